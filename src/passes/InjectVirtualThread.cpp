// Virtual threads (TVM's InjectVirtualThread). A loop bound to `vthread` is not a loop of
// the kernel: its iterations are independent like threads, so the loop is pushed down to
// the innermost statements that depend on it, where each becomes one copy per virtual
// thread. What does not depend on it runs once: a shared-memory fetch in the reduction
// loop is made once for all virtual threads instead of once each, and the copies of the
// register-tile updates interleave. A buffer allocated inside and written differently per
// virtual thread (the local accumulator) gets one slice per virtual thread.
#include <set>

#include "ir/IRMutator.h"
#include "ir/IRVisitor.h"
#include "ir/Simplify.h"
#include "passes/Passes.h"

namespace tessel {
namespace {

using NodeSet = std::set<const ExprNode*>;

// Does s (or e) read a variable or buffer of `deps`?
bool reads_any(const Expr& e, const NodeSet& deps) {
  bool found = false;
  visit_exprs(e, [&](const Expr& x) {
    if (deps.count(x.get())) found = true;
    if (const Load* l = x.as<Load>(); l && deps.count(l->buffer.get())) found = true;
  });
  return found;
}
bool touches_any(const Stmt& s, const NodeSet& deps) {
  bool found = false;
  visit_exprs(s, [&](const Expr& x) {
    if (deps.count(x.get())) found = true;
    if (const Load* l = x.as<Load>(); l && deps.count(l->buffer.get())) found = true;
  });
  visit_stmts(s, [&](const Stmt& x) {
    if (const Store* st = x.as<Store>(); st && deps.count(st->buffer.get())) found = true;
  });
  return found;
}

// What depends on the virtual thread: its variable, variables bound from it, and buffers
// stored with values or indices that do (to a fixed point: a buffer read into another).
NodeSet dependents(const Stmt& body, const Var& v) {
  NodeSet deps{v.get()};
  for (size_t before = 0; before != deps.size();) {
    before = deps.size();
    visit_stmts(body, [&](const Stmt& s) {
      if (const Store* st = s.as<Store>()) {
        if (reads_any(st->value, deps) || reads_any(st->index, deps)) deps.insert(st->buffer.get());
      } else if (const LetStmt* l = s.as<LetStmt>()) {
        if (reads_any(l->value, deps)) deps.insert(l->var.get());
      } else if (const For* f = s.as<For>()) {
        if (reads_any(f->min, deps) || reads_any(f->extent, deps)) deps.insert(f->var.get());
      }
    });
  }
  return deps;
}

class Inject : public IRMutator {
 public:
  Inject(Var v, int64_t n, NodeSet deps) : v_(std::move(v)), n_(n), deps_(std::move(deps)) {}
  using IRMutator::mutate;

  Stmt mutate(const Stmt& s) override {
    if (!s.defined() || !touches_any(s, deps_)) return s;
    if (s.as<Block>() || s.as<AttrStmt>()) return IRMutator::mutate(s);
    if (const For* f = s.as<For>(); f && !deps_.count(f->var.get())) return IRMutator::mutate(s);
    if (const LetStmt* l = s.as<LetStmt>(); l && !deps_.count(l->var.get())) return IRMutator::mutate(s);
    if (const IfThenElse* i = s.as<IfThenElse>(); i && !reads_any(i->cond, deps_)) return IRMutator::mutate(s);
    if (const Allocate* a = s.as<Allocate>()) return allocate(a);
    std::vector<Stmt> copies;
    for (int64_t k = 0; k < n_; ++k) copies.push_back(simplify(substitute(s, v_, make_int(k))));
    return Block::make(copies);
  }

 private:
  // A buffer written per virtual thread gets a slice each, after the others.
  Stmt allocate(const Allocate* a) {
    if (!deps_.count(a->buffer.get())) return Allocate::make(a->buffer, a->dtype, a->size, a->scope, mutate(a->body));
    class Slice : public IRMutator {
     public:
      const ExprNode* buf;
      Expr offset;
      using IRMutator::mutate;
      Expr shift(const Expr& index) {
        int lanes = index.dtype().lanes;
        return index + (lanes > 1 ? Broadcast::make(offset, lanes) : offset);
      }
      Expr visit(const Load* l, const Expr& e) override {
        Expr r = IRMutator::visit(l, e);
        const Load* x = r.as<Load>();
        return x->buffer.get() == buf ? Load::make(x->type, x->buffer, shift(x->index), x->predicate) : r;
      }
      Stmt visit(const Store* st, const Stmt& s) override {
        Stmt r = IRMutator::visit(st, s);
        const Store* x = r.as<Store>();
        return x->buffer.get() == buf ? Store::make(x->buffer, x->value, shift(x->index), x->predicate) : r;
      }
    } slice;
    slice.buf = a->buffer.get();
    slice.offset = v_ * make_int(a->size);
    return Allocate::make(a->buffer, a->dtype, a->size * n_, a->scope, mutate(slice.mutate(a->body)));
  }

  Var v_;
  int64_t n_;
  NodeSet deps_;
};

class VirtualThreads : public IRMutator {
 public:
  using IRMutator::mutate;

 protected:
  Stmt visit(const For* op, const Stmt& s) override {
    Stmt body = mutate(op->body);  // inner virtual threads first
    if (op->for_kind != ForKind::ThreadBound || op->thread_tag != "vthread")
      return body.same_as(op->body) ? s : For::make(op->var, op->min, op->extent, op->for_kind, body, op->thread_tag);
    int64_t n;
    TESSEL_INTERNAL_CHECK(is_const_int(op->extent, &n) && is_zero(op->min), "vthread loop without a constant extent");
    return Inject(op->var, n, dependents(body, op->var)).mutate(body);
  }
};

}  // namespace

Stmt inject_virtual_thread(const Stmt& s) {
  VirtualThreads vt;
  return vt.mutate(s);
}

}  // namespace tessel
