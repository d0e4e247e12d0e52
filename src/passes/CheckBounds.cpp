// Every read of a compute definition checked against the shape of the tensor it reads, over
// the ranges of the definition's axes. A reduction's `where` narrows the ranges of the reads
// under it (they happen only where it holds, unless it is skippable: a skippable guard may be
// dropped); a select does not, as both of its branches are evaluated (pad and the other
// operators clamp the indices of reads a select discards). A read that leaves the tensor for
// some point is an error naming the tensor, the index and its range. Where the range is not
// exact (an index that is not a sum of distinct variables times constants, or a `where`
// that couples variables) nothing is claimed; a checked build checks such reads when the
// kernel runs (check_reads_when_run, CheckIndex).
#include <map>
#include <sstream>

#include "ir/IRPrinter.h"
#include "ir/IRMutator.h"
#include "ir/Simplify.h"
#include "passes/Passes.h"
#include "schedule/ScheduleState.h"
#include "schedule/StageNest.h"

namespace tessel {
namespace {

// e as coefficient * variable + offset (one variable, or none), if it has that form.
struct Linear {
  const VarNode* var = nullptr;
  int64_t coef = 0, offset = 0;
};
bool linear(const Expr& e, Linear& out) {
  int64_t c;
  if (is_const_int(e, &c)) return out = {nullptr, 0, c}, true;
  if (const VarNode* v = e.as<Variable>()) return out = {v, 1, 0}, true;
  const BinaryNode* b = dynamic_cast<const BinaryNode*>(e.get());
  if (!b) return false;
  Linear x, y;
  if (!linear(b->a, x) || !linear(b->b, y)) return false;
  switch (e.get()->kind) {
    case NodeKind::Add:
    case NodeKind::Sub: {
      int64_t s = e.get()->kind == NodeKind::Add ? 1 : -1;
      if (x.var && y.var && x.var != y.var) return false;
      out = {x.var ? x.var : y.var, x.coef + s * y.coef, x.offset + s * y.offset};
      return true;
    }
    case NodeKind::Mul:
      if (x.var && y.var) return false;
      out = x.var ? Linear{x.var, x.coef * y.offset, x.offset * y.offset}
                  : Linear{y.var, y.coef * x.offset, y.offset * x.offset};
      return true;
    default:
      return false;
  }
}

// Whether the range of e over a box of variable ranges is exact: a sum of terms, each a
// constant or a constant times a variable that no other term uses.
bool exact_range(const Expr& e) {
  std::map<const VarNode*, int> uses;
  bool affine = true;
  std::function<void(const Expr&)> walk = [&](const Expr& x) {
    int64_t c;
    if (is_const_int(x, &c)) return;
    if (const VarNode* v = x.as<Variable>()) return void(++uses[v]);
    const BinaryNode* b = dynamic_cast<const BinaryNode*>(x.get());
    if (b && (x.get()->kind == NodeKind::Add || x.get()->kind == NodeKind::Sub)) return walk(b->a), walk(b->b);
    if (b && x.get()->kind == NodeKind::Mul && (is_const_int(b->a) || is_const_int(b->b))) return walk(b->a), walk(b->b);
    affine = false;
  };
  walk(e);
  if (!affine) return false;
  for (auto& [v, n] : uses)
    if (n > 1) return false;
  return true;
}

// Checks every read (see the file comment); with `checked`, also wraps each index it cannot
// prove inside its tensor in CheckIndex(index, extent, guard, message), which stops the
// program with the message when it runs outside (`guard`: the `where` the read is under).
class Checker : public IRMutator {
 public:
  Checker(const OperationNode* op, BoundsMap ranges, std::vector<std::string>* checked)
      : op_(op), ranges_(std::move(ranges)), checked_(checked) {}

 protected:
  Expr visit(const Select* s, const Expr& e) override {
    bool saved = in_select_;
    in_select_ = true;
    Expr out = IRMutator::visit(s, e);
    in_select_ = saved;
    return out;
  }
  Expr visit(const Reduce* r, const Expr& e) override {
    if (!r->condition.defined() || is_skippable(r->condition)) return IRMutator::visit(r, e);
    Expr cond = mutate(r->condition), init = r->init.defined() ? mutate(r->init) : r->init, source;
    Expr saved_guard = guard_;
    guard_ = guard_.defined() ? (guard_ && cond) : cond;
    under(r->condition, [&] { source = mutate(r->source); });
    guard_ = saved_guard;
    if (source.same_as(r->source) && cond.same_as(r->condition) && init.same_as(r->init)) return e;
    return Reduce::make(r->combiner, source, r->axes, cond, init);
  }
  Expr visit(const TensorLoad* l, const Expr& e) override {
    std::vector<Expr> idx;
    for (auto& i : l->indices) idx.push_back(mutate(i));  // reads in the indices (a gather) are checked too
    bool changed = false;
    for (size_t d = 0; d < idx.size(); ++d) {
      ConstInterval b = const_bounds(l->indices[d], ranges_);
      int64_t n = l->op->shape[d];
      if (b.bounded() && b.min >= 0 && b.max < n) {
        changed |= !idx[d].same_as(l->indices[d]);
        continue;
      }
      bool proven_outside = b.bounded() && exact_ && exact_range(l->indices[d]);
      std::string msg = message(l, d, b, proven_outside);
      if (proven_outside) throw Error(msg);
      if (!checked_) continue;
      int id = int(checked_->size());
      checked_->push_back(msg);
      idx[d] = Call::make(idx[d].dtype(), Intrinsic::CheckIndex,
                          {idx[d], make_int(n), guard_.defined() ? guard_ : const_true(), make_int(id)});
      changed = true;
    }
    return changed ? TensorLoad::make(l->op, idx) : e;
  }

 private:
  std::string message(const TensorLoad* l, size_t d, const ConstInterval& b, bool proven) const {
    std::stringstream idx, msg;
    for (size_t k = 0; k < l->indices.size(); ++k) idx << (k ? ", " : "") << to_string(l->indices[k]);
    int64_t n = l->op->shape[d];
    msg << "'" << op_->name << "' reads " << l->op->name << "[" << idx.str() << "] outside the tensor: index " << d
        << ", " << to_string(l->indices[d]);
    if (proven) msg << ", ranges over [" << b.min << ", " << b.max << "]";
    else msg << ", was outside when the kernel ran";
    if (proven && narrowed_) msg << " where its reduction's condition holds";
    msg << ", but " << l->op->name << " has " << n << " elements in dimension " << d << " (valid: 0 to " << n - 1
        << "); shrink '" << op_->name << "', pad the input, or clamp the index with min/max";
    if (in_select_) msg << " (a select evaluates both of its branches: it does not guard a read)";
    return msg.str();
  }

  // Runs f with the variable ranges narrowed by `cond`: conjuncts of the form `linear CMP
  // linear` in one variable narrow it exactly; any other makes the ranges an over-approximation.
  void under(const Expr& cond, const std::function<void()>& f) {
    BoundsMap saved = ranges_;
    bool saved_exact = exact_, saved_narrowed = narrowed_;
    std::vector<Expr> conj;
    std::function<void(const Expr&)> split = [&](const Expr& c) {
      if (c.get()->kind == NodeKind::And) return split(c.as<And>()->a), split(c.as<And>()->b);
      conj.push_back(c);
    };
    split(cond);
    for (auto& c : conj) narrow(c);
    bool never = false;  // the condition never holds: nothing under it is read
    for (auto& [v, r] : ranges_) never |= r.min > r.max;
    if (!never) f();
    ranges_ = std::move(saved);
    exact_ = saved_exact, narrowed_ = saved_narrowed;
  }
  void narrow(const Expr& c) {
    const BinaryNode* b = dynamic_cast<const BinaryNode*>(c.get());
    NodeKind k = c.get()->kind;
    bool cmp = k == NodeKind::LT || k == NodeKind::LE || k == NodeKind::GT || k == NodeKind::GE;
    Linear d;
    if (!b || !cmp || !linear(simplify(b->a - b->b), d) || !d.var || (d.coef != 1 && d.coef != -1)) {
      exact_ = false;
      return;
    }
    // coef * v + offset CMP 0, as v >= lo or v <= hi.
    int64_t lo = ConstInterval::kNegInf, hi = ConstInterval::kPosInf;
    int64_t rhs = -d.offset * d.coef;  // v CMP' rhs, CMP' flipped when coef is -1
    bool greater = (k == NodeKind::GT || k == NodeKind::GE) == (d.coef == 1);
    bool strict = k == NodeKind::GT || k == NodeKind::LT;
    if (greater) lo = strict ? rhs + 1 : rhs;
    else hi = strict ? rhs - 1 : rhs;
    ConstInterval& r = ranges_[d.var];
    r.min = std::max(r.min, lo);
    r.max = std::min(r.max, hi);
    narrowed_ = true;
  }

  const OperationNode* op_;
  BoundsMap ranges_;
  std::vector<std::string>* checked_;  // messages of the checked reads, by id (null: only check)
  Expr guard_;                          // the conditions the read is under
  bool exact_ = true;      // the ranges are exactly the points where the read happens
  bool narrowed_ = false;  // a condition narrowed them
  bool in_select_ = false;  // the read is in a select (which evaluates both branches)
};

}  // namespace

namespace {
Expr check_body(const OperationNode* op, const Expr& body, std::vector<std::string>* checked) {
  BoundsMap ranges;
  for (auto* axes : {&op->axis, &op->reduce_axis})
    for (auto& iv : *axes) ranges[iv.var().get()] = {iv.min(), iv.min() + iv.extent() - 1};
  return Checker(op, ranges, checked).mutate(body);
}
}  // namespace

void check_bounds(const ScheduleState& st) {
  for (auto& s : st.stages)
    if (!s.is_placeholder()) check_body(s.op.get(), s.op->body, nullptr);
}

void check_reads_when_run(LoopProgram& prog, std::vector<std::string>& messages) {
  for (auto& n : prog.stages) n.body = check_body(n.st->op.get(), n.body, &messages);
}

}  // namespace tessel
