// Tuned kernels from tuning_logs/ against OpenBLAS (GEMM), oneDNN (conv2d) and Tessel's
// default schedules, at 1 and 2 threads.
//   bench_tuned [tuning_logs directory]
#include <cblas.h>
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
// " on <cpu>" when it was tuned on another CPU (no record of this one).
std::string source(const std::string& log, const Workload& w) {
  auto best = best_schedule(log, w, Target::host(), /*stand_in=*/true);
  if (!best) return "none";
  bool dflt = steps_to_json(best->steps) == steps_to_json(ops::default_schedule(w.outputs).steps());
  return std::string(dflt ? "default" : "search") +
         (best->target_key == Target::host().key() ? "" : " on " + best->target_key);
}
}  // namespace

int main(int argc, char** argv) {
  bench::unset_openblas_overrides(argv);
  std::string dir = argc > 1 ? argv[1] : std::string(TESSEL_SOURCE_DIR) + "/tuning_logs";
  std::printf("{\"bench\": \"tuned\", \"info\": \"openblas core %s, cpu %s, logs %s\"}\n", openblas_get_corename(),
              host_cpu_name().c_str(), dir.c_str());
  bench::Report gemm("gemm");
  for (int64_t n : {512, 1024, 2048}) {
    Workload w = make_workload("matmul", {{"M", n}, {"N", n}, {"K", n}});
    std::string shape = std::to_string(n) + "x" + std::to_string(n) + "x" + std::to_string(n);
    std::string log = dir + "/gemm_" + std::to_string(n) + ".json";
    bool found = false;
    Module tuned = build_best(log, w, Target::host(), &found);
    Module dflt = build(ops::default_schedule(w.outputs), w.args);
    auto args = bench::make_args(w);
    std::string from = ", \"tuned_from\": \"" + source(log, w) + "\"";
    float* a = args[0].data<float>();
    float* b = args[1].data<float>();
    float* c = args[2].data<float>();
    int in = int(n);
    for (int t : {1, 2}) {
      set_num_threads(t);
      openblas_set_num_threads(t);
      bench::Impls impls = {{"tessel-default", bench::runner(dflt, args)},
                            {"openblas", [=] {
                               cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, in, in, in, 1.f, a, in, b, in,
                                           0.f, c, in);
                             }}};
      if (found) impls.insert(impls.begin(), {"tessel-tuned", bench::runner(tuned, args)});
      for (auto& [impl, sec] : bench::time_interleaved(impls))
        gemm.add(shape, impl, t, w.flops / sec / 1e9, impl == "tessel-tuned" ? from : "");
    }
  }
  gemm.ratio("tessel-tuned", "openblas");
  gemm.ratio("tessel-tuned", "tessel-default");

  bench::Report conv("conv2d");
  dnnl::engine eng(dnnl::engine::kind::cpu, 0);
  dnnl::stream strm(eng);
  std::ifstream list(dir + "/resnet50_conv2d.txt");
  for (std::string line; std::getline(list, line);) {
    if (line.empty() || line[0] == '#') continue;
    std::stringstream ss(line);
    std::string op, shape_text;
    ss >> op >> shape_text;
    Workload w = make_workload(op, parse_shape(shape_text));
    auto& s = w.shape;
    std::string shape = "N=1,C=" + std::to_string(s["C"]) + ",H=" + std::to_string(s["H"]) + ",W=" +
                        std::to_string(s["W"]) + ",K=" + std::to_string(s["K"]) + ",R=" + std::to_string(s["R"]) +
                        ",S=" + std::to_string(s["S"]) + ",stride=" + std::to_string(s["stride"]) +
                        ",pad=" + std::to_string(s["pad"]);
    std::string log = dir + "/resnet50_conv2d.json";
    bool found = false;
    Module tuned = build_best(log, w, Target::host(), &found);
    Module dflt = build(ops::default_schedule(w.outputs), w.args);
    auto args = bench::make_args(w);
    std::string from = ", \"tuned_from\": \"" + source(log, w) + "\"";
    int64_t OH = (s["H"] + 2 * s["pad"] - s["R"]) / s["stride"] + 1;
    using dt = dnnl::memory::data_type;
    using tag = dnnl::memory::format_tag;
    auto desc = dnnl::convolution_forward::desc(
        dnnl::prop_kind::forward_inference, dnnl::algorithm::convolution_direct,
        dnnl::memory::desc({1, s["C"], s["H"], s["W"]}, dt::f32, tag::any),
        dnnl::memory::desc({s["K"], s["C"], s["R"], s["S"]}, dt::f32, tag::any),
        dnnl::memory::desc({1, s["K"], OH, OH}, dt::f32, tag::any), {s["stride"], s["stride"]}, {s["pad"], s["pad"]},
        {s["pad"], s["pad"]});
    for (int t : {1, 2}) {
      set_num_threads(t);
      omp_set_num_threads(t);
      // oneDNN plans its work for the thread count current when the primitive is made.
      auto pd = dnnl::convolution_forward::primitive_desc(desc, eng);
      dnnl::memory src(pd.src_desc(), eng), wei(pd.weights_desc(), eng), dst(pd.dst_desc(), eng);
      std::fill_n(static_cast<float*>(src.get_data_handle()), pd.src_desc().get_size() / 4, 0.5f);
      std::fill_n(static_cast<float*>(wei.get_data_handle()), pd.weights_desc().get_size() / 4, 0.25f);
      dnnl::convolution_forward prim(pd);
      bench::Impls impls = {{"tessel-default", bench::runner(dflt, args)}, {"onednn", [&] {
                               prim.execute(strm, {{DNNL_ARG_SRC, src}, {DNNL_ARG_WEIGHTS, wei}, {DNNL_ARG_DST, dst}});
                               strm.wait();
                             }}};
      if (found) impls.insert(impls.begin(), {"tessel-tuned", bench::runner(tuned, args)});
      for (auto& [impl, sec] : bench::time_interleaved(impls))
        conv.add(shape, impl, t, w.flops / sec / 1e9, impl == "tessel-tuned" ? from : "");
    }
  }
  conv.ratio("tessel-tuned", "onednn");
  conv.ratio("tessel-tuned", "tessel-default");
  for (int t : {1, 2})
    std::printf("{\"bench\": \"conv2d\", \"threads\": %d, \"geomean\": \"tessel-tuned/onednn\", \"value\": %.3f}\n", t,
                conv.geomean("tessel-tuned", "onednn", t));
  return 0;
}
