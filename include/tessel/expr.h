#pragma once
// Scalar expressions of the tensor-expression language: handles, variables, loop axes,
// operators, intrinsics and reductions. The node structs live in src/ir/IR.h; users only
// hold these handles, which are cheap to copy and immutable.
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <string>
#include <vector>

#include "tessel/dtype.h"

namespace tessel {

struct ExprNode;
struct StmtNode;
struct VarNode;

class Expr {
 public:
  Expr() = default;
  Expr(int v);      // NOLINT: int literals become int32 constants
  Expr(int64_t v);  // NOLINT: int64 constant
  Expr(float v);    // NOLINT: float32 constant
  Expr(double v);   // NOLINT: float32 constant too, as in TVM; use cast() for float64
  explicit Expr(std::shared_ptr<const ExprNode> n) : node_(std::move(n)) {}

  bool defined() const { return node_ != nullptr; }
  const ExprNode* get() const { return node_.get(); }
  const std::shared_ptr<const ExprNode>& node() const { return node_; }
  DType dtype() const;
  std::string str() const;
  // Downcast to a node type (defined in src/ir/IR.h); nullptr if the kind differs.
  template <typename T>
  const T* as() const;
  bool same_as(const Expr& o) const { return node_ == o.node_; }

 private:
  std::shared_ptr<const ExprNode> node_;
};

class Stmt {
 public:
  Stmt() = default;
  explicit Stmt(std::shared_ptr<const StmtNode> n) : node_(std::move(n)) {}
  bool defined() const { return node_ != nullptr; }
  const StmtNode* get() const { return node_.get(); }
  const std::shared_ptr<const StmtNode>& node() const { return node_; }
  std::string str() const;
  template <typename T>
  const T* as() const;
  bool same_as(const Stmt& o) const { return node_ == o.node_; }

 private:
  std::shared_ptr<const StmtNode> node_;
};

// A named variable. Identity is the node, not the name.
class Var : public Expr {
 public:
  Var() = default;
  explicit Var(const std::string& name, DType t = int32);
  explicit Var(std::shared_ptr<const ExprNode> n);
  const std::string& name() const;
  const VarNode* var_node() const;
};

enum class IterKind : uint8_t { Spatial, Reduce };

struct IterVarNode {
  Var var;
  int64_t min = 0;
  int64_t extent = 0;
  IterKind kind = IterKind::Spatial;
};

// A loop axis of a computation: a variable with a constant range.
class IterVar {
 public:
  IterVar() = default;
  IterVar(Var v, int64_t min, int64_t extent, IterKind kind);
  const Var& var() const { return node_->var; }
  const std::string& name() const { return node_->var.name(); }
  int64_t min() const { return node_->min; }
  int64_t extent() const { return node_->extent; }
  IterKind kind() const { return node_->kind; }
  bool is_reduce() const { return node_->kind == IterKind::Reduce; }
  bool defined() const { return node_ != nullptr; }
  const IterVarNode* get() const { return node_.get(); }
  operator Expr() const { return node_->var; }  // NOLINT: axes are used as index expressions

 private:
  std::shared_ptr<const IterVarNode> node_;
};

struct Range {
  int64_t min = 0;
  int64_t extent = 0;
  Range(int64_t extent_) : extent(extent_) {}  // NOLINT: reduce_axis(64, "k")
  Range(int64_t min_, int64_t extent_) : min(min_), extent(extent_) {}
};

IterVar reduce_axis(Range r, const std::string& name);

// Arithmetic. Integer division and modulo truncate toward zero, as in C; index
// expressions in Tessel are non-negative so the distinction rarely matters.
Expr operator+(Expr a, Expr b);
Expr operator-(Expr a, Expr b);
Expr operator*(Expr a, Expr b);
Expr operator/(Expr a, Expr b);
Expr operator%(Expr a, Expr b);
Expr operator-(Expr a);
Expr operator==(Expr a, Expr b);
Expr operator!=(Expr a, Expr b);
Expr operator<(Expr a, Expr b);
Expr operator<=(Expr a, Expr b);
Expr operator>(Expr a, Expr b);
Expr operator>=(Expr a, Expr b);
Expr operator&&(Expr a, Expr b);
Expr operator||(Expr a, Expr b);
Expr operator!(Expr a);

Expr min(Expr a, Expr b);
Expr max(Expr a, Expr b);
Expr select(Expr cond, Expr t, Expr f);
inline Expr if_then_else(Expr cond, Expr t, Expr f) { return select(cond, t, f); }
Expr cast(DType t, Expr e);
Expr make_const(DType t, double v);

// Math intrinsics (float operands; integer operands are cast to float32 first).
Expr exp(Expr x);
Expr log(Expr x);
Expr sqrt(Expr x);
Expr rsqrt(Expr x);
Expr tanh(Expr x);
Expr sigmoid(Expr x);
Expr erf(Expr x);
Expr abs(Expr x);
Expr pow(Expr x, Expr y);
Expr floor(Expr x);
Expr ceil(Expr x);

// A condition that work may be skipped by but need not be checked by: where it fails, the
// guarded computation must be harmless to run anyway, as a sum over a convolution's zero
// padding is. As a reduction's `where`, loop partitioning skips those points where it
// splits loops at the borders; elsewhere the check is dropped rather than paid for.
Expr skippable(Expr cond);

// Reductions over reduce axes. `where` masks out points of the reduction domain;
// `init` replaces the combiner's identity as the starting value.
Expr sum(Expr source, std::vector<IterVar> axes, Expr where = Expr(), Expr init = Expr());
Expr max(Expr source, std::vector<IterVar> axes, Expr where = Expr(), Expr init = Expr());
Expr min(Expr source, std::vector<IterVar> axes, Expr where = Expr(), Expr init = Expr());
// max(x, {k}) would otherwise be ambiguous with the binary max(x, k).
inline Expr max(Expr source, std::initializer_list<IterVar> axes, Expr where = Expr(),
                Expr init = Expr()) {
  return max(std::move(source), std::vector<IterVar>(axes), std::move(where), std::move(init));
}
inline Expr min(Expr source, std::initializer_list<IterVar> axes, Expr where = Expr(),
                Expr init = Expr()) {
  return min(std::move(source), std::vector<IterVar>(axes), std::move(where), std::move(init));
}
Expr prod(Expr source, std::vector<IterVar> axes, Expr where = Expr(), Expr init = Expr());

}  // namespace tessel
