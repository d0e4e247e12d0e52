// Guards come from splits that do not divide and from producers computed over regions
// that hang off a tensor's edge. Most iterations never need them: a guard that holds for
// the whole loop is dropped, and a loop whose guards fail only from some iteration on is
// split into an unguarded main part and a guarded tail (loop partitioning), so the main
// part vectorizes, unrolls and keeps its accumulators in registers. The tail need not be
// one iteration: a fused loop `io.jo.fused` over a non-dividing `io` fails its guard in
// the last `jo`-extent iterations, and a guard in a register block stops LLVM from
// promoting the accumulators across the reduction loop (GEMM 2048 with a 96-row block
// and a 512-column block ran at 12-18 GFLOP/s when only a last iteration was peeled,
// 50-70 with the whole last row of tiles split off).
#include "ir/IRMutator.h"
#include "ir/IRVisitor.h"
#include "ir/Simplify.h"
#include "passes/Passes.h"

namespace tessel {
namespace {

// Guards are counted by their conjuncts: one `if` often checks several split axes at
// once (`i < M && j < N`), and dropping the row check of the main rows still counts.
int count_conjuncts(const Expr& cond, const VarNode* v) {
  if (const And* a = cond.as<And>()) return count_conjuncts(a->a, v) + count_conjuncts(a->b, v);
  return v == nullptr || uses_var(cond, v);
}

int count_guards(const Stmt& s, const VarNode* v) {
  int n = 0;
  visit_stmts(s, [&](const Stmt& st) {
    if (const IfThenElse* i = st.as<IfThenElse>()) n += count_conjuncts(i->cond, v);
  });
  return n;
}

// Statements a piece of code becomes once unroll_loops has run (the same rule: explicit
// unrolls, and serial loops without inner loops under auto_unroll_max_step). It prices a
// partition: LLVM's time grows with the copies, and a random candidate with guards on
// many levels could otherwise multiply its code several times over.
struct UnrolledSize {
  int64_t stmts = 0, steps = 1;
  bool has_loop = false;
};

UnrolledSize unrolled_size(const Stmt& s, int64_t max_step) {
  if (!s.defined()) return {0, 1, false};
  if (const For* f = s.as<For>()) {
    UnrolledSize b = unrolled_size(f->body, max_step);
    int64_t n;
    bool unroll = is_const_int(f->extent, &n) &&
                  (f->for_kind == ForKind::Unrolled ||
                   (f->for_kind == ForKind::Serial && max_step > 0 && !b.has_loop && n * b.steps <= max_step));
    return unroll ? UnrolledSize{b.stmts * n, b.steps * n, b.has_loop} : UnrolledSize{b.stmts, 1, true};
  }
  if (const Block* b = s.as<Block>()) {
    UnrolledSize sum{0, 0, false};
    for (auto& st : b->stmts) {
      UnrolledSize x = unrolled_size(st, max_step);
      sum.stmts += x.stmts, sum.steps += x.steps, sum.has_loop |= x.has_loop;
    }
    return sum;
  }
  if (const AttrStmt* a = s.as<AttrStmt>())
    return unrolled_size(a->body, a->key == "auto_unroll_max_step" ? a->value : max_step);
  if (const IfThenElse* i = s.as<IfThenElse>()) {
    UnrolledSize t = unrolled_size(i->then_case, max_step);
    if (i->else_case.defined()) t.stmts += unrolled_size(i->else_case, max_step).stmts;
    return t;
  }
  if (const LetStmt* l = s.as<LetStmt>()) return unrolled_size(l->body, max_step);
  if (const Realize* r = s.as<Realize>()) return unrolled_size(r->body, max_step);
  if (const Allocate* a = s.as<Allocate>()) return unrolled_size(a->body, max_step);
  return {1, 1, false};
}

constexpr int64_t kMinPartitionBudget = 256;

class GuardRemover : public IRMutator {
 public:
  using IRMutator::mutate;
  BoundsMap bounds;

 protected:
  Stmt visit(const For* op, const Stmt& s) override {
    int64_t ext;
    bool const_ext = is_const_int(op->extent, &ext) && is_zero(op->min);
    if (const_ext) bounds[op->var.get()] = {0, ext - 1};
    Stmt whole = simplify(s, &bounds_outside(op));
    const For* f = whole.as<For>();
    if (!f) {  // simplified away (extent 1) or folded
      bounds.erase(op->var.get());
      return mutate(whole);
    }
    if (const_ext && ext >= 2 && op->for_kind != ForKind::Vectorized &&
        count_guards(f->body, op->var.var_node()) > 0) {
      // Guards proved over a shorter range stay proved over any part of it, so the
      // iterations that drop a guard form a prefix [0, p): find the longest by bisection.
      int guards = count_guards(f->body, nullptr);
      auto fewer_guards_below = [&](int64_t p) {
        bounds[op->var.get()] = {0, p - 1};
        return count_guards(simplify(f->body, &bounds), nullptr) < guards;
      };
      int64_t lo = 0, hi = ext;  // fewer_guards_below(lo) (or lo == 0); not below hi
      while (hi - lo > 1) {
        int64_t mid = lo + (hi - lo) / 2;
        (fewer_guards_below(mid) ? lo : hi) = mid;
      }
      // Each partition copies the body: it pays only when most iterations lose a guard,
      // and only while the copies stay within the budget.
      int64_t copy = lo > 0 && 2 * lo >= ext ? unrolled_size(f->body, max_step_).stmts : budget_ + 1;
      if (copy <= budget_) {
        budget_ -= copy;
        bounds[op->var.get()] = {0, lo - 1};
        Stmt main_body = simplify(f->body, &bounds);
        bounds.erase(op->var.get());
        Stmt main = lo == 1 ? simplify(substitute(main_body, op->var, make_int(0)), &bounds)
                            : For::make(op->var, make_int(0), make_int(lo), op->for_kind, main_body, op->thread_tag);
        Stmt tail = ext - lo == 1 ? simplify(substitute(f->body, op->var, make_int(lo)), &bounds)
                                  : For::make(op->var, make_int(0), make_int(ext - lo), op->for_kind,
                                              substitute(f->body, op->var, op->var + make_int(lo)), op->thread_tag);
        // Both parts go round again: the main part may hold guards that fail earlier,
        // the tail loops inside it may split too.
        return Block::make({mutate(main), mutate(tail)});
      }
      bounds[op->var.get()] = {0, ext - 1};
    }
    Stmt body = mutate(f->body);
    bounds.erase(op->var.get());
    return For::make(f->var, f->min, f->extent, f->for_kind, body, f->thread_tag);
  }

  // Bounds of the loops enclosing `op` (its own variable's range is the simplifier's job).
  const BoundsMap& bounds_outside(const For* op) {
    scratch_ = bounds;
    scratch_.erase(op->var.get());
    return scratch_;
  }
  BoundsMap scratch_;

 public:
  int64_t budget_ = 0;  // statements partitions may still copy

 protected:
  int64_t max_step_ = 0;  // the enclosing auto_unroll_max_step
  Stmt visit(const AttrStmt* op, const Stmt& s) override {
    if (op->key != "auto_unroll_max_step") return IRMutator::visit(op, s);
    int64_t saved = max_step_;
    max_step_ = op->value;
    Stmt body = mutate(op->body);
    max_step_ = saved;
    return AttrStmt::make(op->key, op->value, body);
  }
};

}  // namespace

Stmt remove_true_guards(const Stmt& s) {
  // Partitions may add as much code as there was (after unrolling), and some always:
  // a guarded GEMM nest is most of its function.
  Stmt in = simplify(s);
  GuardRemover g;
  g.budget_ = std::max<int64_t>(kMinPartitionBudget, unrolled_size(in, 0).stmts);
  return g.mutate(in);
}

}  // namespace tessel
