// Skippable guards (a convolution's taps on its zero padding) have mostly done their
// work by now: loop partitioning split the loops at the borders where that paid, and
// unrolling plus simplification decided the guards of unrolled register blocks. What is
// left is settled here. A guard shared by everything in a loop moves in front of it and
// is checked once per run of the loop: a column of a register block whose taps all lie
// in the padding is skipped whole. A guard left on single stores is dropped, not
// checked: the store is harmless where it fails, and a branch per store costs more than
// the tap it saves and keeps LLVM from holding accumulators in registers across loops
// (a 28x28 layer ran at half speed with such branches left in its register block).
#include "ir/IRMutator.h"
#include "ir/IRVisitor.h"
#include "ir/Simplify.h"  // equal, conjuncts
#include "passes/Passes.h"

namespace tessel {
namespace {

// Moves the skippable conjuncts every statement of a block, or of a loop's body, is
// guarded by (and that do not use the loop's variable) in front of the block or loop.
class Hoist : public IRMutator {
 protected:
  Stmt visit(const Block* op, const Stmt& s) override {
    Stmt b = IRMutator::visit(op, s);
    const Block* blk = b.as<Block>();
    if (!blk) return b;
    return hoist(b, blk->stmts, nullptr);
  }
  Stmt visit(const For* op, const Stmt& s) override {
    Stmt f = IRMutator::visit(op, s);
    const For* loop = f.as<For>();
    if (!loop) return f;
    return hoist(f, {loop->body}, loop->var.var_node());
  }

 private:
  // The skippable conjuncts shared by all of `stmts` (each an `if` without else), minus
  // those that use `var`, go in front of `whole`, rebuilt without them.
  Stmt hoist(const Stmt& whole, const std::vector<Stmt>& stmts, const VarNode* var) {
    std::vector<Expr> shared;
    for (size_t i = 0; i < stmts.size(); ++i) {
      const IfThenElse* g = stmts[i].as<IfThenElse>();
      if (!g || g->else_case.defined()) return whole;
      std::vector<Expr> cs;
      conjuncts(g->cond, &cs);
      if (i == 0) {
        for (auto& c : cs)
          if (is_skippable(c) && !(var && uses_var(c, var))) shared.push_back(c);
      } else {
        std::vector<Expr> kept;
        for (auto& c : shared)
          for (auto& d : cs)
            if (equal(c, d)) {
              kept.push_back(c);
              break;
            }
        shared = kept;
      }
      if (shared.empty()) return whole;
    }
    Stmt inner = strip(whole, shared);
    return IfThenElse::make(all_of(shared), inner);
  }

  // `s` with the conjuncts `gone` removed from the guards at its top.
  static Stmt strip(const Stmt& s, const std::vector<Expr>& gone) {
    if (const Block* b = s.as<Block>()) {
      std::vector<Stmt> out;
      for (auto& x : b->stmts) out.push_back(strip(x, gone));
      return Block::make(out);
    }
    if (const For* f = s.as<For>())
      return For::make(f->var, f->min, f->extent, f->for_kind, strip(f->body, gone), f->thread_tag);
    const IfThenElse* g = s.as<IfThenElse>();
    std::vector<Expr> cs, rest;
    conjuncts(g->cond, &cs);
    for (auto& c : cs) {
      bool drop = false;
      for (auto& x : gone) drop |= equal(c, x);
      if (!drop) rest.push_back(c);
    }
    return rest.empty() ? g->then_case : IfThenElse::make(all_of(rest), g->then_case);
  }
};

// A skippable guard in front of a loop is checked; anywhere else it is dropped.
class Settle : public IRMutator {
 protected:
  Stmt visit(const IfThenElse* op, const Stmt& s) override {
    std::vector<Expr> cs, kept;
    conjuncts(op->cond, &cs);
    bool before_loop = op->then_case.as<For>() != nullptr && !op->else_case.defined();
    bool any = false;
    for (auto& c : cs) {
      if (!is_skippable(c)) kept.push_back(c);
      else if (before_loop) kept.push_back(static_cast<const Call*>(c.get())->args[0]);
      any |= is_skippable(c);
    }
    if (!any) return IRMutator::visit(op, s);
    Stmt then_case = mutate(op->then_case);
    return kept.empty() ? then_case : IfThenElse::make(all_of(kept), then_case, mutate(op->else_case));
  }
  Expr visit(const Call* op, const Expr& e) override {
    return op->op == Intrinsic::Skippable ? const_true() : IRMutator::visit(op, e);
  }
};

}  // namespace

Stmt place_skippable_guards(const Stmt& s) { return Settle().mutate(Hoist().mutate(s)); }

}  // namespace tessel
