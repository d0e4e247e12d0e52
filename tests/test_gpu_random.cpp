// Random valid GPU schedules of one computation must all give the reference answer: block,
// vthread, thread and register tiles (dividing or not), local accumulators, shared-memory
// stages fetched by all threads (vectorized or not), unrolling, drawn at random; each runs
// as OpenCL on PoCL and its CUDA twin compiles for sm_90 (and runs, where a CUDA device exists).
#include <random>

#include "codegen/NVRTC.h"
#include "reference.h"
#include "schedule/ScheduleState.h"

using namespace tessel;
using ref::Buffer;

namespace {

class GpuSampler {
 public:
  explicit GpuSampler(uint64_t seed) : rng_(seed) {}
  int pick(int n) { return std::uniform_int_distribution<int>(0, n - 1)(rng_); }
  bool coin(double p = 0.5) { return std::uniform_real_distribution<double>(0, 1)(rng_) < p; }

  // Schedules `out`, a reduction with reuse of its inputs.
  Schedule sample(const Tensor& out) {
    Schedule s({out});
    for (auto& name : s.stage_names()) {  // element-wise producers (the padding) inlined
      const StageState& st = s.state().stage(name);
      if (!st.is_placeholder() && !s.state().is_output(name)) s[name].compute_inline();
    }
    bool cache = coin(0.85);
    std::string acc = cache ? s.cache_write(out, "local").name() : out.name();
    Stage o = s[out];
    const OperationNode* op = s.state().stage(out.name()).op.get();
    std::vector<Axis> blocks, vthreads, threads, regs;
    int64_t budget_threads = 256, budget_v = 8;
    for (auto& iv : op->axis) {
      int64_t t = std::min<int64_t>(budget_threads, int64_t(1) << pick(5));
      int64_t v = budget_v > 1 && coin(0.2) ? 2 : 1;
      int64_t r = 1 + pick(4);
      budget_threads /= t, budget_v /= v;
      auto [ob, in] = o.split(iv.name(), v * t * r);
      auto [ov, in2] = o.split(in, t * r);
      auto [ot, orr] = o.split(in2, r);
      blocks.push_back(ob), vthreads.push_back(ov), threads.push_back(ot), regs.push_back(orr);
    }
    std::vector<Axis> order = blocks;
    for (auto* level : {&vthreads, &threads, &regs}) order.insert(order.end(), level->begin(), level->end());
    if (!cache)
      for (auto& r : op->reduce_axis) order.push_back(r.name());
    o.reorder(order);
    Axis b = o.fuse(blocks), v = o.fuse(vthreads), t = o.fuse(threads);
    o.bind(b, "blockIdx.x");
    if (extent(s, out.name(), v) > 1) o.bind(v, "vthread");
    o.bind(t, "threadIdx.x");
    if (!cache) return s;

    Stage a = s[acc];
    a.compute_at(o, t);
    const OperationNode* aop = s.state().stage(acc).op.get();
    auto [ro, ri] = a.split(aop->reduce_axis[0].name(), 1 + pick(16));
    std::vector<Axis> aorder{ro, ri};
    for (size_t r = 1; r < aop->reduce_axis.size(); ++r) aorder.push_back(aop->reduce_axis[r].name());
    for (auto& iv : aop->axis) aorder.push_back(iv.name());
    a.reorder(aorder);
    if (coin()) for (auto& iv : aop->axis) a.unroll(iv.name());
    if (coin(0.3)) a.pragma(ro, "auto_unroll_max_step", coin() ? 16 : 64);
    int64_t nthreads = extent(s, out.name(), t);
    for (auto& in : aop->inputs()) {
      if (!coin(0.7)) continue;
      Tensor sh = s.cache_read(Tensor(in), "shared", {s.tensor(acc)});
      Stage f = s[sh];
      f.compute_at(a, ro);
      auto axes = f.leaf_axes();
      Axis fused = f.fuse(std::vector<Axis>(axes.begin(), axes.end()));
      if (coin(0.4)) {
        auto [fo, fv] = f.split(fused, coin() ? 2 : 4);
        f.vectorize(fv);
        fused = fo;
      }
      auto [fo, ft] = f.split(fused, nthreads);
      f.bind(ft, "threadIdx.x");
    }
    return s;
  }

 private:
  static int64_t extent(Schedule& s, const std::string& stage, const Axis& a) {
    const StageState& st = s.state().stage(stage);
    return st.axes[st.find_axis(a.name)].extent;
  }
  std::mt19937_64 rng_;
};

void run_random(const std::vector<Tensor>& ins, const Tensor& out, int count, uint64_t seed) {
  std::vector<Tensor> args = ins;
  args.push_back(out);
  std::vector<Buffer> inputs;
  for (size_t i = 0; i < ins.size(); ++i) inputs.push_back(ref::random(ins[i].shape(), 7 + i));
  Buffer want = ref::run(ops::default_schedule({out}), args, inputs)[0];
  GpuSampler sampler(seed);
  const Target cuda = Target::parse("cuda -arch=sm_90");
  std::vector<Target> targets = ref::gpu_run_targets();
  bool compile_only = nvrtc_available() && targets.back().kind != Target::Kind::CUDA;
  for (int n = 0; n < count; ++n) {
    Schedule s = sampler.sample(out);
    // Every target's error, so a failure says where the schedule goes wrong.
    std::string errors, source;
    bool wrong = false;
    for (const Target& t : targets) {
      Module m = build(s, args, {.target = t});
      Buffer got(out.shape(), out.dtype());
      std::vector<Buffer> all = inputs;
      all.push_back(got);
      m(all);
      double e = max_relative_error(got, want);
      errors += t.str() + ": " + std::to_string(e) + "\n";
      if (e > 1e-4 && !wrong) wrong = true, source = m.source();
    }
    ASSERT_FALSE(wrong) << "schedule " << n << ", largest relative errors:\n" << errors << s.to_cpp() << source;
    if (compile_only) ASSERT_NO_THROW(build(s, args, {.target = cuda})) << s.to_cpp();
  }
}

TEST(GpuRandomSchedules, Matmul) {
  Tensor A = placeholder({45, 38}, float32, "A"), B = placeholder({38, 52}, float32, "B");
  run_random({A, B}, ops::matmul(A, B), 150, 11);
}

TEST(GpuRandomSchedules, Conv2d) {
  Tensor X = placeholder({1, 6, 10, 9}, float32, "X"), W = placeholder({8, 6, 3, 3}, float32, "W");
  run_random({X, W}, ops::conv2d_nchw(X, W, {.pad_h = 1, .pad_w = 1}), 100, 12);
}

}  // namespace
