#pragma once
/** \file Read-only traversal of the IR. Override visit() for the nodes you care about and
 * call the base to keep descending. */
#include <functional>

#include "ir/IR.h"

namespace tessel {

class IRVisitor {
 public:
  virtual ~IRVisitor() = default;
  virtual void visit(const Expr& e);
  virtual void visit(const Stmt& s);

 protected:
#define TESSEL_VISIT_DECL(N) virtual void visit_node(const N* op, const Expr& e);
  TESSEL_EXPR_NODES(TESSEL_VISIT_DECL)
#undef TESSEL_VISIT_DECL
#define TESSEL_VISIT_DECL(N) virtual void visit_node(const N* op, const Stmt& s);
  TESSEL_STMT_NODES(TESSEL_VISIT_DECL)
#undef TESSEL_VISIT_DECL
};

// Calls f on every expression node under e (pre-order), or under every expression of s.
void visit_exprs(const Expr& e, const std::function<void(const Expr&)>& f);
void visit_exprs(const Stmt& s, const std::function<void(const Expr&)>& f);
void visit_stmts(const Stmt& s, const std::function<void(const Stmt&)>& f);

// Does e mention v (or any variable of the set)?
bool uses_var(const Expr& e, const VarNode* v);
bool uses_var(const Stmt& s, const VarNode* v);

}  // namespace tessel
