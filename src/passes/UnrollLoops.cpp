// Unrolling: loops marked unroll become one copy of the body per iteration. Under
// pragma auto_unroll_max_step = N, any serial loop with a constant extent is unrolled
// when its extent times the iterations already unrolled inside it is at most N (TVM's
// rule), so small inner tiles become straight-line code that LLVM keeps in registers.
#include "ir/IRMutator.h"
#include "ir/Simplify.h"
#include "passes/Passes.h"

namespace tessel {
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
    int64_t n;
    bool const_ext = is_const_int(op->extent, &n);
    bool unroll = const_ext && (op->for_kind == ForKind::Unrolled ||
                                (op->for_kind == ForKind::Serial && max_step_ > 0 && !body_loop &&
                                 n * body_step <= max_step_));
    if (!unroll) {
      inner_step_ = 1, inner_has_loop_ = true;
      return For::make(op->var, op->min, op->extent,
                       op->for_kind == ForKind::Unrolled ? ForKind::Serial : op->for_kind, body, op->thread_tag);
    }
    std::vector<Stmt> copies;
    for (int64_t i = 0; i < n; ++i)
      copies.push_back(simplify(substitute(body, op->var, simplify(op->min + make_int(i)))));
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
