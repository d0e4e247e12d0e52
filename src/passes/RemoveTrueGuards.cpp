// Guards come from splits that do not divide and from producers computed over regions
// that hang off a tensor's edge. Most iterations never need them: a guard that holds for
// the whole loop is dropped, and a loop whose guard only fails in its last iteration is
// split into an unguarded main part and a guarded last iteration (loop partitioning), so
// the main part vectorizes and unrolls cleanly.
#include "ir/IRMutator.h"
#include "ir/IRVisitor.h"
#include "ir/Simplify.h"
#include "passes/Passes.h"

namespace tessel {
namespace {

int count_guards(const Stmt& s, const VarNode* v) {
  int n = 0;
  visit_stmts(s, [&](const Stmt& st) {
    if (const IfThenElse* i = st.as<IfThenElse>()) n += v == nullptr || uses_var(i->cond, v);
  });
  return n;
}

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
      // Try the loop without its last iteration: if that removes guards, peel it.
      bounds[op->var.get()] = {0, ext - 2};
      Stmt main_body = simplify(f->body, &bounds);
      if (count_guards(main_body, nullptr) < count_guards(f->body, nullptr)) {
        main_body = mutate(main_body);
        bounds.erase(op->var.get());
        Stmt last = mutate(simplify(substitute(f->body, op->var, make_int(ext - 1)), &bounds));
        Stmt main = ext - 1 == 1 ? simplify(substitute(main_body, op->var, make_int(0)))
                                 : For::make(op->var, make_int(0), make_int(ext - 1), op->for_kind, main_body,
                                             op->thread_tag);
        return Block::make({main, last});
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
};

}  // namespace

Stmt remove_true_guards(const Stmt& s) {
  GuardRemover g;
  return g.mutate(simplify(s));
}

}  // namespace tessel
