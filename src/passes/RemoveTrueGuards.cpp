// Guards come from splits that do not divide, from producers computed over regions that
// hang off a tensor's edge, and from convolution windows that reach into the padding.
// Most iterations never need them: a guard that holds for the whole loop is dropped, and
// a loop whose guards fail only in its first or last iterations is split into an
// unguarded main part and a guarded head or tail (loop partitioning), so the main part
// vectorizes, unrolls and keeps its accumulators in registers. The tail need not be
// one iteration: a fused loop `io.jo.fused` over a non-dividing `io` fails its guard in
// the last `jo`-extent iterations, and a guard in a register block stops LLVM from
// promoting the accumulators across the reduction loop (GEMM 2048 with a 96-row block
// and a 512-column block ran at 12-18 GFLOP/s when only a last iteration was peeled,
// 50-70 with the whole last row of tiles split off).
#include <utility>

#include "ir/IRMutator.h"
#include "ir/IRVisitor.h"
#include "ir/Simplify.h"
#include "passes/Passes.h"

namespace tessel {
namespace {

// Guards are counted by their conjuncts: one `if` often checks several split axes at
// once (`i < M && j < N`), and dropping the row check of the main rows still counts.
// Skippable ones count only when `skippable` is set.
int count_conjuncts(const Expr& cond, const VarNode* v, bool skippable) {
  if (const And* a = cond.as<And>())
    return count_conjuncts(a->a, v, skippable) + count_conjuncts(a->b, v, skippable);
  if (!skippable && is_skippable(cond)) return 0;
  return v == nullptr || uses_var(cond, v);
}

int count_guards(const Stmt& s, const VarNode* v, bool skippable = true) {
  int n = 0;
  visit_stmts(s, [&](const Stmt& st) {
    if (const IfThenElse* i = st.as<IfThenElse>()) n += count_conjuncts(i->cond, v, skippable);
  });
  return n;
}

// The loops, lets and guards of a statement, with every store and call left out: what the
// simplifier decides about the guards depends on nothing else, and the bisection below
// simplifies a loop body a dozen times to count them.
class GuardSkeleton : public IRMutator {
 public:
  using IRMutator::mutate;

 protected:
  Stmt leaf_ = Evaluate::make(make_int(0));
  Stmt visit(const Store*, const Stmt&) override { return leaf_; }
  Stmt visit(const TensorStore*, const Stmt&) override { return leaf_; }
  Stmt visit(const Evaluate*, const Stmt&) override { return leaf_; }
};

constexpr int64_t kMinPartitionBudget = 256;
constexpr int64_t kSkippableBudget = 2;  // x the program's size, for skippable guards

class GuardRemover : public IRMutator {
 public:
  using IRMutator::mutate;
  BoundsMap bounds;

 protected:
  Stmt visit(const For* op, const Stmt& s) override {
    int64_t ext;
    bool const_ext = is_const_int(op->extent, &ext) && is_zero(op->min);
    if (const_ext) bounds[op->var.get()] = {0, ext - 1};
    // A loop inside one simplified here was simplified with it, under the same bounds.
    Stmt whole = simplified_ ? s : simplify(s, &bounds_outside(op));
    const For* f = whole.as<For>();
    if (!f) {  // simplified away (extent 1) or folded
      bounds.erase(op->var.get());
      return mutate(whole);
    }
    if (f->for_kind == ForKind::Vectorized && const_ext) {
      Stmt tight = tighten_vector_loop(whole, ext);
      if (!tight.same_as(whole)) {
        bounds.erase(op->var.get());
        return mutate(tight);
      }
    }
    // A parallel loop is split only for guards that must be checked: a one-iteration part
    // split off for a padded border would run on one thread while the other waits
    // (the first and last row of a 56x56 convolution cost 10% at two threads).
    bool skippable = skippable_ && op->for_kind != ForKind::Parallel;
    // A loop bound to GPU threads stays whole: its iterations are the threads of one launch.
    // Loops inside one are not split either: a GPU predicates a guard for little, while
    // the copies would multiply the kernel's code (and NVRTC's time) for every border.
    if (op->for_kind == ForKind::ThreadBound) {
      bool saved = std::exchange(simplified_, true);
      Stmt body = (++in_threads_, mutate(f->body));
      --in_threads_;
      simplified_ = saved;
      bounds.erase(op->var.get());
      return For::make(f->var, f->min, f->extent, f->for_kind, body, f->thread_tag);
    }
    if (in_threads_ == 0 && const_ext && ext >= 2 && op->for_kind != ForKind::Vectorized &&
        count_guards(f->body, op->var.var_node(), skippable) > 0) {
      // Guards proved over a range stay proved over any part of it, so the iterations
      // that drop a guard form a prefix [0, p) (a split's tail fails at the end) or a
      // suffix [p, ext) (a padded window fails at the start): find the longest of each by
      // bisection.
      int guards = count_guards(f->body, nullptr, skippable);
      Stmt skeleton = GuardSkeleton().mutate(f->body);
      auto fewer_guards_in = [&](int64_t from, int64_t to) {
        bounds[op->var.get()] = {from, to - 1};
        return count_guards(simplify(skeleton, &bounds), nullptr, skippable) < guards;
      };
      // A first (last) iteration that keeps every guard ends the search for a prefix (suffix)
      // at once, one simplification instead of a bisection's.
      int64_t lo = 0, hi = fewer_guards_in(0, 1) ? ext : 1;  // fewer in [0, lo) (or lo == 0); not in [0, hi)
      while (hi - lo > 1) {
        int64_t mid = lo + (hi - lo) / 2;
        (fewer_guards_in(0, mid) ? lo : hi) = mid;
      }
      int64_t prefix = lo;
      lo = 0, hi = fewer_guards_in(ext - 1, ext) ? ext : 1;  // fewer in [ext - lo, ext); not in [ext - hi, ext)
      while (hi - lo > 1) {
        int64_t mid = lo + (hi - lo) / 2;
        (fewer_guards_in(ext - mid, ext) ? lo : hi) = mid;
      }
      int64_t suffix = lo;
      // Each partition copies the body: it pays only when most iterations lose a guard,
      // and only while the copies stay within the budget. A copy is priced at its size
      // once unrolled: LLVM's time grows with it, and a random candidate with guards on
      // many levels could otherwise multiply its code several times over.
      int64_t clean = std::max(prefix, suffix);
      int64_t copy =
          clean > 0 && 2 * clean >= ext ? unrolled_size(f->body, max_step_).stmts * unrolled_ : budget_ + 1;
      if (copy <= budget_) {
        budget_ -= copy;
        int64_t cut = prefix >= suffix ? prefix : ext - suffix;
        // Both parts go round again: the part that lost a guard may hold others that fail
        // elsewhere, and loops inside either part may split too.
        bool saved = std::exchange(simplified_, false);
        Stmt parts = f->for_kind == ForKind::Parallel
                         ? parallel_parts(f, cut, ext)
                         : Block::make({mutate(part(f, 0, cut)), mutate(part(f, cut, ext))});
        simplified_ = saved;
        return parts;
      }
      bounds[op->var.get()] = {0, ext - 1};
    }
    bool saved = std::exchange(simplified_, true);
    int64_t outer_copies = unrolled_;
    if (f->for_kind == ForKind::Unrolled && const_ext) unrolled_ = std::min(unrolled_ * ext, budget_ + 1);
    Stmt body = mutate(f->body);
    unrolled_ = outer_copies;
    simplified_ = saved;
    bounds.erase(op->var.get());
    return For::make(f->var, f->min, f->extent, f->for_kind, body, f->thread_tag);
  }

  // A vector loop whose whole body is guarded by `v < b` (the tail of a split that does
  // not divide, once partitioning made its outer index a constant) runs b lanes, unguarded:
  // narrower vectors, not masked ones. A masked accumulator cannot stay in a register
  // across the reduction loop: the 4-pixel tail of a 1x1 convolution's 196 pixels, fused
  // into one vector axis, ran 30x slower than its full blocks with the mask.
  static Stmt tighten_vector_loop(const Stmt& loop, int64_t ext) {
    const For* f = loop.as<For>();
    const IfThenElse* g = f->body.as<IfThenElse>();
    if (!g || g->else_case.defined()) return loop;
    std::vector<Expr> cs, rest;
    conjuncts(g->cond, &cs);
    // The lanes a conjunct `a < b` (or <=) keeps when a - b is `v + c` for a constant c.
    auto kept = [&](const Expr& c) -> int64_t {
      const BinaryNode* b = c.as<LT>() ? static_cast<const BinaryNode*>(c.get()) : c.as<LE>();
      if (!b) return -1;
      Expr d = simplify(Sub::make(b->a, b->b));
      int64_t k = 0;
      if (const Add* a = d.as<Add>()) {
        if (!a->a.same_as(f->var) || !is_const_int(a->b, &k)) return -1;
      } else if (const Sub* m = d.as<Sub>()) {
        if (!m->a.same_as(f->var) || !is_const_int(m->b, &k)) return -1;
        k = -k;
      } else if (!d.same_as(f->var)) {
        return -1;
      }
      return std::max<int64_t>(c.as<LT>() ? -k : 1 - k, 0);  // v + k < 0: v < -k
    };
    int64_t lanes = ext;
    for (auto& c : cs) {
      int64_t n = kept(c);
      if (n >= 0 && n < ext) lanes = std::min(lanes, n);
      else rest.push_back(c);
    }
    if (lanes == ext) return loop;
    if (lanes == 0) return Evaluate::make(make_int(0));
    Stmt body = rest.empty() ? g->then_case : IfThenElse::make(all_of(rest), g->then_case);
    return For::make(f->var, f->min, make_int(lanes), f->for_kind, body, f->thread_tag);
  }

  // Loop f's body simplified for its iterations [from, to), with `from` for its variable where
  // that is one iteration.
  Stmt body_for(const For* f, int64_t from, int64_t to) {
    bounds[f->var.get()] = {from, to - 1};
    Stmt body = simplify(f->body, &bounds);
    bounds.erase(f->var.get());
    return to - from == 1 ? simplify(substitute(body, f->var, make_int(from)), &bounds) : body;
  }

  // Iterations [from, to) of loop f, simplified for that range: a loop counting from 0
  // again, or the body alone for a single iteration.
  Stmt part(const For* f, int64_t from, int64_t to) {
    Stmt body = body_for(f, from, to);
    if (to - from == 1) return body;
    if (from > 0) body = substitute(body, f->var, Expr(f->var) + make_int(from));
    return For::make(f->var, make_int(0), make_int(to - from), f->for_kind, body, f->thread_tag);
  }

  // A parallel loop's parts stay in one parallel loop, each iteration running the part it falls in: a
  // part after the loop would run on one thread while the others wait (a 1x1 convolution at 14x14 ran
  // its 12 blocks of 16 pixels in parallel, then the last 4 pixels of all its channels on one core).
  // The form is parallel_parts_of's.
  Stmt parallel_parts(const For* f, int64_t cut, int64_t ext) {
    auto mutated = [&](int64_t from, int64_t to) {
      Stmt body = body_for(f, from, to);
      bounds[f->var.get()] = {from, to - 1};
      body = mutate(body);
      bounds.erase(f->var.get());
      return body;
    };
    Stmt head = mutated(0, cut), tail = mutated(cut, ext);
    return For::make(f->var, f->min, f->extent, f->for_kind,
                     IfThenElse::make(LT::make(f->var, make_int(cut)), head, tail), f->thread_tag);
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
  bool skippable_ = false;  // whether skippable guards count

 protected:
  int64_t max_step_ = 0;  // the enclosing auto_unroll_max_step
  // Copies of the statement that the unrolled loops around it make: a partition inside one
  // is copied that many times (a padded window's partitions inside a loop unrolled 10 times
  // made 400 KB of IR, 110 s in LLVM).
  int64_t unrolled_ = 1;
  int in_threads_ = 0;    // GPU thread loops around the statement
  bool simplified_ = false;  // the statement was simplified under the current bounds
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

const IfThenElse* parallel_parts_of(const For* loop, int64_t* cut) {
  const IfThenElse* parts = loop->body.as<IfThenElse>();
  const LT* lt = parts && parts->else_case.defined() ? parts->cond.as<LT>() : nullptr;
  if (loop->for_kind != ForKind::Parallel || !lt || !lt->a.same_as(loop->var) || !is_const_int(lt->b, cut))
    return nullptr;
  return parts;
}

Stmt remove_true_guards(const Stmt& s) {
  // Partitions may add as much code as there was (after unrolling), and some always:
  // a guarded GEMM nest is most of its function.
  Stmt in = simplify(s);
  int64_t budget = std::max<int64_t>(kMinPartitionBudget, unrolled_size(in, 0).stmts);
  GuardRemover checked;
  checked.budget_ = budget;
  Stmt out = checked.mutate(in);
  // Skippable guards come second: a checked guard left in a register block costs a branch
  // per store, a skippable one only the taps it would have skipped (a 7x7 convolution
  // whose partitions for the padding used the budget first kept the guards of its split
  // columns and ran at a quarter of its speed). They get a budget of their own, twice the
  // program: partitions of the border rows and taps copy small bodies many times, and
  // with less, conv2d 3x3 kernels ran 4-10% slower (with more, lowering in the search
  // slows down for little).
  GuardRemover skippable;
  skippable.skippable_ = true;
  skippable.budget_ = std::max(checked.budget_, kSkippableBudget * budget);
  return count_guards(out, nullptr) > count_guards(out, nullptr, false) ? skippable.mutate(out) : out;
}

}  // namespace tessel
