// GPU default schedules: NVRTC compile time, registers and spills per kernel (sm_90), their
// OpenCL twins timed on PoCL (OpenCL on this CPU: a CPU figure, labelled so), and, where a
// CUDA device exists, GFLOP/s on it beside its name; there, also the three networks of
// bench_models compiled for it (every tensor on the device), their latency as a user sees it
// (the median of 20 runs, uploading the input and downloading the output). One JSON object
// per line, then a summary with the median compile time.
//   bench_gpu [pocl=0]      (pocl=0 skips the PoCL timings)
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <functional>

#include "runtime/CUDA.h"
#include "tessel/graph.h"
#include "tessel/graph_models.h"
#include "tessel/ops.h"
#include "tessel/tessel.h"

using namespace tessel;

namespace {

struct Case {
  std::string name;
  std::function<std::vector<Tensor>()> make;  // inputs, then the output
  double flops;
};

Tensor p(std::vector<int64_t> shape, const char* name) { return placeholder(shape, float32, name); }

std::vector<Case> cases() {
  std::vector<Case> out;
  for (int64_t n : {1024, 4096})
    out.push_back({"gemm_" + std::to_string(n), [n] {
                     Tensor A = p({n, n}, "A"), B = p({n, n}, "B");
                     return std::vector{A, B, ops::matmul(A, B)};
                   }, 2.0 * n * n * n});
  struct Layer { int64_t C, H, K, R, stride, pad; };
  for (Layer l : std::vector<Layer>{{64, 56, 64, 3, 1, 1}, {128, 28, 128, 3, 1, 1}, {256, 14, 256, 3, 1, 1},
                                    {512, 7, 512, 3, 1, 1}, {64, 56, 256, 1, 1, 0}, {256, 56, 64, 1, 1, 0},
                                    {512, 28, 128, 1, 1, 0}, {1024, 14, 256, 1, 1, 0}, {2048, 7, 512, 1, 1, 0},
                                    {3, 224, 64, 7, 2, 3}, {128, 56, 128, 3, 2, 1}}) {
    int64_t oh = (l.H + 2 * l.pad - l.R) / l.stride + 1;
    std::string name = "conv2d_C" + std::to_string(l.C) + "_H" + std::to_string(l.H) + "_K" + std::to_string(l.K) +
                       "_R" + std::to_string(l.R) + "_s" + std::to_string(l.stride);
    out.push_back({name, [l] {
                     Tensor X = p({1, l.C, l.H, l.H}, "X"), W = p({l.K, l.C, l.R, l.R}, "W");
                     ops::Conv2dParams cp{.stride_h = l.stride, .stride_w = l.stride, .pad_h = l.pad, .pad_w = l.pad};
                     return std::vector{X, W, ops::conv2d_nchw(X, W, cp)};
                   }, 2.0 * l.K * oh * oh * l.C * l.R * l.R});
  }
  out.push_back({"softmax_4096x1024", [] { Tensor X = p({4096, 1024}, "X"); return std::vector{X, ops::softmax(X)}; },
                 5.0 * 4096 * 1024});
  out.push_back({"layer_norm_512x768", [] {
                   Tensor X = p({512, 768}, "X"), g = p({768}, "g"), b = p({768}, "b");
                   return std::vector{X, g, b, ops::layer_norm(X, g, b)};
                 }, 8.0 * 512 * 768});
  out.push_back({"dense_bias_gelu_128x768x3072", [] {
                   Tensor X = p({128, 768}, "X"), W = p({3072, 768}, "W"), b = p({3072}, "b");
                   return std::vector{X, W, b, ops::dense(X, W, b, ops::Activation::Gelu)};
                 }, 2.0 * 128 * 768 * 3072});
  return out;
}

std::vector<Buffer> buffers(const std::vector<Tensor>& args) {
  std::vector<Buffer> b;
  for (size_t i = 0; i < args.size(); ++i) {
    b.emplace_back(args[i].shape(), args[i].dtype());
    b.back().fill_random(i + 1);
  }
  return b;
}

// The networks on the CUDA device: compile time, kernels, median latency of 20 runs.
void networks(const Target& cuda) {
  struct Net { const char* name; std::function<std::string()> make; };
  for (const Net& n : std::vector<Net>{{"net_resnet50", [] { return graph::models::resnet(50); }},
                                       {"net_mobilenetv2", [] { return graph::models::mobilenet_v2(); }},
                                       {"net_bert_layer", [] { return graph::models::bert_layer(); }}}) {
    std::printf("{\"bench\":\"gpu\",\"case\":\"%s\"", n.name);
    try {
      graph::Graph g = graph::load_onnx_bytes(n.make());
      auto t0 = std::chrono::steady_clock::now();
      graph::Network net = graph::compile(g, {.target = cuda});
      double compile_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      std::vector<Buffer> in;
      for (int id : g.inputs) {
        in.emplace_back(g.values[size_t(id)].shape, g.values[size_t(id)].dtype);
        in.back().fill_random(1);
      }
      net.run(in);  // uploads the weights
      std::vector<double> ms;
      for (int r = 0; r < 20; ++r) {
        auto t = std::chrono::steady_clock::now();
        net.run(in);
        ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t).count());
      }
      std::sort(ms.begin(), ms.end());
      std::printf(",\"compile_s\":%.1f,\"kernels\":%d,\"cuda_device\":\"%s\",\"cuda_ms\":%.4f", compile_s,
                  net.num_kernels(), cuda_device_name().c_str(), ms[ms.size() / 2]);
    } catch (const Error& e) {
      std::printf(",\"cuda_error\":\"%.200s\"", e.what());
    }
    std::printf("}\n");
    std::fflush(stdout);
  }
}

}  // namespace

int main(int argc, char** argv) {
  bool pocl = !(argc > 1 && std::strcmp(argv[1], "pocl=0") == 0);
  Target cuda = Target::parse("cuda -arch=sm_90"), opencl = Target::parse("opencl");
  std::vector<double> compile_ms;
  for (const Case& c : cases()) {
    std::vector<Tensor> args = c.make();
    std::vector<Tensor> outs{args.back()};
    std::printf("{\"bench\":\"gpu\",\"case\":\"%s\"", c.name.c_str());
    try {
      Module m = build(ops::default_schedule(outs, cuda), args, {.name = "k", .target = cuda});
      KernelResources r = m.resources();
      compile_ms.push_back(m.compile_seconds() * 1e3);
      std::printf(",\"arch\":\"sm_90\",\"compile_ms\":%.1f,\"kernels\":%d,\"registers\":%d,\"spill_bytes\":%d,"
                  "\"shared_bytes\":%d",
                  m.compile_seconds() * 1e3, r.kernels, r.registers, r.spill_bytes, r.shared_bytes);
      if (m.device().find("no device") == std::string::npos) {
        auto bufs = buffers(args);
        double s = m.time(bufs, 20);
        std::printf(",\"cuda_device\":\"%s\",\"cuda_ms\":%.4f,\"cuda_gflops\":%.1f", m.device().c_str(), s * 1e3,
                    c.flops / s / 1e9);
      }
    } catch (const Error& e) {
      std::printf(",\"cuda_error\":\"%.200s\"", e.what());
    }
    if (pocl && c.flops < 2e10) {
      try {
        Module m = build(ops::default_schedule(outs, opencl), args, {.name = "k", .target = opencl});
        auto bufs = buffers(args);
        double s = m.time(bufs, 1);
        std::printf(",\"opencl_device\":\"%s (CPU, not a GPU figure)\",\"opencl_ms\":%.3f,\"opencl_gflops\":%.2f",
                    m.device().c_str(), s * 1e3, c.flops / s / 1e9);
      } catch (const Error& e) {
        std::printf(",\"opencl_error\":\"%.200s\"", e.what());
      }
    }
    std::printf("}\n");
    std::fflush(stdout);
  }
  if (!cuda_device_name().empty()) networks(cuda);
  if (!compile_ms.empty()) {
    std::sort(compile_ms.begin(), compile_ms.end());
    std::printf("{\"bench\":\"gpu\",\"summary\":\"lowering + NVRTC per default schedule (sm_90)\",\"median_ms\":%.1f,"
                "\"max_ms\":%.1f,\"kernels_compiled\":%zu}\n",
                compile_ms[compile_ms.size() / 2], compile_ms.back(), compile_ms.size());
  }
}
