// Deploy: rebuild tuned kernels from the logs in tuning_logs/ and run them: CPU kernels,
// and CUDA kernels from tuning_logs/gpu.json.gz (run where a CUDA device is; elsewhere they
// are compiled and their resources printed). Only the log lookup is used from the autotuner.
//   example_deploy [tuning_logs directory]
#include <chrono>
#include <cstdio>
#include <string>

#include "tessel/autotune.h"
#include "tessel/tessel.h"

using namespace tessel;
using namespace tessel::autotune;

static double run(const Module& m, const Workload& w) {
  std::vector<Buffer> args;
  for (auto& t : w.args) {
    args.emplace_back(t.shape(), t.dtype());
    args.back().fill_random(7);
  }
  m(args);
  double best = 1e30;
  for (int r = 0; r < 10; ++r) {
    auto t0 = std::chrono::steady_clock::now();
    m(args);
    best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  return best;
}

int main(int argc, char** argv) {
  std::string dir = argc > 1 ? argv[1] : "tuning_logs";
  struct Item {
    const char* log;
    const char* op;
    const char* shape;
  } items[] = {
      {"gemm_1024.json.gz", "matmul", "M=1024,N=1024,K=1024"},
      {"resnet50_conv2d.json.gz", "conv2d_nchwc", "C=64,H=56,W=56,K=64,R=3,S=3,stride=1,pad=1"},
      {"resnet50_conv2d.json.gz", "conv2d_nchwc", "C=256,H=14,W=14,K=256,R=3,S=3,stride=1,pad=1"},
      {"resnet50_conv2d.json.gz", "conv2d_nchwc", "C=1024,H=14,W=14,K=256,R=1,S=1,stride=1,pad=0"},
  };
  for (auto& it : items) {
    Workload w = make_workload(it.op, parse_shape(it.shape));
    bool found = false;
    Module m = build_best(dir + "/" + it.log, w, Target::host(), &found);
    double s = run(m, w);
    std::printf("%-60s %-8s %8.3f ms %7.1f GFLOP/s\n", w.key().c_str(), found ? "tuned" : "DEFAULT", s * 1e3,
                w.flops / s / 1e9);
  }
  // The same lookup for a GPU: the log's best record of this architecture (measured on a
  // device where there is one, else the static model's estimate, and the lookup says so).
  Target gpu = Target::parse("cuda -arch=sm_90");
  for (const char* shape : {"M=1024,N=1024,K=1024"}) {
    Workload w = make_workload("matmul", parse_shape(shape));
    try {
      Module m = build_best(dir + "/gpu.json.gz", w, gpu);
      KernelResources r = m.resources();
      std::printf("%-60s cuda sm_90: %d registers, %d bytes of spills, %d bytes of shared memory\n", w.key().c_str(),
                  r.registers, r.spill_bytes, r.shared_bytes);
      std::vector<Buffer> args;
      for (auto& t : w.args) args.emplace_back(t.shape(), t.dtype()), args.back().fill_random(7);
      double s = m.time(args, 20);
      std::printf("%-60s %s: %8.3f ms %7.1f GFLOP/s\n", "", m.device().c_str(), s * 1e3, w.flops / s / 1e9);
    } catch (const Error& e) {
      std::printf("%-60s not run here: %s\n", "", e.what());
    }
  }
  return 0;
}
