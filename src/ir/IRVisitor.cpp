#include "ir/IRVisitor.h"

namespace tessel {

void IRVisitor::visit(const Expr& e) {
  if (!e.defined()) return;
  switch (e.get()->kind) {
#define TESSEL_CASE(N) \
  case NodeKind::N: return visit_node(static_cast<const N*>(e.get()), e);
    TESSEL_EXPR_NODES(TESSEL_CASE)
#undef TESSEL_CASE
    default: throw InternalError("statement kind inside an expression");
  }
}

void IRVisitor::visit(const Stmt& s) {
  if (!s.defined()) return;
  switch (s.get()->kind) {
#define TESSEL_CASE(N) \
  case NodeKind::N: return visit_node(static_cast<const N*>(s.get()), s);
    TESSEL_STMT_NODES(TESSEL_CASE)
#undef TESSEL_CASE
    default: throw InternalError("expression kind inside a statement");
  }
}

void IRVisitor::visit_node(const IntImm*, const Expr&) {}
void IRVisitor::visit_node(const FloatImm*, const Expr&) {}
void IRVisitor::visit_node(const Variable*, const Expr&) {}
void IRVisitor::visit_node(const Cast* op, const Expr&) { visit(op->value); }
#define TESSEL_BIN(N) \
  void IRVisitor::visit_node(const N* op, const Expr&) { visit(op->a); visit(op->b); }
TESSEL_BIN(Add) TESSEL_BIN(Sub) TESSEL_BIN(Mul) TESSEL_BIN(Div) TESSEL_BIN(Mod) TESSEL_BIN(Min)
TESSEL_BIN(Max) TESSEL_BIN(EQ) TESSEL_BIN(NE) TESSEL_BIN(LT) TESSEL_BIN(LE) TESSEL_BIN(GT)
TESSEL_BIN(GE) TESSEL_BIN(And) TESSEL_BIN(Or)
#undef TESSEL_BIN
void IRVisitor::visit_node(const Not* op, const Expr&) { visit(op->a); }
void IRVisitor::visit_node(const Select* op, const Expr&) { visit(op->cond); visit(op->t); visit(op->f); }
void IRVisitor::visit_node(const Call* op, const Expr&) { for (auto& a : op->args) visit(a); }
void IRVisitor::visit_node(const TensorLoad* op, const Expr&) { for (auto& a : op->indices) visit(a); }
void IRVisitor::visit_node(const Load* op, const Expr&) {
  visit(op->index);
  visit(op->predicate);
}
void IRVisitor::visit_node(const Ramp* op, const Expr&) { visit(op->base); visit(op->stride); }
void IRVisitor::visit_node(const Broadcast* op, const Expr&) { visit(op->value); }
void IRVisitor::visit_node(const Reduce* op, const Expr&) {
  visit(op->source);
  visit(op->condition);
  visit(op->init);
}
void IRVisitor::visit_node(const Let* op, const Expr&) { visit(op->value); visit(op->body); }

void IRVisitor::visit_node(const LetStmt* op, const Stmt&) { visit(op->value); visit(op->body); }
void IRVisitor::visit_node(const For* op, const Stmt&) { visit(op->min); visit(op->extent); visit(op->body); }
void IRVisitor::visit_node(const Store* op, const Stmt&) {
  visit(op->value);
  visit(op->index);
  visit(op->predicate);
}
void IRVisitor::visit_node(const TensorStore* op, const Stmt&) {
  visit(op->value);
  for (auto& i : op->indices) visit(i);
}
void IRVisitor::visit_node(const Realize* op, const Stmt&) {
  for (auto& m : op->mins) visit(m);
  visit(op->body);
}
void IRVisitor::visit_node(const Allocate* op, const Stmt&) { visit(op->body); }
void IRVisitor::visit_node(const IfThenElse* op, const Stmt&) {
  visit(op->cond);
  visit(op->then_case);
  visit(op->else_case);
}
void IRVisitor::visit_node(const Block* op, const Stmt&) { for (auto& s : op->stmts) visit(s); }
void IRVisitor::visit_node(const Evaluate* op, const Stmt&) { visit(op->value); }
void IRVisitor::visit_node(const AttrStmt* op, const Stmt&) { visit(op->body); }

namespace {
class LambdaVisitor : public IRVisitor {
 public:
  std::function<void(const Expr&)> fe;
  std::function<void(const Stmt&)> fs;
  using IRVisitor::visit;
  void visit(const Expr& e) override {
    if (!e.defined()) return;
    if (fe) fe(e);
    IRVisitor::visit(e);
  }
  void visit(const Stmt& s) override {
    if (!s.defined()) return;
    if (fs) fs(s);
    IRVisitor::visit(s);
  }
};
}  // namespace

void visit_exprs(const Expr& e, const std::function<void(const Expr&)>& f) {
  LambdaVisitor v;
  v.fe = f;
  v.visit(e);
}
void visit_exprs(const Stmt& s, const std::function<void(const Expr&)>& f) {
  LambdaVisitor v;
  v.fe = f;
  v.visit(s);
}
void visit_stmts(const Stmt& s, const std::function<void(const Stmt&)>& f) {
  LambdaVisitor v;
  v.fs = f;
  v.visit(s);
}

bool uses_var(const Expr& e, const VarNode* var) {
  bool found = false;
  visit_exprs(e, [&](const Expr& x) { found |= x.get() == var; });
  return found;
}
bool uses_var(const Stmt& s, const VarNode* var) {
  bool found = false;
  visit_exprs(s, [&](const Expr& x) { found |= x.get() == var; });
  // Buffer variables appear as fields of Load/Store, not as child expressions.
  if (!found) {
    visit_stmts(s, [&](const Stmt& st) {
      if (const Store* op = st.as<Store>()) found |= op->buffer.get() == var;
    });
    visit_exprs(s, [&](const Expr& x) {
      if (const Load* op = x.as<Load>()) found |= op->buffer.get() == var;
    });
  }
  return found;
}

}  // namespace tessel
