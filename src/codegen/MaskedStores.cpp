#include "codegen/MaskedStores.h"

#include <bit>

#include <llvm/IR/InstIterator.h>
#include <llvm/IR/IntrinsicInst.h>
#include <llvm/MC/MCInstrInfo.h>
#include <llvm/MC/MCSchedule.h>

namespace tessel {
namespace {

// The reciprocal throughput (cycles) of x86 instruction `op` on the target CPU; 0 where the
// model does not say (a variant class, an unmodelled CPU).
double cycles_per(const llvm::TargetMachine& tm, unsigned op) {
  const llvm::MCSubtargetInfo* sti = tm.getMCSubtargetInfo();
  const llvm::MCSchedModel& model = sti->getSchedModel();
  if (!model.hasInstrSchedModel()) return 0;
  const llvm::MCSchedClassDesc* d = model.getSchedClassDesc(tm.getMCInstrInfo()->get(op).getSchedClass());
  if (!d || !d->isValid() || d->isVariant()) return 0;
  return llvm::MCSchedModel::getReciprocalThroughput(*sti, *d);
}

}  // namespace

bool masked_stores_are_slow(const llvm::TargetMachine& tm, bool avx512) {
  if (avx512 || !tm.getTargetTriple().isX86() || !tm.getMCSubtargetInfo()->checkFeatures("+avx")) return false;
  // The opcodes by name, found once: their numbers are the X86 back end's, the same for every
  // CPU, and the search (some 20,000 names) would otherwise cost each JIT build 0.3 ms.
  static const std::pair<unsigned, unsigned> ops = [&] {
    const llvm::MCInstrInfo* ii = tm.getMCInstrInfo();
    std::pair<unsigned, unsigned> found{0, 0};
    for (unsigned op = 0; op < ii->getNumOpcodes(); ++op) {
      if (ii->getName(op) == "VMASKMOVPSYmr") found.first = op;
      if (ii->getName(op) == "VMOVUPSYmr") found.second = op;
    }
    return found;
  }();
  if (!ops.first || !ops.second) return false;
  double masked = cycles_per(tm, ops.first), plain = cycles_per(tm, ops.second);
  return masked > 0 && plain > 0 && masked > 3 * plain;
}

void split_constant_masked_stores(llvm::Module& module) {
  std::vector<llvm::IntrinsicInst*> stores;
  for (llvm::Function& f : module)
    for (llvm::Instruction& i : llvm::instructions(f))
      if (auto* c = llvm::dyn_cast<llvm::IntrinsicInst>(&i);
          c && c->getIntrinsicID() == llvm::Intrinsic::masked_store && llvm::isa<llvm::Constant>(c->getArgOperand(3)))
        stores.push_back(c);
  for (llvm::IntrinsicInst* st : stores) {
    llvm::Value* value = st->getArgOperand(0);
    llvm::Value* ptr = st->getArgOperand(1);
    auto* mask = llvm::cast<llvm::Constant>(st->getArgOperand(3));
    auto* vt = llvm::cast<llvm::FixedVectorType>(value->getType());
    llvm::Type* et = vt->getElementType();
    llvm::Align align = llvm::cast<llvm::ConstantInt>(st->getArgOperand(2))->getAlignValue();
    uint64_t bytes = module.getDataLayout().getTypeStoreSize(et);
    unsigned n = vt->getNumElements();
    auto on = [&](unsigned l) {
      llvm::Constant* m = mask->getAggregateElement(l);
      return m && !m->isNullValue() && !llvm::isa<llvm::UndefValue>(m);
    };
    llvm::IRBuilder<> b(st);
    for (unsigned l = 0; l < n;) {
      if (!on(l)) {
        ++l;
        continue;
      }
      unsigned run = 0;
      while (l + run < n && on(l + run)) ++run;
      for (unsigned piece = std::bit_floor(run); run; piece /= 2) {
        for (; run >= piece; run -= piece, l += piece) {
          llvm::Value* p = b.CreateConstInBoundsGEP1_64(et, ptr, l);
          llvm::Align a = llvm::commonAlignment(align, l * bytes);
          if (piece == 1) {
            b.CreateAlignedStore(b.CreateExtractElement(value, uint64_t(l)), p, a);
          } else {
            std::vector<int> lanes;
            for (unsigned k = 0; k < piece; ++k) lanes.push_back(int(l + k));
            b.CreateAlignedStore(b.CreateShuffleVector(value, lanes), p, a);
          }
        }
      }
    }
    st->eraseFromParent();
  }
}

}  // namespace tessel
