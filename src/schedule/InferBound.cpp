// Bound inference: how much of each producer a stage computed at a consumer's loop must
// produce, and what every loop's extent is. Consumers are processed before producers, so
// when a producer is visited the loops around its attach point are already known.
#include <algorithm>
#include <optional>
#include <set>

#include "ir/IRMutator.h"
#include "ir/IRVisitor.h"
#include "ir/Simplify.h"
#include "schedule/StageNest.h"

namespace tessel {

const StageNest* LoopProgram::find(const std::string& name) const {
  for (auto& s : stages)
    if (s.st->name == name) return &s;
  return nullptr;
}

namespace {

// Extents of every axis from the root extents, and root indices from leaf variables.
void derive_axes(StageNest& n) {
  const StageState& s = *n.st;
  n.axis_ext.assign(s.axes.size(), 0);
  for (int r = 0; r < s.num_root; ++r) n.axis_ext[r] = n.root_ext[r];
  for (const Relation& rel : s.relations) {
    if (rel.kind == Relation::Split) {
      int64_t p = n.axis_ext[rel.parent];
      int64_t inner = rel.nparts ? (p + rel.nparts - 1) / rel.nparts : std::min(rel.factor, p);
      inner = std::max<int64_t>(inner, 1);
      n.axis_ext[rel.inner] = inner;
      n.axis_ext[rel.outer] = (p + inner - 1) / inner;
    } else {
      n.axis_ext[rel.parent] = n.axis_ext[rel.outer] * n.axis_ext[rel.inner];
    }
  }
  std::vector<Expr> value(s.axes.size());
  for (int a : s.leaf) value[a] = s.axes[a].var;
  for (auto it = s.relations.rbegin(); it != s.relations.rend(); ++it) {
    const Relation& rel = *it;
    if (rel.kind == Relation::Split) {
      value[rel.parent] = value[rel.outer] * make_int(n.axis_ext[rel.inner]) + value[rel.inner];
      if (n.axis_ext[rel.parent] % n.axis_ext[rel.inner] != 0)
        n.split_guards.push_back(value[rel.parent] < make_int(n.axis_ext[rel.parent]));
    } else {
      value[rel.outer] = value[rel.parent] / make_int(n.axis_ext[rel.inner]);
      value[rel.inner] = value[rel.parent] % make_int(n.axis_ext[rel.inner]);
    }
  }
  n.root_value.clear();
  for (int r = 0; r < s.num_root; ++r) {
    TESSEL_INTERNAL_CHECK(value[r].defined(), "root axis ", s.axes[r].name, " of ", s.name, " has no value");
    n.root_value.push_back(simplify(n.root_min[r] + value[r]));
  }
}

// Symbolic interval of an index over the relaxed variables (each in [0, ext-1]).
struct SymInterval {
  Expr lo, hi;  // undefined = unbounded
  bool bounded() const { return lo.defined() && hi.defined(); }
  // Widened to hold `o` too.
  void join(const SymInterval& o) {
    lo = lo.defined() && o.lo.defined() ? min(lo, o.lo) : Expr();
    hi = hi.defined() && o.hi.defined() ? max(hi, o.hi) : Expr();
  }
};

SymInterval eval_interval(const Expr& e, const std::map<const ExprNode*, int64_t>& relax) {
  const ExprNode* n = e.get();
  auto both = [](Expr a) { return SymInterval{a, a}; };
  switch (n->kind) {
    case NodeKind::IntImm: return both(e);
    case NodeKind::Variable: {
      auto it = relax.find(n);
      if (it == relax.end()) return both(e);
      return {make_int(0), make_int(it->second - 1)};
    }
    case NodeKind::Add:
    case NodeKind::Sub: {
      auto* b = static_cast<const BinaryNode*>(n);
      SymInterval x = eval_interval(b->a, relax), y = eval_interval(b->b, relax);
      if (n->kind == NodeKind::Add)
        return {x.lo.defined() && y.lo.defined() ? x.lo + y.lo : Expr(),
                x.hi.defined() && y.hi.defined() ? x.hi + y.hi : Expr()};
      return {x.lo.defined() && y.hi.defined() ? x.lo - y.hi : Expr(),
              x.hi.defined() && y.lo.defined() ? x.hi - y.lo : Expr()};
    }
    case NodeKind::Mul: {
      auto* b = static_cast<const Mul*>(n);
      int64_t k;
      Expr other;
      if (is_const_int(b->b, &k)) other = b->a;
      else if (is_const_int(b->a, &k)) other = b->b;
      if (other.defined()) {
        SymInterval x = eval_interval(other, relax);
        Expr lo = x.lo.defined() ? x.lo * make_int(k) : Expr();
        Expr hi = x.hi.defined() ? x.hi * make_int(k) : Expr();
        return k >= 0 ? SymInterval{lo, hi} : SymInterval{hi, lo};
      }
      SymInterval x = eval_interval(b->a, relax), y = eval_interval(b->b, relax);
      if (x.bounded() && y.bounded() && equal(x.lo, x.hi) && equal(y.lo, y.hi)) return both(x.lo * y.lo);
      return {};
    }
    case NodeKind::Div: {
      auto* b = static_cast<const Div*>(n);
      int64_t k;
      if (!is_const_int(b->b, &k) || k <= 0) break;
      SymInterval x = eval_interval(b->a, relax);
      return {x.lo.defined() ? x.lo / b->b : Expr(), x.hi.defined() ? x.hi / b->b : Expr()};
    }
    case NodeKind::Mod: {
      auto* b = static_cast<const Mod*>(n);
      int64_t k;
      if (!is_const_int(b->b, &k) || k <= 0) break;
      SymInterval x = eval_interval(b->a, relax);
      if (x.bounded() && equal(x.lo, x.hi)) return both(x.lo % b->b);
      return {make_int(0), make_int(k - 1)};
    }
    case NodeKind::Min:
    case NodeKind::Max: {
      auto* b = static_cast<const BinaryNode*>(n);
      SymInterval x = eval_interval(b->a, relax), y = eval_interval(b->b, relax);
      bool is_min = n->kind == NodeKind::Min;
      auto pick = [&](const Expr& p, const Expr& q, bool take_min) -> Expr {
        if (!p.defined()) return take_min ? q : Expr();
        if (!q.defined()) return take_min ? p : Expr();
        return take_min ? min(p, q) : max(p, q);
      };
      if (is_min) return {x.lo.defined() && y.lo.defined() ? min(x.lo, y.lo) : Expr(), pick(x.hi, y.hi, true)};
      return {pick(x.lo, y.lo, false), x.hi.defined() && y.hi.defined() ? max(x.hi, y.hi) : Expr()};
    }
    case NodeKind::Select: {
      auto* s = static_cast<const Select*>(n);
      SymInterval x = eval_interval(s->t, relax), y = eval_interval(s->f, relax);
      return {x.lo.defined() && y.lo.defined() ? min(x.lo, y.lo) : Expr(),
              x.hi.defined() && y.hi.defined() ? max(x.hi, y.hi) : Expr()};
    }
    case NodeKind::Cast: {
      auto* c = static_cast<const Cast*>(n);
      if (c->value.dtype().is_integer()) {
        SymInterval x = eval_interval(c->value, relax);
        return {x.lo.defined() ? cast(n->type, x.lo) : Expr(), x.hi.defined() ? cast(n->type, x.hi) : Expr()};
      }
      break;
    }
    default: break;
  }
  return {};
}

// An index clamped into [lo, hi] by constants, max(min(e, hi), lo) as pad() reads (either bound
// may be absent): the clamp's bounds and e. Clamps narrow the region, but their symbolic
// bounds do not subtract: max(min(y*8 + 6, 55), 0) - max(min(y*8 - 2, 55), 0) has no constant
// bound, where the unclamped extent is 9 (see clamped_region).
struct Clamp {
  std::optional<int64_t> lo, hi;
  bool operator==(const Clamp& o) const { return lo == o.lo && hi == o.hi; }
};
Expr unclamp(Expr e, Clamp& c) {
  for (;;) {
    NodeKind kind = e.get()->kind;
    if (kind != NodeKind::Max && kind != NodeKind::Min) return e;
    auto* b = static_cast<const BinaryNode*>(e.get());
    int64_t k;
    if (!is_const_int(b->b, &k)) return e;
    std::optional<int64_t>& bound = kind == NodeKind::Max ? c.lo : c.hi;
    if (bound) return e;  // clamped twice on one side: keep the inner clamp in e
    bound = k;
    e = b->a;
  }
}

bool is_thread_loop(const AxisState& a) {
  return a.annotation == ForKind::ThreadBound && a.thread_tag.rfind("blockIdx", 0) != 0;
}

// Loop variables enclosing the point where a stage attached at (parent, axis) runs. A
// shared buffer is one per thread block, so for it the enclosing thread loops do not
// count: its region is the union over all of the block's threads (`skip_threads`).
void enclosing_vars(const ScheduleState& st, const std::string& parent, const std::string& axis,
                    bool skip_threads, std::set<const ExprNode*>& out) {
  const StageState& p = st.stage(parent);
  int pos = p.leaf_position(p.find_axis(axis));
  for (int k = 0; k <= pos; ++k)
    if (!(skip_threads && is_thread_loop(p.axes[p.leaf[k]]))) out.insert(p.axes[p.leaf[k]].var.get());
  if (p.attach == StageState::At) enclosing_vars(st, p.attach_stage, p.attach_axis, skip_threads, out);
}

// Is `reader` executed inside the loop (parent, axis)?
bool runs_inside(const ScheduleState& st, const StageState& reader, const std::string& parent,
                 const std::string& axis) {
  const StageState& p = st.stage(parent);
  int pos = p.leaf_position(p.find_axis(axis));
  if (reader.name == parent) return true;
  for (const StageState* cur = &reader; cur->attach == StageState::At;) {
    const StageState& up = st.stage(cur->attach_stage);
    if (up.name == parent) return up.leaf_position(up.find_axis(cur->attach_axis)) >= pos;
    cur = &up;
  }
  return false;
}

void collect_loads(const Expr& body, const OperationNode* op, std::vector<std::vector<Expr>>& out) {
  visit_exprs(body, [&](const Expr& e) {
    if (const TensorLoad* l = e.as<TensorLoad>())
      if (l->op.get() == op) out.push_back(l->indices);
  });
}

// The first index and the extent of a region (the extent a bound over the outer loops where it
// varies with them); an unbounded extent is INT64_MAX.
std::pair<Expr, int64_t> region_extent(const SymInterval& r, const BoundsMap& ranges) {
  Expr lo = simplify(r.lo, &ranges);
  Expr ext = simplify(r.hi - lo + make_int(1), &ranges);
  int64_t e;
  if (is_const_int(ext, &e)) return {lo, e};
  ConstInterval b = const_bounds(ext, ranges);
  return {lo, b.bounded_above() ? b.max : INT64_MAX};
}

// The region of indices clamp(v) for v in `unclamped`, [a, b], clamped to [c.lo, c.hi], of a
// dimension of `full` indices: from clamp(a) on, b - a + 1 of them. Clamping is monotone and
// narrows any interval, so clamp(v) lies between clamp(a) and clamp(a) + (b - a). A region that
// would hang over the tensor's end starts earlier instead, so that it needs no guards (a
// guarded copy is not a transposed one: the last band of a channel-blocked pack was copied
// lane by lane).
std::pair<Expr, int64_t> clamped_region(const SymInterval& unclamped, const Clamp& c, int64_t full,
                                        const BoundsMap& ranges) {
  auto [lo, e] = region_extent(unclamped, ranges);
  // Not a clamp (every index is c.lo), or no narrower than the dimension: the whole of it.
  if ((c.lo && c.hi && *c.lo > *c.hi) || e >= full) return {lo, INT64_MAX};
  if (c.lo) lo = max(lo, make_int(*c.lo));
  if (c.hi) lo = min(lo, make_int(*c.hi));
  return {simplify(min(lo, make_int(full - e)), &ranges), e};
}

}  // namespace

LoopProgram infer_bounds(const ScheduleState& st) {
  std::map<std::string, Expr> bodies = inline_stages(st);
  LoopProgram prog;
  for (auto& s : st.stages)
    if (!s.is_placeholder() && s.attach != StageState::Inline) {
      StageNest n;
      n.st = &s;
      n.body = bodies.at(s.name);
      prog.stages.push_back(n);
    }
  // Every leaf loop variable of every stage visited so far, with its extent.
  std::map<const ExprNode*, int64_t> loop_ext;
  for (auto it = prog.stages.rbegin(); it != prog.stages.rend(); ++it) {
    StageNest& n = *it;
    const StageState& s = *n.st;
    const OperationNode* op = s.op.get();
    int nsp = int(op->axis.size());
    n.root_min.clear(), n.root_ext.clear();
    for (auto& iv : op->axis) n.root_min.push_back(make_int(iv.min())), n.root_ext.push_back(iv.extent());
    for (auto& iv : op->reduce_axis) n.root_min.push_back(make_int(iv.min())), n.root_ext.push_back(iv.extent());

    // A stage computed at a loop holds what its readers read inside that loop. So does a
    // de-interleaved copy at the root: its readers may take only some phases (a stride-2 1x1
    // convolution reads phase 0 of rows and columns), and the rest would be copied for nothing.
    bool at = s.attach == StageState::At;
    if (at || (s.attach == StageState::Root && op->tag == "deinterleave" && !st.is_output(s.name))) {
      std::set<const ExprNode*> outer;
      if (at) enclosing_vars(st, s.attach_stage, s.attach_axis, st.storage_scope(s) == "shared", outer);
      std::map<const ExprNode*, int64_t> relax;
      for (auto& [v, ext] : loop_ext)
        if (!outer.count(v)) relax[v] = ext;
      std::vector<SymInterval> region(nsp), unclamped(nsp);
      std::vector<Clamp> clamps(nsp);
      std::vector<bool> first(nsp, true), same_clamp(nsp, true);
      for (auto& reader : prog.stages) {
        std::vector<std::vector<Expr>> loads;
        collect_loads(reader.body, op, loads);
        if (loads.empty()) continue;
        TESSEL_USER_CHECK(!at || runs_inside(st, *reader.st, s.attach_stage, s.attach_axis), "compute_at: stage '",
                          s.name, "' is computed at '", s.attach_stage, "' loop '", s.attach_axis,
                          "', but stage '", reader.st->name,
                          "' also reads it outside that loop; compute it at the root or at a loop enclosing "
                          "all its readers");
        // The reader's root variables in terms of its loops.
        VarMap to_loops;
        const OperationNode* rop = reader.st->op.get();
        int rsp = int(rop->axis.size());
        for (int r = 0; r < reader.st->num_root; ++r) {
          const IterVar& iv = r < rsp ? rop->axis[r] : rop->reduce_axis[r - rsp];
          // An axis of one iteration is its minimum: a 1x1 window's tap (y*2 + ry) % 2 is then 0.
          to_loops[iv.var().get()] = reader.root_ext[r] == 1 ? reader.root_min[r] : reader.root_value[r];
        }
        for (auto& idx : loads)
          for (int d = 0; d < nsp; ++d) {
            Expr index = simplify(substitute(idx[d], to_loops));
            Clamp c;
            SymInterval iv = eval_interval(index, relax), inner = eval_interval(unclamp(index, c), relax);
            if (first[d]) {
              region[d] = iv, unclamped[d] = inner, clamps[d] = c;
              first[d] = false;
            } else {
              region[d].join(iv), unclamped[d].join(inner);
              same_clamp[d] = same_clamp[d] && clamps[d] == c;
            }
          }
      }
      BoundsMap ranges;
      for (auto& [v, ext] : loop_ext) ranges[v] = {0, ext - 1};
      for (int d = 0; d < nsp; ++d) {
        int64_t full = op->axis[d].extent();
        if (first[d]) continue;  // unknown: compute the whole dimension
        auto [lo, e] = region[d].bounded() ? region_extent(region[d], ranges) : std::pair<Expr, int64_t>{Expr(), full};
        if (e >= full && same_clamp[d] && unclamped[d].bounded())
          std::tie(lo, e) = clamped_region(unclamped[d], clamps[d], full, ranges);
        if (e >= full) continue;
        n.root_min[d] = lo;
        n.root_ext[d] = std::max<int64_t>(e, 1);
      }
    }
    derive_axes(n);
    // An attached stage's region may hang over the tensor's edge at the tails of the
    // consumer's loops: guard the domain (guards that always hold are removed later).
    for (int d = 0; d < nsp; ++d)
      if (!is_const_int(n.root_min[d])) {
        n.domain_guards.push_back(n.root_value[d] >= make_int(0));
        n.domain_guards.push_back(n.root_value[d] < make_int(op->axis[d].extent()));
      }
    for (int a : s.leaf) loop_ext[s.axes[a].var.get()] = n.axis_ext[a];
  }
  return prog;
}

}  // namespace tessel
