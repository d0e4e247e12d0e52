// Conditions that every iteration of an innermost serial loop decides alike (they use none
// of its variables and read no memory) are decided once in front of it: the loop is copied
// for each outcome, each copy without the branches. Such guards mostly keep a partial
// register block (the last 4 of 6 output channels where 64 does not divide by 6) from
// writing past the tensor. LLVM takes them out of the loop itself only while it judges the
// copies small enough; a branch left inside keeps the accumulators it guards in memory.
// The conditions of one register block are a family, `e + t < bound` for each of its rows
// t, that decide together: the rows up to some t pass. A family of m is m + 1 copies, not
// 2^m. Where the copies would be too many, there are two: all conditions passing (the
// common case), and the loop as it was.
#include <algorithm>
#include <vector>

#include "ir/IRMutator.h"
#include "ir/IRVisitor.h"
#include "ir/Simplify.h"
#include "passes/Passes.h"

namespace tessel {
namespace {

constexpr int64_t kMaxCopies = 16;
constexpr int64_t kMaxCopiedStmts = 4096;  // copies x statements of the loop body

// The conjuncts of the `if`s in an innermost loop's body that use no variable bound inside
// it and read no memory; the body's statements.
class Conditions : public IRVisitor {
 public:
  std::vector<Expr> invariant;
  int64_t stmts = 0;

  void collect(const For* loop) {
    bound_.push_back(loop->var.var_node());
    visit(loop->body);
  }

 protected:
  void visit_node(const LetStmt* op, const Stmt& s) override {
    bound_.push_back(op->var.var_node());
    IRVisitor::visit_node(op, s);
  }
  void visit_node(const Store* op, const Stmt& s) override {
    ++stmts;
    IRVisitor::visit_node(op, s);
  }
  void visit_node(const IfThenElse* op, const Stmt& s) override {
    std::vector<Expr> cs;
    conjuncts(op->cond, &cs);
    for (auto& c : cs) {
      if (!decided_once(c)) continue;
      bool seen = false;
      for (auto& x : invariant) seen = seen || equal(x, c);
      if (!seen) invariant.push_back(c);
    }
    IRVisitor::visit_node(op, s);
  }

 private:
  class ReadsMemory : public IRVisitor {
   public:
    bool found = false;

   protected:
    void visit_node(const Load*, const Expr&) override { found = true; }
    void visit_node(const Call*, const Expr&) override { found = true; }
  };

  bool decided_once(const Expr& cond) {
    for (const VarNode* v : bound_)
      if (uses_var(cond, v)) return false;
    ReadsMemory r;
    r.visit(cond);
    return !r.found;
  }

  std::vector<const VarNode*> bound_;
};

// `d` where a comparison of integers is `d < 0`; undefined for other conditions.
Expr below_zero(const Expr& c) {
  auto diff = [](const Expr& a, const Expr& b, int64_t k) { return simplify(a - b - make_int(k)); };
  if (!c.dtype().is_scalar()) return Expr();
  if (const LT* x = c.as<LT>()) return x->a.dtype().is_int() ? diff(x->a, x->b, 0) : Expr();
  if (const LE* x = c.as<LE>()) return x->a.dtype().is_int() ? diff(x->a, x->b, -1) : Expr();
  if (const GT* x = c.as<GT>()) return x->a.dtype().is_int() ? diff(x->b, x->a, 0) : Expr();
  if (const GE* x = c.as<GE>()) return x->a.dtype().is_int() ? diff(x->b, x->a, -1) : Expr();
  return Expr();
}

// Conditions that decide together, weakest first: `base + offset < 0`, so where one holds
// every one before it does. A condition of another form is a family of its own.
struct Family {
  Expr base;
  std::vector<std::pair<int64_t, Expr>> members;  // offset, condition
};

std::vector<Family> families(const std::vector<Expr>& conds) {
  std::vector<Family> out;
  for (auto& c : conds) {
    Expr d = below_zero(c);
    bool joined = false;
    for (auto& f : out) {
      int64_t t = 0;
      if (d.defined() && f.base.defined() && is_const_int(simplify(d - f.base), &t)) {
        f.members.emplace_back(t, c);
        joined = true;
        break;
      }
    }
    if (!joined) out.push_back(Family{d, {{0, c}}});
  }
  for (auto& f : out) std::sort(f.members.begin(), f.members.end(), [](auto& a, auto& b) { return a.first < b.first; });
  return out;
}

// `s` with the conjuncts decided in `known` replaced by their values, and the `if`s they
// decide by the branch taken.
class Decide : public IRMutator {
 public:
  explicit Decide(const std::vector<std::pair<Expr, bool>>& known) : known_(known) {}

 protected:
  Stmt visit(const IfThenElse* op, const Stmt& s) override {
    std::vector<Expr> cs, left;
    conjuncts(op->cond, &cs);
    bool fails = false, changed = false;
    for (auto& c : cs) {
      auto it = std::find_if(known_.begin(), known_.end(), [&](auto& k) { return equal(k.first, c); });
      if (it == known_.end()) left.push_back(c);
      else fails = fails || !it->second, changed = true;
    }
    if (!changed) return IRMutator::visit(op, s);
    if (fails) return op->else_case.defined() ? mutate(op->else_case) : Block::make({});
    if (left.empty()) return mutate(op->then_case);
    return IfThenElse::make(all_of(left), mutate(op->then_case),
                            op->else_case.defined() ? mutate(op->else_case) : Stmt());
  }

 private:
  const std::vector<std::pair<Expr, bool>>& known_;
};

class Unswitch : public IRMutator {
 protected:
  Stmt visit(const For* op, const Stmt& s) override {
    // Whether a loop lies inside, noted on the way down, so that only innermost loops are
    // walked for their conditions (this runs in every CPU build).
    inner_loop_ = false;
    Stmt r = IRMutator::visit(op, s);
    bool innermost = !inner_loop_;
    inner_loop_ = true;  // the loop around this one has one inside
    const For* loop = r.as<For>();
    if (!innermost || !loop || loop->for_kind != ForKind::Serial) return r;
    Conditions c;
    c.collect(loop);
    if (c.invariant.empty() || 2 * c.stmts > kMaxCopiedStmts) return r;
    std::vector<Family> fs = families(c.invariant);
    int64_t copies = 1;
    for (auto& f : fs) copies = std::min(copies * int64_t(f.members.size() + 1), kMaxCopies + 1);
    if (copies <= kMaxCopies && copies * c.stmts <= kMaxCopiedStmts) return versions(r, fs, 0, {});
    // All passing, or the loop as it was.
    std::vector<std::pair<Expr, bool>> all;
    for (auto& x : c.invariant) all.emplace_back(x, true);
    std::vector<Expr> strongest;
    for (auto& f : fs) strongest.push_back(f.members.back().second);
    return IfThenElse::make(all_of(strongest), simplify(Decide(all).mutate(r)), r);
  }

 private:
  bool inner_loop_ = false;

  // The copies for every outcome of families fs[i..], the conditions before decided in `known`.
  static Stmt versions(const Stmt& loop, const std::vector<Family>& fs, size_t i,
                       std::vector<std::pair<Expr, bool>> known) {
    if (i == fs.size()) return simplify(Decide(known).mutate(loop));
    const auto& m = fs[i].members;
    // n = how many of the family (weakest first) hold: a chain of tests from the strongest down.
    Stmt chain;
    for (size_t n = 0; n <= m.size(); ++n) {
      auto k = known;
      for (size_t j = 0; j < m.size(); ++j) k.emplace_back(m[j].second, j < n);
      Stmt v = versions(loop, fs, i + 1, k);
      chain = n == 0 ? v : IfThenElse::make(m[n - 1].second, v, chain);
    }
    return chain;
  }
};

}  // namespace

Stmt unswitch_loops(const Stmt& s) {
  return Unswitch().mutate(s);
}

}  // namespace tessel
