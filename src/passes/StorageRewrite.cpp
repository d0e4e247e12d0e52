// Buffer reuse: two scratch allocations at the same level whose lifetimes do not overlap
// (one block statement uses only the first, later ones only the second) share memory when
// they have the same element type and the second fits. Typical case: the padded input of
// one stage and the intermediate of a later stage in a fused chain.
#include <algorithm>

#include "ir/IRMutator.h"
#include "ir/IRVisitor.h"
#include "passes/Passes.h"

namespace tessel {
namespace {

bool mentions(const Stmt& s, const VarNode* buf) { return uses_var(s, buf); }

class Rewriter : public IRMutator {
 public:
  using IRMutator::mutate;

 protected:
  // Allocate(a, Allocate(b, Block{uses of a..., uses of b...})): if no statement after the
  // last use of a mentions a, and b is not used before that, b can live in a's memory.
  Stmt visit(const Allocate* op, const Stmt& s) override {
    Stmt body = mutate(op->body);
    const Allocate* inner = body.as<Allocate>();
    if (inner && inner->dtype == op->dtype && inner->size <= op->size && inner->scope == op->scope) {
      if (const Block* blk = inner->body.as<Block>()) {
        const VarNode* a = op->buffer.var_node();
        const VarNode* b = inner->buffer.var_node();
        int last_a = -1, first_b = int(blk->stmts.size());
        for (int i = 0; i < int(blk->stmts.size()); ++i) {
          if (mentions(blk->stmts[i], a)) last_a = i;
          if (mentions(blk->stmts[i], b)) first_b = std::min(first_b, i);
        }
        if (last_a >= 0 && last_a < first_b) {
          // Loads and stores name their buffer directly, not as a child expression.
          class Rename : public IRMutator {
           public:
            Var from, to;
            using IRMutator::mutate;
            Expr visit(const Load* l, const Expr& e) override {
              Expr r = IRMutator::visit(l, e);
              const Load* x = r.as<Load>();
              return x->buffer.same_as(from) ? Load::make(x->type, to, x->index, x->predicate) : r;
            }
            Stmt visit(const Store* st, const Stmt& sm) override {
              Stmt r = IRMutator::visit(st, sm);
              const Store* x = r.as<Store>();
              return x->buffer.same_as(from) ? Store::make(to, x->value, x->index, x->predicate) : r;
            }
          } rn;
          rn.from = inner->buffer, rn.to = op->buffer;
          return Allocate::make(op->buffer, op->dtype, op->size, op->scope, rn.mutate(inner->body));
        }
      }
    }
    return body.same_as(op->body) ? s : Allocate::make(op->buffer, op->dtype, op->size, op->scope, body);
  }
};

}  // namespace

Stmt storage_rewrite(const Stmt& s) {
  Rewriter r;
  return r.mutate(s);
}

}  // namespace tessel
