#include "codegen/ShuffleOrder.h"

#include <map>
#include <set>

#include <llvm/Analysis/VectorUtils.h>
#include <llvm/IR/IntrinsicInst.h>

namespace tessel {
namespace {

constexpr unsigned kLanes = 8;
// Logical lane held by each lane in vshufps order; its own inverse. Its first 6 or 7 lanes
// are the order of a vector of 6 or 7 (a row of 7 columns, legalised as 8 lanes).
constexpr int kOrder[kLanes] = {0, 1, 4, 5, 2, 3, 6, 7};

// The lanes of a vector that a stride-2 read of 16 floats fills and kOrder can reorder, else 0.
unsigned lanes(const llvm::Type* t) {
  auto* v = llvm::dyn_cast<llvm::FixedVectorType>(t);
  return v && v->getNumElements() >= 6 && v->getNumElements() <= kLanes ? v->getNumElements() : 0;
}

// A read of every other float of 16 (CodeGenLLVM's strided_load at stride 2): the mask f,
// f + 2, ..., f + 14 of one 16-float vector, f 0 or 1 (lanes that no one reads may be poison).
bool stride2_read(const llvm::Instruction* i) {
  auto* s = llvm::dyn_cast<llvm::ShuffleVectorInst>(i);
  if (!s || !s->getType()->getElementType()->isFloatTy() || !lanes(s->getType())) return false;
  if (llvm::cast<llvm::FixedVectorType>(s->getOperand(0)->getType())->getNumElements() != 2 * kLanes) return false;
  int first = -1;
  for (unsigned l = 0; l < lanes(s->getType()); ++l) {
    int m = s->getShuffleMask()[l];
    if (m < 0) continue;
    if (first < 0) first = m - 2 * int(l);
    if ((first != 0 && first != 1) || m != first + 2 * int(l)) return false;
  }
  return first >= 0;
}

// A shuffle of two vectors that takes each lane l from lane l of one of them: InstCombine's
// form of a select on constant lanes (the padding's zeros).
bool blend(const llvm::Instruction* i) {
  auto* s = llvm::dyn_cast<llvm::ShuffleVectorInst>(i);
  if (!s) return false;
  unsigned n = lanes(s->getOperand(0)->getType());
  if (!n || lanes(s->getType()) != n) return false;
  llvm::ArrayRef<int> m = s->getShuffleMask();
  for (unsigned l = 0; l < n; ++l)
    if (m[l] >= 0 && unsigned(m[l]) % n != l) return false;
  return true;
}

// Operations whose lane l depends only on their operands' lanes l.
bool lane_wise(const llvm::Instruction* i) {
  if (!lanes(i->getType())) return false;
  if (blend(i)) return true;
  if (auto* e = llvm::dyn_cast<llvm::InsertElementInst>(i)) return llvm::isa<llvm::ConstantInt>(e->getOperand(2));
  if (llvm::isa<llvm::BinaryOperator, llvm::UnaryOperator, llvm::CmpInst, llvm::SelectInst, llvm::PHINode>(i))
    return true;
  if (auto* c = llvm::dyn_cast<llvm::CastInst>(i)) return lanes(c->getSrcTy()) == lanes(c->getDestTy());
  if (auto* c = llvm::dyn_cast<llvm::IntrinsicInst>(i)) {
    switch (c->getIntrinsicID()) {
      case llvm::Intrinsic::fma: case llvm::Intrinsic::fmuladd: case llvm::Intrinsic::minnum:
      case llvm::Intrinsic::maxnum: case llvm::Intrinsic::minimum: case llvm::Intrinsic::maximum:
      case llvm::Intrinsic::fabs: case llvm::Intrinsic::sqrt:
        return true;
      default:
        return false;
    }
  }
  return false;
}

// The same lanes in the other order (kOrder is its own inverse).
llvm::Constant* reorder(llvm::Constant* c) {
  std::vector<llvm::Constant*> v;
  for (unsigned l = 0; l < lanes(c->getType()); ++l) v.push_back(c->getAggregateElement(unsigned(kOrder[l])));
  return llvm::ConstantVector::get(v);
}

// An operand that is the same in either order, or can be put in it: splats and constants whose
// lanes are known.
bool order_free(const llvm::Value* v) {
  if (!lanes(v->getType()) || llvm::getSplatValue(v)) return true;
  auto* c = llvm::dyn_cast<llvm::Constant>(v);
  if (!c) return false;
  for (unsigned l = 0; l < lanes(v->getType()); ++l)
    if (!c->getAggregateElement(l)) return false;
  return true;
}

struct Webs {
  std::map<llvm::Instruction*, llvm::Instruction*> parent;
  llvm::Instruction* find(llvm::Instruction* i) {
    while (parent[i] != i) i = parent[i] = parent[parent[i]];
    return i;
  }
};

void reorder_function(llvm::Function& f) {
  // The stride-2 reads and the lane-wise operations that take only such values, splats and
  // constants: the largest such set, found by dropping what takes anything else.
  std::set<llvm::Instruction*> in;
  for (auto& bb : f)
    for (auto& i : bb)
      if (stride2_read(&i) || lane_wise(&i)) in.insert(&i);
  auto takes_other = [&](llvm::Instruction* i) {
    if (stride2_read(i)) return false;
    for (llvm::Value* op : i->operands()) {
      auto* oi = llvm::dyn_cast<llvm::Instruction>(op);
      if (!order_free(op) && !(oi && in.count(oi))) return true;
    }
    return false;
  };
  std::vector<llvm::Instruction*> work(in.begin(), in.end());
  while (!work.empty()) {
    llvm::Instruction* i = work.back();
    work.pop_back();
    if (!in.count(i) || !takes_other(i)) continue;
    in.erase(i);
    for (llvm::User* u : i->users()) work.push_back(llvm::cast<llvm::Instruction>(u));
  }
  // Connected parts: each changes order as a whole.
  Webs webs;
  for (auto* i : in) webs.parent[i] = i;
  for (auto* i : in)
    if (!stride2_read(i))
      for (llvm::Value* op : i->operands())
        if (auto* oi = llvm::dyn_cast<llvm::Instruction>(op); oi && in.count(oi))
          webs.parent[webs.find(i)] = webs.find(oi);
  // A part pays off where its reads (a lane-crossing shuffle saved each) outnumber the values
  // leaving it (one spent each).
  std::map<llvm::Instruction*, int> gain;
  auto leaves = [&](llvm::Instruction* i) {
    for (llvm::User* u : i->users())
      if (!in.count(llvm::cast<llvm::Instruction>(u))) return true;
    return false;
  };
  for (auto* i : in) gain[webs.find(i)] += (stride2_read(i) ? 1 : 0) - (leaves(i) ? 1 : 0);
  for (auto* i : in) {
    if (gain[webs.find(i)] <= 0) continue;
    bool read = stride2_read(i);
    if (!read)
      for (llvm::Use& op : i->operands())
        if (auto* c = llvm::dyn_cast<llvm::Constant>(op.get()); c && lanes(c->getType()) && !c->getSplatValue())
          op.set(reorder(c));
    if (auto* s = llvm::dyn_cast<llvm::ShuffleVectorInst>(i)) {
      // Lane l now holds lane kOrder[l]: a stride-2 read takes that lane's element of the span; a
      // blend takes it from the same operand, whose lanes are in the new order too.
      unsigned n = lanes(s->getType());
      std::vector<int> mask;
      for (unsigned l = 0; l < n; ++l) {
        int from = s->getShuffleMask()[kOrder[l]];
        mask.push_back(read || from < 0 ? from : int(from / n * n + l));
      }
      s->setShuffleMask(mask);
    } else if (auto* e = llvm::dyn_cast<llvm::InsertElementInst>(i)) {
      uint64_t lane = llvm::cast<llvm::ConstantInt>(e->getOperand(2))->getZExtValue();
      e->setOperand(2, llvm::ConstantInt::get(e->getOperand(2)->getType(), kOrder[lane]));
    }
    if (!leaves(i)) continue;
    llvm::IRBuilder<> b(llvm::isa<llvm::PHINode>(i) ? &*i->getParent()->getFirstInsertionPt() : i->getNextNode());
    llvm::Value* restored = b.CreateShuffleVector(i, llvm::ArrayRef<int>(kOrder, lanes(i->getType())));
    i->replaceUsesWithIf(restored, [&](llvm::Use& u) {
      return u.getUser() != restored && !in.count(llvm::cast<llvm::Instruction>(u.getUser()));
    });
  }
}

}  // namespace

void compute_in_shuffle_order(llvm::Module& module) {
  for (auto& f : module)
    if (!f.isDeclaration()) reorder_function(f);
}

}  // namespace tessel
