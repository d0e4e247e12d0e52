// fp32 GEMM: Tessel's hand schedule vs OpenBLAS vs Eigen, 512/1024/2048, 1 and 2 threads.
#include <cblas.h>
#include <omp.h>

#include <Eigen/Dense>

#include "Harness.h"
#include "tessel/ops.h"
#include "tessel/tessel.h"

using namespace tessel;

int main(int argc, char** argv) {
  bench::unset_openblas_overrides(argv);
  std::printf("{\"bench\": \"gemm\", \"info\": \"openblas core %s, cpu %s\"}\n", openblas_get_corename(),
              host_cpu_name().c_str());
  std::vector<int64_t> sizes = {512, 1024, 2048};
  std::vector<int> threads = {1, 2};
  if (argc > 1) {
    int64_t n = std::atoll(argv[1]);
    if (n <= 0) {
      std::fprintf(stderr, "usage: %s [N]: N x N x N GEMMs (default 512, 1024 and 2048); got '%s'\n", argv[0], argv[1]);
      return 2;
    }
    sizes = {n};
  }
  bench::Report report("gemm");
  for (int64_t n : sizes) {
    std::string shape = std::to_string(n) + "x" + std::to_string(n) + "x" + std::to_string(n);
    double flops = 2.0 * n * n * n;
    Tensor A = placeholder({n, n}, float32, "A");
    Tensor B = placeholder({n, n}, float32, "B");
    ops::PackedMatmul mm = ops::matmul_packed(A, B, 32);
    Module m = build(ops::hand_schedule(mm), {A, B, mm.C});
    // How long building (lowering + LLVM O3 + JIT) the kernel takes.
    std::vector<double> builds;
    for (int r = 0; r < 9; ++r) builds.push_back(build(ops::hand_schedule(mm), {A, B, mm.C}).compile_seconds());
    std::sort(builds.begin(), builds.end());
    std::printf("{\"bench\": \"gemm-build\", \"shape\": \"%s\", \"impl\": \"tessel-hand\", \"build_ms_median\": %.1f}\n",
                (std::to_string(n) + "x" + std::to_string(n) + "x" + std::to_string(n)).c_str(), builds[4] * 1e3);
    Buffer a({n, n}, float32), b({n, n}, float32), c({n, n}, float32);
    a.fill_random(1), b.fill_random(2);
    using Mat = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
    Eigen::Map<Mat> ea(a.data<float>(), n, n), eb(b.data<float>(), n, n);
    Mat ec(n, n);
    for (int t : threads) {
      set_num_threads(t);
      openblas_set_num_threads(t);
      omp_set_num_threads(t);
      Eigen::setNbThreads(t);
      bench::Impls impls = {
          {"tessel-hand", [&] { m(a, b, c); }},
          {"openblas", [&] {
             cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, int(n), int(n), int(n), 1.f, a.data<float>(),
                         int(n), b.data<float>(), int(n), 0.f, c.data<float>(), int(n));
           }},
          {"eigen", [&] { ec.noalias() = ea * eb; }}};
      for (auto& [impl, sec] : bench::time_interleaved(impls)) report.add(shape, impl, t, flops / sec / 1e9);
    }
  }
  report.ratio("tessel-hand", "openblas");
  report.ratio("tessel-hand", "eigen");
  return 0;
}
