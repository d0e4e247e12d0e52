// Tuned kernels from tuning_logs/ against OpenBLAS (GEMM), oneDNN (conv2d: ResNet-50 in
// NCHW16c, NCHW and NHWC, MobileNetV2 and other shapes in NCHW and NHWC) and Tessel's default
// schedules, at 1 and 2 threads.
// oneDNN picks its own best layouts (format `any`): it is the speed a user of it would get,
// and the peer of the targets. In the lists in the layouts users give, oneDNN with its
// activations in that layout too (onednn-nchw, onednn-nhwc): no reorder of them per call.
//   bench_tuned [tuning_logs directory] [passes] [only]
// `only` keeps the lists whose name contains it ("gemm" for the GEMMs alone).
// Every kernel is built once; then all cases are timed `passes` times over (3 by default,
// about 3 minutes each), and the ratios use each implementation's best pass: on a
// shared machine a slow spell can halve one case's 2-thread figures for a minute.
#include <cblas.h>
#include <deque>
#include <fstream>
#include <sstream>
#include <omp.h>

#include <dnnl.hpp>

#include "Harness.h"
#include "Kernels.h"
#include "tessel/autotune.h"
#include "tessel/ops.h"
#include "tessel/tessel.h"

using namespace tessel;
using namespace tessel::autotune;

namespace {
// "search" when the log's best is a schedule the search found, "default" when nothing it
// found beat the default schedule (the tuner logs that too), "none" without a record; with
// " on <cpu>" when it was tuned on another CPU (no record of this one). A convolution built by
// Winograd's algorithm says so instead ("winograd F(4x4, 3x3)").
std::string source(const std::string& log, const Workload& w) {
  auto best = best_schedule(log, w, Target::host(), /*stand_in=*/true);
  if (!best) return "none";
  bool dflt = steps_to_json(best->steps) == steps_to_json(autotune::default_schedule(w).steps());
  return std::string(dflt ? "default" : "search") +
         (best->target_key == Target::host().key() ? "" : " on " + best->target_key);
}

// One comparison: implementations of one workload at one thread count.
struct Case {
  bench::Report* report;
  std::string shape;
  int threads;
  double flops;
  std::string tuned_from;
  bench::Impls impls;
};

void time_case(const Case& c) {
  set_num_threads(c.threads);
  openblas_set_num_threads(c.threads);
  omp_set_num_threads(c.threads);
  for (auto& [impl, sec] : bench::time_interleaved(c.impls))
    c.report->add(c.shape, impl, c.threads, c.flops / sec / 1e9, impl == "tessel-tuned" ? c.tuned_from : "");
}

// What a case's kernels and arguments need to outlive the timing.
struct Kernels {
  bool found;              // the log has a record: `tuned` is its kernel
  std::string tuned_from;  // its report field (see source)
  Module tuned, dflt;
  std::vector<Buffer> args;
};
}  // namespace

int main(int argc, char** argv) {
  bench::unset_openblas_overrides(argv);
  std::string dir = argc > 1 ? argv[1] : std::string(TESSEL_SOURCE_DIR) + "/tuning_logs";
  int passes = argc > 2 ? std::atoi(argv[2]) : 3;
  std::string only = argc > 3 ? argv[3] : "";
  auto wanted = [&](const std::string& list) { return list.find(only) != std::string::npos; };
  if (passes < 1) {
    std::fprintf(stderr, "bench_tuned: passes must be at least 1, got '%s'\n", argv[2]);
    return 2;
  }
  std::printf("{\"bench\": \"tuned\", \"info\": \"openblas core %s, cpu %s, logs %s, passes %d\"}\n",
              openblas_get_corename(), host_cpu_name().c_str(), dir.c_str(), passes);
  bench::Report gemm("gemm", passes);
  std::deque<bench::Report> convs;  // one per list of layers
  std::deque<Kernels> kernels;  // a deque: cases keep references into it
  std::vector<Case> cases;
  // The tuned (when the log has a record) and default kernels of workload w.
  auto add_kernels = [&](const Workload& w, const std::string& log) -> Kernels& {
    bool found = false;
    Module tuned = build_best(log, w, Target::host(), &found);
    std::string from = source(log, w);
    for (const LayoutRewrite& r : tuned.layout_rewrites())
      if (!r.transform.empty()) from = r.transform;  // its companion's record was faster (winograd_companion)
    kernels.push_back({found, ", \"tuned_from\": \"" + from + "\"", tuned,
                       build(autotune::default_schedule(w), w.args), bench::make_args(w)});
    return kernels.back();
  };
  auto impls = [](const Kernels& k) {
    bench::Impls i = {{"tessel-default", bench::runner(k.dflt, k.args)}};
    if (k.found) i.insert(i.begin(), {"tessel-tuned", bench::runner(k.tuned, k.args)});
    return i;
  };

  for (int64_t n : {512, 1024, 2048}) {
    if (!wanted("gemm")) break;
    Workload w = make_workload("matmul", {{"M", n}, {"N", n}, {"K", n}});
    std::string shape = std::to_string(n) + "x" + std::to_string(n) + "x" + std::to_string(n);
    std::string log = dir + "/gemm_" + std::to_string(n) + ".json.gz";
    Kernels& k = add_kernels(w, log);
    float* a = k.args[0].data<float>();
    float* b = k.args[1].data<float>();
    float* c = k.args[2].data<float>();
    int in = int(n);
    for (int t : {1, 2}) {
      Case cs{&gemm, shape, t, w.flops, k.tuned_from, impls(k)};
      cs.impls.push_back({"openblas", [=] {
                            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, in, in, in, 1.f, a, in, b, in, 0.f,
                                        c, in);
                          }});
      cases.push_back(cs);
    }
  }

  dnnl::engine eng(dnnl::engine::kind::cpu, 0);
  dnnl::stream strm(eng);
  // oneDNN primitives and their memory, one per layer and thread count.
  struct Onednn {
    dnnl::convolution_forward prim;
    dnnl::memory src, wei, dst;
  };
  std::deque<Onednn> onednn;
  // ResNet-50's convolutions in the blocked layout and in the layouts users give (NCHW, NHWC),
  // MobileNetV2's depthwise and pointwise ones in NCHW and NHWC, and other shapes (5x5 windows,
  // channel counts off the vector, 5x5 depthwise) in NCHW and NHWC. A depthwise layer is
  // oneDNN's grouped convolution with one group per channel.
  for (std::string set : {"resnet50_conv2d", "resnet50_conv2d_nchw", "resnet50_conv2d_nhwc", "mobilenetv2_conv2d",
                          "mobilenetv2_conv2d_nhwc", "odd_conv2d_nchw", "odd_conv2d_nhwc"}) {
    if (!wanted(set)) continue;
    bench::Report& conv = convs.emplace_back(set, passes);
    std::ifstream list(dir + "/" + set + ".txt");
    for (std::string line; std::getline(list, line);) {
      if (line.empty() || line[0] == '#') continue;
      std::stringstream ss(line);
      std::string op, shape_text;
      ss >> op >> shape_text;
      Workload w = make_workload(op, parse_shape(shape_text));
      auto& s = w.shape;
      bool dw = op.rfind("depthwise_conv2d", 0) == 0;
      int64_t C = s["C"], K = dw ? C : s["K"];
      std::string shape = std::string(dw ? "depthwise " : "") + "N=1,C=" + std::to_string(C) +
                          ",H=" + std::to_string(s["H"]) + ",W=" + std::to_string(s["W"]) +
                          ",K=" + std::to_string(K) + ",R=" + std::to_string(s["R"]) + ",S=" + std::to_string(s["S"]) +
                          ",stride=" + std::to_string(s["stride"]) + ",pad=" + std::to_string(s["pad"]);
      std::string log = dir + "/" + set + ".json.gz";
      Kernels& k = add_kernels(w, log);
      int64_t OH = (s["H"] + 2 * s["pad"] - s["R"]) / s["stride"] + 1;
      using dt = dnnl::memory::data_type;
      using tag = dnnl::memory::format_tag;
      dnnl::memory::dims wei =
          dw ? dnnl::memory::dims{C, 1, 1, s["R"], s["S"]} : dnnl::memory::dims{K, C, s["R"], s["S"]};
      // oneDNN in the activation layout it prefers (format `any`: the target's peer), and, for
      // the lists in the layouts users give, with its activations in that layout (weights still
      // its own): what a caller whose tensors are NCHW or NHWC gets without reordering them.
      std::string user_layout = op == "conv2d_nchwc" ? "" : op.ends_with("_nhwc") ? "nhwc" : "nchw";
      auto desc = [&](tag act) {
        return dnnl::convolution_forward::desc(
            dnnl::prop_kind::forward_inference, dnnl::algorithm::convolution_direct,
            dnnl::memory::desc({1, C, s["H"], s["W"]}, dt::f32, act), dnnl::memory::desc(wei, dt::f32, tag::any),
            dnnl::memory::desc({1, K, OH, OH}, dt::f32, act), {s["stride"], s["stride"]}, {s["pad"], s["pad"]},
            {s["pad"], s["pad"]});
      };
      for (int t : {1, 2}) {
        Case cs{&conv, shape, t, w.flops, k.tuned_from, impls(k)};
        std::vector<std::pair<std::string, tag>> peers = {{"onednn", tag::any}};
        if (!user_layout.empty())
          peers.push_back({"onednn-" + user_layout, user_layout == "nhwc" ? tag::nhwc : tag::nchw});
        for (auto& [name, act] : peers) {
          // oneDNN plans its work for the thread count current when the primitive is made.
          omp_set_num_threads(t);
          auto pd = dnnl::convolution_forward::primitive_desc(desc(act), eng);
          Onednn& o = onednn.emplace_back(Onednn{dnnl::convolution_forward(pd), dnnl::memory(pd.src_desc(), eng),
                                                 dnnl::memory(pd.weights_desc(), eng),
                                                 dnnl::memory(pd.dst_desc(), eng)});
          std::fill_n(static_cast<float*>(o.src.get_data_handle()), pd.src_desc().get_size() / 4, 0.5f);
          std::fill_n(static_cast<float*>(o.wei.get_data_handle()), pd.weights_desc().get_size() / 4, 0.25f);
          cs.impls.push_back({name, [&o, &strm] {
                                o.prim.execute(
                                    strm, {{DNNL_ARG_SRC, o.src}, {DNNL_ARG_WEIGHTS, o.wei}, {DNNL_ARG_DST, o.dst}});
                                strm.wait();
                              }});
        }
        cases.push_back(cs);
      }
    }
  }

  for (int p = 1; p <= passes; ++p) {
    if (p > 1) {
      gemm.next_pass();
      for (auto& conv : convs) conv.next_pass();
    }
    for (auto& c : cases) time_case(c);
    for (auto& conv : convs)
      for (int t : {1, 2})
        std::printf("{\"bench\": \"%s\", \"pass\": %d, \"threads\": %d, \"geomean\": \"tessel-tuned/onednn\", "
                    "\"value\": %.3f}\n",
                    conv.name().c_str(), p, t, conv.geomean("tessel-tuned", "onednn", t, p));
  }
  const char* onednn_peers[] = {"onednn", "onednn-nchw", "onednn-nhwc"};
  gemm.ratio("tessel-tuned", "openblas");
  gemm.ratio("tessel-tuned", "tessel-default");
  for (auto& conv : convs) {
    for (const char* peer : onednn_peers) conv.ratio("tessel-tuned", peer);
    conv.ratio("tessel-tuned", "tessel-default");
  }
  for (auto& conv : convs)
    for (const char* peer : onednn_peers)
      for (int t : {1, 2})
        if (double g = conv.geomean("tessel-tuned", peer, t); g > 0)
          std::printf("{\"bench\": \"%s\", \"threads\": %d, \"geomean\": \"tessel-tuned/%s\", \"value\": %.3f}\n",
                      conv.name().c_str(), t, peer, g);
  return 0;
}
