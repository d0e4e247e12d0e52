#include "ir/IR.h"

#include <cmath>
#include <limits>

namespace tessel {

// ---- helpers ----

bool is_const_int(const Expr& e, int64_t* value) {
  if (const IntImm* imm = e.as<IntImm>()) {
    if (value) *value = imm->value;
    return true;
  }
  return false;
}

Expr make_int(int64_t v, DType t) { return IntImm::make(t, v); }
Expr const_true() { return IntImm::make(boolean, 1); }
Expr const_false() { return IntImm::make(boolean, 0); }

// ---- node constructors ----

Expr IntImm::make(DType t, int64_t v) {
  if (t.is_bool()) v = v != 0;
  return Expr(std::make_shared<IntImm>(t, v));
}
Expr FloatImm::make(DType t, double v) { return Expr(std::make_shared<FloatImm>(t, v)); }

Expr Cast::make(DType t, Expr v) {
  TESSEL_INTERNAL_CHECK(v.defined(), "cast of undefined expression");
  if (v.dtype() == t) return v;
  TESSEL_INTERNAL_CHECK(t.lanes == v.dtype().lanes, "cast changes lanes");
  return Expr(std::make_shared<Cast>(t, std::move(v)));
}

namespace {

// Types of two operands meet at the wider of the two; a float side wins over an int side.
// Constant operands adopt the other side's type, so `x * 2` keeps x's type.
void promote(Expr& a, Expr& b) {
  DType ta = a.dtype(), tb = b.dtype();
  if (ta == tb) return;
  bool ca = a.as<IntImm>() || a.as<FloatImm>();
  bool cb = b.as<IntImm>() || b.as<FloatImm>();
  auto to = [](Expr& e, DType t) {
    if (const IntImm* i = e.as<IntImm>()) {
      e = t.is_float() ? FloatImm::make(t, double(i->value)) : IntImm::make(t, i->value);
    } else if (const FloatImm* f = e.as<FloatImm>()) {
      e = t.is_float() ? FloatImm::make(t, f->value) : IntImm::make(t, int64_t(f->value));
    } else {
      e = Cast::make(t, e);
    }
  };
  // Broadcasting is the vectorizer's job; operator nodes only see equal widths.
  TESSEL_INTERNAL_CHECK(ta.lanes == tb.lanes, "operands of different lane counts: ", ta.str(), " and ", tb.str());
  if (cb && !ca && !(ta.is_integer() && b.as<FloatImm>())) { to(b, ta); return; }
  if (ca && !cb && !(tb.is_integer() && a.as<FloatImm>())) { to(a, tb); return; }
  DType t;
  if (ta.is_float() != tb.is_float()) t = ta.is_float() ? ta : tb;
  else if (ta.is_bool() != tb.is_bool()) t = ta.is_bool() ? tb : ta;
  else t = ta.bits >= tb.bits ? ta : tb;
  if (ta != t) to(a, t);
  if (tb != t) to(b, t);
}

template <typename N>
Expr make_arith(Expr a, Expr b) {
  TESSEL_USER_CHECK(a.defined() && b.defined(), "arithmetic on an undefined expression");
  promote(a, b);
  DType t = a.dtype();
  return Expr(std::make_shared<N>(t, std::move(a), std::move(b)));
}

template <typename N>
Expr make_cmp(Expr a, Expr b) {
  TESSEL_USER_CHECK(a.defined() && b.defined(), "comparison of an undefined expression");
  promote(a, b);
  DType t = boolean.with_lanes(a.dtype().lanes);
  return Expr(std::make_shared<N>(t, std::move(a), std::move(b)));
}

Expr to_bool(Expr e) {
  if (e.dtype().is_bool()) return e;
  return make_cmp<NE>(e, make_const(e.dtype().element_of(), 0));
}

}  // namespace

Expr Add::make(Expr a, Expr b) { return make_arith<Add>(std::move(a), std::move(b)); }
Expr Sub::make(Expr a, Expr b) { return make_arith<Sub>(std::move(a), std::move(b)); }
Expr Mul::make(Expr a, Expr b) { return make_arith<Mul>(std::move(a), std::move(b)); }
Expr Div::make(Expr a, Expr b) { return make_arith<Div>(std::move(a), std::move(b)); }
Expr Mod::make(Expr a, Expr b) { return make_arith<Mod>(std::move(a), std::move(b)); }
Expr Min::make(Expr a, Expr b) { return make_arith<Min>(std::move(a), std::move(b)); }
Expr Max::make(Expr a, Expr b) { return make_arith<Max>(std::move(a), std::move(b)); }
Expr EQ::make(Expr a, Expr b) { return make_cmp<EQ>(std::move(a), std::move(b)); }
Expr NE::make(Expr a, Expr b) { return make_cmp<NE>(std::move(a), std::move(b)); }
Expr LT::make(Expr a, Expr b) { return make_cmp<LT>(std::move(a), std::move(b)); }
Expr LE::make(Expr a, Expr b) { return make_cmp<LE>(std::move(a), std::move(b)); }
Expr GT::make(Expr a, Expr b) { return make_cmp<GT>(std::move(a), std::move(b)); }
Expr GE::make(Expr a, Expr b) { return make_cmp<GE>(std::move(a), std::move(b)); }
Expr And::make(Expr a, Expr b) {
  a = to_bool(a), b = to_bool(b);
  DType t = a.dtype();
  return Expr(std::make_shared<And>(t, a, b));
}
Expr Or::make(Expr a, Expr b) {
  a = to_bool(a), b = to_bool(b);
  DType t = a.dtype();
  return Expr(std::make_shared<Or>(t, a, b));
}
Expr Not::make(Expr a) {
  a = to_bool(a);
  DType t = a.dtype();
  return Expr(std::make_shared<Not>(t, a));
}

Expr Select::make(Expr c, Expr t, Expr f) {
  TESSEL_USER_CHECK(c.defined() && t.defined() && f.defined(), "select with an undefined operand");
  c = to_bool(c);
  promote(t, f);
  DType ty = t.dtype();
  return Expr(std::make_shared<Select>(ty, std::move(c), std::move(t), std::move(f)));
}

Expr Call::make(DType t, Intrinsic op, std::vector<Expr> args) {
  return Expr(std::make_shared<Call>(t, op, std::move(args)));
}

Expr TensorLoad::make(Operation op, std::vector<Expr> indices) {
  DType t = op->dtype;
  return Expr(std::make_shared<TensorLoad>(t, std::move(op), std::move(indices)));
}

Expr Load::make(DType t, Var buffer, Expr index, Expr predicate) {
  t = t.with_lanes(index.dtype().lanes);
  return Expr(std::make_shared<Load>(t, std::move(buffer), std::move(index), std::move(predicate)));
}

Expr Ramp::make(Expr base, Expr stride, int lanes) {
  DType t = base.dtype().with_lanes(lanes);
  return Expr(std::make_shared<Ramp>(t, std::move(base), std::move(stride), lanes));
}

Expr Broadcast::make(Expr value, int lanes) {
  DType t = value.dtype().with_lanes(lanes);
  return Expr(std::make_shared<Broadcast>(t, std::move(value), lanes));
}

Expr Reduce::make(Combiner c, Expr source, std::vector<IterVar> axes, Expr cond, Expr init) {
  TESSEL_USER_CHECK(source.defined(), "reduction of an undefined expression");
  TESSEL_USER_CHECK(!axes.empty(), combiner_name(c), "(...) needs at least one reduce axis");
  for (const IterVar& iv : axes)
    TESSEL_USER_CHECK(iv.is_reduce(), combiner_name(c), "(...) over axis '", iv.name(),
                      "', which is not a reduce axis; make it with reduce_axis()");
  DType t = source.dtype();
  if (cond.defined()) cond = to_bool(cond);
  if (init.defined()) init = cast(t, init);
  return Expr(std::make_shared<Reduce>(t, c, std::move(source), std::move(axes), std::move(cond), std::move(init)));
}

Expr Let::make(Var v, Expr value, Expr body) {
  DType t = body.dtype();
  return Expr(std::make_shared<Let>(t, std::move(v), std::move(value), std::move(body)));
}

Stmt LetStmt::make(Var v, Expr value, Stmt body) {
  return Stmt(std::make_shared<LetStmt>(std::move(v), std::move(value), std::move(body)));
}
Stmt For::make(Var v, Expr min, Expr extent, ForKind k, Stmt body, std::string tag) {
  return Stmt(std::make_shared<For>(std::move(v), std::move(min), std::move(extent), k, std::move(tag),
                                    std::move(body)));
}
Stmt Store::make(Var buffer, Expr value, Expr index, Expr predicate) {
  return Stmt(std::make_shared<Store>(std::move(buffer), std::move(value), std::move(index), std::move(predicate)));
}
Stmt TensorStore::make(Operation op, Expr value, std::vector<Expr> indices) {
  return Stmt(std::make_shared<TensorStore>(std::move(op), std::move(value), std::move(indices)));
}
Stmt Realize::make(Operation op, std::vector<Expr> mins, std::vector<int64_t> extents, std::string scope,
                   Stmt body) {
  return Stmt(std::make_shared<Realize>(std::move(op), std::move(mins), std::move(extents), std::move(scope),
                                        std::move(body)));
}
Stmt Allocate::make(Var buffer, DType t, int64_t size, std::string scope, Stmt body) {
  return Stmt(std::make_shared<Allocate>(std::move(buffer), t, size, std::move(scope), std::move(body)));
}
Stmt IfThenElse::make(Expr cond, Stmt then_case, Stmt else_case) {
  return Stmt(std::make_shared<IfThenElse>(std::move(cond), std::move(then_case), std::move(else_case)));
}
Stmt Block::make(std::vector<Stmt> stmts) {
  std::vector<Stmt> flat;
  for (Stmt& s : stmts) {
    if (!s.defined()) continue;
    if (const Block* b = s.as<Block>()) flat.insert(flat.end(), b->stmts.begin(), b->stmts.end());
    else flat.push_back(std::move(s));
  }
  if (flat.empty()) return Stmt();
  if (flat.size() == 1) return flat[0];
  return Stmt(std::make_shared<Block>(std::move(flat)));
}
Stmt Evaluate::make(Expr v) { return Stmt(std::make_shared<Evaluate>(std::move(v))); }
Stmt AttrStmt::make(std::string key, int64_t value, Stmt body) {
  return Stmt(std::make_shared<AttrStmt>(std::move(key), value, std::move(body)));
}

const char* intrinsic_name(Intrinsic op) {
  switch (op) {
    case Intrinsic::Exp: return "exp";
    case Intrinsic::Log: return "log";
    case Intrinsic::Sqrt: return "sqrt";
    case Intrinsic::Rsqrt: return "rsqrt";
    case Intrinsic::Tanh: return "tanh";
    case Intrinsic::Sigmoid: return "sigmoid";
    case Intrinsic::Erf: return "erf";
    case Intrinsic::Abs: return "abs";
    case Intrinsic::Pow: return "pow";
    case Intrinsic::Floor: return "floor";
    case Intrinsic::Ceil: return "ceil";
    case Intrinsic::Skippable: return "skippable";
    case Intrinsic::ThreadIndex: return "thread_index";
    case Intrinsic::Barrier: return "barrier";
    case Intrinsic::ThreadAllReduce: return "thread_allreduce";
    case Intrinsic::ShuffleXor: return "shuffle_xor";
    case Intrinsic::CheckIndex: return "check_index";
    case Intrinsic::VectorReduce: return "vector_reduce";
    case Intrinsic::Prefetch: return "prefetch";
  }
  return "?";
}

const char* combiner_name(Combiner c) {
  switch (c) {
    case Combiner::Sum: return "sum";
    case Combiner::Max: return "max";
    case Combiner::Min: return "min";
    case Combiner::Prod: return "prod";
  }
  return "?";
}

const char* for_kind_name(ForKind k) {
  switch (k) {
    case ForKind::Serial: return "for";
    case ForKind::Parallel: return "parallel";
    case ForKind::Vectorized: return "vectorized";
    case ForKind::Unrolled: return "unrolled";
    case ForKind::ThreadBound: return "bound";
  }
  return "?";
}

Expr combiner_identity(Combiner c, DType t) {
  auto lowest = [&]() -> double {
    if (t.is_float()) return -std::numeric_limits<double>::infinity();
    if (t.is_uint() || t.is_bool()) return 0;
    return -std::ldexp(1.0, t.bits - 1);
  };
  auto highest = [&]() -> double {
    if (t.is_float()) return std::numeric_limits<double>::infinity();
    if (t.is_bool()) return 1;
    if (t.is_uint()) return std::ldexp(1.0, t.bits) - 1;
    return std::ldexp(1.0, t.bits - 1) - 1;
  };
  switch (c) {
    case Combiner::Sum: return make_const(t, 0);
    case Combiner::Prod: return make_const(t, 1);
    case Combiner::Max: return make_const(t, lowest());
    case Combiner::Min: return make_const(t, highest());
  }
  return Expr();
}

Expr combine(Combiner c, Expr acc, Expr value) {
  switch (c) {
    case Combiner::Sum: return Add::make(acc, value);
    case Combiner::Prod: return Mul::make(acc, value);
    case Combiner::Max: return Max::make(acc, value);
    case Combiner::Min: return Min::make(acc, value);
  }
  return Expr();
}

// ---- Operation ----

std::vector<Operation> OperationNode::inputs() const {
  std::vector<Operation> out;
  std::vector<Expr> stack{body};
  // Iterative walk: bodies of fused epilogues can be deep.
  while (!stack.empty()) {
    Expr e = stack.back();
    stack.pop_back();
    if (!e.defined()) continue;
    const ExprNode* n = e.get();
    switch (n->kind) {
      case NodeKind::TensorLoad: {
        auto* l = static_cast<const TensorLoad*>(n);
        bool seen = false;
        for (auto& o : out) seen |= o == l->op;
        if (!seen) out.push_back(l->op);
        for (auto it = l->indices.rbegin(); it != l->indices.rend(); ++it) stack.push_back(*it);
        break;
      }
      case NodeKind::Cast: stack.push_back(static_cast<const Cast*>(n)->value); break;
      case NodeKind::Not: stack.push_back(static_cast<const Not*>(n)->a); break;
      case NodeKind::Select: {
        auto* s = static_cast<const Select*>(n);
        stack.push_back(s->f), stack.push_back(s->t), stack.push_back(s->cond);
        break;
      }
      case NodeKind::Call: {
        auto* c = static_cast<const Call*>(n);
        for (auto it = c->args.rbegin(); it != c->args.rend(); ++it) stack.push_back(*it);
        break;
      }
      case NodeKind::Reduce: {
        auto* r = static_cast<const Reduce*>(n);
        stack.push_back(r->init), stack.push_back(r->condition), stack.push_back(r->source);
        break;
      }
      case NodeKind::Let: {
        auto* l = static_cast<const Let*>(n);
        stack.push_back(l->body), stack.push_back(l->value);
        break;
      }
      default:
        if (auto* b = dynamic_cast<const BinaryNode*>(n)) stack.push_back(b->b), stack.push_back(b->a);
        break;
    }
  }
  return out;
}

Operation make_compute_op(std::string name, std::vector<IterVar> axis, Expr body, std::string tag,
                          std::map<std::string, std::string> attrs) {
  auto op = std::make_shared<OperationNode>();
  op->kind = OperationNode::Compute;
  op->name = std::move(name);
  for (const IterVar& iv : axis) op->shape.push_back(iv.extent());
  op->dtype = body.dtype();
  op->axis = std::move(axis);
  if (const Reduce* r = body.as<Reduce>()) op->reduce_axis = r->axes;
  op->body = std::move(body);
  op->tag = std::move(tag);
  op->attrs = std::move(attrs);
  return op;
}

}  // namespace tessel
