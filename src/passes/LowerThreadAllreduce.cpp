// Cross-thread reduction: ThreadAllReduce(v) combines v over the threadIdx.x of a block,
// one group per (threadIdx.y, threadIdx.z), and gives every thread the result. On CUDA a
// group that fits a warp combines by butterfly shuffles (no shared memory, no barrier);
// a group of whole warps shuffles within each warp and then combines the warps' results
// through shared memory. Otherwise (OpenCL 1.2 has no shuffles, or an odd extent) the
// values go through a shared-memory tree, halving with a barrier per step.
#include "ir/IRMutator.h"
#include "passes/Passes.h"
#include "tessel/target.h"

namespace tessel {
namespace {

bool is_pow2(int64_t x) { return x > 0 && (x & (x - 1)) == 0; }

Stmt barrier() { return Evaluate::make(Call::make(int32, Intrinsic::Barrier, {})); }
Expr thread(int d) { return Call::make(int32, Intrinsic::ThreadIndex, {make_int(d)}); }

class Lowerer : public IRMutator {
 public:
  const DeviceKernel* k = nullptr;
  const Target* target = nullptr;
  using IRMutator::mutate;

 protected:
  Stmt visit(const Store* op, const Stmt& s) override {
    const Call* c = op->value.as<Call>();
    if (!c || c->op != Intrinsic::ThreadAllReduce) return s;
    Combiner comb = Combiner(c->args[1].as<IntImm>()->value);
    DType t = c->type;
    int64_t x = k->block[0], groups = k->block[1] * k->block[2];
    int64_t warp = target->warp_size;
    Expr tx = thread(3), group = thread(4) + thread(5) * make_int(k->block[1]);
    Var tmp("red_tmp", handle), buf("red_buf", handle);
    auto ld = [&](const Var& b, Expr i) { return Load::make(t, b, i); };
    Expr out = ld(tmp, make_int(0));
    std::vector<Stmt> seq{Store::make(tmp, c->args[0], make_int(0))};
    bool cuda = target->kind == Target::Kind::CUDA;
    if (cuda && ((x <= warp && is_pow2(x)) || (x % warp == 0 && x / warp <= warp))) {
      // Lanes of inactive threads must be left out of the shuffle mask of a small block.
      int64_t threads = x * groups;
      int64_t mask = threads >= 32 ? 0xffffffffLL : (int64_t(1) << threads) - 1;
      for (int64_t off = std::min(x, warp) / 2; off >= 1; off /= 2)
        seq.push_back(Store::make(
            tmp, combine(comb, out, Call::make(t, Intrinsic::ShuffleXor, {out, make_int(off), make_int(mask, int64)})),
            make_int(0)));
      if (x > warp) {
        int64_t w = x / warp;
        Expr slot = group * make_int(w);
        seq.push_back(IfThenElse::make(tx % make_int(warp) == make_int(0),
                                       Store::make(buf, out, slot + tx / make_int(warp))));
        seq.push_back(barrier());
        seq.push_back(Store::make(tmp, ld(buf, slot), make_int(0)));
        for (int64_t i = 1; i < w; ++i)
          seq.push_back(Store::make(tmp, combine(comb, out, ld(buf, slot + make_int(i))), make_int(0)));
        seq.push_back(barrier());
        seq.push_back(Store::make(op->buffer, out, op->index));
        return Allocate::make(tmp, t, 1, "local", Allocate::make(buf, t, groups * w, "shared", Block::make(seq)));
      }
      seq.push_back(Store::make(op->buffer, out, op->index));
      return Allocate::make(tmp, t, 1, "local", Block::make(seq));
    }
    int64_t p = 1;
    while (p < x) p *= 2;
    Expr mine = group * make_int(x) + tx;
    seq = {Store::make(buf, c->args[0], mine), barrier()};
    for (int64_t half = p / 2; half >= 1; half /= 2) {
      Expr other = mine + make_int(half);
      seq.push_back(IfThenElse::make(tx < make_int(half) && tx + make_int(half) < make_int(x),
                                     Store::make(buf, combine(comb, ld(buf, mine), ld(buf, other)), mine)));
      seq.push_back(barrier());
    }
    seq.push_back(Store::make(op->buffer, ld(buf, group * make_int(x)), op->index));
    seq.push_back(barrier());  // the buffer may be written again by the next reduction
    return Allocate::make(buf, t, groups * x, "shared", Block::make(seq));
  }
};

}  // namespace

bool allreduce_has_barrier(const Target& target, int64_t x) {
  return !(target.kind == Target::Kind::CUDA && x <= target.warp_size && is_pow2(x));
}

Stmt lower_thread_allreduce(const DeviceKernel& k, const Target& target) {
  Lowerer l;
  l.k = &k;
  l.target = &target;
  return l.mutate(k.body);
}

}  // namespace tessel
