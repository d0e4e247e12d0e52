// Unrolling: loops marked unroll become one copy of the body per iteration. Under
// pragma auto_unroll_max_step = N, any serial loop with a constant extent is unrolled
// when its extent times the iterations already unrolled inside it is at most N (TVM's
// rule), so small inner tiles become straight-line code that LLVM keeps in registers.
#include "ir/IRMutator.h"
#include "ir/Simplify.h"
#include "passes/Passes.h"

namespace tessel {

bool unrolls(const For* f, int64_t max_step, const UnrolledSize& body) {
  int64_t n;
  return is_const_int(f->extent, &n) &&
         (f->for_kind == ForKind::Unrolled ||
          (f->for_kind == ForKind::Serial && max_step > 0 && !body.has_loop && n * body.steps <= max_step));
}

UnrolledSize unrolled_size(const Stmt& s, int64_t max_step) {
  if (!s.defined()) return {0, 1, false};
  if (const For* f = s.as<For>()) {
    UnrolledSize b = unrolled_size(f->body, max_step);
    // A vectorized loop becomes one wide statement before unrolling: it is no loop then
    // (a producer's vectorized row inside a register block does not stop the unroll).
    if (f->for_kind == ForKind::Vectorized) return b;
    int64_t n = 0;
    is_const_int(f->extent, &n);
    if (!unrolls(f, max_step, b)) return {b.stmts, 1, true};
    return {b.stmts * n, b.steps * n, b.has_loop};
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

namespace {

class Unroller : public IRMutator {
 public:
  using IRMutator::mutate;

 protected:
  int64_t max_step_ = 0;
  int64_t inner_step_ = 1;   // iterations unrolled in the statement just visited
  bool inner_has_loop_ = false;

  Stmt visit(const AttrStmt* op, const Stmt& s) override {
    if (op->key != "auto_unroll_max_step") return IRMutator::visit(op, s);
    int64_t saved = max_step_;
    max_step_ = op->value;
    Stmt body = mutate(op->body);
    max_step_ = saved;
    return body;
  }

  Stmt visit(const Block* op, const Stmt& s) override {
    int64_t steps = 0;
    bool loop = false;
    std::vector<Stmt> out;
    for (auto& st : op->stmts) {
      inner_step_ = 1, inner_has_loop_ = false;
      out.push_back(mutate(st));
      steps += inner_step_;
      loop |= inner_has_loop_;
    }
    inner_step_ = steps, inner_has_loop_ = loop;
    return Block::make(out);
  }

  Stmt visit(const For* op, const Stmt& s) override {
    inner_step_ = 1, inner_has_loop_ = false;
    Stmt body = mutate(op->body);
    int64_t body_step = inner_step_;
    bool body_loop = inner_has_loop_;
    if (!unrolls(op, max_step_, {0, body_step, body_loop})) {
      inner_step_ = 1, inner_has_loop_ = true;
      return For::make(op->var, op->min, op->extent,
                       op->for_kind == ForKind::Unrolled ? ForKind::Serial : op->for_kind, body, op->thread_tag);
    }
    int64_t n = 0;
    is_const_int(op->extent, &n);
    std::vector<Stmt> copies;
    for (int64_t i = 0; i < n; ++i)
      copies.push_back(substitute(body, op->var, simplify(op->min + make_int(i))));
    inner_step_ = n * body_step, inner_has_loop_ = body_loop;
    return Block::make(copies);
  }
};

}  // namespace

Stmt unroll_loops(const Stmt& s) {
  Unroller u;
  return u.mutate(s);
}

}  // namespace tessel
