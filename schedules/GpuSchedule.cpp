// Default GPU schedules for the operator library, chosen by each stage's shape of work:
//  - stages with data reuse (GEMM, batched GEMM, convolutions in any layout) are tiled in
//    three levels: a block tile per thread block, a register tile per thread, and between
//    them the threads; the reduction is cut into chunks whose operands the block stages
//    in shared memory, fetched cooperatively (coalesced, float4 where aligned), and each
//    thread accumulates its register tile in a local buffer;
//  - reductions over long rows (softmax, layer norm) are cross-thread reductions: one
//    block per row, its threads sharing the row;
//  - everything else runs one thread per element (four where the rows allow float4),
//    with element-wise producers inlined.
#include <map>
#include <set>

#include "schedule/ScheduleState.h"
#include "schedules/Common.h"
#include "tessel/build.h"

namespace tessel::ops {
namespace {

constexpr int64_t kThreads = 256;     // per block, for element-wise stages and tiles
constexpr int64_t kRegisterTile = 16;  // outputs per thread in a tiled stage
constexpr int64_t kReduceChunk = 32;   // reduction steps per shared-memory stage

int64_t pow2_at_most(int64_t n) {
  int64_t p = 1;
  while (p * 2 <= n) p *= 2;
  return p;
}

// Stages that read each input element many times: worth staging in shared memory.
bool has_reuse(const OperationNode* op) {
  return op->reduction() && (op->tag == "matmul" || op->tag == "conv2d" || op->tag == "depthwise_conv2d");
}

// Root stage of independent elements: a thread each (a float4 each where rows allow).
// A short reduction (pooling) is a serial loop in its output's thread.
void schedule_elementwise(Schedule& s, const std::string& name) {
  Stage st = s[name];
  const OperationNode* op = op_of(s, name);
  std::vector<Axis> sp;
  for (auto& iv : op->axis) sp.push_back(iv.name());
  Axis f = sp.size() > 1 ? st.fuse(sp) : sp[0];
  int64_t total = 1;
  for (int64_t e : op->shape) total *= e;
  if (!op->reduction() && op->dtype == float32 && op->shape.back() % 4 == 0 && total >= 4 * kThreads) {
    auto [o, v] = st.split(f, 4);
    st.vectorize(v);
    f = o;
    total /= 4;
  }
  auto [b, t] = st.split(f, std::min(kThreads, total));
  st.bind(b, "blockIdx.x");
  st.bind(t, "threadIdx.x");
}

// One block per output row, its threads splitting the row's reduction.
void schedule_cross_thread(Schedule& s, const std::string& name) {
  Stage st = s[name];
  const OperationNode* op = op_of(s, name);
  std::vector<Axis> sp, red;
  for (auto& iv : op->axis) sp.push_back(iv.name());
  for (auto& iv : op->reduce_axis) red.push_back(iv.name());
  Axis r = red.size() > 1 ? st.fuse(red) : red[0];
  int64_t extent = 1;
  for (auto& iv : op->reduce_axis) extent *= iv.extent();
  auto [ro, ri] = st.split(r, std::min<int64_t>(kThreads / 2, pow2_at_most(extent)));
  Axis b = sp.size() > 1 ? st.fuse(sp) : sp[0];
  st.bind(b, "blockIdx.x");
  st.bind(ri, "threadIdx.x");
}

// Splits `extent` between threads and a register tile, round robin over the axes
// (innermost first) so that the block tile grows in every dimension and each operand is
// reused across the others.
struct Tiling {
  std::vector<int64_t> threads, regs;  // per spatial axis
};
// How large a tiled stage's tiles may be: threads per block, outputs per thread, reduction
// steps per shared-memory stage.
struct TileBudget {
  int64_t threads = kThreads, regs = kRegisterTile, chunk = kReduceChunk;
};
Tiling choose_tiling(const std::vector<int64_t>& ext, const TileBudget& budget) {
  size_t n = ext.size();
  Tiling t{std::vector<int64_t>(n, 1), std::vector<int64_t>(n, 1)};
  auto grow = [&](std::vector<int64_t>& f, int64_t budget) {
    for (bool grew = true; grew && budget > 1;) {
      grew = false;
      for (size_t k = n; k-- > 0 && budget > 1;) {
        int64_t cap = 1;  // the extent rounded up to a power of two: a tile need not divide it
        while (cap < ext[k]) cap *= 2;
        if (t.threads[k] * t.regs[k] * 2 <= cap) f[k] *= 2, budget /= 2, grew = true;
      }
    }
  };
  grow(t.threads, budget.threads);
  grow(t.regs, budget.regs);
  return t;
}

// The tiled stage with the fewest thread blocks: its blocks and outputs.
struct TiledSize {
  int64_t blocks = 0, outputs = 0;
};

// `out` is the stored result, `acc` its local accumulator (computed per thread). Keeps its
// size in `smallest` where it has fewer blocks.
void schedule_tiled(Schedule& s, const std::string& out, const std::string& acc, const TileBudget& budget,
                    TiledSize* smallest) {
  const OperationNode* op = op_of(s, out);
  const OperationNode* aop = op_of(s, acc);
  Tiling tile = choose_tiling(op->shape, budget);
  TiledSize size{1, 1};
  for (size_t k = 0; k < op->shape.size(); ++k) {
    int64_t per_block = tile.threads[k] * tile.regs[k];
    size.blocks *= (op->shape[k] + per_block - 1) / per_block, size.outputs *= op->shape[k];
  }
  if (!smallest->blocks || size.blocks < smallest->blocks) *smallest = size;
  Stage o = s[out];
  auto axes = o.leaf_axes();
  std::vector<Axis> blocks, threads, regs;
  for (size_t k = 0; k < axes.size(); ++k) {
    auto [ob, in] = o.split(axes[k], tile.threads[k] * tile.regs[k]);
    auto [ot, orr] = o.split(in, tile.regs[k]);
    blocks.push_back(ob), threads.push_back(ot), regs.push_back(orr);
  }
  std::vector<Axis> order = blocks;
  order.insert(order.end(), threads.begin(), threads.end());
  order.insert(order.end(), regs.begin(), regs.end());
  o.reorder(order);
  Axis b = o.fuse(blocks), t = o.fuse(threads);
  o.bind(b, "blockIdx.x");
  o.bind(t, "threadIdx.x");
  // The register tile is indexed by constants only once unrolled; a loop over it would put
  // the accumulators in local memory.
  for (auto& r : regs) o.unroll(r);

  Stage a = s[acc];
  a.compute_at(o, t);
  // The reduction: chunks of the first reduce axis outside, the rest of it and the other
  // reduce axes inside, then the register tile, unrolled so that it lives in registers.
  int64_t others = 1;
  for (size_t r = 1; r < aop->reduce_axis.size(); ++r) others *= aop->reduce_axis[r].extent();
  int64_t chunk = std::max<int64_t>(1, std::min(aop->reduce_axis[0].extent(), budget.chunk / others));
  auto [ro, ri] = a.split(aop->reduce_axis[0].name(), chunk);
  std::vector<Axis> aorder{ro, ri};
  for (size_t r = 1; r < aop->reduce_axis.size(); ++r) aorder.push_back(aop->reduce_axis[r].name());
  for (auto& iv : aop->axis) aorder.push_back(iv.name());
  a.reorder(aorder);
  for (auto& iv : aop->axis) a.unroll(iv.name());
  // Operands staged in shared memory per chunk, fetched by all the block's threads.
  // As many fetching threads as compute threads: a stage bound to fewer would run its
  // loop, and the barriers in it, under a condition on the thread index.
  const StageState& ost = s.state().stage(out);
  int64_t nthreads = ost.axes[ost.find_axis(t.name)].extent;
  for (auto& in : aop->inputs()) {
    Tensor sh = s.cache_read(Tensor(in), "shared", {s.tensor(acc)});
    Stage f = s[sh];
    f.compute_at(a, ro);
    auto faxes = f.leaf_axes();
    Axis fused = faxes.size() > 1 ? f.fuse(std::vector<Axis>(faxes.begin(), faxes.end())) : Axis(faxes[0]);
    if (in->shape.back() % 4 == 0 && in->dtype == float32) {
      // The last dimension of the staged tile must hold whole float4s for aligned loads.
      auto [fo, fv] = f.split(fused, 4);
      fused = fo;
      f.vectorize(fv);
    }
    auto [fo, ft] = f.split(fused, nthreads);
    f.bind(ft, "threadIdx.x");
  }
}

// `*smallest`: the tiled stage with the fewest thread blocks (0 blocks if none is tiled).
Schedule schedule_with_budget(const std::vector<Tensor>& outputs, const TileBudget& budget, TiledSize* smallest) {
  Schedule s(outputs);
  std::vector<std::string> names = s.stage_names();
  // An element-wise output over a tiled stage's space (bias, activation) keeps its tiling.
  std::map<std::string, std::string> epilogue_of;
  std::set<std::string> done;
  for (auto& name : names) {
    const StageState& st = s.state().stage(name);
    if (st.is_placeholder() || !has_reuse(st.op.get())) continue;
    auto readers = s.state().readers(name);
    if (readers.size() == 1 && s.state().is_output(readers[0]) && !s.state().is_output(name) &&
        op_of(s, readers[0])->shape == st.op->shape && !op_of(s, readers[0])->reduction())
      epilogue_of[name] = readers[0], done.insert(readers[0]);
  }
  // Element-wise producers are computed where they are read.
  for (auto& name : names) {
    const StageState& st = s.state().stage(name);
    if (st.is_placeholder() || s.state().is_output(name) || st.op->reduction()) continue;
    s[name].compute_inline();
  }
  for (auto it = names.rbegin(); it != names.rend(); ++it) {
    const std::string& name = *it;
    const StageState& st = s.state().stage(name);
    if (done.count(name) || st.is_placeholder() || st.attach == StageState::Inline) continue;
    const OperationNode* op = st.op.get();
    if (!op->reduction()) {
      schedule_elementwise(s, name);
      continue;
    }
    if (has_reuse(op)) {
      std::string out = epilogue_of.count(name) ? epilogue_of[name] : name;
      Tensor local = s.cache_write(s.tensor(name), "local");
      if (out != name) s[name].compute_inline();
      schedule_tiled(s, out, local.name(), budget, smallest);
      continue;
    }
    int64_t red = 1;
    for (auto& r : op->reduce_axis) red *= r.extent();
    if (red >= 32) schedule_cross_thread(s, name);
    else schedule_elementwise(s, name);
  }
  return s;
}

// Does the schedule fit the target (its shared-memory tiles, above all)?
bool fits(const Schedule& s, const Target& target) {
  std::vector<Tensor> args;
  for (auto& name : s.stage_names())
    if (s.state().stage(name).is_placeholder()) args.push_back(s.tensor(name));
  for (auto& t : s.outputs()) args.push_back(t);
  try {
    lower(s, args, target);
    return true;
  } catch (const Error&) {
    return false;
  }
}

}  // namespace

Schedule gpu_default_schedule(const std::vector<Tensor>& outputs, const Target& target) {
  TileBudget b;
  // Enough thread blocks for every multiprocessor: a layer of 64x56x56 outputs in tiles of
  // 4,096 has 49 blocks, and an H100 has 132 multiprocessors. Smaller tiles reuse each
  // staged operand less, so outputs per thread go first, down to 1, then threads, down to 64;
  // a stage too small to fill the device even so keeps its tiles.
  for (;;) {
    TiledSize size;
    schedule_with_budget(outputs, b, &size);
    if (size.blocks >= target.multiprocessors || size.outputs < target.multiprocessors * 64) break;
    if (b.regs > 1) b.regs /= 2;
    else if (b.threads > 64) b.threads /= 2;
    else break;
  }
  // Shared-memory stages hold a chunk of the reduction over the block's tile: halve the
  // chunk until the tiles fit, then the outputs per thread (a strided or depthwise
  // convolution's input tile grows with its output tile, not with the chunk), then the threads.
  for (;;) {
    TiledSize size;
    Schedule s = schedule_with_budget(outputs, b, &size);
    if (!size.blocks || fits(s, target)) return s;
    if (b.chunk > 1) b.chunk /= 2;
    else if (b.regs > 1) b.regs /= 2, b.chunk = kReduceChunk;
    else if (b.threads > 32) b.threads /= 2, b.chunk = kReduceChunk;
    else return s;
  }
}

}  // namespace tessel::ops
