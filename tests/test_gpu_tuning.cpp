// GPU tuning: sampled and mutated GPU candidates of the library's operators lower and pass
// the target's limits, or are rejected with the reason; those that pass run correctly as
// OpenCL on PoCL, and their CUDA twins compile.
#include <random>

#include "autotune/CostModel.h"
#include "autotune/Features.h"
#include "autotune/SearchSpace.h"
#include "codegen/CodeGenC.h"
#include "codegen/NVRTC.h"
#include "passes/Lower.h"
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
