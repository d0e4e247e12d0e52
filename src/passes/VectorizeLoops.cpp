// Turns each vectorized loop into one vector statement: the loop variable becomes
// Ramp(0, 1, lanes) and every expression that depends on it is widened; what does not
// depend on it stays scalar and is broadcast where it meets a vector. A reduction loop,
// s = combine(s, f(k)) into one address, combines the lanes of f(k) in a tree (VectorReduce)
// and then into s. A loop whose body cannot be widened (a branch on the lane, another store
// of lanes to one address, a nested allocation) stays a scalar loop: correct, if slower.
#include "ir/IRMutator.h"
#include "ir/IRVisitor.h"
#include "ir/Simplify.h"
#include "passes/Passes.h"

namespace tessel {
namespace {

struct NotVectorizable {};

Expr widen(const Expr& e, int lanes) {
  if (e.dtype().lanes == lanes) return e;
  TESSEL_INTERNAL_CHECK(e.dtype().is_scalar(), "widening a ", e.dtype().str(), " to ", lanes, " lanes");
  return Broadcast::make(e, lanes);
}

// What a select's condition says is non-negative: each conjunct a < b as b - a - 1, a <= b as
// b - a, and so on.
std::vector<Expr> nonnegative_facts(const Expr& cond) {
  std::vector<Expr> cs, facts;
  conjuncts(cond, &cs);
  for (auto& c : cs) {
    const BinaryNode* b = static_cast<const BinaryNode*>(c.get());
    switch (c.get()->kind) {
      case NodeKind::LT: facts.push_back(b->b - b->a - 1); break;
      case NodeKind::LE: facts.push_back(b->b - b->a); break;
      case NodeKind::GT: facts.push_back(b->a - b->b - 1); break;
      case NodeKind::GE: facts.push_back(b->a - b->b); break;
      default: break;
    }
  }
  return facts;
}

// Drops the clamps max(x, lo) and min(x, hi) that keep a read in bounds where a select's
// condition already does (a padded copy reads X[max(min(v - pad, n - 1), 0)] where
// pad <= v < pad + n): x - lo, or hi - x, differs from one of the facts by a non-negative
// constant.
class Unclamp : public IRMutator {
 public:
  explicit Unclamp(std::vector<Expr> facts) : facts_(std::move(facts)) {}
  bool changed = false;

 protected:
  Expr visit(const Max* op, const Expr& e) override {
    Expr a = mutate(op->a);
    if (!implied(a - op->b)) return IRMutator::visit(op, e);
    changed = true;
    return a;
  }
  Expr visit(const Min* op, const Expr& e) override {
    Expr a = mutate(op->a);
    if (!implied(op->b - a)) return IRMutator::visit(op, e);
    changed = true;
    return a;
  }

 private:
  bool implied(const Expr& nonnegative) const {
    for (auto& f : facts_) {
      int64_t d;
      if (is_const_int(simplify(nonnegative - f), &d) && d >= 0) return true;
    }
    return false;
  }
  std::vector<Expr> facts_;
};

// Whether f is a sum of constants times one atom, set in *atom: a variable, or a division or
// modulo by a constant (a fused loop's row p / W and column p % W).
bool linear_in_atom(const Expr& f, Expr* atom) {
  if (f.as<IntImm>()) return true;
  if (const Add* a = f.as<Add>()) return linear_in_atom(a->a, atom) && linear_in_atom(a->b, atom);
  if (const Sub* d = f.as<Sub>()) return linear_in_atom(d->a, atom) && linear_in_atom(d->b, atom);
  if (const Mul* m = f.as<Mul>())
    return (m->a.as<IntImm>() && linear_in_atom(m->b, atom)) || (m->b.as<IntImm>() && linear_in_atom(m->a, atom));
  bool quotient = (f.as<Div>() || f.as<Mod>()) && static_cast<const BinaryNode*>(f.get())->b.as<IntImm>();
  if (!f.as<Variable>() && !quotient) return false;
  if (!atom->defined()) *atom = f;
  return equal(*atom, f);
}

// Replaces every subexpression equal to `from` (structurally) with `to`.
class ReplaceEqual : public IRMutator {
 public:
  ReplaceEqual(Expr from, Expr to) : from_(std::move(from)), to_(std::move(to)) {}
  using IRMutator::mutate;
  Expr mutate(const Expr& e) override { return equal(e, from_) ? to_ : IRMutator::mutate(e); }

 private:
  Expr from_, to_;
};

class Widen : public IRMutator {
 public:
  Widen(const Var& v, int lanes, const BoundsMap& bounds) : var_(v), lanes_(lanes), bounds_(bounds) {}
  using IRMutator::mutate;

 protected:
  Expr visit(const Variable* op, const Expr& e) override {
    if (op == var_.get()) return Ramp::make(make_int(0, op->type), make_int(1, op->type), lanes_);
    return e;
  }

  Expr binary(const Expr& e, const BinaryNode* op) {
    Expr a = mutate(op->a), b = mutate(op->b);
    if (a.same_as(op->a) && b.same_as(op->b)) return e;
    if (a.dtype().is_scalar() && b.dtype().is_scalar()) return rebuild_binary(e, a, b);
    const Ramp* ra = a.as<Ramp>();
    const Ramp* rb = b.as<Ramp>();
    NodeKind k = e.get()->kind;
    // Keep index arithmetic in ramp form so loads become dense or strided.
    if (k == NodeKind::Add || k == NodeKind::Sub) {
      if (ra && b.dtype().is_scalar())
        return Ramp::make(rebuild_binary(e, ra->base, b), ra->stride, lanes_);
      if (rb && a.dtype().is_scalar() && k == NodeKind::Add)
        return Ramp::make(a + rb->base, rb->stride, lanes_);
      if (ra && rb)
        return Ramp::make(rebuild_binary(e, ra->base, rb->base), rebuild_binary(e, ra->stride, rb->stride), lanes_);
    }
    if (k == NodeKind::Mul) {
      if (ra && b.dtype().is_scalar()) return Ramp::make(ra->base * b, ra->stride * b, lanes_);
      if (rb && a.dtype().is_scalar()) return Ramp::make(a * rb->base, a * rb->stride, lanes_);
    }
    // A ramp that stays within one block of c: (base + s*i) / c is base / c for every lane,
    // and % c a ramp again, when base and c are multiples of the ramp's span s*lanes (a
    // fused or flattened index splits back into a row and a dense run of columns). The base
    // must not be negative: truncating division rounds the lanes of a negative block apart.
    int64_t c, stride;
    if ((k == NodeKind::Div || k == NodeKind::Mod) && ra && is_const_int(b, &c) && is_const_int(ra->stride, &stride) &&
        stride > 0 && c % (stride * lanes_) == 0 && known_multiple(ra->base, stride * lanes_) &&
        const_bounds(ra->base, bounds_).min >= 0) {
      if (k == NodeKind::Div) return ra->base / b;  // the same for every lane: scalar, broadcast where needed
      return Ramp::make(ra->base % b, ra->stride, lanes_);
    }
    return rebuild_binary(e, widen(a, lanes_), widen(b, lanes_));
  }

#define TESSEL_BIN(N) \
  Expr visit(const N* op, const Expr& e) override { return binary(e, op); }
  TESSEL_BIN(Add) TESSEL_BIN(Sub) TESSEL_BIN(Mul) TESSEL_BIN(Div) TESSEL_BIN(Mod) TESSEL_BIN(Min)
  TESSEL_BIN(Max) TESSEL_BIN(EQ) TESSEL_BIN(NE) TESSEL_BIN(LT) TESSEL_BIN(LE) TESSEL_BIN(GT)
  TESSEL_BIN(GE) TESSEL_BIN(And) TESSEL_BIN(Or)
#undef TESSEL_BIN

  Expr visit(const Select* op, const Expr& e) override {
    Expr c = mutate(op->cond), t = mutate(op->t), f = mutate(op->f);
    if (c.dtype().is_scalar() && t.dtype().is_scalar() && f.dtype().is_scalar()) return IRMutator::visit(op, e);
    // Reads in bounds only where the condition holds (a padded copy's) would gather their
    // clamped lanes: unclamped and masked by the condition, they are one masked vector load.
    if (c.dtype().is_vector()) {
      std::vector<Expr> facts = nonnegative_facts(op->cond);
      Unclamp u(facts);
      Expr unclamped = u.mutate(op->t);
      std::vector<std::pair<Expr, Var>> atoms;  // quotients the facts bound, as fresh variables
      bool narrowed = false;
      BoundsMap where = bounds_where(facts, &atoms, &narrowed);
      if (u.changed || narrowed) {
        Expr saved = pred_;
        pred_ = saved.defined() ? (saved && c) : c;
        // Simplified first, within the ranges where the condition holds: without its clamps, a
        // fused loop's flat index (p / W + ry) * W + p % W + rx folds back to p + ry * W + rx,
        // and a stride-2 read's phase (2x - 1) % 2 and column (2x - 1) / 2 to 1 and x - 1 where
        // x >= 1 (or, of fused pixels, x = p % W): dense ramps rather than gathers.
        Expr x = unclamped;
        VarMap back;
        for (auto& [q, v] : atoms) x = ReplaceEqual(q, v).mutate(x), back[v.get()] = q;
        x = simplify(x, &where);
        if (!back.empty()) x = simplify(substitute(x, back), &where);
        t = mutate(x);
        pred_ = saved;
      }
    }
    return Select::make(widen(c, lanes_), widen(t, lanes_), widen(f, lanes_));
  }
  Expr visit(const Call* op, const Expr& e) override {
    std::vector<Expr> args;
    bool vec = false;
    for (auto& a : op->args) args.push_back(mutate(a)), vec |= args.back().dtype().is_vector();
    if (!vec) return IRMutator::visit(op, e);
    // A skippable guard that differs between lanes would cost a masked store: drop it.
    if (op->op == Intrinsic::Skippable) return const_true();
    for (auto& a : args) a = widen(a, lanes_);
    return Call::make(op->type.with_lanes(lanes_), op->op, args);
  }
  // The ranges of the enclosing loops and of the vectorized variable, narrowed where a fact
  // f >= 0 is linear in one atom u, c*u + d (what a padded read's condition says of its column);
  // an atom that is a quotient is bounded as a fresh variable, entered in `atoms`.
  BoundsMap bounds_where(const std::vector<Expr>& facts, std::vector<std::pair<Expr, Var>>* atoms,
                         bool* narrowed) const {
    BoundsMap m = bounds_;
    m[var_.get()] = {0, lanes_ - 1};
    for (auto& f : facts) {
      Expr u;
      if (!linear_in_atom(f, &u) || !u.defined()) continue;
      Var v = u.as<Variable>() ? Var(u.node()) : Var();
      for (auto& [q, w] : *atoms)
        if (!v.defined() && equal(q, u)) v = w;
      if (!v.defined()) atoms->push_back({u, v = Var("atom", u.dtype())});
      Expr fv = u.as<Variable>() ? f : ReplaceEqual(u, v).mutate(f);
      int64_t d, d1;
      if (!is_const_int(simplify(substitute(fv, v, make_int(0, f.dtype()))), &d) ||
          !is_const_int(simplify(substitute(fv, v, make_int(1, f.dtype()))), &d1) || d1 == d)
        continue;
      int64_t c = d1 - d, q = d / std::abs(c) - (d % std::abs(c) < 0 ? 1 : 0);  // floor(d / |c|)
      ConstInterval& r = m[v.get()];
      if (c > 0) r.min = std::max(r.min, -q);
      else r.max = std::min(r.max, q);
      *narrowed = true;
    }
    return m;
  }
  Expr visit(const Let*, const Expr&) override { throw NotVectorizable(); }
  Expr visit(const Reduce*, const Expr&) override { throw NotVectorizable(); }

  Expr visit(const Load* op, const Expr& e) override {
    Expr i = mutate(op->index);
    if (!pred_.defined()) return i.same_as(op->index) ? e : Load::make(op->type, op->buffer, i);
    // Under a lane predicate a read may only touch memory for the active lanes.
    return Load::make(op->type, op->buffer, widen(i, lanes_), pred_);
  }
  Stmt visit(const Store* op, const Stmt& s) override {
    Expr i = mutate(op->index);
    if (i.dtype().is_scalar()) {
      if (pred_.defined()) throw NotVectorizable();
      if (Expr r = lane_reduction(op); r.defined()) return Store::make(op->buffer, r, i);
      // Every lane would write the same element: only a serial loop keeps the last write.
      Expr v = mutate(op->value);
      if (v.dtype().is_vector()) throw NotVectorizable();
      return IRMutator::visit(op, s);
    }
    return Store::make(op->buffer, widen(mutate(op->value), lanes_), i, pred_);
  }
  // s = combine(s, f) with s the stored element and f differing between lanes:
  // combine(s, VectorReduce(f)).
  Expr lane_reduction(const Store* st) {
    const ExprNode* v = st->value.get();
    Combiner c;
    switch (v->kind) {
      case NodeKind::Add: c = Combiner::Sum; break;
      case NodeKind::Mul: c = Combiner::Prod; break;
      case NodeKind::Max: c = Combiner::Max; break;
      case NodeKind::Min: c = Combiner::Min; break;
      default: return Expr();
    }
    auto* b = static_cast<const BinaryNode*>(v);
    const Load* acc = b->a.as<Load>();
    if (!acc || !acc->buffer.same_as(st->buffer) || !equal(acc->index, st->index) || acc->predicate.defined())
      return Expr();
    bool reads_acc = false;
    visit_exprs(b->b, [&](const Expr& e) {
      if (const Load* l = e.as<Load>()) reads_acc |= l->buffer.same_as(st->buffer);
    });
    if (reads_acc) return Expr();
    Expr f = mutate(b->b);
    if (f.dtype().is_scalar()) return Expr();
    return combine(c, b->a, Call::make(f.dtype().element_of(), Intrinsic::VectorReduce, {f, make_int(int64_t(c))}));
  }
  // A guard on the lane (the tail of a split that does not divide) becomes a predicate
  // on the loads and stores under it: masked vector instructions instead of a scalar loop.
  Stmt visit(const IfThenElse* op, const Stmt& s) override {
    Expr c = mutate(op->cond);
    if (c.dtype().is_scalar()) return IfThenElse::make(c, mutate(op->then_case), mutate(op->else_case));
    Expr saved = pred_;
    pred_ = saved.defined() ? (saved && c) : c;
    Stmt t = mutate(op->then_case);
    Stmt f;
    if (op->else_case.defined()) {
      pred_ = saved.defined() ? (saved && !c) : !c;
      f = mutate(op->else_case);
    }
    pred_ = saved;
    return Block::make({t, f});
  }
  Stmt visit(const For* op, const Stmt& s) override {
    Expr mn = mutate(op->min), ext = mutate(op->extent);
    if (mn.dtype().is_vector() || ext.dtype().is_vector() || pred_.defined()) throw NotVectorizable();
    return For::make(op->var, mn, ext, op->for_kind == ForKind::Parallel ? ForKind::Serial : op->for_kind,
                     mutate(op->body), op->thread_tag);
  }
  Stmt visit(const LetStmt* op, const Stmt& s) override {
    Expr v = mutate(op->value);
    if (v.dtype().is_vector()) throw NotVectorizable();
    return LetStmt::make(op->var, v, mutate(op->body));
  }
  Stmt visit(const Allocate*, const Stmt&) override { throw NotVectorizable(); }

 private:
  Var var_;
  int lanes_;
  const BoundsMap& bounds_;  // of the loops around the vectorized one
  Expr pred_;  // lanes active under enclosing vector conditions
};

class VectorizeLoops : public IRMutator {
 public:
  using IRMutator::mutate;
  BoundsMap bounds_;

 protected:
  Stmt visit(const For* op, const Stmt& s) override {
    int64_t lanes, ext;
    if (is_const_int(op->extent, &ext) && is_zero(op->min)) bounds_[op->var.get()] = {0, ext - 1};
    Stmt body = mutate(op->body);
    bounds_.erase(op->var.get());
    if (op->for_kind != ForKind::Vectorized) {
      return body.same_as(op->body) ? s : For::make(op->var, op->min, op->extent, op->for_kind, body, op->thread_tag);
    }
    auto serial = [&] { return For::make(op->var, op->min, op->extent, ForKind::Serial, body); };
    if (!is_const_int(op->extent, &lanes) || lanes > 64 || !is_zero(op->min)) return serial();
    if (lanes == 1) return substitute(body, op->var, op->min);
    bool has_vectors = false;
    visit_exprs(body, [&](const Expr& e) { has_vectors |= e.dtype().is_vector(); });
    if (has_vectors) return serial();
    try {
      Widen w(op->var, int(lanes), bounds_);
      return w.mutate(body);
    } catch (const NotVectorizable&) {
      return serial();
    }
  }
};

}  // namespace

Stmt vectorize_loops(const Stmt& s) {
  VectorizeLoops v;
  return v.mutate(s);
}

}  // namespace tessel
