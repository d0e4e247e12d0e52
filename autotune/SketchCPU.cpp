// The CPU sketch rules: multi-level tiling (S S R S R S) with a cache-write block, a
// micro-kernel or a fused consumer; packed inputs; compute locations; parallel outer loops,
// vector inner ones, auto-unroll. Every random choice is a Decision (see Tracer.h).
#include <algorithm>

#include "autotune/Tracer.h"
#include "schedules/Common.h"

namespace tessel::autotune {
namespace {

// Does stage `reader` run inside loop `axis` of stage `parent`?
bool runs_inside(const ScheduleState& st, const std::string& reader, const std::string& parent,
                 const std::string& axis) {
  const StageState& p = st.stage(parent);
  int pos = p.leaf_position(p.find_axis(axis));
  if (reader == parent) return true;
  for (const StageState* cur = &st.stage(reader); cur->attach == StageState::At;) {
    const StageState& up = st.stage(cur->attach_stage);
    if (up.name == parent) return up.leaf_position(up.find_axis(cur->attach_axis)) >= pos;
    cur = &up;
  }
  return false;
}

// An input that stays the same between calls (the workload's constants), so its layout can
// be rewritten once outside the kernel.
bool constant_input(const OperationNode* input, const std::set<std::string>& constants) {
  return !input->is_compute() && constants.count(input->name) > 0;
}

// The dimension of `input` that every read of it in `op` indexes with exactly `var`, or -1.
int dim_indexed_by(const OperationNode* op, const OperationNode* input, const Expr& var) {
  int dim = -2;
  visit_exprs(op->body, [&](const Expr& e) {
    const TensorLoad* l = e.as<TensorLoad>();
    if (!l || l->op.get() != input) return;
    int d = int(l->indices.size()) - 1;
    while (d >= 0 && !l->indices[size_t(d)].same_as(var)) --d;
    dim = dim == -2 || dim == d ? d : -1;
  });
  return std::max(dim, -1);
}

// Spatial axes other than the last that could be the vector axis of a tiled stage: those
// that index a constant input (weights) in one of its dimensions, whose layout can then be
// rewritten so that the vector loads are unit-stride. In an NCHW convolution that is the
// output channel: the weights load as vectors and each input pixel is one broadcast, at
// any stride (along the columns, a stride of 2 turns every vector load into a gather).
// An axis shorter than a vector is none: Winograd's products, offered their tile points (6)
// and output-channel blocks (4), ran 15-60x slower than their default over one of them,
// 2-11x over the last axis (a block of 16 channels, as the default).
std::vector<size_t> vector_axis_options(const OperationNode* op, const std::set<std::string>& constants, int lanes) {
  std::vector<size_t> out;
  for (size_t d = 0; d + 1 < op->axis.size(); ++d)
    for (auto& input : op->inputs())
      if (constant_input(input.get(), constants) && op->axis[d].extent() >= lanes &&
          dim_indexed_by(op, input.get(), op->axis[d].var()) >= 0) {
        out.push_back(d);
        break;
      }
  return out;
}

// Inputs of a tiled stage worth blocking along the vector axis `vec`, with the dimension
// to cut into blocks (so the inner loops stream through memory):
// - constant inputs (weights) read along it in any dimension: their layout is rewritten
//   once, outside the kernel;
// - other inputs read along it in their last dimension, long in it and reused (not indexed
//   by every spatial axis): packed inside the kernel;
// - other inputs read along it in another dimension (activations when the vector runs over
//   channels): packed inside the kernel, or every vector load would be a gather.
std::vector<std::pair<Operation, int>> blockable_inputs(const OperationNode* op, const Expr& vec, int lanes,
                                                        const std::set<std::string>& constants) {
  std::vector<std::pair<Operation, int>> out;
  for (auto& input : op->inputs()) {
    int nd = int(input->shape.size()), dim = dim_indexed_by(op, input.get(), vec);
    if (dim < 0 || nd < 2) continue;
    if (constant_input(input.get(), constants) || dim + 1 < nd) {
      out.emplace_back(input, dim);
    } else if (!input->is_compute() && input->shape.back() > 2 * lanes) {
      auto used = index_vars(op->body, input.get());
      bool reused = false;
      for (auto& iv : op->axis) reused |= iv.extent() > 1 && !used.count(iv.var().get());
      if (reused) out.emplace_back(input, dim);
    }
  }
  return out;
}

// A loop a tiled stage is tiled along: one of its axes, or an image's rows and columns fused
// into one loop of pixels; `vars` are the compute's variables it runs over.
struct TileLoop {
  std::string name;
  int64_t extent;
  std::set<const ExprNode*> vars;
};

// Order of the register block's loops (the innermost tile level, unrolled into straight
// code): the vector axis last, and just before it come the axes that index the input
// with the fewest distinct values in the block. Those values then stay in registers while
// the outer block loops visit each value of the other input once. In the other order
// LLVM keeps the larger set live (e.g. every broadcast input pixel across the weight
// vectors of a convolution) and spills: half the speed on a 3x3 conv2d.
std::vector<size_t> register_block_order(const OperationNode* op, const std::vector<TileLoop>& loops,
                                         const std::vector<std::vector<int64_t>>& factors, size_t vector, int lanes) {
  size_t n = loops.size();
  auto reads = [&](const std::set<const ExprNode*>& used, size_t d) {
    for (auto* x : loops[d].vars)
      if (used.count(x)) return true;
    return false;
  };
  std::set<const ExprNode*> live;
  int64_t fewest = 0;
  for (auto& input : op->inputs()) {
    auto used = index_vars(op->body, input.get());
    int64_t values = 1;
    for (size_t d = 0; d < n; ++d)
      if (reads(used, d)) values *= d == vector ? (factors[d][2] + lanes - 1) / lanes : factors[d][2];
    if (fewest == 0 || values < fewest) fewest = values, live = used;
  }
  std::vector<size_t> order, inner;
  for (size_t d = 0; d < n; ++d)
    if (d != vector) (reads(live, d) ? inner : order).push_back(d);
  order.insert(order.end(), inner.begin(), inner.end());
  order.push_back(vector);
  return order;
}

// Unrolls a tiled stage's register block (its S3 loops: `block`, then the `vector` loop),
// and the innermost reduction loop around it (R1's last, `reduce`) when the copies
// stay within 512 vector statements. The auto-unroll pragma rarely gets there: 64 covers
// the block but not the reduction step around it, and 512 also unrolls the S2 loops of a
// larger cache-write block (the model soon learns 512 is bad on average: 110 of 4,524
// conv records used it). Only for micro-kernel blocks: unrolling the reduction step of
// the other cache-write forms made 10 of 12 top conv candidates slower, some by half.
void unroll_micro_kernel(Schedule& s, const std::string& stage, const std::vector<std::string>& block,
                         const std::string& vector, const std::string& reduce, int lanes) {
  int64_t copies = 1;
  for (auto& a : block) copies *= axis_extent(s, stage, a);
  if (copies > 64) return;  // far beyond the registers: leave it to the pragma
  for (auto& a : block)
    if (axis_extent(s, stage, a) > 1) s[stage].unroll(a);
  int64_t vectors = (axis_extent(s, stage, vector) + lanes - 1) / lanes;
  int64_t r = reduce.empty() ? 1 : axis_extent(s, stage, reduce);
  if (r > 1 && r * copies * vectors <= 512) s[stage].unroll(reduce);
}

}  // namespace

Candidate SearchSpace::generate_cpu(Tracer& tr) const {
  Schedule s(w_.outputs);
  // Inputs packed inside the kernel, and the loop of their reader they may be packed in.
  struct Pack {
    std::string packed, reader, at;
  };
  std::vector<Pack> packs;
  // Stages over fused pixels whose input's pixel panels may be packed (drawn last), in blocks
  // of `block` pixels, inside their outermost tile loops at `at`.
  struct Panel {
    std::string reader, at;
    int64_t block;
  };
  std::vector<Panel> panels;
  int lanes = this->lanes();
  auto leaves = [&](const std::string& st) { return s[st].leaf_axes(); };
  auto spatial_leaves = [&](const std::string& st) {
    std::vector<std::string> out;
    const StageState& ss = s.state().stage(st);
    for (int a : ss.leaf)
      if (ss.axes[a].kind == IterKind::Spatial) out.push_back(ss.axes[a].name);
    return out;
  };
  // The largest auto-unroll step is drawn one time in eight, the others one in three and a
  // half: 512 also unrolls the loops around a register block, its builds took 2.7x as long
  // (0.65 s against 0.24, 45% of the build time of the ResNet-50 NCHW logs) and it was the
  // best in 3 of those 23 layers and none of MobileNetV2's 30, by at most 7%.
  auto unroll_pragma = [&](const std::string& st) {
    int64_t v = kUnrollSteps[tr.choice(int64_t(kUnrollSteps.size()), {0, 1, 2}, 1.0 / 6)];
    if (v > 0) s[st].pragma(leaves(st)[0], "auto_unroll_max_step", v);
  };
  // Fuse the first `n` of `axes` (outer loops) and run them in parallel.
  auto parallel_outer = [&](const std::string& st, const std::vector<std::string>& axes) -> std::string {
    if (axes.empty()) return "";
    // At least as many outer loops as give every core an equal share (Ansor's InitParallel
    // fuses until the extent is large enough): with batch 1 the outermost loop has extent 1,
    // and one draw in five was a serial kernel or a serial padding copy. An extent that
    // does not share evenly leaves cores idle in its last round (3 or 7 rows of tiles on 2
    // cores). Draws below that count mean that count, so earlier decisions replay.
    size_t enough = 1;
    for (int64_t e = axis_extent(s, st, axes[0]); !target_.shares_evenly(e) && enough < axes.size(); ++enough)
      e *= axis_extent(s, st, axes[enough]);
    int64_t n = std::max<int64_t>(int64_t(enough), 1 + tr.choice(int64_t(axes.size())));
    std::vector<Axis> f(axes.begin(), axes.begin() + n);
    Axis fused = s[st].fuse(f);
    s[st].parallel(fused);
    return fused.name;
  };
  // Each parallel iteration prefetches the rewritten weights that the next one reads (see
  // Stage::prefetch): at inference they come from memory, where the first reads of each
  // tile would otherwise wait for them.
  auto prefetch_weights = [&](const std::string& st, const std::string& par, const std::vector<Tensor>& weights) {
    if (par.empty()) return;
    for (auto& w : weights) s[st].prefetch(w, Axis(par));
  };
  // Loop `axis` of stage `st`, or the parallel loop `par` it was fused into.
  auto unfused = [&](const std::string& st, const std::string& axis, const std::string& par) {
    const StageState& ss = s.state().stage(st);
    return ss.find_axis(axis) >= 0 && ss.leaf_position(ss.find_axis(axis)) < 0 ? par : axis;
  };
  // The loops of a stage's spatial axes `sp` but the last that pick rows of a constant matrix
  // (StageInfo::row_axes; an axis read modulo m is split by m first), taken out of `sp` and
  // unrolled: each copy then computes one row's sum, its selects folded away. Left to the
  // search, Winograd's transforms were rolled loops over chains of six selects that computed
  // every row for each: candidates 5-50x slower than the default kernel, and the slowest to
  // build (Ansor unrolls the loops over constant matrices too).
  auto take_row_loops = [&](const std::string& st, std::vector<std::string>& sp) {
    std::vector<std::string> rows;
    auto in = std::find_if(info_.begin(), info_.end(), [&](const StageInfo& i) { return i.name == st; });
    if (in == info_.end() || sp.size() < 2) return rows;
    for (auto& [axis, mod] : in->row_axes) {
      auto it = std::find(sp.begin(), sp.end() - 1, axis);
      if (it == sp.end() - 1) continue;
      if (mod > 0) {
        auto [o, i] = s[st].split(axis, mod);
        *it = o.name;
        rows.push_back(i.name);
      } else {
        sp.erase(it);
        rows.push_back(axis);
      }
    }
    for (auto& r : rows) s[st].unroll(r);
    return rows;
  };
  // A root stage without reuse: outer spatial loops parallel, inner one in vector lanes.
  auto simple_root = [&](const std::string& st, bool allow_parallel) {
    const StageState& ss = s.state().stage(st);
    const OperationNode* op = ss.op.get();
    std::vector<std::string> sp;
    for (auto& iv : op->axis) sp.push_back(iv.name());
    std::vector<std::string> red;
    for (auto& iv : op->reduce_axis) red.push_back(iv.name());
    std::vector<std::string> rows = take_row_loops(st, sp);
    std::string last = sp.back();
    int64_t ext = axis_extent(s, st, last);
    int64_t vec = std::min<int64_t>(ext, std::vector<int64_t>{1, lanes / 2, lanes, 2 * lanes}[tr.choice(4)]);
    std::vector<std::string> outer(sp.begin(), sp.end() - 1);
    std::string inner;
    if (vec > 1) {
      auto [o, i] = s[st].split(last, vec);
      outer.push_back(o.name);
      inner = i.name;
    } else {
      outer.push_back(last);
    }
    std::vector<Axis> order(outer.begin(), outer.end());
    for (auto& r : red) order.push_back(r);
    for (auto& r : rows) order.push_back(r);
    if (!inner.empty()) order.push_back(inner);
    s[st].reorder(order);
    if (allow_parallel) parallel_outer(st, outer);
    if (!inner.empty()) s[st].vectorize(inner);
  };
  // The multi-level tiled stage `m`, optionally computed inside `outer` (a cache-write
  // copy or a fused consumer with the same iteration space). A `micro` kernel is the
  // cache-write form of hand-written micro-kernels: the block is just S3 (S2 = 1),
  // computed inside the consumer's level-2 loop so the whole reduction runs on accumulators
  // held in registers, and the block with the innermost reduction loop around it is
  // unrolled (see unroll_micro_kernel). ResNet-50 conv 256@14 3x3 on AVX2, 96 trials from
  // scratch, best kernels timed side by side: 71.9 GFLOP/s with this form, 61.0 without
  // (62.6 for the best of 1,384 earlier trials); conv 1x1 1024->256: 67.0 against 64.7.
  // With `fuse_image` (see image_axes_fuse) the image's rows and columns are tiled as one
  // loop of pixels, the vector axis, and its tiles run outermost: each block of pixels then
  // stays in cache while every output channel's weights pass over it. On ResNet-50's 1x1
  // conv 512->128 at 28x28 (NCHW, 2 threads) that order ran 170 GFLOP/s, the channels'
  // tiles outermost 152: the input went through L3 once per block of channels.
  auto tile = [&](const std::string& m, const std::string& outer, bool micro, bool fuse_image) {
    Operation keep = s.state().stage(m).op;  // pack replaces the stage's op; keep this one alive
    const OperationNode* op = keep.get();
    // The loops to tile: the compute's axes, or with the image's two fused into one.
    std::vector<TileLoop> ax;
    for (auto& iv : op->axis) ax.push_back({iv.name(), iv.extent(), {iv.var().get()}});
    // The vector axis: the last, or one that reads weights in another dimension (drawn).
    // The output's layout is the caller's, so its stores stay along its last axis.
    size_t v = ax.size() - 1;
    if (fuse_image) {
      TESSEL_INTERNAL_CHECK(outer.empty(), "sketch: fused image axes in a cache-write block of ", m);
      TileLoop& h = ax[v - 1];
      TileLoop& w = ax[v];
      TileLoop pixels{s[m].fuse({Axis(h.name), Axis(w.name)}).name, h.extent * w.extent, h.vars};
      pixels.vars.insert(w.vars.begin(), w.vars.end());
      ax.resize(v - 1);
      ax.insert(ax.begin(), pixels);
      v = 0;
    } else if (!s.state().is_output(m)) {
      std::vector<size_t> options = vector_axis_options(op, constants_, lanes);
      if (!options.empty())
        if (int64_t pick = tr.choice(int64_t(options.size()) + 1)) v = options[size_t(pick - 1)];
    }
    std::vector<std::vector<int64_t>> sf, rf;
    std::vector<std::vector<std::string>> sl, rl;
    // The innermost level (S3) of all spatial axes is the block of accumulators that the
    // reduction loops R1 wrap: fresh draws mostly keep it within the vector registers less
    // four for the operands (12 with AVX2, 28 with AVX-512: more spills) and at 4 or more
    // (independent FMAs to hide their latency). A cache-write block (levels S1-S3, or
    // S2-S3) is likewise kept within 128 KiB: on both CPUs tuned so far, no top kernel
    // used a larger one, yet half of the unconstrained draws did, and their accumulators
    // then went through L2 or memory. Mutations may leave both bounds.
    int64_t max_regs = std::max(4, target_.vector_registers - 4);
    constexpr int64_t kMaxLocalBlockBytes = 128 << 10;
    size_t mark = tr.out.size();
    bool fresh = !tr.replaying();
    bool prior = fresh && tr.unit() >= 0.1;  // one fresh draw in ten goes past the bounds on the block
    for (int attempt = 0;; ++attempt) {
      sf.clear();
      for (size_t d = 0; d < ax.size(); ++d) {
        bool last = d == v;
        int64_t extent = ax[d].extent;
        // Rows of two vectors are preferred where they fit: each broadcast input value then
        // feeds twice the FMAs (the hand-written AVX2 kernels' 16-lane rows). On znver3, 8
        // of the 9 best ResNet-50 conv2d kernels had them; the ninth (512@7 3x3: 7 columns
        // of one vector) ran 10% faster as 4 columns of two (172 against 157 GFLOP/s).
        int64_t prefer = extent % (2 * lanes) == 0 ? 2 * lanes : lanes;
        // Fused pixels take up to 4 vectors (6 output channels x 4 vectors of pixels filled
        // AVX-512's registers best in the default's GEMM over the pixels).
        sf.push_back(tr.tile(extent, 3, last ? (fuse_image ? 4 : 2) * lanes : 16, last ? prefer : 0));
        if (micro) sf.back()[1] = 1;
      }
      int64_t regs = (sf[v][2] + lanes - 1) / lanes;
      for (size_t d = 0; d < sf.size(); ++d) regs *= d == v ? 1 : sf[d][2];
      int64_t block = w_.dtype.bytes(), tiles = 1;
      for (auto& f : sf) block *= f[0] * f[1] * f[2];
      // The outermost tile loops become the parallel loop: their tiles must share evenly
      // among the cores (a 14-row output in tiles of 3 rows is 5 tiles: on 2 cores, one
      // idles for the last).
      for (size_t d = 0; d < sf.size(); ++d) {
        int64_t inner = sf[d][0] * sf[d][1] * sf[d][2];
        tiles *= (ax[d].extent + inner - 1) / inner;
      }
      bool fits = outer.empty() || block <= kMaxLocalBlockBytes;
      // Fused pixels in place: whole vectors, a power of two of them in a register block,
      // and where the pixels fill whole vectors, a last block of a power of two of them too
      // (see ops::whole_pixel_vectors; 196 or 49 pixels end in a narrower vector: see
      // remove_true_guards).
      int64_t e = ax[v].extent, vec = sf[v][2];
      bool whole = ops::whole_pixel_vectors(e % lanes ? vec : e, vec, lanes);
      bool even = target_.shares_evenly(tiles) && (!fuse_image || whole);
      if (!fresh || attempt == 200 || (even && (!prior || (regs >= 4 && regs <= max_regs && fits)))) break;
      tr.rewind(mark);
    }
    // Fused pixels accumulate in place: their block's whole reduction runs inside (drawn 3
    // times in 4), or the accumulators go to memory and back between its parts (512->128 at
    // 28x28: 170 GFLOP/s with the 512 channels inside, 130 in parts of 64).
    for (auto& iv : op->reduce_axis)
      rf.push_back(fuse_image ? tr.tile(iv.extent(), 1, iv.extent(), iv.extent()) : tr.tile(iv.extent(), 1, 64));
    // Inputs read along the vector axis (see blockable_inputs): copied into blocks of the
    // innermost one or two tile levels of that axis.
    std::vector<Tensor> rewritten;
    for (auto& [input, dim] : fuse_image ? std::vector<std::pair<Operation, int>>()
                                         : blockable_inputs(op, op->axis[v].var(), lanes, constants_)) {
      int64_t pick = tr.choice(3);  // 0: read in place; 1: block = S3; 2: block = S2*S3
      if (pick == 0) continue;
      int64_t block = std::min(input->shape[size_t(dim)], pick == 1 ? sf[v][2] : sf[v][1] * sf[v][2]);
      if (block < lanes) continue;  // a block narrower than a vector gains nothing
      if (constant_input(input.get(), constants_)) {
        s.rewrite_layout(Tensor(input), dim, block);
        rewritten.push_back(Tensor(input));
        continue;
      }
      std::string packed = s.pack(Tensor(input), {s.tensor(m)}, dim, block).name();
      simple_root(packed, true);
      packs.push_back({packed, m, ""});
    }
    if (!fuse_image && v + 1 != ax.size()) {  // the accumulators: whole vectors along v
      std::vector<Axis> storage;
      for (size_t d = 0; d < op->axis.size(); ++d)
        if (d != v) storage.push_back(op->axis[d].name());
      storage.push_back(op->axis[v].name());
      s[m].reorder_storage(storage);
    }
    for (size_t d = 0; d < ax.size(); ++d) sl.push_back(multi_split(s, m, ax[d].name, sf[d]));
    for (size_t r = 0; r < op->reduce_axis.size(); ++r) rl.push_back(multi_split(s, m, op->reduce_axis[r].name(), rf[r]));
    // S0 S1 R0 S2 R1 S3 (S3 in register-block order)
    std::vector<Axis> order;
    for (int l : {0, 1}) for (auto& x : sl) order.push_back(x[l]);
    for (auto& r : rl) order.push_back(r[0]);
    for (auto& x : sl) order.push_back(x[2]);
    for (auto& r : rl) order.push_back(r[1]);
    for (size_t d : register_block_order(op, ax, sf, v, lanes)) order.push_back(sl[d][3]);
    s[m].reorder(order);
    std::string pack_at = sl.back()[0];  // the innermost of the outermost tile loops
    if (!outer.empty()) {
      // The consumer follows the two outer tile levels; m is computed at level 1 or 2.
      std::vector<std::string> o0, o1, o2;
      const OperationNode* oop = s.state().stage(outer).op.get();
      for (size_t d = 0; d < oop->axis.size(); ++d) {
        auto names = multi_split(s, outer, oop->axis[d].name(), {sf[d][0], sf[d][1] * sf[d][2]});
        o0.push_back(names[0]), o1.push_back(names[1]), o2.push_back(names[2]);
      }
      std::vector<Axis> oorder;
      for (auto* lv : {&o0, &o1, &o2}) for (auto& x : *lv) oorder.push_back(x);
      s[outer].reorder(oorder);
      int64_t level = 1 + tr.choice(2);
      if (micro) level = 2;  // still drawn above, so a mutation to another form keeps its place
      std::string par = parallel_outer(outer, o0);
      prefetch_weights(outer, par, rewritten);
      std::string at = unfused(outer, level == 1 ? o0.back() : o1.back(), par);
      int64_t row = axis_extent(s, outer, o2.back());
      bool vector_row = row > 1 && row <= 64;
      if (vector_row) s[outer].vectorize(o2.back());
      s[m].compute_at(s[outer], at);
      // A block in registers, of whole vectors stored along the output's rows, is copied out
      // unrolled (see schedule_conv_nchw_strided): in a loop it goes through memory. Not a block
      // stored along another axis, whose copy out is the back end's transpose of a loop.
      int64_t vectors = row / lanes;
      for (size_t d = 0; d + 1 < o2.size(); ++d) vectors *= axis_extent(s, outer, o2[d]);
      if (level == 2 && v + 1 == ax.size() && vector_row && row % lanes == 0 && vectors <= max_regs)
        for (size_t d = 0; d + 1 < o2.size(); ++d)
          if (axis_extent(s, outer, o2[d]) > 1) s[outer].unroll(o2[d]);
    } else {
      std::vector<std::string> s0;
      for (auto& x : sl) s0.push_back(x[0]);
      std::string par = parallel_outer(m, s0);
      prefetch_weights(m, par, rewritten);
      pack_at = unfused(m, pack_at, par);
      if (fuse_image) panels.push_back({m, pack_at, sf[v][2]});
    }
    for (auto& p : packs)  // a pack of this stage may go inside its outermost tile loops
      if (p.reader == m && p.at.empty()) p.at = pack_at;
    std::string vec = sl[v][3];
    if (axis_extent(s, m, vec) > 1) s[m].vectorize(vec);
    unroll_pragma(m);
    if (micro) {
      std::vector<std::string> block;
      for (size_t d = 0; d < sl.size(); ++d)
        if (d != v) block.push_back(sl[d][3]);
      unroll_micro_kernel(s, m, block, vec, rl.empty() ? "" : rl.back()[1], lanes);
    }
  };

  // Cheap element-wise producers disappear into their consumers.
  for (auto& in : info_)
    if (in.inline_always) s[in.name].compute_inline();

  for (auto it = info_.rbegin(); it != info_.rend(); ++it) {
    const StageInfo& in = *it;
    if (in.placeholder || in.inline_always || in.fused_into_producer) continue;
    if (s.state().find_stage(in.name) < 0) continue;
    if (in.multi_level_tiling) {
      // A strided 1x1 convolution in NCHW may read a subsampled copy of its input (drawn),
      // whose pixels then fuse like a stride-1 layer's (see ops::subsample_input).
      bool subsampled = false;
      if (int64_t stride = ops::pixel_stride(s.state().stage(in.name).op.get()); stride > 1 && tr.choice(2)) {
        simple_root(ops::subsample_input(s, in.name, stride).name(), true);
        subsampled = true;
      }
      if (!in.fused_consumer.empty()) {
        tile(in.name, in.fused_consumer, false, false);
      } else if (in.output) {
        // 0: accumulate in a cache-write block, 1: in place, 2: a micro-kernel's block,
        // 3: in place over the image's pixels as one axis (offered where they fuse)
        bool fuse = subsampled || ops::image_axes_fuse(s.state().stage(in.name).op.get());
        int64_t variant = tr.choice(fuse ? 4 : 3);
        if (variant == 1 || variant == 3) {
          tile(in.name, "", false, variant == 3);
        } else {
          std::string local = s.cache_write(s.tensor(in.name), "local").name();
          tile(local, in.name, variant == 2, false);
        }
      } else {
        tile(in.name, "", false, false);
      }
      continue;
    }
    if (in.output) {
      if (in.needs_rfactor && tr.choice(2) == 1) {
        const OperationNode* op = s.state().stage(in.name).op.get();
        std::string k = op->reduce_axis[0].name();
        int64_t f = tr.tile(op->reduce_axis[0].extent(), 1, 64)[0];
        auto [ko, ki] = s[in.name].split(k, std::max<int64_t>(f, 2));
        Tensor rf = s.rfactor(s.tensor(in.name), ki);
        s[rf.name()].compute_at(s[in.name], spatial_leaves(in.name).back());
        s[rf.name()].reorder({Axis(k + ".outer"), rf.axis(0)});
        s[rf.name()].vectorize(rf.axis(0));
        continue;
      }
      simple_root(in.name, true);
      continue;
    }
    // Intermediate stage: inline (if element-wise), at the root, or inside a consumer at
    // a loop that encloses every stage reading it.
    std::vector<std::string> readers = s.state().effective_readers(in.name);
    std::vector<std::pair<std::string, std::string>> places;
    for (auto& r : readers) {
      // A constant-matrix transform goes inside no reduction's loops: all of them but the
      // reduction's own run over outputs that read the same transformed data (of 85
      // candidates with Winograd's input transform inside the products' loops, the fastest
      // ran 9x slower than the default, which computes it at the root), nor inside a vector
      // loop, whose lanes would each pick another row.
      const StageState& rs = s.state().stage(r);
      bool rows = !in.row_axes.empty();
      if (rows && !rs.op->reduce_axis.empty()) continue;
      for (auto& a : leaves(r)) {
        if (rows && rs.axes[size_t(rs.find_axis(a))].annotation == ForKind::Vectorized) continue;
        bool all_inside = true;
        for (auto& other : readers) all_inside &= runs_inside(s.state(), other, r, a);
        if (all_inside) places.emplace_back(r, a);
      }
    }
    // An element-wise producer that is not inlined (a padding copy, say) is drawn at the
    // root one time in four: computed once, in parallel and in vector lanes, rather than
    // again for every tile that reads it. The tuned ResNet-50 3x3 conv2d kernels all padded
    // per tile, at 1,200-2,400 trials each; the same kernels padding at the root ran up to
    // 4% faster (128@28, 256@14), and a plain hand-tiled kernel that pads at the root beat
    // them by 3-7% on three of the four layers.
    //
    // A mutation of the location also inlines one time in four. Samples seldom do (one
    // option among dozens of loops), yet on ResNet-50 conv 128@28 on znver4 the 22 fastest
    // of 866 measured programs inline the padding, and a cold guided search, which only
    // reaches them by mutation, stalled ~3% below the random search that drew one. The
    // cost model weeds out such mutants where inlining loses (most layers), unmeasured.
    // A stage picking rows of a constant matrix is not inlined: its consumer's loops would
    // not unroll over its rows (see take_row_loops).
    bool inlinable = !in.reduce && in.row_axes.empty();
    int64_t options = int64_t(places.size()) + 1 + (inlinable ? 1 : 0);
    std::vector<int64_t> preferred;  // the root; for a mutation, inlined too
    if (!in.reduce) {
      preferred.push_back(int64_t(places.size()));
      if (tr.redrawing()) preferred.push_back(options - 1);
    }
    int64_t pick = tr.choice(options, preferred, 0.25);
    if (inlinable && pick == options - 1) {
      s[in.name].compute_inline();
    } else if (pick == int64_t(places.size())) {
      simple_root(in.name, true);
    } else {
      s[in.name].compute_at(s[places[pick].first], places[pick].second);
      std::vector<std::string> sp = spatial_leaves(in.name);
      std::vector<std::string> rows = take_row_loops(in.name, sp);
      if (!rows.empty()) {
        std::vector<Axis> order(sp.begin(), sp.end() - 1);
        for (auto& r : rows) order.push_back(r);
        order.push_back(sp.back());
        s[in.name].reorder(order);
      }
      std::string last = sp.empty() ? "" : sp.back();
      if (!last.empty() && !in.reduce) {
        int64_t ext = axis_extent(s, in.name, last);
        if (ext > lanes) {
          auto [o, i] = s[in.name].split(last, lanes);
          s[in.name].vectorize(i);
        } else if (ext > 1) {
          s[in.name].vectorize(last);
        }
      }
    }
  }
  // Where each packed input is packed: once for the whole call (the root), or inside its
  // reader's outermost tile loops, just the part that tile reads, while it is in cache.
  // These are the walk's last decisions, so every earlier decision keeps its place in the
  // records of older logs.
  for (auto& p : packs)
    if (!p.at.empty() && tr.choice(2) == 1) s[p.packed].compute_at(s[p.reader], p.at);
  // Fused pixels read in place or from their input packed in blocks of the register block's
  // pixels, each block's panel contiguous (see ops::schedule_conv_nchw_pixels), packed at the
  // root or inside the outermost tile loops. Drawn after all the decisions above.
  for (auto& p : panels) {
    if (tr.choice(2) == 0) continue;
    Tensor input(s.state().stage(p.reader).op->inputs()[0]);
    int dims = 2, dim = int(input.shape().size()) - dims;
    std::string packed = s.pack(input, {s.tensor(p.reader)}, dim, p.block, dims).name();
    simple_root(packed, true);
    if (tr.choice(2) == 1) s[packed].compute_at(s[p.reader], p.at);
  }
  return tr.candidate(s);
}

}  // namespace tessel::autotune
