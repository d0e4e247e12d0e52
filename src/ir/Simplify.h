#pragma once
/** \file Algebraic simplification of integer index arithmetic and constant folding, with
 * optional known ranges of variables (loop variables) to prove comparisons and to cancel
 * divisions and modulos. Integer expressions are put in a canonical linear form
 * (sum of coefficient * atom + constant), so io*32 + ii - io*32 becomes ii. */
#include <cstdint>
#include <limits>
#include <unordered_map>
#include <vector>

#include "ir/IR.h"

namespace tessel {

// An integer interval with optional ends.
struct ConstInterval {
  static constexpr int64_t kNegInf = std::numeric_limits<int64_t>::min();
  static constexpr int64_t kPosInf = std::numeric_limits<int64_t>::max();
  int64_t min = kNegInf, max = kPosInf;
  bool bounded_below() const { return min != kNegInf; }
  bool bounded_above() const { return max != kPosInf; }
  bool bounded() const { return bounded_below() && bounded_above(); }
  bool is_point() const { return bounded() && min == max; }
  static ConstInterval point(int64_t v) { return {v, v}; }
  static ConstInterval everything() { return {}; }
};

using BoundsMap = std::unordered_map<const ExprNode*, ConstInterval>;

Expr simplify(const Expr& e, const BoundsMap* bounds = nullptr);
// Simplifies every expression, using the ranges of enclosing loops; removes branches
// whose condition is decided and loops of extent 0 or 1.
Stmt simplify(const Stmt& s, const BoundsMap* bounds = nullptr);

// The range of an integer expression, given ranges of its variables.
ConstInterval const_bounds(const Expr& e, const BoundsMap& bounds);
// True if cond holds for every value of the variables within bounds (false = unknown).
bool can_prove(const Expr& cond, const BoundsMap* bounds = nullptr);

// True if e is a multiple of n for every value of its variables (false = unknown).
bool known_multiple(const Expr& e, int64_t n);

// Structural equality (same tree, same variables).
bool equal(const Expr& a, const Expr& b);

// The conjuncts of a condition (`a && b && c` as a, b, c) appended to `out`, and a list of
// them joined again (undefined for none).
void conjuncts(const Expr& e, std::vector<Expr>* out);
Expr all_of(const std::vector<Expr>& cs);

}  // namespace tessel
