#pragma once
/** \file What the sketch rules of every target share: the tracer that draws (or replays)
 * decisions, and small schedule helpers. */
#include <random>
#include <set>
#include <string>
#include <vector>

#include "autotune/SearchSpace.h"
#include "ir/IRVisitor.h"
#include "schedule/ScheduleState.h"

namespace tessel::autotune {

// Whether tile factors (outer to inner) suit an axis: the innermost within `max_inner`,
// and the tile at most one innermost step past the extent (7 columns as 2 x 4, the last 4
// guarded: see reshape_register_block).
inline bool fits(const std::vector<int64_t>& f, int64_t extent, int64_t max_inner) {
  int64_t p = 1;
  for (int64_t x : f) {
    if (x < 1) return false;
    p *= x;
  }
  if (f.empty()) return p <= extent;
  return f.back() <= std::min(max_inner, extent) && p <= (extent + f.back() - 1) / f.back() * f.back();
}

// Reads decisions back during replay and draws new ones otherwise.
class Tracer {
 public:
  Tracer(const std::vector<Decision>* replay, std::mt19937_64& rng) : replay_(replay), rng_(rng) {}
  std::vector<Decision> out;

  int64_t uniform(int64_t lo, int64_t hi) { return std::uniform_int_distribution<int64_t>(lo, hi)(rng_); }

  // One of n options. A fresh draw (a new sample, or a choice a mutation left empty) takes
  // each of `preferred` with probability `p`, any option otherwise; a replay keeps its value.
  int64_t choice(int64_t n, const std::vector<int64_t>& preferred = {}, double p = 0) {
    Decision d{Decision::Choice, std::max<int64_t>(n, 1), 0, {}};
    const Decision* r = next();
    if (r && r->kind == Decision::Choice && !r->value.empty() && r->value[0] < d.range) {
      d.value = r->value;
    } else {
      // preferred[k] when a uniform draw in [0, 1) falls in [k p, (k + 1) p)
      size_t k = preferred.empty() ? 0 : size_t(unit() / std::max(p, 1e-9));
      if (k < preferred.size() && preferred[k] < d.range) d.value = {preferred[k]};
      else d.value = {uniform(0, d.range - 1)};
    }
    out.push_back(d);
    return d.value[0];
  }

  // Whether this walk replays decisions: a draw is then a mutation's (or a decision that
  // no longer fits), not a new sample's.
  bool redrawing() const { return replay_ != nullptr; }

  // n factors (outer to inner) whose product is at most `extent`; innermost <= max_inner.
  // `prefer_inner` (a vector width) is drawn as the innermost factor 3 times in 4 when it
  // divides the extent: a full vector is the usual best choice for the vector loop.
  // `caps` (outer to inner, empty: none) bound each factor of a fresh draw (the GPU's
  // vthread, thread and register levels); a replay or mutation may go past them.
  std::vector<int64_t> tile(int64_t extent, int n, int64_t max_inner, int64_t prefer_inner = 0,
                            const std::vector<int64_t>& caps = {}) {
    Decision d{Decision::Tile, extent, max_inner, {}};
    const Decision* r = next();
    if (r && r->kind == Decision::Tile && int(r->value.size()) == n && fits(r->value, extent, max_inner)) {
      d.value = r->value;
    } else {
      d.value = sample_tile(extent, n, max_inner, rng_, caps);
      if (prefer_inner > 1 && extent % prefer_inner == 0 && prefer_inner <= max_inner &&
          std::uniform_int_distribution<int>(0, 3)(rng_) > 0) {
        d.value = sample_tile(extent / prefer_inner, n - 1, extent, rng_);
        d.value.push_back(prefer_inner);
      }
    }
    out.push_back(d);
    return d.value;
  }

  // Whether decisions come from a replay (then they are kept as they are, never redrawn).
  bool replaying() const { return replay_ && pos_ < replay_->size(); }
  // The candidate the walk made: its decisions and the schedule's steps.
  Candidate candidate(const Schedule& s) {
    Candidate c;
    c.decisions = std::move(out);
    c.steps = s.steps();
    c.key = steps_to_json(c.steps);
    return c;
  }
  // Drops the decisions drawn since `mark` (a rejected fresh draw).
  void rewind(size_t mark) { out.resize(mark); }
  double unit() { return std::uniform_real_distribution<double>(0, 1)(rng_); }

  // Factors drawn innermost first: often a divisor of what is left (exact tiles), often
  // a power of two or any value (tiles with a guarded tail, so primes get real choices).
  static std::vector<int64_t> sample_tile(int64_t extent, int n, int64_t max_inner, std::mt19937_64& rng,
                                          const std::vector<int64_t>& caps = {}) {
    std::vector<int64_t> f(n, 1);
    int64_t left = extent;
    for (int k = n - 1; k >= 0; --k) {
      int64_t cap = k == n - 1 ? std::min(left, max_inner) : left;
      if (size_t(k) < caps.size()) cap = std::min(cap, caps[size_t(k)]);
      if (cap <= 1) break;
      std::vector<int64_t> options;
      for (int64_t v = 1; v <= cap; ++v)
        if (left % v == 0) options.push_back(v);
      double r = std::uniform_real_distribution<double>(0, 1)(rng);
      int64_t v;
      if (r < 0.6) {
        v = options[std::uniform_int_distribution<size_t>(0, options.size() - 1)(rng)];
      } else if (r < 0.85) {
        int max_pow = 0;
        while ((int64_t(1) << (max_pow + 1)) <= cap) ++max_pow;
        v = int64_t(1) << std::uniform_int_distribution<int>(0, max_pow)(rng);
      } else {
        v = std::uniform_int_distribution<int64_t>(1, cap)(rng);
      }
      f[k] = v;
      left /= v;
    }
    return f;
  }

 private:
  const Decision* next() {
    if (!replay_ || pos_ >= replay_->size()) return nullptr;
    return &(*replay_)[pos_++];
  }
  const std::vector<Decision>* replay_;
  std::mt19937_64& rng_;
  size_t pos_ = 0;
};

inline const std::vector<int64_t> kUnrollSteps = {0, 16, 64, 512};

// Variables used in the indices of reads of `input` in `body`.
inline std::set<const ExprNode*> index_vars(const Expr& body, const OperationNode* input) {
  std::set<const ExprNode*> vars;
  visit_exprs(body, [&](const Expr& e) {
    if (const TensorLoad* l = e.as<TensorLoad>())
      if (l->op.get() == input)
        for (auto& i : l->indices) visit_exprs(i, [&](const Expr& x) {
          if (x.as<Variable>()) vars.insert(x.get());
        });
  });
  return vars;
}

inline bool expensive(const Expr& body) {
  bool bad = false;
  visit_exprs(body, [&](const Expr& e) {
    if (e.as<Call>() || e.as<Select>()) bad = true;
  });
  return bad;
}

inline bool plain_indices(const Expr& body) {
  bool ok = true;
  visit_exprs(body, [&](const Expr& e) {
    if (const TensorLoad* l = e.as<TensorLoad>())
      for (auto& i : l->indices) ok &= i.as<Variable>() != nullptr || i.as<IntImm>() != nullptr;
  });
  return ok;
}

// Does `consumer` read `producer` at exactly its own axes, in order?
inline bool elementwise_match(const OperationNode* consumer, const OperationNode* producer) {
  if (consumer->shape != producer->shape || consumer->reduction()) return false;
  bool ok = false, other = false;
  visit_exprs(consumer->body, [&](const Expr& e) {
    if (const TensorLoad* l = e.as<TensorLoad>()) {
      if (l->op.get() != producer) return;
      bool same = l->indices.size() == consumer->axis.size();
      for (size_t d = 0; same && d < l->indices.size(); ++d) same = l->indices[d].same_as(consumer->axis[d].var());
      (same ? ok : other) = true;
    }
  });
  return ok && !other;
}

// Split `axis` into levels; returns level names outermost first. factors: inner factors.
inline std::vector<std::string> multi_split(Schedule& s, const std::string& stage, const std::string& axis,
                                     const std::vector<int64_t>& factors) {
  std::vector<std::string> names;
  std::string cur = axis;
  for (size_t l = 0; l < factors.size(); ++l) {
    int64_t f = 1;
    for (size_t k = l; k < factors.size(); ++k) f *= factors[k];
    auto [o, i] = s[stage].split(cur, f);
    names.push_back(o.name);
    cur = i.name;
  }
  names.push_back(cur);
  return names;
}

inline int64_t axis_extent(Schedule& s, const std::string& stage, const std::string& axis) {
  const StageState& st = s.state().stage(stage);
  return st.axes[st.find_axis(axis)].extent;
}

}  // namespace tessel::autotune
