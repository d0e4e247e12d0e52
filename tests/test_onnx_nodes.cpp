// The ONNX backend node tests that Debian ships (libonnx-testdata) for every operator Tessel
// implements: each model is loaded, compiled, run on its inputs and compared with its
// expected outputs at the tolerance ONNX's own runner uses (rtol 1e-3, atol 1e-7). Tests of
// other operators are not counted; the ones skipped are listed with the reason.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include <onnx/onnx_pb.h>

#include "tessel/graph.h"

using namespace tessel;
namespace fs = std::filesystem;

namespace {

const char* kNodeTests = "/usr/share/libonnx-testdata/data/node";

// Tests of implemented operators that ask for something Tessel does not do, and why.
const std::map<std::string, std::string> kSkipped = {
    {"test_cast_FLOAT_to_STRING", "strings are not numbers Tessel computes with"},
    {"test_cast_STRING_to_FLOAT", "strings are not numbers Tessel computes with"},
    {"test_castlike_FLOAT_to_STRING_expanded", "strings are not numbers Tessel computes with"},
    {"test_castlike_STRING_to_FLOAT_expanded", "strings are not numbers Tessel computes with"},
    {"test_cast_BFLOAT16_to_FLOAT", "bfloat16 is not a Tessel type"},
    {"test_cast_FLOAT_to_BFLOAT16", "bfloat16 is not a Tessel type"},
    {"test_castlike_BFLOAT16_to_FLOAT_expanded", "bfloat16 is not a Tessel type"},
    {"test_castlike_FLOAT_to_BFLOAT16_expanded", "bfloat16 is not a Tessel type"},
    {"test_identity_sequence", "sequences are not tensors"},
    {"test_identity_opt", "optional values are not tensors"},
    {"test_batchnorm_epsilon_training_mode", "training mode (batch statistics); Tessel compiles for inference"},
    {"test_batchnorm_example_training_mode", "training mode (batch statistics); Tessel compiles for inference"},
    {"test_training_dropout", "training-mode dropout is random"},
    {"test_training_dropout_default", "training-mode dropout is random"},
    {"test_training_dropout_default_mask", "training-mode dropout is random"},
    {"test_training_dropout_mask", "training-mode dropout is random"},
    {"test_training_dropout_zero_ratio", "training mode with its ratio a run-time input (Tessel must know it is 0)"},
    {"test_training_dropout_zero_ratio_mask",
     "training mode with its ratio a run-time input (Tessel must know it is 0)"},
    {"test_maxpool_with_argmax_2d_precomputed_pads", "MaxPool's Indices output"},
    {"test_maxpool_with_argmax_2d_precomputed_strides", "MaxPool's Indices output"},
};

struct ModelInfo {
  std::set<std::string> ops;
  std::vector<std::string> inputs;  // graph inputs that are not initializers, in order
};

ModelInfo model_info(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  onnx::ModelProto m;
  ModelInfo info;
  if (!m.ParseFromString(ss.str())) return info;
  std::set<std::string> init;
  for (const auto& t : m.graph().initializer()) init.insert(t.name());
  for (const auto& n : m.graph().node()) info.ops.insert(n.op_type());
  for (const auto& i : m.graph().input())
    if (!init.count(i.name())) info.inputs.push_back(i.name());
  return info;
}

// The input or output files of a test data set, in order.
std::vector<std::string> data_files(const fs::path& dir, const std::string& prefix) {
  std::vector<std::string> out;
  for (int k = 0; fs::exists(dir / (prefix + std::to_string(k) + ".pb")); ++k)
    out.push_back((dir / (prefix + std::to_string(k) + ".pb")).string());
  return out;
}

// Empty when `got` matches `want`; otherwise what differs.
std::string compare(const Buffer& got, const Buffer& want) {
  if (got.dtype() != want.dtype() || got.shape() != want.shape())
    return "got " + got.describe() + ", expected " + want.describe();
  for (int64_t k = 0; k < got.size(); ++k) {
    double g = got.get(k), w = want.get(k);
    bool same = (std::isnan(g) && std::isnan(w)) || g == w || std::abs(g - w) <= 1e-7 + 1e-3 * std::abs(w);
    if (!same)
      return "element " + std::to_string(k) + " is " + std::to_string(g) + ", expected " + std::to_string(w);
  }
  return "";
}

// Runs one backend test, fused or node by node; an empty string when every data set matched.
std::string run_node_test(const fs::path& dir, const ModelInfo& info, bool fuse) {
  std::vector<fs::path> sets;
  for (auto& e : fs::directory_iterator(dir))
    if (e.is_directory()) sets.push_back(e.path());
  std::sort(sets.begin(), sets.end());
  for (const fs::path& set : sets) {
    std::vector<std::string> in_files = data_files(set, "input_"), out_files = data_files(set, "output_");
    if (in_files.size() != info.inputs.size()) return "the data set's inputs do not match the model's";
    // Shapes, axes, indices (int64 inputs) and flags (bool) are compile-time facts to Tessel:
    // bound as constants, the way a model carries them as initializers.
    std::map<std::string, Buffer> bind;
    std::vector<Buffer> inputs;
    for (size_t k = 0; k < in_files.size(); ++k) {
      Buffer b = graph::load_onnx_tensor(in_files[k]);
      if (b.dtype() == int64 || b.dtype() == boolean) bind[info.inputs[k]] = b;
      else inputs.push_back(b);
    }
    try {
      graph::Graph g = graph::load_onnx((dir / "model.onnx").string(), bind);
      graph::Network net = graph::compile(g, {.fuse = fuse});
      std::vector<Buffer> got = net.run(inputs);
      if (got.size() != out_files.size()) return "the network has " + std::to_string(got.size()) + " outputs";
      for (size_t k = 0; k < got.size(); ++k) {
        std::string diff = compare(got[k], graph::load_onnx_tensor(out_files[k]));
        if (!diff.empty()) return set.filename().string() + ", output " + std::to_string(k) + ": " + diff;
      }
    } catch (const std::exception& e) {
      return e.what();
    }
  }
  return "";
}

void run_all(const std::string& first, const std::string& last, bool fuse) {
  if (!fs::exists(kNodeTests))
    GTEST_SKIP() << "libonnx-testdata is not installed (scripts/install-deps.sh installs it)";
  std::set<std::string> listed;
  for (const std::string& op : graph::supported_operators()) listed.insert(op);
  listed.insert("Constant");
  std::vector<fs::path> dirs;
  for (auto& e : fs::directory_iterator(kNodeTests)) {
    std::string name = e.path().filename().string();
    if (name >= first && name < last) dirs.push_back(e.path());
  }
  std::sort(dirs.begin(), dirs.end());
  int ran = 0, passed = 0;
  std::string skipped;
  for (const fs::path& dir : dirs) {
    ModelInfo info = model_info((dir / "model.onnx").string());
    if (info.ops.empty() || !std::includes(listed.begin(), listed.end(), info.ops.begin(), info.ops.end())) continue;
    std::string name = dir.filename().string();
    if (kSkipped.count(name)) {
      skipped += "  " + name + ": " + kSkipped.at(name) + "\n";
      continue;
    }
    ++ran;
    std::string failure = run_node_test(dir, info, fuse);
    EXPECT_EQ(failure, "") << name;
    passed += failure.empty();
  }
  std::printf("ONNX node tests %s to %s (%s): %d ran, %d passed; skipped:\n%s", first.c_str(), last.c_str(),
              fuse ? "fused" : "node by node", ran, passed, skipped.empty() ? "  none\n" : skipped.c_str());
  EXPECT_GT(ran, 0);
}

}  // namespace

// Split by name so that ctest runs them side by side; the expanded tests (functions written
// out as several nodes) run fused and node by node.
TEST(OnnxNodeTests, AToC) { run_all("test_a", "test_d", true); }
TEST(OnnxNodeTests, DToL) { run_all("test_d", "test_m", true); }
TEST(OnnxNodeTests, MToR) { run_all("test_m", "test_s", true); }
TEST(OnnxNodeTests, SToZ) { run_all("test_s", "test_zz", true); }
TEST(OnnxNodeTests, NodeByNode) { run_all("test_a", "test_zz", false); }
