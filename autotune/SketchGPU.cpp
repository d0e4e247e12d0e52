// The GPU sketch rules (Ansor's, for CUDA-like targets), with the same Decision trace as
// the CPU's so replay, mutation and logs work unchanged:
//  - element-wise producers are inlined (a padding copy is read through by the shared
//    fetch of its consumer);
//  - stages with data reuse get multi-level tiling S S S R R S R S: block, virtual thread
//    and thread tiles in the stored stage (fused and bound), a local accumulator computed
//    at the thread level whose reduction is cut in three (R0 outside the shared fetches),
//    and each operand staged in shared memory per R0 step, fetched by all threads of the
//    block (fetch loops fused, split by the thread count, bound to threadIdx.x, the inner
//    part vectorized where drawn);
//  - reductions over long rows may be cross-thread reductions (one block per output, its
//    threads splitting the row), or a thread per output;
//  - every other stage is fused and bound to blocks and threads, vectorized where drawn;
//  - an auto-unroll depth in {0, 16, 64, 512, 1024} on the tiled stages.
// Tile sizes need not divide the extents. Fresh draws keep threads, virtual threads and
// the register tile within bounds a GPU runs well; mutations may leave them, and the
// lowering then rejects what breaks the target's limits.
#include <algorithm>

#include "autotune/Tracer.h"

namespace tessel::autotune {
namespace {

const std::vector<int64_t> kGpuUnrollSteps = {0, 16, 64, 512, 1024};
const std::vector<int64_t> kThreadOptions = {32, 64, 128, 256, 512, 1024};
constexpr int64_t kMaxRegisterTile = 64;  // accumulators per thread, fresh draws
constexpr int64_t kMinThreads = 32;       // a warp
// Fresh draws per axis: vthread, thread, S3, S4; and the reduction's R1, R2.
const std::vector<int64_t> kSpatialCaps = {4, 64, 8, 8}, kReduceCaps = {16, 8};

int64_t product(const std::vector<int64_t>& v) {
  int64_t p = 1;
  for (int64_t x : v) p *= x;
  return p;
}

}  // namespace

// Whether fresh tile sizes suit a GPU: threads within the block limit and at least a warp
// (unless the whole stage is smaller), virtual threads within theirs, a register tile of
// at most kMaxRegisterTile accumulators, and shared tiles (each operand's block tile by the
// reduction step, over the axes that index it) within the static shared memory.
bool SearchSpace::fits_gpu(const OperationNode* op, const std::vector<std::vector<int64_t>>& sf,
                           const std::vector<std::vector<int64_t>>& rf) const {
  int64_t threads = 1, vthreads = 1, regs = 1, total = 1;
  for (size_t d = 0; d < sf.size(); ++d)
    threads *= sf[d][1], vthreads *= sf[d][0], regs *= sf[d][0] * sf[d][2] * sf[d][3], total *= op->axis[d].extent();
  if (threads > target_.max_threads_per_block || vthreads > target_.max_vthread || regs > kMaxRegisterTile ||
      (threads < kMinThreads && threads * regs < total))
    return false;
  int64_t shared = 0;
  for (auto& input : op->inputs()) {
    auto used = index_vars(op->body, input.get());
    int64_t elems = 1;
    for (size_t d = 0; d < sf.size(); ++d)
      if (used.count(op->axis[d].var().get())) elems *= product(sf[d]);
    for (size_t r = 0; r < rf.size(); ++r)
      if (used.count(op->reduce_axis[r].var().get())) elems *= product(rf[r]);
    shared += elems * input->dtype.bytes();
  }
  return shared <= target_.max_shared_memory_per_block;
}

Candidate SearchSpace::generate_gpu(Tracer& tr) const {
  Schedule s(w_.outputs);
  const Target& target = target_;
  auto fuse_all = [&](const std::string& st, const std::vector<std::string>& axes) {
    std::vector<Axis> a(axes.begin(), axes.end());
    return a.size() > 1 ? s[st].fuse(a) : a[0];
  };
  auto spatial_axes = [&](const std::string& st) {
    std::vector<std::string> out;
    for (auto& iv : s.state().stage(st).op->axis) out.push_back(iv.name());
    return out;
  };
  // A fused loop of `total` iterations as blocks of threads, its innermost `vec` in lanes.
  auto bind_threads = [&](const std::string& st, Axis fused, int64_t total, bool allow_vector) {
    int64_t vec = 1;
    if (allow_vector) {
      vec = std::vector<int64_t>{1, 2, 4}[tr.choice(3, {2}, 0.5)];
      if (total % vec != 0 || total / vec < kMinThreads) vec = 1;
    }
    if (vec > 1) {
      auto [o, v] = s[st].split(fused, vec);
      s[st].vectorize(v);
      fused = o;
      total /= vec;
    }
    int64_t threads = std::min(total, kThreadOptions[tr.choice(int64_t(kThreadOptions.size()), {2}, 0.3)]);
    auto [b, t] = s[st].split(fused, std::max<int64_t>(threads, 1));
    s[st].bind(b, "blockIdx.x");
    s[st].bind(t, "threadIdx.x");
  };
  auto unroll_pragma = [&](const std::string& st, const std::string& axis) {
    int64_t v = kGpuUnrollSteps[tr.choice(int64_t(kGpuUnrollSteps.size()))];
    if (v > 0) s[st].pragma(axis, "auto_unroll_max_step", v);
  };

  // `m` is the tiled stage (a reduction with reuse), `out` the stage that stores the tiles:
  // `m` itself, or an element-wise consumer fused with it.
  auto tile = [&](const std::string& m, const std::string& out) {
    std::string local = s.cache_write(s.tensor(m), "local").name();
    if (out != m) s[m].compute_inline();
    const OperationNode* op = s.state().stage(local).op.get();
    size_t n = op->axis.size();
    // Spatial factors per axis, outer to inner: vthread, thread, S3, S4 (the block implied);
    // reduction factors R1, R2 (R0 implied).
    std::vector<std::vector<int64_t>> sf, rf;
    size_t mark = tr.out.size();
    bool prior = !tr.replaying();
    for (int attempt = 0;; ++attempt) {
      sf.clear(), rf.clear();
      for (size_t d = 0; d < n; ++d) sf.push_back(tr.tile(op->axis[d].extent(), 4, 8, 0, kSpatialCaps));
      for (auto& iv : op->reduce_axis) rf.push_back(tr.tile(iv.extent(), 2, 8, 0, kReduceCaps));
      if (!prior || attempt == 100 || fits_gpu(op, sf, rf)) break;
      tr.rewind(mark);
    }

    // The stored stage: block / vthread / thread / register levels, each level fused.
    std::vector<Axis> blocks, vthreads, threads, regs;
    std::vector<std::string> out_axes = spatial_axes(out);
    for (size_t d = 0; d < n; ++d) {
      auto names = multi_split(s, out, out_axes[d], {sf[d][0], sf[d][1], sf[d][2] * sf[d][3]});
      blocks.push_back(names[0]), vthreads.push_back(names[1]), threads.push_back(names[2]), regs.push_back(names[3]);
    }
    std::vector<Axis> order;
    for (auto* level : {&blocks, &vthreads, &threads, &regs}) order.insert(order.end(), level->begin(), level->end());
    s[out].reorder(order);
    Axis b = s[out].fuse(blocks), v = s[out].fuse(vthreads), t = s[out].fuse(threads);
    s[out].bind(b, "blockIdx.x");
    if (axis_extent(s, out, v.name) > 1) s[out].bind(v, "vthread");
    s[out].bind(t, "threadIdx.x");
    s[local].compute_at(s[out], t);

    // The accumulator: R0 R1 S3 R2 S4.
    std::vector<std::vector<std::string>> sl, rl;
    for (size_t d = 0; d < n; ++d) sl.push_back(multi_split(s, local, op->axis[d].name(), {sf[d][3]}));
    for (size_t r = 0; r < rf.size(); ++r) rl.push_back(multi_split(s, local, op->reduce_axis[r].name(), rf[r]));
    std::vector<Axis> lorder;
    for (int l : {0, 1}) for (auto& x : rl) lorder.push_back(x[l]);
    for (auto& x : sl) lorder.push_back(x[0]);
    for (auto& x : rl) lorder.push_back(x[2]);
    for (auto& x : sl) lorder.push_back(x[1]);
    s[local].reorder(lorder);
    unroll_pragma(local, lorder[0].name);

    // Operands in shared memory per R0 step, fetched by all the block's threads (as many
    // as compute: fewer would put the fetch loop's barriers under a thread condition).
    if (rl.empty()) return;
    int64_t nthreads = axis_extent(s, out, t.name);
    std::string r0 = rl.back()[0];
    for (auto& in : op->inputs()) {
      std::string sh = s.cache_read(Tensor(in), "shared", {s.tensor(local)}).name();
      s[sh].compute_at(s[local], r0);
      Axis fused = fuse_all(sh, s[sh].leaf_axes());
      int64_t vec = std::vector<int64_t>{1, 2, 4}[tr.choice(3, {2}, 0.5)];
      if (vec > 1 && in->shape.back() % vec == 0) {
        auto [fo, fv] = s[sh].split(fused, vec);
        s[sh].vectorize(fv);
        fused = fo;
      }
      auto [fo, ft] = s[sh].split(fused, nthreads);
      s[sh].bind(ft, "threadIdx.x");
    }
  };

  // Element-wise producers are computed where they are read.
  for (auto& in : info_)
    if (!in.placeholder && !in.output && !in.reduce) s[in.name].compute_inline();

  for (auto it = info_.rbegin(); it != info_.rend(); ++it) {
    const StageInfo& in = *it;
    if (in.placeholder || in.fused_into_producer) continue;
    const StageState& st = s.state().stage(in.name);
    if (st.attach == StageState::Inline) continue;
    if (in.multi_level_tiling) {
      tile(in.name, in.fused_consumer.empty() ? in.name : in.fused_consumer);
      continue;
    }
    const OperationNode* op = st.op.get();
    int64_t space = 1, red = 1;
    for (auto& iv : op->axis) space *= iv.extent();
    for (auto& iv : op->reduce_axis) red *= iv.extent();
    if (in.reduce && red >= 32 && tr.choice(2, {0}, space < 16 * target.multiprocessors ? 0.9 : 0.5) == 0) {
      // Cross-thread: one block per output, its threads splitting the (fused) reduction.
      std::vector<std::string> rnames;
      for (auto& iv : op->reduce_axis) rnames.push_back(iv.name());
      Axis r = fuse_all(in.name, rnames);
      int64_t cap = 1;
      while (cap * 2 <= std::min<int64_t>(red, 1024)) cap *= 2;
      int64_t threads = std::min(cap, std::vector<int64_t>{32, 64, 128, 256, 512}[tr.choice(5, {2}, 0.3)]);
      auto [ro, ri] = s[in.name].split(r, threads);
      s[in.name].bind(fuse_all(in.name, spatial_axes(in.name)), "blockIdx.x");
      s[in.name].bind(ri, "threadIdx.x");
      continue;
    }
    // A thread (or a vector) per output; a reduction runs serially in its thread.
    bool vector_ok = !in.reduce && op->shape.back() % 2 == 0;
    bind_threads(in.name, fuse_all(in.name, spatial_axes(in.name)), space, vector_ok);
  }
  return tr.candidate(s);
}

}  // namespace tessel::autotune
