#include "ir/IRMutator.h"

namespace tessel {

Expr IRMutator::mutate(const Expr& e) {
  if (!e.defined()) return e;
  switch (e.get()->kind) {
#define TESSEL_CASE(N) \
  case NodeKind::N: return visit(static_cast<const N*>(e.get()), e);
    TESSEL_EXPR_NODES(TESSEL_CASE)
#undef TESSEL_CASE
    default: throw InternalError("statement kind inside an expression");
  }
}

Stmt IRMutator::mutate(const Stmt& s) {
  if (!s.defined()) return s;
  switch (s.get()->kind) {
#define TESSEL_CASE(N) \
  case NodeKind::N: return visit(static_cast<const N*>(s.get()), s);
    TESSEL_STMT_NODES(TESSEL_CASE)
#undef TESSEL_CASE
    default: throw InternalError("expression kind inside a statement");
  }
}

Expr rebuild_binary(const Expr& like, Expr a, Expr b) {
  switch (like.get()->kind) {
    case NodeKind::Add: return Add::make(a, b);
    case NodeKind::Sub: return Sub::make(a, b);
    case NodeKind::Mul: return Mul::make(a, b);
    case NodeKind::Div: return Div::make(a, b);
    case NodeKind::Mod: return Mod::make(a, b);
    case NodeKind::Min: return Min::make(a, b);
    case NodeKind::Max: return Max::make(a, b);
    case NodeKind::EQ: return EQ::make(a, b);
    case NodeKind::NE: return NE::make(a, b);
    case NodeKind::LT: return LT::make(a, b);
    case NodeKind::LE: return LE::make(a, b);
    case NodeKind::GT: return GT::make(a, b);
    case NodeKind::GE: return GE::make(a, b);
    case NodeKind::And: return And::make(a, b);
    case NodeKind::Or: return Or::make(a, b);
    default: throw InternalError("rebuild_binary of a non-binary node");
  }
}

Expr IRMutator::visit(const IntImm*, const Expr& e) { return e; }
Expr IRMutator::visit(const FloatImm*, const Expr& e) { return e; }
Expr IRMutator::visit(const Variable*, const Expr& e) { return e; }
Expr IRMutator::visit(const Cast* op, const Expr& e) {
  Expr v = mutate(op->value);
  if (v.same_as(op->value)) return e;
  return Cast::make(op->type.with_lanes(v.dtype().lanes), v);
}
#define TESSEL_BIN(N)                                         \
  Expr IRMutator::visit(const N* op, const Expr& e) {         \
    Expr a = mutate(op->a), b = mutate(op->b);                \
    if (a.same_as(op->a) && b.same_as(op->b)) return e;      \
    return N::make(a, b);                                     \
  }
TESSEL_BIN(Add) TESSEL_BIN(Sub) TESSEL_BIN(Mul) TESSEL_BIN(Div) TESSEL_BIN(Mod) TESSEL_BIN(Min)
TESSEL_BIN(Max) TESSEL_BIN(EQ) TESSEL_BIN(NE) TESSEL_BIN(LT) TESSEL_BIN(LE) TESSEL_BIN(GT)
TESSEL_BIN(GE) TESSEL_BIN(And) TESSEL_BIN(Or)
#undef TESSEL_BIN
Expr IRMutator::visit(const Not* op, const Expr& e) {
  Expr a = mutate(op->a);
  return a.same_as(op->a) ? e : Not::make(a);
}
Expr IRMutator::visit(const Select* op, const Expr& e) {
  Expr c = mutate(op->cond), t = mutate(op->t), f = mutate(op->f);
  if (c.same_as(op->cond) && t.same_as(op->t) && f.same_as(op->f)) return e;
  return Select::make(c, t, f);
}
Expr IRMutator::visit(const Call* op, const Expr& e) {
  std::vector<Expr> args;
  bool changed = false;
  for (auto& a : op->args) {
    args.push_back(mutate(a));
    changed |= !args.back().same_as(a);
  }
  if (!changed) return e;
  // A call whose lanes are its argument's (math: a widened exp is a vector) follows them; one of
  // its own lanes (a lane reduction's scalar) keeps them.
  bool follows = !op->args.empty() && op->type.lanes == op->args[0].dtype().lanes;
  return Call::make(follows ? op->type.with_lanes(args[0].dtype().lanes) : op->type, op->op, args);
}
Expr IRMutator::visit(const TensorLoad* op, const Expr& e) {
  std::vector<Expr> idx;
  bool changed = false;
  for (auto& a : op->indices) {
    idx.push_back(mutate(a));
    changed |= !idx.back().same_as(a);
  }
  return changed ? TensorLoad::make(op->op, idx) : e;
}
Expr IRMutator::visit(const Load* op, const Expr& e) {
  Expr i = mutate(op->index), p = mutate(op->predicate);
  return i.same_as(op->index) && p.same_as(op->predicate) ? e : Load::make(op->type, op->buffer, i, p);
}
Expr IRMutator::visit(const Ramp* op, const Expr& e) {
  Expr b = mutate(op->base), s = mutate(op->stride);
  if (b.same_as(op->base) && s.same_as(op->stride)) return e;
  return Ramp::make(b, s, op->lanes);
}
Expr IRMutator::visit(const Broadcast* op, const Expr& e) {
  Expr v = mutate(op->value);
  return v.same_as(op->value) ? e : Broadcast::make(v, op->lanes);
}
Expr IRMutator::visit(const Reduce* op, const Expr& e) {
  Expr s = mutate(op->source), c = mutate(op->condition), i = mutate(op->init);
  if (s.same_as(op->source) && c.same_as(op->condition) && i.same_as(op->init)) return e;
  return Reduce::make(op->combiner, s, op->axes, c, i);
}
Expr IRMutator::visit(const Let* op, const Expr& e) {
  Expr v = mutate(op->value), b = mutate(op->body);
  if (v.same_as(op->value) && b.same_as(op->body)) return e;
  return Let::make(op->var, v, b);
}

Stmt IRMutator::visit(const LetStmt* op, const Stmt& s) {
  Expr v = mutate(op->value);
  Stmt b = mutate(op->body);
  if (v.same_as(op->value) && b.same_as(op->body)) return s;
  return LetStmt::make(op->var, v, b);
}
Stmt IRMutator::visit(const For* op, const Stmt& s) {
  Expr mn = mutate(op->min), ext = mutate(op->extent);
  Stmt b = mutate(op->body);
  if (mn.same_as(op->min) && ext.same_as(op->extent) && b.same_as(op->body)) return s;
  return For::make(op->var, mn, ext, op->for_kind, b, op->thread_tag);
}
Stmt IRMutator::visit(const Store* op, const Stmt& s) {
  Expr v = mutate(op->value), i = mutate(op->index), p = mutate(op->predicate);
  if (v.same_as(op->value) && i.same_as(op->index) && p.same_as(op->predicate)) return s;
  return Store::make(op->buffer, v, i, p);
}
Stmt IRMutator::visit(const TensorStore* op, const Stmt& s) {
  Expr v = mutate(op->value);
  bool changed = !v.same_as(op->value);
  std::vector<Expr> idx;
  for (auto& a : op->indices) {
    idx.push_back(mutate(a));
    changed |= !idx.back().same_as(a);
  }
  return changed ? TensorStore::make(op->op, v, idx) : s;
}
Stmt IRMutator::visit(const Realize* op, const Stmt& s) {
  bool changed = false;
  std::vector<Expr> mins;
  for (auto& m : op->mins) {
    mins.push_back(mutate(m));
    changed |= !mins.back().same_as(m);
  }
  Stmt b = mutate(op->body);
  changed |= !b.same_as(op->body);
  return changed ? Realize::make(op->op, mins, op->extents, op->scope, b) : s;
}
Stmt IRMutator::visit(const Allocate* op, const Stmt& s) {
  Stmt b = mutate(op->body);
  return b.same_as(op->body) ? s : Allocate::make(op->buffer, op->dtype, op->size, op->scope, b);
}
Stmt IRMutator::visit(const IfThenElse* op, const Stmt& s) {
  Expr c = mutate(op->cond);
  Stmt t = mutate(op->then_case), f = mutate(op->else_case);
  if (c.same_as(op->cond) && t.same_as(op->then_case) && f.same_as(op->else_case)) return s;
  return IfThenElse::make(c, t, f);
}
Stmt IRMutator::visit(const Block* op, const Stmt& s) {
  bool changed = false;
  std::vector<Stmt> out;
  for (auto& st : op->stmts) {
    out.push_back(mutate(st));
    changed |= !out.back().same_as(st);
  }
  return changed ? Block::make(out) : s;
}
Stmt IRMutator::visit(const Evaluate* op, const Stmt& s) {
  Expr v = mutate(op->value);
  return v.same_as(op->value) ? s : Evaluate::make(v);
}
Stmt IRMutator::visit(const AttrStmt* op, const Stmt& s) {
  Stmt b = mutate(op->body);
  return b.same_as(op->body) ? s : AttrStmt::make(op->key, op->value, b);
}

namespace {
class Substituter : public IRMutator {
 public:
  explicit Substituter(const VarMap& m) : map_(m) {}
  using IRMutator::mutate;

 protected:
  Expr visit(const Variable* op, const Expr& e) override {
    auto it = map_.find(op);
    return it == map_.end() ? e : it->second;
  }
  const VarMap& map_;
};
}  // namespace

Expr substitute(const Expr& e, const VarMap& map) {
  if (map.empty()) return e;
  Substituter s(map);
  return s.mutate(e);
}
VarMap one_iteration_axes(const OperationNode* op, bool spatial) {
  VarMap unit;
  for (auto* axes : {&op->axis, &op->reduce_axis})
    if (spatial || axes == &op->reduce_axis)
      for (auto& iv : *axes)
        if (iv.extent() == 1) unit[iv.var().get()] = make_int(iv.min());
  return unit;
}

Stmt substitute(const Stmt& st, const VarMap& map) {
  if (map.empty()) return st;
  Substituter s(map);
  return s.mutate(st);
}
Expr substitute(const Expr& e, const Var& v, const Expr& value) { return substitute(e, VarMap{{v.get(), value}}); }
Stmt substitute(const Stmt& s, const Var& v, const Expr& value) { return substitute(s, VarMap{{v.get(), value}}); }

}  // namespace tessel
