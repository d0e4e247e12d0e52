#include "ir/Simplify.h"

#include <algorithm>

#include "ir/IRMutator.h"
#include "ir/IRVisitor.h"

namespace tessel {

// ---------------------------------------------------------------------------------------
// Structural equality
// ---------------------------------------------------------------------------------------

bool equal(const Expr& a, const Expr& b) {
  if (a.same_as(b)) return true;
  if (!a.defined() || !b.defined()) return false;
  const ExprNode* x = a.get();
  const ExprNode* y = b.get();
  if (x->kind != y->kind || x->type != y->type) return false;
  switch (x->kind) {
    case NodeKind::IntImm: return static_cast<const IntImm*>(x)->value == static_cast<const IntImm*>(y)->value;
    case NodeKind::FloatImm:
      return static_cast<const FloatImm*>(x)->value == static_cast<const FloatImm*>(y)->value;
    case NodeKind::Variable: return false;  // identity only, checked above
    case NodeKind::Cast: return equal(static_cast<const Cast*>(x)->value, static_cast<const Cast*>(y)->value);
    case NodeKind::Not: return equal(static_cast<const Not*>(x)->a, static_cast<const Not*>(y)->a);
    case NodeKind::Select: {
      auto *p = static_cast<const Select*>(x), *q = static_cast<const Select*>(y);
      return equal(p->cond, q->cond) && equal(p->t, q->t) && equal(p->f, q->f);
    }
    case NodeKind::Call: {
      auto *p = static_cast<const Call*>(x), *q = static_cast<const Call*>(y);
      if (p->op != q->op || p->args.size() != q->args.size()) return false;
      for (size_t i = 0; i < p->args.size(); ++i)
        if (!equal(p->args[i], q->args[i])) return false;
      return true;
    }
    case NodeKind::TensorLoad: {
      auto *p = static_cast<const TensorLoad*>(x), *q = static_cast<const TensorLoad*>(y);
      if (p->op != q->op) return false;
      for (size_t i = 0; i < p->indices.size(); ++i)
        if (!equal(p->indices[i], q->indices[i])) return false;
      return true;
    }
    case NodeKind::Load: {
      auto *p = static_cast<const Load*>(x), *q = static_cast<const Load*>(y);
      return p->buffer.same_as(q->buffer) && equal(p->index, q->index) &&
             (p->predicate.defined() == q->predicate.defined()) &&
             (!p->predicate.defined() || equal(p->predicate, q->predicate));
    }
    case NodeKind::Ramp: {
      auto *p = static_cast<const Ramp*>(x), *q = static_cast<const Ramp*>(y);
      return p->lanes == q->lanes && equal(p->base, q->base) && equal(p->stride, q->stride);
    }
    case NodeKind::Broadcast: {
      auto *p = static_cast<const Broadcast*>(x), *q = static_cast<const Broadcast*>(y);
      return p->lanes == q->lanes && equal(p->value, q->value);
    }
    case NodeKind::Reduce:
    case NodeKind::Let: return false;
    default: {
      auto *p = static_cast<const BinaryNode*>(x), *q = static_cast<const BinaryNode*>(y);
      return equal(p->a, q->a) && equal(p->b, q->b);
    }
  }
}

namespace {

bool is_index_type(DType t) { return t.is_scalar() && t.is_integer(); }

// ---------------------------------------------------------------------------------------
// Interval arithmetic with open ends
// ---------------------------------------------------------------------------------------

using CI = ConstInterval;

CI ci_add(CI a, CI b) {
  CI r;
  r.min = (a.bounded_below() && b.bounded_below()) ? a.min + b.min : CI::kNegInf;
  r.max = (a.bounded_above() && b.bounded_above()) ? a.max + b.max : CI::kPosInf;
  return r;
}

CI ci_scale(CI a, int64_t k) {
  if (k == 0) return CI::point(0);
  CI r;
  if (k > 0) {
    r.min = a.bounded_below() ? a.min * k : CI::kNegInf;
    r.max = a.bounded_above() ? a.max * k : CI::kPosInf;
  } else {
    r.min = a.bounded_above() ? a.max * k : CI::kNegInf;
    r.max = a.bounded_below() ? a.min * k : CI::kPosInf;
  }
  return r;
}

CI ci_union(CI a, CI b) { return {std::min(a.min, b.min), std::max(a.max, b.max)}; }

// ---------------------------------------------------------------------------------------
// Linear forms
// ---------------------------------------------------------------------------------------

struct Linear {
  std::vector<std::pair<Expr, int64_t>> terms;
  int64_t c = 0;

  void add_term(const Expr& atom, int64_t k) {
    if (k == 0) return;
    for (auto& t : terms)
      if (equal(t.first, atom)) {
        t.second += k;
        return;
      }
    terms.emplace_back(atom, k);
  }
  void add(const Expr& e, int64_t scale) {
    const ExprNode* n = e.get();
    switch (n->kind) {
      case NodeKind::IntImm: c += scale * static_cast<const IntImm*>(n)->value; return;
      case NodeKind::Add: {
        auto* b = static_cast<const Add*>(n);
        add(b->a, scale), add(b->b, scale);
        return;
      }
      case NodeKind::Sub: {
        auto* b = static_cast<const Sub*>(n);
        add(b->a, scale), add(b->b, -scale);
        return;
      }
      case NodeKind::Mul: {
        auto* b = static_cast<const Mul*>(n);
        int64_t k;
        if (is_const_int(b->b, &k)) return add(b->a, scale * k);
        if (is_const_int(b->a, &k)) return add(b->b, scale * k);
        break;
      }
      default: break;
    }
    add_term(e, scale);
  }
  // (x / c) * c + x % c == x, for C's truncating division of any sign: a flattened index
  // of a split or fused axis becomes the axis again (and stays a dense vector ramp).
  void fold_div_mod() {
    for (size_t i = 0; i < terms.size(); ++i) {
      const Div* d = terms[i].first.as<Div>();
      int64_t c;
      if (!d || !is_const_int(d->b, &c) || c == 0 || terms[i].second % c != 0) continue;
      int64_t k = terms[i].second / c;
      for (size_t j = 0; j < terms.size(); ++j) {
        const Mod* m = terms[j].first.as<Mod>();
        if (!m || terms[j].second != k || !equal(m->b, d->b) || !equal(m->a, d->a)) continue;
        Expr x = d->a;
        terms[i].second = terms[j].second = 0;
        add(x, k);
        break;
      }
    }
  }
  void drop_zero_terms() {
    terms.erase(std::remove_if(terms.begin(), terms.end(), [](auto& t) { return t.second == 0; }), terms.end());
  }
};

Linear linearize(const Expr& e) {
  Linear l;
  l.add(e, 1);
  l.fold_div_mod();
  l.drop_zero_terms();
  return l;
}

Expr build(const Linear& l, DType t) {
  Expr out;
  // Positive terms first so the common shape is "a*k + b - c".
  for (int pass = 0; pass < 2; ++pass) {
    for (auto& [atom, k] : l.terms) {
      if ((k > 0) != (pass == 0)) continue;
      int64_t mag = k > 0 ? k : -k;
      Expr term = mag == 1 ? atom : Expr(std::make_shared<Mul>(t, atom, make_int(mag, t)));
      if (!out.defined()) out = k > 0 ? term : Expr(std::make_shared<Sub>(t, make_int(0, t), term));
      else out = k > 0 ? Expr(std::make_shared<Add>(t, out, term)) : Expr(std::make_shared<Sub>(t, out, term));
    }
  }
  if (!out.defined()) return make_int(l.c, t);
  if (l.c > 0) out = Expr(std::make_shared<Add>(t, out, make_int(l.c, t)));
  if (l.c < 0) out = Expr(std::make_shared<Sub>(t, out, make_int(-l.c, t)));
  return out;
}

// ---------------------------------------------------------------------------------------
// Bounds
// ---------------------------------------------------------------------------------------

CI bounds_of(const Expr& e, const BoundsMap* bm);

CI atom_bounds(const Expr& e, const BoundsMap* bm) {
  const ExprNode* n = e.get();
  switch (n->kind) {
    case NodeKind::IntImm: return CI::point(static_cast<const IntImm*>(n)->value);
    case NodeKind::Variable: {
      if (bm) {
        auto it = bm->find(n);
        if (it != bm->end()) return it->second;
      }
      break;
    }
    case NodeKind::Mul: {
      auto* m = static_cast<const Mul*>(n);
      CI a = bounds_of(m->a, bm), b = bounds_of(m->b, bm);
      if (!a.bounded() || !b.bounded()) break;
      int64_t c[4] = {a.min * b.min, a.min * b.max, a.max * b.min, a.max * b.max};
      return {*std::min_element(c, c + 4), *std::max_element(c, c + 4)};
    }
    case NodeKind::Div: {
      auto* d = static_cast<const Div*>(n);
      int64_t k;
      if (!is_const_int(d->b, &k) || k <= 0) break;
      CI a = bounds_of(d->a, bm);
      return {a.bounded_below() ? a.min / k : CI::kNegInf, a.bounded_above() ? a.max / k : CI::kPosInf};
    }
    case NodeKind::Mod: {
      auto* d = static_cast<const Mod*>(n);
      int64_t k;
      if (!is_const_int(d->b, &k) || k <= 0) break;
      CI a = bounds_of(d->a, bm);
      if (a.bounded_below() && a.min >= 0) {
        if (a.bounded_above() && a.max < k) return a;
        return {0, k - 1};
      }
      return {-(k - 1), k - 1};
    }
    case NodeKind::Min: {
      auto* m = static_cast<const Min*>(n);
      CI a = bounds_of(m->a, bm), b = bounds_of(m->b, bm);
      return {std::min(a.min, b.min), std::min(a.max, b.max)};
    }
    case NodeKind::Max: {
      auto* m = static_cast<const Max*>(n);
      CI a = bounds_of(m->a, bm), b = bounds_of(m->b, bm);
      return {std::max(a.min, b.min), std::max(a.max, b.max)};
    }
    case NodeKind::Select: {
      auto* s = static_cast<const Select*>(n);
      return ci_union(bounds_of(s->t, bm), bounds_of(s->f, bm));
    }
    case NodeKind::Cast: {
      auto* c = static_cast<const Cast*>(n);
      if (c->value.dtype().is_bool()) return {0, 1};
      if (is_index_type(c->value.dtype()) && c->type.bits >= c->value.dtype().bits) return bounds_of(c->value, bm);
      break;
    }
    default: break;
  }
  if (n->type.is_bool()) return {0, 1};
  if (n->type.is_uint() && n->type.bits < 64) return {0, (int64_t(1) << n->type.bits) - 1};
  if (n->type.is_int() && n->type.bits == 8) return {-128, 127};
  return CI::everything();
}

CI bounds_of(const Expr& e, const BoundsMap* bm) {
  if (!is_index_type(e.dtype()) && !e.dtype().is_bool()) return CI::everything();
  NodeKind k = e.get()->kind;
  if (k != NodeKind::Add && k != NodeKind::Sub && k != NodeKind::Mul) return atom_bounds(e, bm);
  Linear l = linearize(e);
  CI r = CI::point(l.c);
  for (auto& [atom, coeff] : l.terms) r = ci_add(r, ci_scale(atom_bounds(atom, bm), coeff));
  return r;
}

// ---------------------------------------------------------------------------------------
// The expression simplifier
// ---------------------------------------------------------------------------------------

class Simplifier : public IRMutator {
 public:
  explicit Simplifier(const BoundsMap* bm) {
    if (bm) bounds_ = *bm;
  }
  using IRMutator::mutate;
  BoundsMap bounds_;

 protected:
  CI bounds(const Expr& e) { return bounds_of(e, &bounds_); }

  Expr linear_result(Expr rebuilt) {
    DType t = rebuilt.dtype();
    return build(linearize(rebuilt), t);
  }

  Expr visit(const Add* op, const Expr& e) override {
    Expr a = mutate(op->a), b = mutate(op->b);
    if (is_index_type(op->type)) return linear_result(Add::make(a, b));
    return fold_float(e, op->kind, a, b);
  }
  Expr visit(const Sub* op, const Expr& e) override {
    Expr a = mutate(op->a), b = mutate(op->b);
    if (is_index_type(op->type)) return linear_result(Sub::make(a, b));
    return fold_float(e, op->kind, a, b);
  }
  Expr visit(const Mul* op, const Expr& e) override {
    Expr a = mutate(op->a), b = mutate(op->b);
    if (is_index_type(op->type)) {
      int64_t x, y;
      if (is_const_int(a, &x) && is_const_int(b, &y)) return make_int(x * y, op->type);
      if (is_const_int(a) || is_const_int(b)) return linear_result(Mul::make(a, b));
      if (a.same_as(op->a) && b.same_as(op->b)) return e;
      return Mul::make(a, b);
    }
    return fold_float(e, op->kind, a, b);
  }

  Expr fold_float(const Expr& e, NodeKind k, Expr a, Expr b) {
    const FloatImm* fa = a.as<FloatImm>();
    const FloatImm* fb = b.as<FloatImm>();
    if (fa && fb) {
      double x = fa->value, y = fb->value;
      switch (k) {
        case NodeKind::Add: return FloatImm::make(e.dtype(), x + y);
        case NodeKind::Sub: return FloatImm::make(e.dtype(), x - y);
        case NodeKind::Mul: return FloatImm::make(e.dtype(), x * y);
        case NodeKind::Div: return FloatImm::make(e.dtype(), x / y);
        case NodeKind::Min: return FloatImm::make(e.dtype(), std::min(x, y));
        case NodeKind::Max: return FloatImm::make(e.dtype(), std::max(x, y));
        default: break;
      }
    }
    if (k == NodeKind::Add && fb && fb->value == 0) return a;
    if (k == NodeKind::Add && fa && fa->value == 0) return b;
    if (k == NodeKind::Sub && fb && fb->value == 0) return a;
    if (k == NodeKind::Mul && fb && fb->value == 1) return a;
    if (k == NodeKind::Mul && fa && fa->value == 1) return b;
    if (k == NodeKind::Div && fb && fb->value == 1) return a;
    auto* bin = static_cast<const BinaryNode*>(e.get());
    if (a.same_as(bin->a) && b.same_as(bin->b)) return e;
    return rebuild_binary(e, a, b);
  }

  // a = k*Q + R, where Q gathers the terms (and the constant's part) whose coefficients k divides.
  // The constant's part is its truncated quotient, or with `floor` its floor (2x - 1 as
  // 2(x - 1) + 1 rather than 2x + -1).
  static void split_by(const Expr& a, int64_t k, Linear* q, Linear* r, bool floor = false) {
    Linear l = linearize(a);
    for (auto& [atom, c] : l.terms) {
      if (c % k == 0) q->terms.emplace_back(atom, c / k);
      else r->terms.emplace_back(atom, c);
    }
    q->c = l.c / k - (floor && l.c % k < 0 ? 1 : 0);
    r->c = l.c - k * q->c;
  }

  // For a >= 0, writes a = k*Q + R (split_by, the constant truncated, else floored). Succeeds
  // when Q has terms and both Q and R are provably non-negative, so that a / k == Q + R / k
  // and a % k == R % k; `r_below_k` says R < k (then a / k == Q).
  bool quotient(const Expr& a, int64_t k, DType t, Expr* q, Expr* r, bool* r_below_k) {
    for (bool floor : {false, true}) {
      Linear ql, rl;
      split_by(a, k, &ql, &rl, floor);
      CI bq = CI::point(ql.c), br = CI::point(rl.c);
      for (auto& [atom, c] : ql.terms) bq = ci_add(bq, ci_scale(bounds(atom), c));
      for (auto& [atom, c] : rl.terms) br = ci_add(br, ci_scale(bounds(atom), c));
      if (ql.terms.empty() || !bq.bounded_below() || bq.min < 0 || !br.bounded_below() || br.min < 0) continue;
      *q = build(ql, t);
      *r = build(rl, t);
      *r_below_k = br.bounded_above() && br.max < k;
      return true;
    }
    return false;
  }

  // a == k * Q exactly (split_by leaves no R). Then a / k == Q and a % k == 0 whatever the
  // signs (a stride-2 read's (y*2) % 2).
  static bool exact_quotient(const Expr& a, int64_t k, DType t, Expr* q) {
    Linear ql, rl;
    split_by(a, k, &ql, &rl);
    if (!rl.terms.empty() || rl.c != 0) return false;
    *q = build(ql, t);
    return true;
  }

  Expr visit(const Div* op, const Expr& e) override {
    Expr a = mutate(op->a), b = mutate(op->b);
    if (!is_index_type(op->type)) return fold_float(e, op->kind, a, b);
    int64_t x, k;
    if (is_const_int(b, &k) && k != 0 && is_const_int(a, &x)) return make_int(x / k, op->type);
    if (is_const_int(b, &k) && k > 0) {
      if (k == 1) return a;
      if (Expr q; exact_quotient(a, k, op->type, &q)) return q;
      CI ba = bounds(a);
      if (ba.bounded_below() && ba.min >= 0) {
        // One quotient over the whole range (a partitioned tail's `(x + 516) / 43`, x < 43).
        if (ba.bounded_above() && ba.min / k == ba.max / k) return make_int(ba.min / k, op->type);
        Expr q, r;
        bool small;
        if (quotient(a, k, op->type, &q, &r, &small)) return small ? q : mutate(Add::make(q, Div::make(r, b)));
        // (x / k1) / k2 == x / (k1*k2) for x >= 0
        if (const Div* inner = a.as<Div>()) {
          int64_t k1;
          if (is_const_int(inner->b, &k1) && k1 > 0) return Div::make(inner->a, make_int(k1 * k, op->type));
        }
      }
    }
    if (a.same_as(op->a) && b.same_as(op->b)) return e;
    return Div::make(a, b);
  }

  Expr visit(const Mod* op, const Expr& e) override {
    Expr a = mutate(op->a), b = mutate(op->b);
    int64_t x, k;
    if (is_const_int(b, &k) && k != 0 && is_const_int(a, &x)) return make_int(x % k, op->type);
    if (is_const_int(b, &k) && k > 0) {
      if (k == 1) return make_int(0, op->type);
      if (Expr q; exact_quotient(a, k, op->type, &q)) return make_int(0, op->type);
      CI ba = bounds(a);
      if (ba.bounded_below() && ba.min >= 0) {
        if (ba.bounded_above() && ba.max < k) return a;
        // One quotient over the whole range (a partitioned tail's (x + 192) % 14, x < 4: a 14x14 plane's
        // last 4 pixels are columns 10 to 13 of one row).
        if (ba.bounded_above() && ba.min / k == ba.max / k)
          return mutate(Sub::make(a, make_int(ba.min / k * k, op->type)));
        Expr q, r;
        bool small;
        if (quotient(a, k, op->type, &q, &r, &small)) return small ? r : Mod::make(r, b);
      }
    }
    if (a.same_as(op->a) && b.same_as(op->b)) return e;
    return Mod::make(a, b);
  }

  // Sign of a - b over the known ranges: -1 (a <= b), 1 (a >= b), 0 unknown; strict flags.
  CI diff_bounds(const Expr& a, const Expr& b) {
    if (!is_index_type(a.dtype())) return CI::everything();
    return bounds(Sub::make(a, b));
  }

  Expr visit(const Min* op, const Expr& e) override {
    Expr a = mutate(op->a), b = mutate(op->b);
    if (!is_index_type(op->type)) return fold_float(e, op->kind, a, b);
    CI d = diff_bounds(a, b);
    if (d.bounded_above() && d.max <= 0) return a;
    if (d.bounded_below() && d.min >= 0) return b;
    if (a.same_as(op->a) && b.same_as(op->b)) return e;
    return Min::make(a, b);
  }
  Expr visit(const Max* op, const Expr& e) override {
    Expr a = mutate(op->a), b = mutate(op->b);
    if (!is_index_type(op->type)) return fold_float(e, op->kind, a, b);
    CI d = diff_bounds(a, b);
    if (d.bounded_above() && d.max <= 0) return b;
    if (d.bounded_below() && d.min >= 0) return a;
    if (a.same_as(op->a) && b.same_as(op->b)) return e;
    return Max::make(a, b);
  }

  Expr compare(const Expr& e, NodeKind k, Expr a, Expr b) {
    if (a.dtype().is_scalar()) {
      if (is_index_type(a.dtype())) {
        CI d = diff_bounds(a, b);
        auto decide = [&](bool v) { return v ? const_true() : const_false(); };
        switch (k) {
          case NodeKind::LT:
            if (d.bounded_above() && d.max < 0) return decide(true);
            if (d.bounded_below() && d.min >= 0) return decide(false);
            break;
          case NodeKind::LE:
            if (d.bounded_above() && d.max <= 0) return decide(true);
            if (d.bounded_below() && d.min > 0) return decide(false);
            break;
          case NodeKind::GT:
            if (d.bounded_below() && d.min > 0) return decide(true);
            if (d.bounded_above() && d.max <= 0) return decide(false);
            break;
          case NodeKind::GE:
            if (d.bounded_below() && d.min >= 0) return decide(true);
            if (d.bounded_above() && d.max < 0) return decide(false);
            break;
          case NodeKind::EQ:
            if (d.is_point()) return decide(d.min == 0);
            if (d.min > 0 || d.max < 0) return decide(false);
            break;
          case NodeKind::NE:
            if (d.is_point()) return decide(d.min != 0);
            if (d.min > 0 || d.max < 0) return decide(true);
            break;
          default: break;
        }
      }
      const FloatImm* fa = a.as<FloatImm>();
      const FloatImm* fb = b.as<FloatImm>();
      if (fa && fb) {
        double x = fa->value, y = fb->value;
        bool v = k == NodeKind::LT ? x < y : k == NodeKind::LE ? x <= y : k == NodeKind::GT ? x > y
               : k == NodeKind::GE ? x >= y : k == NodeKind::EQ ? x == y : x != y;
        return v ? const_true() : const_false();
      }
    }
    auto* bin = static_cast<const BinaryNode*>(e.get());
    if (a.same_as(bin->a) && b.same_as(bin->b)) return e;
    return rebuild_binary(e, a, b);
  }
  Expr visit(const LT* op, const Expr& e) override { return compare(e, op->kind, mutate(op->a), mutate(op->b)); }
  Expr visit(const LE* op, const Expr& e) override { return compare(e, op->kind, mutate(op->a), mutate(op->b)); }
  Expr visit(const GT* op, const Expr& e) override { return compare(e, op->kind, mutate(op->a), mutate(op->b)); }
  Expr visit(const GE* op, const Expr& e) override { return compare(e, op->kind, mutate(op->a), mutate(op->b)); }
  Expr visit(const EQ* op, const Expr& e) override { return compare(e, op->kind, mutate(op->a), mutate(op->b)); }
  Expr visit(const NE* op, const Expr& e) override { return compare(e, op->kind, mutate(op->a), mutate(op->b)); }

  static int truth(const Expr& e) {
    int64_t v;
    if (e.dtype().is_bool() && e.dtype().is_scalar() && is_const_int(e, &v)) return v ? 1 : 0;
    return -1;
  }

  Expr visit(const And* op, const Expr& e) override {
    Expr a = mutate(op->a), b = mutate(op->b);
    int ta = truth(a), tb = truth(b);
    if (ta == 0 || tb == 0) return const_false();
    if (ta == 1) return b;
    if (tb == 1) return a;
    if (a.same_as(op->a) && b.same_as(op->b)) return e;
    return And::make(a, b);
  }
  Expr visit(const Or* op, const Expr& e) override {
    Expr a = mutate(op->a), b = mutate(op->b);
    int ta = truth(a), tb = truth(b);
    if (ta == 1 || tb == 1) return const_true();
    if (ta == 0) return b;
    if (tb == 0) return a;
    if (a.same_as(op->a) && b.same_as(op->b)) return e;
    return Or::make(a, b);
  }
  Expr visit(const Not* op, const Expr& e) override {
    Expr a = mutate(op->a);
    int ta = truth(a);
    if (ta >= 0) return ta ? const_false() : const_true();
    return a.same_as(op->a) ? e : Not::make(a);
  }
  Expr visit(const Call* op, const Expr& e) override {
    if (op->op != Intrinsic::Skippable) return IRMutator::visit(op, e);
    // Each conjunct on its own, so that partitioning can decide them one by one.
    if (const And* a = op->args[0].as<And>())
      return mutate(And::make(Call::make(op->type, op->op, {a->a}), Call::make(op->type, op->op, {a->b})));
    Expr c = mutate(op->args[0]);  // a decided condition needs the wrapper no more
    return truth(c) >= 0 ? c : c.same_as(op->args[0]) ? e : Call::make(c.dtype(), op->op, {c});
  }
  Expr visit(const Select* op, const Expr& e) override {
    Expr c = mutate(op->cond);
    // A vector select whose lanes all decide alike (an unrolled copy's constant condition,
    // broadcast by vectorization) picks its side as a scalar one does.
    const Broadcast* b = c.as<Broadcast>();
    int tc = truth(b ? b->value : c);
    if (tc == 1) return mutate(op->t);
    if (tc == 0) return mutate(op->f);
    Expr t = mutate(op->t), f = mutate(op->f);
    if (equal(t, f)) return t;
    if (c.same_as(op->cond) && t.same_as(op->t) && f.same_as(op->f)) return e;
    return Select::make(c, t, f);
  }
  Expr visit(const Cast* op, const Expr& e) override {
    Expr v = mutate(op->value);
    if (op->type.is_scalar()) {
      if (const IntImm* i = v.as<IntImm>()) return make_const(op->type, double(i->value));
      if (const FloatImm* f = v.as<FloatImm>()) {
        if (op->type.is_float()) return FloatImm::make(op->type, f->value);
      }
    }
    if (v.dtype() == op->type) return v;
    return v.same_as(op->value) ? e : Cast::make(op->type, v);
  }
  Expr visit(const Let* op, const Expr& e) override {
    Expr v = mutate(op->value);
    if (is_index_type(v.dtype())) bounds_[op->var.get()] = bounds(v);
    Expr b = mutate(op->body);
    if (v.as<IntImm>() || v.as<Variable>()) return mutate(substitute(b, op->var, v));
    if (!uses_var(b, op->var.var_node())) return b;
    if (v.same_as(op->value) && b.same_as(op->body)) return e;
    return Let::make(op->var, v, b);
  }

  // ---- statements ----

  Stmt visit(const For* op, const Stmt& s) override {
    Expr mn = mutate(op->min), ext = mutate(op->extent);
    int64_t n;
    if (is_const_int(ext, &n)) {
      if (n <= 0) return Stmt();
      if (n == 1 && op->for_kind != ForKind::ThreadBound) return mutate(substitute(op->body, op->var, mn));
    }
    CI bmin = bounds(mn), bext = bounds(ext);
    CI range{bmin.min, (bmin.bounded_above() && bext.bounded_above()) ? bmin.max + bext.max - 1 : CI::kPosInf};
    bounds_[op->var.get()] = range;
    Stmt body = mutate(op->body);
    bounds_.erase(op->var.get());
    if (!body.defined()) return Stmt();
    if (mn.same_as(op->min) && ext.same_as(op->extent) && body.same_as(op->body)) return s;
    return For::make(op->var, mn, ext, op->for_kind, body, op->thread_tag);
  }
  Stmt visit(const LetStmt* op, const Stmt& s) override {
    Expr v = mutate(op->value);
    if (v.as<IntImm>() || v.as<Variable>()) return mutate(substitute(op->body, op->var, v));
    if (is_index_type(v.dtype())) bounds_[op->var.get()] = bounds(v);
    Stmt b = mutate(op->body);
    if (!b.defined()) return Stmt();
    if (v.same_as(op->value) && b.same_as(op->body)) return s;
    return LetStmt::make(op->var, v, b);
  }
  Stmt visit(const IfThenElse* op, const Stmt& s) override {
    Expr c = mutate(op->cond);
    int tc = truth(c);
    if (tc == 1) return mutate(op->then_case);
    if (tc == 0) return mutate(op->else_case);
    Stmt t = mutate(op->then_case), f = mutate(op->else_case);
    if (!t.defined() && !f.defined()) return Stmt();
    if (!t.defined()) return IfThenElse::make(Not::make(c), f);
    if (c.same_as(op->cond) && t.same_as(op->then_case) && f.same_as(op->else_case)) return s;
    return IfThenElse::make(c, t, f);
  }
};

}  // namespace

Expr simplify(const Expr& e, const BoundsMap* bounds) {
  Simplifier s(bounds);
  return s.mutate(e);
}

Stmt simplify(const Stmt& st, const BoundsMap* bounds) {
  Simplifier s(bounds);
  return s.mutate(st);
}

ConstInterval const_bounds(const Expr& e, const BoundsMap& bounds) { return bounds_of(e, &bounds); }

bool can_prove(const Expr& cond, const BoundsMap* bounds) {
  Expr r = simplify(cond, bounds);
  int64_t v;
  return is_const_int(r, &v) && v != 0;
}

bool known_multiple(const Expr& e, int64_t n) {
  int64_t v;
  if (is_const_int(e, &v)) return v % n == 0;
  if (const Add* a = e.as<Add>()) return known_multiple(a->a, n) && known_multiple(a->b, n);
  if (const Sub* a = e.as<Sub>()) return known_multiple(a->a, n) && known_multiple(a->b, n);
  if (const Mul* m = e.as<Mul>()) return known_multiple(m->a, n) || known_multiple(m->b, n);
  if (const Mod* m = e.as<Mod>()) return known_multiple(m->a, n) && known_multiple(m->b, n);
  return false;
}

void conjuncts(const Expr& e, std::vector<Expr>* out) {
  if (const And* a = e.as<And>()) {
    conjuncts(a->a, out);
    conjuncts(a->b, out);
  } else {
    out->push_back(e);
  }
}

Expr all_of(const std::vector<Expr>& cs) {
  Expr r;
  for (auto& c : cs) r = r.defined() ? (r && c) : c;
  return r;
}

}  // namespace tessel
