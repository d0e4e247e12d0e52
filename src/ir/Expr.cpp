// The user-facing expression builders of expr.h, on top of the IR constructors.
#include <cmath>

#include "ir/IR.h"
#include "ir/IRPrinter.h"

namespace tessel {

Expr::Expr(int v) : Expr(IntImm::make(int32, v)) {}
Expr::Expr(int64_t v) : Expr(IntImm::make(int64, v)) {}
Expr::Expr(float v) : Expr(FloatImm::make(float32, v)) {}
Expr::Expr(double v) : Expr(FloatImm::make(float32, v)) {}

DType Expr::dtype() const {
  TESSEL_INTERNAL_CHECK(node_, "dtype of an undefined expression");
  return node_->type;
}
std::string Expr::str() const { return to_string(*this); }
std::string Stmt::str() const { return to_string(*this); }

Var::Var(const std::string& name, DType t) : Expr(std::make_shared<Variable>(t, name)) {}
Var::Var(std::shared_ptr<const ExprNode> n) : Expr(std::move(n)) {
  TESSEL_INTERNAL_CHECK(!defined() || get()->kind == NodeKind::Variable, "Var from a non-variable node");
}
const std::string& Var::name() const { return var_node()->name; }
const VarNode* Var::var_node() const { return static_cast<const VarNode*>(get()); }

IterVar::IterVar(Var v, int64_t min, int64_t extent, IterKind kind)
    : node_(std::make_shared<IterVarNode>(IterVarNode{std::move(v), min, extent, kind})) {}

IterVar reduce_axis(Range r, const std::string& name) {
  TESSEL_USER_CHECK(r.extent > 0, "reduce_axis '", name, "' has extent ", r.extent, "; it must be positive");
  return IterVar(Var(name), r.min, r.extent, IterKind::Reduce);
}

Expr operator+(Expr a, Expr b) { return Add::make(std::move(a), std::move(b)); }
Expr operator-(Expr a, Expr b) { return Sub::make(std::move(a), std::move(b)); }
Expr operator*(Expr a, Expr b) { return Mul::make(std::move(a), std::move(b)); }
Expr operator/(Expr a, Expr b) { return Div::make(std::move(a), std::move(b)); }
Expr operator%(Expr a, Expr b) {
  TESSEL_USER_CHECK(!a.dtype().is_float() && !b.dtype().is_float(),
                    "operator% needs integer operands, got ", a.dtype().str(), " and ", b.dtype().str());
  return Mod::make(std::move(a), std::move(b));
}
Expr operator-(Expr a) { return Sub::make(make_const(a.dtype(), 0), a); }
Expr operator==(Expr a, Expr b) { return EQ::make(std::move(a), std::move(b)); }
Expr operator!=(Expr a, Expr b) { return NE::make(std::move(a), std::move(b)); }
Expr operator<(Expr a, Expr b) { return LT::make(std::move(a), std::move(b)); }
Expr operator<=(Expr a, Expr b) { return LE::make(std::move(a), std::move(b)); }
Expr operator>(Expr a, Expr b) { return GT::make(std::move(a), std::move(b)); }
Expr operator>=(Expr a, Expr b) { return GE::make(std::move(a), std::move(b)); }
Expr operator&&(Expr a, Expr b) { return And::make(std::move(a), std::move(b)); }
Expr operator||(Expr a, Expr b) { return Or::make(std::move(a), std::move(b)); }
Expr operator!(Expr a) { return Not::make(std::move(a)); }

Expr min(Expr a, Expr b) { return Min::make(std::move(a), std::move(b)); }
Expr max(Expr a, Expr b) { return Max::make(std::move(a), std::move(b)); }
Expr select(Expr c, Expr t, Expr f) { return Select::make(std::move(c), std::move(t), std::move(f)); }
Expr cast(DType t, Expr e) {
  TESSEL_USER_CHECK(e.defined(), "cast of an undefined expression");
  if (const IntImm* i = e.as<IntImm>()) return make_const(t, double(i->value));
  if (const FloatImm* f = e.as<FloatImm>()) return make_const(t, f->value);
  return Cast::make(t, std::move(e));
}

Expr make_const(DType t, double v) {
  if (t.is_float()) return FloatImm::make(t, v);
  return IntImm::make(t, int64_t(v));
}

namespace {
Expr unary_math(Intrinsic op, Expr x) {
  TESSEL_USER_CHECK(x.defined(), intrinsic_name(op), "() of an undefined expression");
  if (!x.dtype().is_float()) x = cast(float32, x);
  return Call::make(x.dtype(), op, {x});
}
}  // namespace

Expr exp(Expr x) { return unary_math(Intrinsic::Exp, std::move(x)); }
Expr log(Expr x) { return unary_math(Intrinsic::Log, std::move(x)); }
Expr sqrt(Expr x) { return unary_math(Intrinsic::Sqrt, std::move(x)); }
Expr rsqrt(Expr x) { return unary_math(Intrinsic::Rsqrt, std::move(x)); }
Expr tanh(Expr x) { return unary_math(Intrinsic::Tanh, std::move(x)); }
Expr sigmoid(Expr x) { return unary_math(Intrinsic::Sigmoid, std::move(x)); }
Expr erf(Expr x) { return unary_math(Intrinsic::Erf, std::move(x)); }
Expr floor(Expr x) { return unary_math(Intrinsic::Floor, std::move(x)); }
Expr ceil(Expr x) { return unary_math(Intrinsic::Ceil, std::move(x)); }
Expr skippable(Expr cond) {
  TESSEL_USER_CHECK(cond.defined() && cond.dtype().is_bool(), "skippable() needs a boolean condition");
  return Call::make(cond.dtype(), Intrinsic::Skippable, {cond});
}
Expr abs(Expr x) {
  TESSEL_USER_CHECK(x.defined(), "abs() of an undefined expression");
  if (x.dtype().is_float()) return Call::make(x.dtype(), Intrinsic::Abs, {x});
  return select(x < make_const(x.dtype(), 0), -x, x);
}
Expr pow(Expr x, Expr y) {
  if (!x.dtype().is_float()) x = cast(float32, x);
  y = cast(x.dtype(), y);
  return Call::make(x.dtype(), Intrinsic::Pow, {x, y});
}

Expr sum(Expr s, std::vector<IterVar> axes, Expr where, Expr init) {
  return Reduce::make(Combiner::Sum, std::move(s), std::move(axes), std::move(where), std::move(init));
}
Expr max(Expr s, std::vector<IterVar> axes, Expr where, Expr init) {
  return Reduce::make(Combiner::Max, std::move(s), std::move(axes), std::move(where), std::move(init));
}
Expr min(Expr s, std::vector<IterVar> axes, Expr where, Expr init) {
  return Reduce::make(Combiner::Min, std::move(s), std::move(axes), std::move(where), std::move(init));
}
Expr prod(Expr s, std::vector<IterVar> axes, Expr where, Expr init) {
  return Reduce::make(Combiner::Prod, std::move(s), std::move(axes), std::move(where), std::move(init));
}

}  // namespace tessel
