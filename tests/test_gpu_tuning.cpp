// GPU tuning: sampled and mutated GPU candidates of the library's operators lower and pass
// the target's limits, or are rejected with the reason; those that pass run correctly as
// OpenCL on PoCL, and their CUDA twins compile.
#include <random>
#include <set>

#include "autotune/CostModel.h"
#include "autotune/Features.h"
#include "autotune/Records.h"
#include "autotune/SearchSpace.h"
#include "codegen/CodeGenC.h"
#include "codegen/NVRTC.h"
#include "passes/Lower.h"
#include "runtime/CUDA.h"
#include "reference.h"

using namespace tessel;
using namespace tessel::autotune;

namespace {

struct Case {
  const char* op;
  std::map<std::string, int64_t> shape;
};

// Odd and prime extents: tiles that do not divide, guarded tails.
const std::vector<Case> kCases = {
    {"matmul", {{"M", 45}, {"N", 38}, {"K", 52}}},
    {"dense", {{"M", 7}, {"N", 33}, {"K", 40}}},
    {"conv2d", {{"C", 6}, {"H", 11}, {"W", 11}, {"K", 10}, {"R", 3}, {"S", 3}, {"pad", 1}}},
    {"conv2d_nhwc", {{"C", 6}, {"H", 9}, {"W", 9}, {"K", 12}, {"R", 3}, {"S", 3}, {"pad", 1}, {"stride", 2}}},
    {"depthwise_conv2d", {{"C", 7}, {"H", 13}, {"W", 13}, {"R", 3}, {"S", 3}, {"pad", 1}}},
    {"softmax", {{"rows", 5}, {"cols", 301}}},
    {"layer_norm", {{"rows", 11}, {"cols", 257}}},
};

std::vector<Buffer> outputs_of(const Workload& w, const std::vector<Step>& steps, const BuildOptions& opts,
                               const std::vector<Buffer>& inputs) {
  return ref::run(Schedule::replay(w.outputs, steps), w.args, inputs, opts);
}

}  // namespace

TEST(GpuTuning, SampledAndMutatedCandidatesAreValidOrRejectedAndTheValidOnesAreRight) {
  Target cl = Target::parse("opencl");
  bool nvrtc = nvrtc_available();
  for (const Case& c : kCases) {
    SCOPED_TRACE(c.op);
    Workload w = make_workload(c.op, c.shape);
    SearchSpace space(w, cl);
    std::mt19937_64 rng(7);
    std::vector<Buffer> inputs;
    for (size_t i = 0; i + w.outputs.size() < w.args.size(); ++i)
      inputs.push_back(ref::random(w.args[i].shape(), 20 + i, w.args[i].dtype()));
    auto want = outputs_of(w, ops::default_schedule(w.outputs).steps(), {}, inputs);
    int valid = 0, rejected = 0, ran = 0;
    std::vector<Candidate> pool;
    for (int i = 0; i < 24; ++i) pool.push_back(space.sample(rng));
    for (int i = 0; i < 24; ++i) pool.push_back(space.mutate(pool[size_t(i)], rng));
    for (auto& cand : pool) {
      // Replay gives the same program.
      EXPECT_EQ(space.replay(cand.decisions, rng).key, cand.key);
      LoweredProgram prog;
      try {
        prog = lower_program(Schedule::replay(w.outputs, cand.steps), w.args, "k", cl, {});
      } catch (const Error& e) {
        ++rejected;
        EXPECT_FALSE(std::string(e.what()).empty());
        continue;
      }
      ++valid;
      EXPECT_EQ(candidate_features(prog, cl).size(), size_t(kProgramFeatures + kGpuFeatures));
      if (ran >= 6) continue;  // PoCL compiles each kernel: a few per operator
      ++ran;
      auto got = outputs_of(w, cand.steps, {.target = cl}, inputs);
      for (size_t o = 0; o < got.size(); ++o) ref::expect_close(got[o], want[o], 1e-3);
      if (nvrtc && ran <= 2) {
        Target cuda = Target::parse("cuda -arch=sm_90");
        auto cuda_prog = lower_program(Schedule::replay(w.outputs, cand.steps), w.args, "k", cuda, {});
        CudaBinary bin = nvrtc_compile(codegen_c(cuda_prog, cuda), "sm_90");
        EXPECT_FALSE(bin.cubin.empty());
      }
    }
    EXPECT_GE(valid, 16) << rejected << " rejected";
  }
}

TEST(GpuTuning, ACostModelRefusesAnotherTargetKind) {
  std::vector<std::vector<float>> rows;
  std::vector<float> labels;
  for (int i = 0; i < 40; ++i) {
    rows.push_back(std::vector<float>(kProgramFeatures + kGpuFeatures, float(i)));
    labels.push_back(i / 40.f);
  }
  CostModel gpu(1, "cuda");
  gpu.train(rows, labels);
  std::string path = std::string(TESSEL_TEST_TMP) + "/cuda_model.json";
  gpu.save(path);
  CostModel again(1, "cuda");
  again.load(path);
  EXPECT_TRUE(again.trained());
  CostModel cpu(1, "llvm");
  ref::expect_error([&] { cpu.load(path); }, {"trained for cuda targets; this run tunes for llvm"});
}

namespace {

std::string tmp_path(const std::string& name) {
  std::string p = std::string(TESSEL_TEST_TMP) + "/" + name;
  std::remove(p.c_str());
  return p;
}

TuneOptions opencl_options(int trials, const std::string& log) {
  TuneOptions o;
  o.target = Target::parse("opencl");
  o.trials = trials;
  o.per_round = 4;
  o.population = 24;
  o.generations = 1;
  o.repeat = 1;
  o.min_repeat_ms = 1;
  o.remeasure_top = 1;
  o.timeout = 20;
  o.log = log;
  return o;
}

}  // namespace

// The whole loop on the local OpenCL device (PoCL here: CPU figures): search, model,
// tessel-runner, log, resume without re-measuring, and the lookup.
TEST(GpuTuning, OpenCLTuningRunsEndToEndThroughTheRunnerAndResumes) {
  Workload w = make_workload("matmul", parse_shape("M=40,N=36,K=24"));
  std::string log = tmp_path("opencl_tune.json");
  TuneOptions o = opencl_options(8, log);
  TaskResult r = tune(w, o);
  EXPECT_EQ(r.trials, 8);
  EXPECT_FALSE(r.estimated);
  EXPECT_FALSE(r.device.empty());
  EXPECT_GT(r.best_gflops, 0);
  std::vector<Record> first = read_log(log);
  ASSERT_GE(first.size(), 8u);
  EXPECT_EQ(first[0].target_key, "opencl/" + r.device);
  for (auto& rec : first) EXPECT_FALSE(rec.estimate);
  // Resumed with a larger budget: the recorded candidates are not measured again.
  o.trials = 12;
  o.resume = true;
  TaskResult again = tune(w, o);
  EXPECT_EQ(again.trials, 12);
  std::set<std::string> keys;
  for (auto& rec : read_log(log))
    if (rec.message != kRemeasuredMessage && rec.error != ErrorCode::Invalid)
      EXPECT_TRUE(keys.insert(steps_to_json(rec.steps)).second) << "measured twice";
  Target device = Target::parse("opencl");
  device.device = r.device;
  auto best = best_schedule(log, w, device);
  ASSERT_TRUE(best.has_value());
  EXPECT_FALSE(best->estimate);
  auto got = ref::run(Schedule::replay(w.outputs, best->steps), w.args,
                      {ref::random(w.args[0].shape(), 1), ref::random(w.args[1].shape(), 2)}, {.target = device});
  auto want = ref::run(ops::default_schedule(w.outputs), w.args,
                       {ref::random(w.args[0].shape(), 1), ref::random(w.args[1].shape(), 2)});
  ref::expect_close(got[0], want[0], 1e-3);
}

// A runner killed mid-batch (a planted crash, as a faulting kernel takes it down) and one
// that hangs are restarted; their candidates are recorded as errors and tuning goes on.
TEST(GpuTuning, AKilledOrHungRunnerIsRestartedAndItsCandidateRecorded) {
  Workload w = make_workload("matmul", parse_shape("M=32,N=32,K=32"));
  TuneOptions o = opencl_options(8, tmp_path("opencl_faults.json"));
  o.plant_crash_at = 1;
  o.plant_hang_at = 2;
  o.timeout = 4;
  TaskResult r = tune(w, o);
  EXPECT_EQ(r.trials, 8);
  EXPECT_GE(r.errors, 2);
  EXPECT_GT(r.best_gflops, 0);
  bool crash = false, hang = false;
  for (auto& rec : read_log(o.log)) {
    crash |= rec.error == ErrorCode::Runtime && rec.message.find("the runner stopped") != std::string::npos &&
             rec.message.find("signal 11") != std::string::npos;
    hang |= rec.error == ErrorCode::RunTimeout && rec.message.find("runner was restarted") != std::string::npos;
  }
  EXPECT_TRUE(crash);
  EXPECT_TRUE(hang);
}

// With no GPU anywhere, a CUDA tuning compiles and checks every candidate, estimates its
// time and says so in every record; a measured record of the workload beats any estimate.
TEST(GpuTuning, CudaWithoutAGpuEstimatesAndSaysSo) {
  if (!nvrtc_available()) GTEST_SKIP() << "NVRTC (libnvrtc.so) is not installed";
  if (!cuda_device_name().empty()) GTEST_SKIP() << "a CUDA device is present";
  Workload w = make_workload("matmul", parse_shape("M=64,N=64,K=64"));
  TuneOptions o = opencl_options(8, tmp_path("cuda_estimates.json"));
  o.target = Target::parse("cuda -arch=sm_90");
  TaskResult r = tune(w, o);
  EXPECT_TRUE(r.estimated);
  EXPECT_EQ(r.trials, 8);
  std::vector<Record> recs = read_log(o.log);
  ASSERT_GE(recs.size(), 8u);
  for (auto& rec : recs) {
    EXPECT_EQ(rec.target_key, "cuda/sm_90");
    if (rec.ok()) EXPECT_TRUE(rec.estimate);
  }
  auto best = best_schedule(o.log, w, o.target);
  ASSERT_TRUE(best.has_value());
  EXPECT_TRUE(best->estimate);
  // A measurement of the same workload on an sm_90 device, even a slow one, comes first.
  Record measured = recs.back();
  measured.target_key = "cuda/sm_90/NVIDIA H100 80GB HBM3";
  measured.estimate = false;
  measured.costs = {1.0};
  measured.error = ErrorCode::None;
  {
    LogWriter out(o.log);
    out.append(measured);
  }
  Target h100 = o.target;
  h100.device = "NVIDIA H100 80GB HBM3";
  for (const Target& t : {o.target, h100}) {
    auto b = best_schedule(o.log, w, t, /*stand_in=*/true);
    ASSERT_TRUE(b.has_value());
    EXPECT_FALSE(b->estimate);
    EXPECT_EQ(b->seconds, 1.0);
  }
}

// Where a CUDA device exists, a CUDA tuning measures every candidate on it through the
// runner, keys its records by the device, and the best replays to the right answer there.
TEST(GpuTuning, CudaOnADeviceMeasures) {
  std::vector<Target> targets = ref::gpu_run_targets();
  if (targets.back().kind != Target::Kind::CUDA) GTEST_SKIP() << "no CUDA device: " << cuda_unavailable_reason();
  Workload w = make_workload("matmul", parse_shape("M=96,N=80,K=64"));
  TuneOptions o = opencl_options(12, tmp_path("cuda_measured.json"));
  o.target = targets.back();
  TaskResult r = tune(w, o);
  EXPECT_FALSE(r.estimated);
  EXPECT_EQ(r.trials, 12);
  EXPECT_GT(r.best_gflops, 0);
  std::vector<Record> recs = read_log(o.log);
  ASSERT_GE(recs.size(), 12u);
  for (auto& rec : recs) {
    EXPECT_EQ(rec.target_key.rfind(o.target.key() + "/", 0), 0u) << rec.target_key;
    EXPECT_FALSE(rec.estimate);
  }
  Target device = o.target;
  device.device = r.device;
  auto best = best_schedule(o.log, w, device);
  ASSERT_TRUE(best.has_value());
  EXPECT_FALSE(best->estimate);
  std::vector<Buffer> in{ref::random(w.args[0].shape(), 1), ref::random(w.args[1].shape(), 2)};
  auto got = ref::run(Schedule::replay(w.outputs, best->steps), w.args, in, {.target = device});
  auto want = ref::run(ops::default_schedule(w.outputs), w.args, in);
  ref::expect_close(got[0], want[0], 1e-3);
}

TEST(GpuTuning, TheRunnerLinksNeitherLLVMNorXGBoost) {
  std::string cmd = std::string("ldd '") + TESSEL_RUNNER_BINARY + "' 2>&1";
  std::FILE* p = popen(cmd.c_str(), "r");
  ASSERT_TRUE(p);
  std::string out;
  char buf[512];
  while (std::fgets(buf, sizeof buf, p)) out += buf;
  pclose(p);
  EXPECT_NE(out.find("libc.so"), std::string::npos) << out;
  EXPECT_EQ(out.find("LLVM"), std::string::npos) << out;
  EXPECT_EQ(out.find("xgboost"), std::string::npos) << out;
}
