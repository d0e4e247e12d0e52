// Random valid schedules of one computation must all give the reference answer: split
// factors (dividing or not), reorders, fuse, vectorize, unroll, parallel, pragma,
// cache_write and compute_at locations are drawn at random, 120 schedules per operator.
#include <random>

#include "reference.h"
#include "schedule/ScheduleState.h"

using namespace tessel;
using ref::Buffer;

namespace {

class Sampler {
 public:
  explicit Sampler(uint64_t seed) : rng_(seed) {}
  int pick(int n) { return std::uniform_int_distribution<int>(0, n - 1)(rng_); }
  bool coin(double p = 0.5) { return std::uniform_real_distribution<double>(0, 1)(rng_) < p; }

  int64_t extent(Schedule& s, const std::string& stage, const std::string& axis) {
    const StageState& st = s.state().stage(stage);
    return st.axes[st.find_axis(axis)].extent;
  }
  bool is_reduce(Schedule& s, const std::string& stage, const std::string& axis) {
    const StageState& st = s.state().stage(stage);
    return st.axes[st.find_axis(axis)].kind == IterKind::Reduce;
  }

  // Tile a stage at random and annotate its loops.
  void schedule_stage(Schedule& s, const std::string& name, bool allow_parallel) {
    Stage st = s[name];
    for (auto& a : st.leaf_axes()) {
      int64_t ext = extent(s, name, a);
      if (ext > 1 && coin(0.7)) {
        auto [o, i] = st.split(a, 1 + pick(int(std::min<int64_t>(ext, 20))));
        if (coin(0.3) && extent(s, name, i.name) > 2) st.split(i, 2);
      }
    }
    std::vector<std::string> leaves = st.leaf_axes();
    std::shuffle(leaves.begin(), leaves.end(), rng_);
    std::vector<Axis> order(leaves.begin(), leaves.end());
    st.reorder(order);
    // Fuse the two outermost loops if they are both spatial.
    leaves = st.leaf_axes();
    if (leaves.size() > 2 && coin(0.3) && !is_reduce(s, name, leaves[0]) && !is_reduce(s, name, leaves[1]))
      st.fuse(leaves[0], leaves[1]);
    leaves = st.leaf_axes();
    if (allow_parallel && !is_reduce(s, name, leaves[0]) && coin(0.6)) st.parallel(leaves[0]);
    std::string inner = leaves.back();
    if (leaves.size() > 1 && !is_reduce(s, name, inner) && extent(s, name, inner) <= 64 && coin(0.7))
      st.vectorize(inner);
    // Unroll a few loops, keeping the unrolled code small enough to compile quickly.
    int64_t unrolled = 1;
    for (size_t k = 1; k + 1 < leaves.size(); ++k)
      if (unrolled * extent(s, name, leaves[k]) <= 16 && coin(0.3)) {
        st.unroll(leaves[k]);
        unrolled *= extent(s, name, leaves[k]);
      }
    if (coin(0.3)) st.pragma(leaves[0], "auto_unroll_max_step", std::vector<int64_t>{0, 16, 64}[pick(3)]);
  }

  // Spatial leaf axes of a stage (compute_at candidates).
  std::vector<std::string> spatial_leaves(Schedule& s, const std::string& name) {
    std::vector<std::string> out;
    for (auto& a : s[name].leaf_axes())
      if (!is_reduce(s, name, a)) out.push_back(a);
    return out;
  }

 private:
  std::mt19937_64 rng_;
};

// Schedules the output stage (and optionally a cache-write stage computed at it).
Schedule random_schedule(Sampler& r, const std::vector<Tensor>& outputs, const std::string& out,
                         const std::vector<std::string>& producers) {
  Schedule s(outputs);
  std::string acc;
  if (r.coin(0.4)) acc = s.cache_write(s.tensor(out), "local").name();
  r.schedule_stage(s, out, true);
  if (!acc.empty()) {
    auto cand = r.spatial_leaves(s, out);
    if (r.coin(0.8) && !cand.empty()) s[acc].compute_at(s[out], cand[r.pick(int(cand.size()))]);
    r.schedule_stage(s, acc, false);
  }
  std::string reader = acc.empty() ? out : acc;
  for (auto& p : producers) {
    int choice = r.pick(3);
    if (choice == 0) {
      s[p].compute_inline();
    } else if (choice == 1) {
      auto leaves = s[reader].leaf_axes();
      s[p].compute_at(s[reader], leaves[r.pick(int(leaves.size()))]);
      r.schedule_stage(s, p, false);
    } else {
      r.schedule_stage(s, p, true);
    }
  }
  return s;
}

}  // namespace

TEST(RandomSchedules, Matmul) {
  const int64_t M = 37, N = 45, K = 23;  // nothing divides: every split with a tail is exercised
  Tensor A = placeholder({M, K}, float32, "A");
  Tensor B = placeholder({K, N}, float32, "B");
  IterVar k = reduce_axis(K, "k");
  Tensor C = compute({M, N}, [&](Var i, Var j) { return sum(A(i, k) * B(k, j), {k}); }, "C");
  Buffer a = ref::random(A.shape(), 1), b = ref::random(B.shape(), 2);
  Buffer want = ref::matmul(a, b);
  Sampler r(2024);
  for (int trial = 0; trial < 120; ++trial) {
    Schedule s = random_schedule(r, {C}, "C", {});
    if (std::getenv("TESSEL_TRACE")) std::fprintf(stderr, "%d %s\n", trial, steps_to_json(s.steps()).c_str());
    Buffer got = ref::run(s, {A, B, C}, {a, b})[0];
    ASSERT_LE(max_relative_error(got, want), 1e-4) << "schedule #" << trial << ":\n" << s.to_cpp();
    // The steps replay to the same program.
    Schedule again = Schedule::replay({C}, steps_from_json(steps_to_json(s.steps())));
    ASSERT_EQ(lower(again, {A, B, C}).str(), lower(s, {A, B, C}).str());
  }
}

TEST(RandomSchedules, WinogradConv2d) {
  // Every stage of the Winograd convolution at random: the output transform (with its column
  // transform at, inside or before it), the products, the input transform and its row transform.
  ops::Conv2dParams p{1, 1, 1, 1, 1, 1, 1};
  Tensor X = placeholder({1, 2, 7, 9, 4}, float32, "X"), W = placeholder({3, 2, 3, 3, 4, 4}, float32, "W");
  Tensor U = placeholder({6, 6, 3, 2, 4, 4}, float32, "U");
  Tensor direct = ops::conv2d_nchwc(X, W, p, "direct"), Y = ops::conv2d_winograd_nchwc(X, U, p, "conv");
  Buffer x = ref::random(X.shape(), 3), w = ref::random(W.shape(), 4);
  Buffer want = ref::run(ops::default_schedule({direct}), {X, W, direct}, {x, w})[0];
  Buffer u = ops::winograd_weights(w, 4);
  Sampler r(11);
  for (int trial = 0; trial < 24; ++trial) {  // 24: each builds five stages of unrolled sums
    Schedule s = random_schedule(r, {Y}, "conv", {"conv.columns"});
    r.schedule_stage(s, "conv.product", true);
    r.schedule_stage(s, "conv.input", true);
    if (r.coin()) {
      auto leaves = s["conv.input"].leaf_axes();
      s["conv.rows"].compute_at(s["conv.input"], leaves[size_t(r.pick(int(leaves.size())))]);
    }
    r.schedule_stage(s, "conv.rows", false);
    if (r.coin()) s["conv.pad"].compute_inline();
    Buffer got = ref::run(s, {X, U, Y}, {x, u})[0];
    ASSERT_LE(max_relative_error(got, want), 1e-4) << "schedule #" << trial << ":\n" << s.to_cpp();
  }
}

TEST(RandomSchedules, Conv2d) {
  ops::Conv2dParams p{1, 1, 1, 1, 1, 1, 1};
  Tensor X = placeholder({1, 6, 11, 11}, float32, "X");
  Tensor W = placeholder({10, 6, 3, 3}, float32, "W");
  Tensor Y = ops::conv2d_nchw(X, W, p, "conv");
  Buffer x = ref::random(X.shape(), 3), w = ref::random(W.shape(), 4);
  Buffer want = ref::conv2d_nchw(x, w, p);
  Sampler r(7);
  for (int trial = 0; trial < 120; ++trial) {
    Schedule s = random_schedule(r, {Y}, "conv", {"conv.pad"});
    Buffer got = ref::run(s, {X, W, Y}, {x, w})[0];
    ASSERT_LE(max_relative_error(got, want), 1e-4) << "schedule #" << trial << ":\n" << s.to_cpp();
  }
}

// Trial 79 of the test above: the padded window's guards partition a 38 KB loop body inside `j`,
// unrolled 10 times. Priced once rather than once per unrolled copy, the partitions made 400 KB
// of IR and 110 s of LLVM; each copy now counts against the partition budget.
TEST(RandomSchedules, PartitionsInsideAnUnrolledLoopCountOncePerCopy) {
  ops::Conv2dParams p{1, 1, 1, 1, 1, 1, 1};
  Tensor X = placeholder({1, 6, 11, 11}, float32, "X");
  Tensor W = placeholder({10, 6, 3, 3}, float32, "W");
  Tensor Y = ops::conv2d_nchw(X, W, p, "conv");
  Schedule s({Y});
  s["conv"].split("k", 3);
  s["conv"].split("l", 4);
  s["conv"].split("rc", 4);
  s["conv"].split("rc.inner", 2);
  s["conv"].split("rx", 2);
  s["conv"].reorder({"ry", "i", "k.outer", "rx.outer", "j", "rc.inner.outer", "l.inner", "rx.inner", "k.inner",
                     "l.outer", "rc.inner.inner", "rc.outer"});
  s["conv"].unroll("j");
  s["conv.pad"].compute_inline();
  EXPECT_LT(lower(s, {X, W, Y}).str().size(), 250000u);
}
