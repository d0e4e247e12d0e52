// Schedule primitives. Each one checks its arguments against the current state, throws a
// tessel::Error naming the stage, the axis and the rule when it cannot apply, and
// otherwise changes the state; apply_step() records it.
#include <algorithm>
#include <functional>
#include <set>
#include <sstream>

#include "ir/IRMutator.h"
#include "ir/IRPrinter.h"
#include "ir/IRVisitor.h"
#include "ir/Simplify.h"
#include "schedule/ScheduleState.h"

namespace tessel {

// ---------------------------------------------------------------------------------------
// State queries
// ---------------------------------------------------------------------------------------

int StageState::find_axis(const std::string& n) const {
  for (size_t i = 0; i < axes.size(); ++i)
    if (axes[i].name == n) return int(i);
  return -1;
}

int StageState::leaf_position(int axis) const {
  auto it = std::find(leaf.begin(), leaf.end(), axis);
  return it == leaf.end() ? -1 : int(it - leaf.begin());
}

std::string StageState::leaf_names() const {
  std::string s;
  for (int a : leaf) s += (s.empty() ? "" : ", ") + axes[a].name;
  return s.empty() ? "(none)" : s;
}

int ScheduleState::find_stage(const std::string& name) const {
  for (size_t i = 0; i < stages.size(); ++i)
    if (stages[i].name == name) return int(i);
  return -1;
}

std::string ScheduleState::stage_list() const {
  std::string s;
  for (auto& st : stages) s += (s.empty() ? "" : ", ") + st.name;
  return s;
}

std::string ScheduleState::storage_scope(const StageState& s) const {
  if (s.scope != "global" || s.attach != StageState::At) return s.scope;
  bool block = false;
  for (const StageState* cur = &s; cur->attach == StageState::At;) {
    const StageState& p = stage(cur->attach_stage);
    int pos = p.leaf_position(p.find_axis(cur->attach_axis));
    for (int k = 0; k <= pos; ++k) {
      const AxisState& a = p.axes[p.leaf[k]];
      if (a.annotation != ForKind::ThreadBound) continue;
      if (a.thread_tag.rfind("blockIdx", 0) != 0) return "local";
      block = true;
    }
    cur = &p;
  }
  return block ? "shared" : "global";
}

StageState& ScheduleState::stage(const std::string& name) {
  int i = find_stage(name);
  TESSEL_USER_CHECK(i >= 0, "no stage named '", name, "' in this schedule; its stages are ", stage_list());
  return stages[i];
}
const StageState& ScheduleState::stage(const std::string& name) const {
  return const_cast<ScheduleState*>(this)->stage(name);
}

bool ScheduleState::is_output(const std::string& name) const {
  for (auto& t : outputs)
    if (t.name() == name) return true;
  return false;
}

std::vector<std::string> ScheduleState::readers(const std::string& name) const {
  const Operation& op = stage(name).op;
  std::vector<std::string> out;
  for (auto& st : stages)
    if (!st.is_placeholder())
      for (auto& in : st.op->inputs())
        if (in == op) out.push_back(st.name);
  return out;
}

std::vector<std::string> ScheduleState::effective_readers(const std::string& name) const {
  std::vector<std::string> out;
  for (auto& r : readers(name)) {
    if (stage(r).attach != StageState::Inline) {
      out.push_back(r);
      continue;
    }
    for (auto& rr : effective_readers(r))
      if (std::find(out.begin(), out.end(), rr) == out.end()) out.push_back(rr);
  }
  return out;
}

// ---------------------------------------------------------------------------------------
// Building stages
// ---------------------------------------------------------------------------------------

namespace {

StageState make_stage(const Operation& op) {
  StageState s;
  s.name = op->name;
  s.op = op;
  if (op->is_compute()) {
    for (auto* list : {&op->axis, &op->reduce_axis})
      for (const IterVar& iv : *list) {
        s.axes.push_back(AxisState{iv.name(), Var(iv.name()), iv.extent(), iv.kind()});
      }
    // The two lists may repeat a name (a reduce axis called "i"); the tuner and the log
    // address axes by name, so names must be unique within a stage.
    std::set<std::string> names;
    for (auto& a : s.axes)
      TESSEL_USER_CHECK(names.insert(a.name).second, "compute '", op->name, "' has two axes named '", a.name,
                        "'; give its reduce axes distinct names");
  }
  s.num_root = int(s.axes.size());
  for (int i = 0; i < s.num_root; ++i) s.leaf.push_back(i);
  return s;
}

// Producers before consumers, each op once.
void topo_visit(const Operation& op, std::vector<Operation>& order, std::set<const OperationNode*>& seen) {
  if (!seen.insert(op.get()).second) return;
  if (op->is_compute())
    for (auto& in : op->inputs()) topo_visit(in, order, seen);
  order.push_back(op);
}

// Redirects reads of the ops in `map` to their replacements.
// `remap`, when given, rewrites the indices of the redirected loads (pack's new layout).
using IndexMap = std::function<std::vector<Expr>(const std::vector<Expr>&)>;
Expr replace_loads(const Expr& body, const std::map<const OperationNode*, Operation>& map, bool* changed,
                   const IndexMap& remap = nullptr) {
  class Rewriter : public IRMutator {
   public:
    const std::map<const OperationNode*, Operation>* m;
    const IndexMap* remap;
    bool* changed;
    using IRMutator::mutate;
    Expr visit(const TensorLoad* op, const Expr& e) override {
      Expr r = IRMutator::visit(op, e);
      auto it = m->find(op->op.get());
      if (it == m->end()) return r;
      if (changed) *changed = true;
      const auto& idx = r.as<TensorLoad>()->indices;
      return TensorLoad::make(it->second, *remap ? (*remap)(idx) : idx);
    }
  } rw;
  rw.m = &map;
  rw.remap = &remap;
  rw.changed = changed;
  return rw.mutate(body);
}

// Replaces reads of ops per `map` in every stage (and, transitively, in stages reading
// rewritten ones); outputs follow.
void replace_dataflow(ScheduleState& st, std::map<const OperationNode*, Operation> map) {
  for (auto& s : st.stages) {
    if (s.is_placeholder() || map.count(s.op.get())) continue;
    bool changed = false;
    Expr body = replace_loads(s.op->body, map, &changed);
    if (!changed) continue;
    auto op = std::make_shared<OperationNode>(*s.op);
    op->body = body;
    map[s.op.get()] = op;
    s.op = op;
  }
  for (auto& t : st.outputs) {
    auto it = map.find(t.op().get());
    if (it != map.end()) t = Tensor(it->second);
  }
}

std::string unique_stage_name(const ScheduleState& st, const std::string& base) {
  if (st.find_stage(base) < 0) return base;
  for (int i = 1;; ++i) {
    std::string n = base + "." + std::to_string(i);
    if (st.find_stage(n) < 0) return n;
  }
}

// A fresh copy of spatial IterVars (new Vars with the same names and ranges).
std::vector<IterVar> copy_axes(const std::vector<IterVar>& axes) {
  std::vector<IterVar> out;
  for (auto& iv : axes) out.emplace_back(Var(iv.name()), iv.min(), iv.extent(), iv.kind());
  return out;
}

std::vector<Expr> vars_of(const std::vector<IterVar>& axes) {
  std::vector<Expr> v;
  for (auto& iv : axes) v.push_back(iv.var());
  return v;
}

}  // namespace

void init_schedule_state(ScheduleState& st, const std::vector<Tensor>& outputs) {
  TESSEL_USER_CHECK(!outputs.empty(), "a schedule needs at least one output tensor");
  st.outputs = outputs;
  std::vector<Operation> order;
  std::set<const OperationNode*> seen;
  for (auto& t : outputs) {
    TESSEL_USER_CHECK(t.defined(), "schedule output is an undefined tensor");
    TESSEL_USER_CHECK(!t.is_placeholder(), "schedule output '", t.name(),
                      "' is a placeholder; outputs must be computed tensors");
    topo_visit(t.op(), order, seen);
  }
  std::set<std::string> names;
  for (auto& op : order) {
    TESSEL_USER_CHECK(names.insert(op->name).second, "two different tensors are named '", op->name,
                      "'; stage names must be unique within a computation");
    st.stages.push_back(make_stage(op));
  }
}

// ---------------------------------------------------------------------------------------
// Primitives
// ---------------------------------------------------------------------------------------

namespace {

StageState& schedulable(ScheduleState& st, const std::string& name, const char* prim) {
  StageState& s = st.stage(name);
  TESSEL_USER_CHECK(!s.is_placeholder(), prim, ": stage '", name,
                    "' is a placeholder (an input); it has no loops to schedule");
  return s;
}

int leaf_axis(const StageState& s, const std::string& axis, const char* prim) {
  int a = s.find_axis(axis);
  int pos = a < 0 ? -1 : s.leaf_position(a);
  TESSEL_USER_CHECK(pos >= 0, prim, ": stage '", s.name, "' has no loop axis '", axis,
                    a >= 0 ? "' any more (it was split or fused)" : "'", "; its axes are ", s.leaf_names());
  return a;
}

int add_axis(StageState& s, std::string name, int64_t extent, IterKind kind) {
  TESSEL_INTERNAL_CHECK(s.find_axis(name) < 0, "duplicate axis name ", name);
  s.axes.push_back(AxisState{name, Var(name), extent, kind});
  return int(s.axes.size()) - 1;
}

// Stages computed at a loop refer to it by name; splitting or fusing it would orphan them.
void check_no_attached(const ScheduleState& st, const StageState& s, const std::string& axis, const char* prim) {
  for (auto& other : st.stages)
    TESSEL_USER_CHECK(!(other.attach == StageState::At && other.attach_stage == s.name && other.attach_axis == axis),
                      prim, ": stage '", other.name, "' is computed at axis '", axis, "' of '", s.name, "'; ", prim,
                      " the axis before compute_at, or attach '", other.name, "' elsewhere first");
}

void do_split(StageState& s, const std::string& axis, int64_t factor, int64_t nparts) {
  const char* prim = nparts ? "split_nparts" : "split";
  int a = leaf_axis(s, axis, prim);
  int64_t value = nparts ? nparts : factor;
  TESSEL_USER_CHECK(value > 0, prim, ": stage '", s.name, "', axis '", axis, "': ", nparts ? "nparts" : "factor",
                    " is ", value, "; it must be a positive integer (1 .. ", s.axes[a].extent, ")");
  int64_t ext = s.axes[a].extent;
  int64_t inner_ext = nparts ? (ext + nparts - 1) / nparts : std::min(factor, ext);
  int64_t outer_ext = (ext + inner_ext - 1) / inner_ext;
  IterKind kind = s.axes[a].kind;
  int o = add_axis(s, axis + ".outer", outer_ext, kind);
  int i = add_axis(s, axis + ".inner", inner_ext, kind);
  s.relations.push_back(Relation{Relation::Split, a, o, i, inner_ext, nparts});
  int pos = s.leaf_position(a);
  s.leaf[pos] = o;
  s.leaf.insert(s.leaf.begin() + pos + 1, i);
}

void do_fuse(StageState& s, const std::vector<std::string>& names) {
  TESSEL_USER_CHECK(names.size() >= 2, "fuse: stage '", s.name, "' needs at least two axes to fuse, got ",
                    names.size());
  std::vector<int> ax;
  for (auto& n : names) ax.push_back(leaf_axis(s, n, "fuse"));
  for (size_t k = 1; k < ax.size(); ++k) {
    TESSEL_USER_CHECK(s.leaf_position(ax[k]) == s.leaf_position(ax[k - 1]) + 1, "fuse: stage '", s.name,
                      "': axes '", names[k - 1], "' and '", names[k],
                      "' are not adjacent (outer then inner) in the loop order ", s.leaf_names(),
                      "; reorder them first");
    TESSEL_USER_CHECK(s.axes[ax[k]].kind == s.axes[ax[0]].kind, "fuse: stage '", s.name, "': axis '", names[0],
                      "' and axis '", names[k], "' mix a spatial and a reduction axis, which cannot be fused");
  }
  int cur = ax[0];
  for (size_t k = 1; k < ax.size(); ++k) {
    std::string name = s.axes[cur].name + "." + s.axes[ax[k]].name + ".fused";
    if (k + 1 < ax.size()) name = s.axes[cur].name + "." + s.axes[ax[k]].name;
    if (s.find_axis(name) >= 0) name += "." + std::to_string(s.axes.size());
    int f = add_axis(s, name, s.axes[cur].extent * s.axes[ax[k]].extent, s.axes[cur].kind);
    s.relations.push_back(Relation{Relation::Fuse, f, cur, ax[k], 0, 0});
    int pos = s.leaf_position(cur);
    s.leaf.erase(s.leaf.begin() + pos, s.leaf.begin() + pos + 2);
    s.leaf.insert(s.leaf.begin() + pos, f);
    cur = f;
  }
}

void do_reorder(StageState& s, const std::vector<std::string>& names) {
  std::vector<int> ax, pos;
  std::set<int> seen;
  for (auto& n : names) {
    int a = s.find_axis(n);
    TESSEL_USER_CHECK(a >= 0 && s.leaf_position(a) >= 0, "reorder: '", n, "' is not a loop axis of stage '",
                      s.name, "' (axes of another stage cannot be reordered here); its axes are ", s.leaf_names());
    TESSEL_USER_CHECK(seen.insert(a).second, "reorder: stage '", s.name, "': axis '", n, "' is listed twice");
    ax.push_back(a);
    pos.push_back(s.leaf_position(a));
  }
  std::sort(pos.begin(), pos.end());
  for (size_t k = 0; k < ax.size(); ++k) s.leaf[pos[k]] = ax[k];
}

void annotate(StageState& s, const std::string& axis, ForKind kind, const std::string& tag) {
  const char* prim = kind == ForKind::Vectorized ? "vectorize" : kind == ForKind::Unrolled ? "unroll"
                   : kind == ForKind::Parallel ? "parallel" : "bind";
  int a = leaf_axis(s, axis, prim);
  AxisState& ax = s.axes[a];
  if (kind == ForKind::ThreadBound) {
    TESSEL_USER_CHECK(ax.annotation != ForKind::ThreadBound, "bind: stage '", s.name, "': axis '", axis,
                      "' is already bound to ", ax.thread_tag, "; an axis can be bound only once");
    bool known = false;
    for (auto* t : kThreadTags) known |= tag == t;
    TESSEL_USER_CHECK(known, "bind: stage '", s.name, "', axis '", axis, "': unknown thread tag '", tag,
                      "'; use blockIdx.x/y/z, threadIdx.x/y/z or vthread");
    for (auto& other : s.axes)
      TESSEL_USER_CHECK(!(other.annotation == ForKind::ThreadBound && other.thread_tag == tag), "bind: stage '",
                        s.name, "': ", tag, " is already bound to axis '", other.name, "'");
  } else {
    TESSEL_USER_CHECK(ax.annotation == ForKind::Serial || ax.annotation == kind, prim, ": stage '", s.name,
                      "': axis '", axis, "' is already annotated ", for_kind_name(ax.annotation),
                      "; an axis takes one of vectorize, unroll, parallel or bind");
  }
  if (kind == ForKind::Vectorized) {
    TESSEL_USER_CHECK(ax.extent <= 64, "vectorize: stage '", s.name, "': axis '", axis, "' has extent ",
                      ax.extent, "; a vectorized loop needs a constant extent of at most 64 lanes. Split it "
                      "first, e.g. split(\"", axis, "\", 16), and vectorize the inner axis");
  }
  if (kind == ForKind::Parallel)
    TESSEL_USER_CHECK(ax.kind != IterKind::Reduce, "parallel: stage '", s.name, "': axis '", axis,
                      "' is a reduction axis; its iterations all update the same outputs. Parallelize a "
                      "spatial axis, or rfactor the reduction first");
  if (kind == ForKind::Unrolled)
    TESSEL_USER_CHECK(ax.extent <= 4096, "unroll: stage '", s.name, "': axis '", axis, "' has extent ",
                      ax.extent, "; unrolling more than 4096 iterations is refused. Split it first");
  ax.annotation = kind;
  ax.thread_tag = tag;
}

void check_attachable(const ScheduleState& st, const StageState& s, const char* prim) {
  TESSEL_USER_CHECK(!st.is_output(s.name) || std::string(prim) != "compute_inline", prim, ": stage '", s.name,
                    "' is an output of the computation and must be stored; it cannot be inlined");
}

void do_compute_at(ScheduleState& st, StageState& s, const std::string& parent, const std::string& axis) {
  TESSEL_USER_CHECK(parent != s.name, "compute_at: stage '", s.name, "' cannot be computed at its own loops");
  TESSEL_USER_CHECK(!st.is_output(s.name), "compute_at: stage '", s.name,
                    "' is an output; outputs are computed at the root");
  const StageState& p = st.stage(parent);
  auto readers = st.effective_readers(s.name);
  // Any stage downstream of this one will do (bound inference checks that every reader
  // then runs inside the chosen loop).
  std::set<std::string> downstream;
  std::vector<std::string> todo = readers;
  while (!todo.empty()) {
    std::string r = todo.back();
    todo.pop_back();
    if (!downstream.insert(r).second) continue;
    for (auto& rr : st.effective_readers(r)) todo.push_back(rr);
  }
  TESSEL_USER_CHECK(downstream.count(parent), "compute_at: stage '",
                    parent, "' does not read '", s.name, "'; a stage can only be computed inside a consumer (",
                    readers.empty() ? std::string("it has none") : "its consumers: " + [&] {
                      std::string r;
                      for (auto& x : readers) r += (r.empty() ? "" : ", ") + x;
                      return r;
                    }(), ")");
  int a = p.find_axis(axis);
  TESSEL_USER_CHECK(a >= 0 && p.leaf_position(a) >= 0, "compute_at: '", axis, "' is not a loop axis of consumer '",
                    parent, "'; the legal places are its axes ", p.leaf_names());
  // No cycles: the parent must not be (transitively) attached inside this stage.
  for (std::string cur = parent; !cur.empty();) {
    const StageState& c = st.stage(cur);
    TESSEL_USER_CHECK(c.name != s.name, "compute_at: stage '", parent, "' is already computed inside '", s.name,
                      "'; attaching '", s.name, "' to it would make a cycle");
    cur = c.attach == StageState::At ? c.attach_stage : "";
  }
  s.attach = StageState::At;
  s.attach_stage = parent;
  s.attach_axis = axis;
}

// A new stage `copy` (a copy of `src` in some layout) between `src` and the named readers.
void insert_copy(ScheduleState& st, const Step& step, const char* prim, const StageState& src, const Operation& copy,
                 const std::string& scope, const IndexMap& remap) {
  TESSEL_USER_CHECK(!step.stages.empty(), prim, " of '", src.name, "': give at least one reader");
  auto readers = st.readers(src.name);
  for (auto& r : step.stages)
    TESSEL_USER_CHECK(std::find(readers.begin(), readers.end(), r) != readers.end(), prim, " of '", src.name,
                      "': stage '", r, "' does not read it (its readers: ", [&] {
                        std::string out;
                        for (auto& x : readers) out += (out.empty() ? "" : ", ") + x;
                        return out;
                      }(), ")");
  const OperationNode* src_op = src.op.get();
  std::string src_name = src.name;
  for (auto& r : step.stages) {
    StageState& rs = st.stage(r);
    auto op = std::make_shared<OperationNode>(*rs.op);
    op->body = replace_loads(rs.op->body, {{src_op, copy}}, nullptr, remap);
    Operation old = rs.op;
    rs.op = op;
    replace_dataflow(st, {{old.get(), op}});
  }
  int pos = st.find_stage(src_name);
  StageState cs = make_stage(copy);
  cs.scope = scope;
  st.stages.insert(st.stages.begin() + pos + 1, cs);
}

std::vector<IterVar> data_axes(const std::vector<int64_t>& shape) {
  std::vector<IterVar> axes;
  for (size_t d = 0; d < shape.size(); ++d)
    axes.emplace_back(Var(d < 6 ? std::string(1, "ijklmn"[d]) : "ax" + std::to_string(d)), 0, shape[d],
                      IterKind::Spatial);
  return axes;
}

void do_cache_read(ScheduleState& st, const Step& step) {
  StageState& src = st.stage(step.stage);
  std::string name = unique_stage_name(st, src.name + "." + step.str);
  std::vector<IterVar> axes = data_axes(src.op->shape);
  Operation cache = make_compute_op(name, axes, TensorLoad::make(src.op, vars_of(axes)), "cache_read");
  insert_copy(st, step, "cache_read", src, cache, step.str, nullptr);
}

// The extent of dimension `dim` of a copy's source, checked to exist.
int64_t copied_extent(const StageState& src, const char* prim, int dim) {
  int nd = int(src.op->shape.size());
  TESSEL_USER_CHECK(dim >= 0 && dim < nd, prim, " of '", src.name, "': dim ", dim, " is not a dimension of its ", nd,
                    "-dimensional shape (use 0..", nd - 1, ")");
  return src.op->shape[dim];
}

// A copy's read of src at `idx`, whose index `dim` may run past its extent `n` (the short
// last block of pack, the short phases of deinterleave): zeros there, and a clamped read that
// stays in bounds. `to_source` maps idx to src's indices (pack's flattened dimensions).
Expr read_or_zero(const StageState& src, std::vector<Expr> idx, int dim, int64_t n, bool may_overrun,
                  const std::function<std::vector<Expr>(std::vector<Expr>)>& to_source = nullptr) {
  Expr x = idx[size_t(dim)];
  if (may_overrun) idx[size_t(dim)] = min(x, make_int(n - 1));
  Expr read = TensorLoad::make(src.op, to_source ? to_source(idx) : idx);
  return may_overrun ? select(x < make_int(n), read, make_const(src.op->dtype, 0)) : read;
}

// The blocked layout of pack and rewrite_layout: src[..., x_dim, ...] lives at
// copy[x_dim / block, ..., x_dim % block], for src of shape `src_shape` (pack's flattened
// one). Checks block; the caller checks dim.
std::vector<int64_t> blocked_shape(const StageState& src, const char* prim, int dim, int64_t block,
                                   const std::vector<int64_t>& src_shape) {
  int nd = int(src_shape.size());
  int64_t n = src_shape[size_t(dim)];
  TESSEL_USER_CHECK(block >= 1 && block <= n, prim, " of '", src.name, "': block ", block,
                    " must be between 1 and the extent of dimension ", dim, " (", n, ")");
  std::vector<int64_t> shape{(n + block - 1) / block};
  for (int d = 0; d < nd; ++d)
    if (d != dim) shape.push_back(src_shape[size_t(d)]);
  shape.push_back(block);
  return shape;
}

IndexMap blocked_index(int dim, int64_t block) {
  return [dim, block](const std::vector<Expr>& i) {
    std::vector<Expr> out{i[dim] / make_int(block)};
    for (size_t d = 0; d < i.size(); ++d)
      if (int(d) != dim) out.push_back(i[d]);
    out.push_back(i[dim] % make_int(block));
    return out;
  };
}

// pack with dims > 1 blocks dimensions dim .. dim + dims - 1 as one: the source with those
// dimensions flattened (row-major) into their last. Returns the flattened shape.
std::vector<int64_t> flattened_shape(const StageState& src, int dim, int dims) {
  int nd = int(src.op->shape.size());
  TESSEL_USER_CHECK(dims >= 1 && dim + dims <= nd, "pack of '", src.name, "': ", dims, " dimensions from dim ", dim,
                    " run past its ", nd, " (use 1..", std::max(1, nd - dim), ")");
  std::vector<int64_t> shape = src.op->shape;
  for (int d = dim + 1; d < dim + dims; ++d) shape[size_t(dim)] *= shape[size_t(d)];
  shape.erase(shape.begin() + dim + 1, shape.begin() + dim + dims);
  return shape;
}

// The source's indices of flattened index `flat` (the dimensions dim .. dim + dims - 1 of
// `shape`), and the reverse; both leave the indices as they are where dims is 1.
std::vector<Expr> unflatten(const std::vector<int64_t>& shape, int dim, int dims, std::vector<Expr> idx) {
  Expr flat = idx[size_t(dim)];
  std::vector<Expr> parts(static_cast<size_t>(dims));
  for (int d = dim + dims - 1; d > dim; --d) {
    parts[size_t(d - dim)] = flat % make_int(shape[size_t(d)]);
    flat = flat / make_int(shape[size_t(d)]);
  }
  parts[0] = flat;
  idx.erase(idx.begin() + dim);
  idx.insert(idx.begin() + dim, parts.begin(), parts.end());
  return idx;
}
std::vector<Expr> flatten(const std::vector<int64_t>& shape, int dim, int dims, std::vector<Expr> idx) {
  Expr flat = idx[size_t(dim)];
  for (int d = dim + 1; d < dim + dims; ++d) flat = flat * make_int(shape[size_t(d)]) + idx[size_t(d)];
  idx.erase(idx.begin() + dim, idx.begin() + dim + dims);
  idx.insert(idx.begin() + dim, flat);
  return idx;
}

void do_pack(ScheduleState& st, const Step& step) {
  StageState& src = st.stage(step.stage);
  int dim = int(step.ints.at(0));
  int64_t block = step.ints.at(1);
  int dims = step.ints.size() > 2 ? int(step.ints[2]) : 1;
  copied_extent(src, "pack", dim);
  std::vector<int64_t> shape = src.op->shape, flat_shape = flattened_shape(src, dim, dims);
  std::vector<IterVar> axes = data_axes(blocked_shape(src, "pack", dim, block, flat_shape));
  std::vector<Expr> v = vars_of(axes), idx;
  Expr x = v.front() * make_int(block) + v.back();
  for (int d = 0, k = 1; d < int(flat_shape.size()); ++d) idx.push_back(d == dim ? x : v[k++]);
  int64_t n = flat_shape[size_t(dim)];
  Expr body = read_or_zero(src, idx, dim, n, n % block != 0,
                           [&](std::vector<Expr> i) { return unflatten(shape, dim, dims, std::move(i)); });
  Operation packed = make_compute_op(unique_stage_name(st, src.name + ".pack"), axes, body, "pack");
  IndexMap blocked = blocked_index(dim, block);
  insert_copy(st, step, "pack", src, packed, "global",
              [=](const std::vector<Expr>& i) { return blocked(flatten(shape, dim, dims, i)); });
}

// The source, dimension, factor and the dimension's extent of a deinterleave or subsample
// step, checked.
struct FactorCopy {
  StageState& src;
  int dim;
  int64_t factor, n;
};
FactorCopy factor_copy(ScheduleState& st, const Step& step, const char* prim) {
  StageState& src = st.stage(step.stage);
  int dim = int(step.ints.at(0));
  int64_t factor = step.ints.at(1);
  int64_t n = copied_extent(src, prim, dim);
  TESSEL_USER_CHECK(factor >= 2 && factor <= n, prim, " of '", src.name, "': factor ", factor,
                    " must be between 2 and the extent of dimension ", dim, " (", n, ")");
  return {src, dim, factor, n};
}

// The phases of deinterleave: src[..., x_dim, ...] lives at copy[..., x_dim % factor,
// x_dim / factor, ...].
void do_deinterleave(ScheduleState& st, const Step& step) {
  auto [src, dim, factor, n] = factor_copy(st, step, "deinterleave");
  std::vector<int64_t> shape = src.op->shape;
  shape[dim] = (n + factor - 1) / factor;
  shape.insert(shape.begin() + dim, factor);
  std::vector<IterVar> axes = data_axes(shape);
  std::vector<Expr> v = vars_of(axes), idx = v;
  Expr x = v[dim + 1] * make_int(factor) + v[dim];
  idx.erase(idx.begin() + dim);
  idx[dim] = x;
  Expr body = read_or_zero(src, idx, dim, n, n % factor != 0);
  Operation copy = make_compute_op(unique_stage_name(st, src.name + ".deint"), axes, body, "deinterleave");
  insert_copy(st, step, "deinterleave", src, copy, "global", [dim, factor](const std::vector<Expr>& i) {
    std::vector<Expr> out = i;
    out[dim] = i[dim] / make_int(factor);
    out.insert(out.begin() + dim, i[dim] % make_int(factor));
    return out;
  });
}

// Every factor-th element of src along `dim`: src[..., x_dim, ...] lives at
// copy[..., x_dim / factor, ...]. Legal where each reader reads only those elements: its
// index there a multiple of factor (its loops of one iteration at their start, as a 1x1
// window's taps), as a stride-2 1x1 convolution reads its input's rows and columns.
void do_subsample(ScheduleState& st, const Step& step) {
  auto [src, dim, factor, n] = factor_copy(st, step, "subsample");
  for (auto& r : step.stages) {
    const int s = st.find_stage(r);
    if (s < 0) continue;  // insert_copy names readers that do not exist
    const OperationNode* rop = st.stages[size_t(s)].op.get();
    VarMap unit = one_iteration_axes(rop);
    visit_exprs(rop->body, [&](const Expr& e) {
      const TensorLoad* l = e.as<TensorLoad>();
      if (!l || l->op.get() != src.op.get()) return;
      Expr i = simplify(substitute(l->indices[size_t(dim)], unit));
      TESSEL_USER_CHECK(is_zero(simplify(i % make_int(factor))), "subsample of '", src.name, "': stage '", r,
                        "' reads dimension ", dim, " at ", to_string(i), ", not always a multiple of ", factor,
                        "; use deinterleave to copy every phase");
    });
  }
  std::vector<int64_t> shape = src.op->shape;
  shape[size_t(dim)] = (n + factor - 1) / factor;
  std::vector<IterVar> axes = data_axes(shape);
  std::vector<Expr> idx = vars_of(axes);
  idx[size_t(dim)] = idx[size_t(dim)] * make_int(factor);
  Operation copy = make_compute_op(unique_stage_name(st, src.name + ".sub"), axes, TensorLoad::make(src.op, idx),
                                   "subsample");
  insert_copy(st, step, "subsample", src, copy, "global", [dim, factor](const std::vector<Expr>& i) {
    std::vector<Expr> out = i;
    out[size_t(dim)] = i[size_t(dim)] / make_int(factor);
    return out;
  });
}

// Every reader of an input reads a new input instead: the same data in the blocked layout,
// prepared once outside the kernel (see LayoutRewrite).
void do_rewrite_layout(ScheduleState& st, const Step& step) {
  StageState& src = st.stage(step.stage);
  TESSEL_USER_CHECK(src.is_placeholder(), "rewrite_layout: '", src.name,
                    "' is computed by the kernel; rewrite_layout stores an input that stays constant between calls "
                    "(weights) in a blocked layout; block a computed tensor with pack");
  int dim = int(step.ints.at(0));
  int64_t block = step.ints.at(1);
  copied_extent(src, "rewrite_layout", dim);
  std::vector<int64_t> shape = blocked_shape(src, "rewrite_layout", dim, block, src.op->shape);
  Step all = step;
  all.stages = st.readers(src.name);
  TESSEL_USER_CHECK(!all.stages.empty(), "rewrite_layout: input '", src.name,
                    "' is not read by the computation (is its layout rewritten already?)");
  Operation rewritten = placeholder(shape, src.op->dtype, unique_stage_name(st, src.name + ".layout")).op();
  st.rewrites.push_back(LayoutRewrite{src.name, rewritten->name, dim, block, src.op->shape});
  insert_copy(st, all, "rewrite_layout", src, rewritten, "global", blocked_index(dim, block));
}

void do_reorder_storage(ScheduleState& st, const Step& step) {
  StageState& s = schedulable(st, step.stage, "reorder_storage");
  TESSEL_USER_CHECK(!st.is_output(s.name), "reorder_storage: '", s.name,
                    "' is an output, whose layout is the caller's; reorder the storage of a stage inside the kernel "
                    "(a cache_write stage, say)");
  std::string names;
  for (auto& iv : s.op->axis) names += (names.empty() ? "" : ", ") + iv.name();
  std::vector<int> order;
  for (auto& a : step.axes) {
    int d = 0;
    while (d < int(s.op->axis.size()) && s.op->axis[d].name() != a) ++d;
    TESSEL_USER_CHECK(d < int(s.op->axis.size()) && std::find(order.begin(), order.end(), d) == order.end(),
                      "reorder_storage: stage '", s.name, "': '", a, "' is not one of its data axes (", names,
                      ") or is named twice");
    order.push_back(d);
  }
  TESSEL_USER_CHECK(order.size() == s.op->axis.size(), "reorder_storage: stage '", s.name, "': name all ",
                    s.op->axis.size(), " data axes (", names, "), outermost first");
  s.storage_order = order;
}

void do_cache_write(ScheduleState& st, const Step& step) {
  StageState& s = schedulable(st, step.stage, "cache_write");
  TESSEL_USER_CHECK(!s.transformed && s.relations.empty(), "cache_write: stage '", s.name,
                    "' was already split, fused, reordered or annotated; call cache_write before scheduling it");
  std::string name = unique_stage_name(st, s.name + "." + step.str);
  auto inner = std::make_shared<OperationNode>(*s.op);
  inner->name = name;
  std::vector<IterVar> axes = copy_axes(s.op->axis);
  Operation outer = make_compute_op(s.name, axes, TensorLoad::make(inner, vars_of(axes)), s.op->tag, s.op->attrs);
  Operation old = s.op;
  int pos = st.find_stage(s.name);
  StageState ws = make_stage(inner);
  ws.scope = step.str;
  StageState os = make_stage(outer);
  os.attach = s.attach, os.attach_stage = s.attach_stage, os.attach_axis = s.attach_axis;
  st.stages[pos] = os;
  st.stages.insert(st.stages.begin() + pos, ws);
  replace_dataflow(st, {{old.get(), outer}});
}

// Expression of each root axis in terms of the leaf axes' variables.
void root_exprs(const StageState& s, std::vector<Expr>& value) {
  value.assign(s.axes.size(), Expr());
  for (int a : s.leaf) value[a] = s.axes[a].var;
  for (auto it = s.relations.rbegin(); it != s.relations.rend(); ++it) {
    const Relation& r = *it;
    if (r.kind == Relation::Split) {
      if (value[r.outer].defined() && value[r.inner].defined())
        value[r.parent] = value[r.outer] * make_int(s.axes[r.inner].extent) + value[r.inner];
    } else if (value[r.parent].defined()) {
      value[r.outer] = value[r.parent] / make_int(s.axes[r.inner].extent);
      value[r.inner] = value[r.parent] % make_int(s.axes[r.inner].extent);
    }
  }
}

void do_rfactor(ScheduleState& st, const Step& step) {
  StageState& s = schedulable(st, step.stage, "rfactor");
  const Reduce* red = s.op->reduction();
  TESSEL_USER_CHECK(red, "rfactor: stage '", s.name, "' is not a reduction");
  TESSEL_USER_CHECK(!step.axes.empty(), "rfactor: stage '", s.name, "': name the reduce axis to factor out");
  int fa = leaf_axis(s, step.axes[0], "rfactor");
  TESSEL_USER_CHECK(s.axes[fa].kind == IterKind::Reduce, "rfactor: stage '", s.name, "': axis '", step.axes[0],
                    "' is not a reduction axis");
  for (auto& r : s.relations)
    TESSEL_USER_CHECK(r.kind == Relation::Split || s.axes[r.parent].kind == IterKind::Spatial, "rfactor: stage '",
                      s.name, "': reduce axes were fused; rfactor works on split reduce axes only");
  std::vector<Expr> value;
  root_exprs(s, value);
  std::string name = unique_stage_name(st, s.name + ".rf");
  // The rf stage: the factored axis becomes spatial axis 0, the other reduce leaves stay reductions.
  std::vector<IterVar> rf_axes{IterVar(Var(s.axes[fa].name), 0, s.axes[fa].extent, IterKind::Spatial)};
  std::vector<IterVar> spatial = copy_axes(s.op->axis);
  rf_axes.insert(rf_axes.end(), spatial.begin(), spatial.end());
  std::vector<IterVar> rf_reduce;
  VarMap leaf_to_new{{s.axes[fa].var.get(), rf_axes[0].var()}};
  for (int a : s.leaf)
    if (s.axes[a].kind == IterKind::Reduce && a != fa) {
      rf_reduce.emplace_back(Var(s.axes[a].name), 0, s.axes[a].extent, IterKind::Reduce);
      leaf_to_new[s.axes[a].var.get()] = rf_reduce.back().var();
    }
  VarMap root_map;
  Expr cond = red->condition;
  for (size_t d = 0; d < s.op->axis.size(); ++d) root_map[s.op->axis[d].var().get()] = spatial[d].var();
  int nsp = int(s.op->axis.size());
  for (size_t r = 0; r < red->axes.size(); ++r) {
    Expr v = substitute(value[nsp + r], leaf_to_new);
    root_map[red->axes[r].var().get()] = v;
    // Non-dividing splits make the factored domain larger than the original one.
    Expr in_range = v < make_int(red->axes[r].extent());
    cond = cond.defined() ? (cond && in_range) : in_range;
  }
  Expr src = substitute(red->source, root_map);
  if (cond.defined()) cond = substitute(cond, root_map);
  Expr rf_body;
  if (rf_reduce.empty()) {
    // Every reduce iteration became spatial: the rf stage is a plain (guarded) map.
    rf_body = cond.defined() ? select(cond, src, combiner_identity(red->combiner, src.dtype())) : src;
  } else {
    rf_body = Reduce::make(red->combiner, src, rf_reduce, cond, Expr());
  }
  Operation rf = make_compute_op(name, rf_axes, rf_body, "rfactor");
  std::vector<IterVar> out_axes = copy_axes(s.op->axis);
  IterVar k(Var(s.axes[fa].name), 0, s.axes[fa].extent, IterKind::Reduce);
  std::vector<Expr> idx{k.var()};
  for (auto& iv : out_axes) idx.push_back(iv.var());
  Operation outer = make_compute_op(s.name, out_axes,
                                    Reduce::make(red->combiner, TensorLoad::make(rf, idx), {k}, Expr(), red->init),
                                    s.op->tag, s.op->attrs);
  Operation old = s.op;
  int pos = st.find_stage(s.name);
  StageState os = make_stage(outer);
  os.attach = s.attach, os.attach_stage = s.attach_stage, os.attach_axis = s.attach_axis;
  st.stages[pos] = os;
  st.stages.insert(st.stages.begin() + pos, make_stage(rf));
  replace_dataflow(st, {{old.get(), outer}});
}

}  // namespace

void apply_step(ScheduleState& st, const Step& step) {
  switch (step.kind) {
    case Step::Split:
    case Step::SplitNParts: {
      StageState& s = schedulable(st, step.stage, "split");
      TESSEL_USER_CHECK(step.axes.size() == 1 && step.ints.size() == 1, "split step needs one axis and one factor");
      check_no_attached(st, s, step.axes[0], "split");
      do_split(s, step.axes[0], step.kind == Step::Split ? step.ints[0] : 0,
               step.kind == Step::SplitNParts ? step.ints[0] : 0);
      s.transformed = true;
      break;
    }
    case Step::Fuse: {
      StageState& s = schedulable(st, step.stage, "fuse");
      for (auto& a : step.axes) check_no_attached(st, s, a, "fuse");
      do_fuse(s, step.axes);
      s.transformed = true;
      break;
    }
    case Step::Reorder: {
      StageState& s = schedulable(st, step.stage, "reorder");
      do_reorder(s, step.axes);
      s.transformed = true;
      break;
    }
    case Step::Vectorize:
    case Step::Unroll:
    case Step::Parallel:
    case Step::Bind: {
      StageState& s = schedulable(st, step.stage, "annotate");
      TESSEL_USER_CHECK(step.axes.size() == 1, "annotation step needs exactly one axis");
      ForKind k = step.kind == Step::Vectorize ? ForKind::Vectorized : step.kind == Step::Unroll ? ForKind::Unrolled
                : step.kind == Step::Parallel ? ForKind::Parallel : ForKind::ThreadBound;
      annotate(s, step.axes[0], k, step.str);
      s.transformed = true;
      break;
    }
    case Step::Pragma: {
      StageState& s = schedulable(st, step.stage, "pragma");
      int a = leaf_axis(s, step.axes.at(0), "pragma");
      TESSEL_USER_CHECK(step.str == "auto_unroll_max_step" || step.str == "unroll_explicit", "pragma: stage '",
                        s.name, "': unknown pragma '", step.str, "'; known: auto_unroll_max_step");
      TESSEL_USER_CHECK(step.ints.size() == 1 && step.ints[0] >= 0, "pragma ", step.str, " needs a value >= 0");
      s.axes[a].pragmas.emplace_back(step.str, step.ints[0]);
      s.transformed = true;
      break;
    }
    case Step::Prefetch: {
      StageState& s = schedulable(st, step.stage, "prefetch");
      int a = leaf_axis(s, step.axes.at(0), "prefetch");
      TESSEL_USER_CHECK(step.ints.size() == 1 && step.ints[0] >= 1, "prefetch: stage '", s.name, "' loop '",
                        step.axes[0], "': the offset must be 1 or more iterations ahead, not ",
                        step.ints.empty() ? 0 : step.ints[0]);
      // A rewritten input's copy is the kernel argument named after the input.
      std::string read = step.str;
      for (auto& r : st.rewrites)
        if (r.rewritten == read) read = r.source;
      TESSEL_USER_CHECK(st.find_stage(read) >= 0, "prefetch: stage '", s.name, "': no tensor '", step.str,
                        "' in this computation; its tensors are ", st.stage_list());
      s.axes[a].prefetches.emplace_back(read, step.ints[0]);
      s.transformed = true;
      break;
    }
    case Step::ComputeAt: {
      StageState& s = schedulable(st, step.stage, "compute_at");
      do_compute_at(st, s, step.str, step.axes.at(0));
      break;
    }
    case Step::ComputeInline: {
      StageState& s = schedulable(st, step.stage, "compute_inline");
      check_attachable(st, s, "compute_inline");
      TESSEL_USER_CHECK(!s.op->reduction(), "compute_inline: stage '", s.name,
                        "' is a reduction; only element-wise stages can be inlined (a reduction needs its own "
                        "loop nest: use compute_at or compute_root)");
      for (auto& other : st.stages)
        TESSEL_USER_CHECK(!(other.attach == StageState::At && other.attach_stage == s.name), "compute_inline: stage '",
                          other.name, "' is computed at a loop of '", s.name, "', which would vanish");
      s.attach = StageState::Inline;
      break;
    }
    case Step::ComputeRoot: {
      StageState& s = schedulable(st, step.stage, "compute_root");
      s.attach = StageState::Root;
      s.attach_stage.clear(), s.attach_axis.clear();
      break;
    }
    case Step::StorageAlign: {
      StageState& s = schedulable(st, step.stage, "storage_align");
      int a = s.find_axis(step.axes.at(0));
      TESSEL_USER_CHECK(a >= 0 && a < int(s.op->axis.size()), "storage_align: stage '", s.name, "': '",
                        step.axes[0], "' is not one of its data axes (", [&] {
                          std::string r;
                          for (auto& iv : s.op->axis) r += (r.empty() ? "" : ", ") + iv.name();
                          return r;
                        }(), ")");
      TESSEL_USER_CHECK(step.ints.size() == 2 && step.ints[0] > 0 && step.ints[1] >= 0 && step.ints[1] < step.ints[0],
                        "storage_align: stage '", s.name, "': factor must be > 0 and 0 <= offset < factor");
      s.align.push_back({a, {step.ints[0], step.ints[1]}});
      break;
    }
    case Step::CacheRead: do_cache_read(st, step); break;
    case Step::Pack: do_pack(st, step); break;
    case Step::Deinterleave: do_deinterleave(st, step); break;
    case Step::Subsample: do_subsample(st, step); break;
    case Step::RewriteLayout: do_rewrite_layout(st, step); break;
    case Step::ReorderStorage: do_reorder_storage(st, step); break;
    case Step::CacheWrite: do_cache_write(st, step); break;
    case Step::RFactor: do_rfactor(st, step); break;
  }
  st.steps.push_back(step);
}

// ---------------------------------------------------------------------------------------
// Public API
// ---------------------------------------------------------------------------------------

Schedule::Schedule(std::vector<Tensor> outputs) : state_(std::make_unique<ScheduleState>()) {
  init_schedule_state(*state_, outputs);
}
Schedule::Schedule(const Schedule& o) : state_(std::make_unique<ScheduleState>(*o.state_)) {}
Schedule& Schedule::operator=(const Schedule& o) {
  state_ = std::make_unique<ScheduleState>(*o.state_);
  return *this;
}
Schedule::Schedule(Schedule&&) noexcept = default;
Schedule& Schedule::operator=(Schedule&&) noexcept = default;
Schedule::~Schedule() = default;

Stage Schedule::operator[](const Tensor& t) { return (*this)[t.name()]; }
Stage Schedule::operator[](const std::string& name) {
  state_->stage(name);  // checks it exists
  return Stage(this, name);
}

void Schedule::apply(const Step& step) { apply_step(*state_, step); }
const std::vector<Step>& Schedule::steps() const { return state_->steps; }
const std::vector<Tensor>& Schedule::outputs() const { return state_->outputs; }

std::vector<std::string> Schedule::stage_names() const {
  std::vector<std::string> n;
  for (auto& s : state_->stages) n.push_back(s.name);
  return n;
}

Tensor Schedule::tensor(const std::string& name) const { return Tensor(state_->stage(name).op); }

Schedule Schedule::replay(const std::vector<Tensor>& outputs, const std::vector<Step>& steps) {
  Schedule s(outputs);
  for (auto& st : steps) s.apply(st);
  return s;
}

Tensor Schedule::apply_copy(Step step, const std::vector<Tensor>& readers) {
  for (auto& r : readers) step.stages.push_back(r.name());
  int before = int(state_->stages.size());
  apply(step);
  TESSEL_INTERNAL_CHECK(int(state_->stages.size()) == before + 1, step.to_json(), " added no stage");
  return Tensor(state_->stages[state_->find_stage(step.stage) + 1].op);  // the copy follows its source
}

Tensor Schedule::cache_read(const Tensor& t, const std::string& scope, const std::vector<Tensor>& readers) {
  return apply_copy(Step{Step::CacheRead, t.name(), {}, {}, scope, {}}, readers);
}

Tensor Schedule::pack(const Tensor& t, const std::vector<Tensor>& readers, int dim, int64_t block, int dims) {
  std::vector<int64_t> ints{dim, block};
  if (dims != 1) ints.push_back(dims);
  return apply_copy(Step{Step::Pack, t.name(), {}, ints, "", {}}, readers);
}

Tensor Schedule::deinterleave(const Tensor& t, const std::vector<Tensor>& readers, int dim, int64_t factor) {
  return apply_copy(Step{Step::Deinterleave, t.name(), {}, {dim, factor}, "", {}}, readers);
}

Tensor Schedule::subsample(const Tensor& t, const std::vector<Tensor>& readers, int dim, int64_t factor) {
  return apply_copy(Step{Step::Subsample, t.name(), {}, {dim, factor}, "", {}}, readers);
}

Tensor Schedule::rewrite_layout(const Tensor& t, int dim, int64_t block) {
  apply(Step{Step::RewriteLayout, t.name(), {}, {dim, block}, "", {}});
  return Tensor(state_->stage(state_->rewrites.back().rewritten).op);
}

const std::vector<LayoutRewrite>& Schedule::layout_rewrites() const { return state_->rewrites; }

Tensor Schedule::cache_write(const Tensor& t, const std::string& scope) {
  apply(Step{Step::CacheWrite, t.name(), {}, {}, scope, {}});
  return Tensor(state_->stages[state_->find_stage(t.name()) - 1].op);
}

Tensor Schedule::rfactor(const Tensor& t, const Axis& axis) {
  apply(Step{Step::RFactor, t.name(), {axis.name}, {}, "", {}});
  return Tensor(state_->stages[state_->find_stage(t.name()) - 1].op);
}

std::string Schedule::to_cpp(const std::string& var) const {
  std::string out;
  for (auto& st : state_->steps) out += st.to_cpp(var) + "\n";
  return out;
}

void Stage::apply(Step step) {
  step.stage = name_;
  sch_->apply(step);
}

std::pair<Axis, Axis> Stage::split(const Axis& axis, int64_t factor) {
  apply(Step{Step::Split, "", {axis.name}, {factor}, "", {}});
  return {Axis(axis.name + ".outer"), Axis(axis.name + ".inner")};
}
std::pair<Axis, Axis> Stage::split_nparts(const Axis& axis, int64_t nparts) {
  apply(Step{Step::SplitNParts, "", {axis.name}, {nparts}, "", {}});
  return {Axis(axis.name + ".outer"), Axis(axis.name + ".inner")};
}
Axis Stage::fuse(const std::vector<Axis>& axes) {
  if (axes.size() == 1) return (*this)[axes[0].name];  // nothing to fuse
  Step st{Step::Fuse, "", {}, {}, "", {}};
  for (auto& a : axes) st.axes.push_back(a.name);
  const StageState& s = sch_->state().stage(name_);
  int pos = axes.empty() ? -1 : s.leaf_position(s.find_axis(axes[0].name));
  apply(st);
  return Axis(s.axes[s.leaf[pos]].name);
}
void Stage::reorder(const std::vector<Axis>& order) {
  Step st{Step::Reorder, "", {}, {}, "", {}};
  for (auto& a : order) st.axes.push_back(a.name);
  apply(st);
}
Stage::Tiled Stage::tile(const Axis& x, const Axis& y, int64_t xf, int64_t yf) {
  auto [xo, xi] = split(x, xf);
  auto [yo, yi] = split(y, yf);
  reorder({xo, yo, xi, yi});
  return {xo, yo, xi, yi};
}
void Stage::vectorize(const Axis& a) { apply(Step{Step::Vectorize, "", {a.name}, {}, "", {}}); }
void Stage::unroll(const Axis& a) { apply(Step{Step::Unroll, "", {a.name}, {}, "", {}}); }
void Stage::parallel(const Axis& a) { apply(Step{Step::Parallel, "", {a.name}, {}, "", {}}); }
void Stage::bind(const Axis& a, const std::string& tag) { apply(Step{Step::Bind, "", {a.name}, {}, tag, {}}); }
void Stage::pragma(const Axis& a, const std::string& key, int64_t v) {
  apply(Step{Step::Pragma, "", {a.name}, {v}, key, {}});
}
void Stage::prefetch(const Tensor& t, const Axis& a, int64_t offset) {
  apply(Step{Step::Prefetch, "", {a.name}, {offset}, t.name(), {}});
}
void Stage::compute_at(const Stage& parent, const Axis& a) {
  apply(Step{Step::ComputeAt, "", {a.name}, {}, parent.name(), {}});
}
void Stage::compute_inline() { apply(Step{Step::ComputeInline, "", {}, {}, "", {}}); }
void Stage::compute_root() { apply(Step{Step::ComputeRoot, "", {}, {}, "", {}}); }
void Stage::reorder_storage(const std::vector<Axis>& order) {
  Step st{Step::ReorderStorage, "", {}, {}, "", {}};
  for (auto& a : order) st.axes.push_back(a.name);
  apply(st);
}
void Stage::storage_align(const Axis& a, int64_t factor, int64_t offset) {
  apply(Step{Step::StorageAlign, "", {a.name}, {factor, offset}, "", {}});
}

std::vector<std::string> Stage::leaf_axes() const {
  const StageState& s = sch_->state().stage(name_);
  std::vector<std::string> out;
  for (int a : s.leaf) out.push_back(s.axes[a].name);
  return out;
}

Axis Stage::operator[](const std::string& axis) const {
  const StageState& s = sch_->state().stage(name_);
  int a = s.find_axis(axis);
  TESSEL_USER_CHECK(a >= 0 && s.leaf_position(a) >= 0, "stage '", name_, "' has no loop axis '", axis,
                    "'; its axes are ", s.leaf_names());
  return Axis(axis);
}

}  // namespace tessel
