#include "ir/IRPrinter.h"

#include <sstream>

namespace tessel {

const char* binary_symbol(NodeKind k) {
  switch (k) {
    case NodeKind::Add: return " + ";
    case NodeKind::Sub: return " - ";
    case NodeKind::Mul: return "*";
    case NodeKind::Div: return "/";
    case NodeKind::Mod: return " % ";
    case NodeKind::EQ: return " == ";
    case NodeKind::NE: return " != ";
    case NodeKind::LT: return " < ";
    case NodeKind::LE: return " <= ";
    case NodeKind::GT: return " > ";
    case NodeKind::GE: return " >= ";
    case NodeKind::And: return " && ";
    case NodeKind::Or: return " || ";
    default: return nullptr;
  }
}

namespace {

class Printer {
 public:
  std::ostringstream os;
  int indent = 0;

  void expr(const Expr& e) {
    if (!e.defined()) { os << "<undef>"; return; }
    const ExprNode* n = e.get();
    switch (n->kind) {
      case NodeKind::IntImm: {
        auto* i = static_cast<const IntImm*>(n);
        if (n->type.is_bool()) os << (i->value ? "true" : "false");
        else os << i->value;
        if (n->type == int64) os << "L";
        return;
      }
      case NodeKind::FloatImm: {
        auto* f = static_cast<const FloatImm*>(n);
        os << f->value;
        if (n->type == float32) os << "f";
        return;
      }
      case NodeKind::Variable: os << static_cast<const VarNode*>(n)->name; return;
      case NodeKind::Cast:
        os << n->type.str() << "(";
        expr(static_cast<const Cast*>(n)->value);
        os << ")";
        return;
      case NodeKind::Min:
      case NodeKind::Max: {
        auto* b = static_cast<const BinaryNode*>(n);
        os << (n->kind == NodeKind::Min ? "min(" : "max(");
        expr(b->a);
        os << ", ";
        expr(b->b);
        os << ")";
        return;
      }
      case NodeKind::Not: os << "!"; expr(static_cast<const Not*>(n)->a); return;
      case NodeKind::Select: {
        auto* s = static_cast<const Select*>(n);
        os << "select(";
        expr(s->cond), os << ", ", expr(s->t), os << ", ", expr(s->f);
        os << ")";
        return;
      }
      case NodeKind::Call: {
        auto* c = static_cast<const Call*>(n);
        os << intrinsic_name(c->op) << "(";
        for (size_t i = 0; i < c->args.size(); ++i) os << (i ? ", " : ""), expr(c->args[i]);
        os << ")";
        return;
      }
      case NodeKind::TensorLoad: {
        auto* l = static_cast<const TensorLoad*>(n);
        os << l->op->name << "(";
        for (size_t i = 0; i < l->indices.size(); ++i) os << (i ? ", " : ""), expr(l->indices[i]);
        os << ")";
        return;
      }
      case NodeKind::Load: {
        auto* l = static_cast<const Load*>(n);
        os << l->buffer.name() << "[";
        expr(l->index);
        os << "]";
        if (l->predicate.defined()) os << " if ", expr(l->predicate);
        return;
      }
      case NodeKind::Ramp: {
        auto* r = static_cast<const Ramp*>(n);
        os << "ramp(";
        expr(r->base), os << ", ", expr(r->stride);
        os << ", " << r->lanes << ")";
        return;
      }
      case NodeKind::Broadcast: {
        auto* b = static_cast<const Broadcast*>(n);
        os << "x" << b->lanes << "(";
        expr(b->value);
        os << ")";
        return;
      }
      case NodeKind::Reduce: {
        auto* r = static_cast<const Reduce*>(n);
        os << combiner_name(r->combiner) << "(";
        expr(r->source);
        os << ", axes=[";
        for (size_t i = 0; i < r->axes.size(); ++i) os << (i ? ", " : "") << r->axes[i].name();
        os << "]";
        if (r->condition.defined()) os << ", where=", expr(r->condition);
        if (r->init.defined()) os << ", init=", expr(r->init);
        os << ")";
        return;
      }
      case NodeKind::Let: {
        auto* l = static_cast<const Let*>(n);
        os << "(let " << l->var.name() << " = ";
        expr(l->value);
        os << " in ";
        expr(l->body);
        os << ")";
        return;
      }
      default: {
        auto* b = static_cast<const BinaryNode*>(n);
        os << "(";
        expr(b->a);
        os << binary_symbol(n->kind);
        expr(b->b);
        os << ")";
      }
    }
  }

  void line() { os << std::string(indent * 2, ' '); }

  void stmt(const Stmt& s) {
    if (!s.defined()) return;
    const StmtNode* n = s.get();
    switch (n->kind) {
      case NodeKind::LetStmt: {
        auto* l = static_cast<const LetStmt*>(n);
        line(), os << "let " << l->var.name() << " = ", expr(l->value), os << "\n";
        stmt(l->body);
        return;
      }
      case NodeKind::For: {
        auto* f = static_cast<const For*>(n);
        line();
        os << for_kind_name(f->for_kind) << " (" << f->var.name() << ", ";
        expr(f->min), os << ", ", expr(f->extent);
        if (!f->thread_tag.empty()) os << ", " << f->thread_tag;
        os << ") {\n";
        ++indent, stmt(f->body), --indent;
        line(), os << "}\n";
        return;
      }
      case NodeKind::Store: {
        auto* st = static_cast<const Store*>(n);
        line(), os << st->buffer.name() << "[", expr(st->index), os << "] = ", expr(st->value);
        if (st->predicate.defined()) os << " if ", expr(st->predicate);
        os << "\n";
        return;
      }
      case NodeKind::TensorStore: {
        auto* st = static_cast<const TensorStore*>(n);
        line(), os << st->op->name << "(";
        for (size_t i = 0; i < st->indices.size(); ++i) os << (i ? ", " : ""), expr(st->indices[i]);
        os << ") = ", expr(st->value), os << "\n";
        return;
      }
      case NodeKind::Realize: {
        auto* r = static_cast<const Realize*>(n);
        line(), os << "realize " << r->op->name << "(";
        for (size_t i = 0; i < r->mins.size(); ++i) os << (i ? ", " : "") << "[", expr(r->mins[i]), os << ", +" << r->extents[i] << ")";
        os << ")";
        if (!r->scope.empty()) os << " in " << r->scope;
        os << " {\n";
        ++indent, stmt(r->body), --indent;
        line(), os << "}\n";
        return;
      }
      case NodeKind::Allocate: {
        auto* a = static_cast<const Allocate*>(n);
        line(), os << "allocate " << a->buffer.name() << "[" << a->dtype.str() << " * " << a->size << "]";
        if (!a->scope.empty()) os << " in " << a->scope;
        os << "\n";
        stmt(a->body);
        return;
      }
      case NodeKind::IfThenElse: {
        auto* i = static_cast<const IfThenElse*>(n);
        line(), os << "if (", expr(i->cond), os << ") {\n";
        ++indent, stmt(i->then_case), --indent;
        if (i->else_case.defined()) {
          line(), os << "} else {\n";
          ++indent, stmt(i->else_case), --indent;
        }
        line(), os << "}\n";
        return;
      }
      case NodeKind::Block:
        for (auto& st : static_cast<const Block*>(n)->stmts) stmt(st);
        return;
      case NodeKind::Evaluate:
        line(), expr(static_cast<const Evaluate*>(n)->value), os << "\n";
        return;
      case NodeKind::AttrStmt: {
        auto* a = static_cast<const AttrStmt*>(n);
        line(), os << "// " << a->key << " = " << a->value << "\n";
        stmt(a->body);
        return;
      }
      default: throw InternalError("printer: unknown statement");
    }
  }
};

}  // namespace

std::string to_string(const Expr& e) {
  Printer p;
  p.expr(e);
  return p.os.str();
}
std::string to_string(const Stmt& s) {
  Printer p;
  p.stmt(s);
  return p.os.str();
}

}  // namespace tessel
