#pragma once
/** \file Rewriting traversal of the IR. Each visit returns the node itself when none of its
 * children changed, so untouched subtrees are shared, not copied. */
#include <functional>
#include <unordered_map>

#include "ir/IR.h"

namespace tessel {

class IRMutator {
 public:
  virtual ~IRMutator() = default;
  virtual Expr mutate(const Expr& e);
  virtual Stmt mutate(const Stmt& s);

 protected:
#define TESSEL_MUT_DECL(N) virtual Expr visit(const N* op, const Expr& e);
  TESSEL_EXPR_NODES(TESSEL_MUT_DECL)
#undef TESSEL_MUT_DECL
#define TESSEL_MUT_DECL(N) virtual Stmt visit(const N* op, const Stmt& s);
  TESSEL_STMT_NODES(TESSEL_MUT_DECL)
#undef TESSEL_MUT_DECL
};

// Rebuilds a binary node of the same kind as `like` with new operands.
Expr rebuild_binary(const Expr& like, Expr a, Expr b);

using VarMap = std::unordered_map<const ExprNode*, Expr>;
// Replaces variables (by node identity) with expressions.
Expr substitute(const Expr& e, const VarMap& map);
Stmt substitute(const Stmt& s, const VarMap& map);
Expr substitute(const Expr& e, const Var& v, const Expr& value);
Stmt substitute(const Stmt& s, const Var& v, const Expr& value);
// The axes of `op` that run one iteration, each mapped to its start (a 1x1 window's taps at 0), the
// spatial ones too where `spatial`: substituted, an index shows how the other axes read.
VarMap one_iteration_axes(const OperationNode* op, bool spatial = true);

}  // namespace tessel
