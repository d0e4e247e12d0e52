// A parallel loop whose body is `if (v < cut) A else B` (RemoveTrueGuards keeps the parts of a
// partitioned parallel loop in one loop that way) runs its B iterations spread evenly among
// the A ones. The thread pool hands each thread a contiguous share of the iterations, and the
// two parts seldom cost alike: a 1x1 convolution at 14x14 in blocks of 64 pixels has 192 full
// blocks and 64 tails of 4 pixels at the end of its loop, so one of two threads ran 128 full
// blocks and the other 64 and all the tails. Spread, every share holds its part of each.
// The loop becomes
//   parallel (v.spread, 0, n) {
//     let v.tails = ((v.spread + 1) * t) / n          // B iterations among 0 .. v.spread
//     if (v.tails <= (v.spread * t) / n) { let v = v.spread - v.tails; A } else { let v = cut + v.tails - 1; B }
//   }
// with t = n - cut: a permutation of the iterations (a parallel loop's are independent) that
// keeps each part's own order, so iterations that share data still run one after another.
#include "ir/IRMutator.h"
#include "passes/Passes.h"

namespace tessel {
namespace {

class Spreader : public IRMutator {
 protected:
  Stmt visit(const For* op, const Stmt& s) override {
    Stmt body = mutate(op->body);
    Stmt loop =
        body.same_as(op->body) ? s : For::make(op->var, op->min, op->extent, op->for_kind, body, op->thread_tag);
    int64_t n = 0, cut = 0;
    const IfThenElse* parts = parallel_parts_of(loop.as<For>(), &cut);
    // (n + 1) * t stays within the loop variable's 32 bits below 46,341 iterations.
    if (!parts || !is_zero(op->min) || !is_const_int(op->extent, &n) || cut <= 0 || cut >= n || n > 46340) return loop;
    DType t = op->var.dtype();
    Var u(op->var.name() + ".spread", t), tails(op->var.name() + ".tails", t);
    Expr nn = make_int(n, t), tt = make_int(n - cut, t);
    Stmt b = LetStmt::make(op->var, make_int(cut, t) + tails - make_int(1, t), parts->else_case);
    Stmt a = LetStmt::make(op->var, u - tails, parts->then_case);
    Stmt spread = LetStmt::make(tails, (u + make_int(1, t)) * tt / nn,
                                IfThenElse::make(LE::make(tails, u * tt / nn), a, b));
    return For::make(u, op->min, op->extent, op->for_kind, spread, op->thread_tag);
  }
};

}  // namespace

Stmt spread_parallel_parts(const Stmt& s) { return Spreader().mutate(s); }

}  // namespace tessel
