// A hand-scheduled fp32 GEMM: compute once, schedule separately, build, run, check.
//   example_matmul [N]      (default 1024)
#include <chrono>
#include <cstdio>
#include <cstdlib>

#include "tessel/ops.h"
#include "tessel/tessel.h"

using namespace tessel;

int main(int argc, char** argv) {
  int64_t n = argc > 1 ? std::atoll(argv[1]) : 1024;
  // What: C = A x B, with B repacked into 32-wide panels.
  Tensor A = placeholder({n, n}, float32, "A");
  Tensor B = placeholder({n, n}, float32, "B");
  ops::PackedMatmul mm = ops::matmul_packed(A, B, 32);
  // How: 64x32 blocks in parallel, 8x32 register tiles, k unrolled by 4.
  Schedule s = ops::hand_schedule(mm);
  std::printf("// schedule, as C++:\n%s\n", s.to_cpp().c_str());
  LoweredFunc f = lower(s, {A, B, mm.C}, "gemm");
  std::string ir = f.str();
  std::printf("// lowered IR (first lines):\n%.*s...\n\n", int(std::min<size_t>(ir.size(), 1800)), ir.c_str());

  Module m = build(s, {A, B, mm.C}, {.name = "gemm"});
  Buffer a({n, n}, float32), b({n, n}, float32), c({n, n}, float32);
  a.fill_random(1), b.fill_random(2);
  m(a, b, c);
  // Spot-check against a straightforward dot product.
  double err = 0;
  for (int64_t i = 0; i < n; i += 61)
    for (int64_t j = 0; j < n; j += 67) {
      double r = 0;
      for (int64_t k = 0; k < n; ++k) r += a.data<float>()[i * n + k] * double(b.data<float>()[k * n + j]);
      err = std::max(err, std::abs(r - c.data<float>()[i * n + j]));
    }
  double best = 1e30;
  for (int rep = 0; rep < 10; ++rep) {
    auto t0 = std::chrono::steady_clock::now();
    m(a, b, c);
    best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  std::printf("gemm %lldx%lldx%lld on %s, %d threads: %.1f GFLOP/s (build %.0f ms, max abs error %.2g)\n",
              (long long)n, (long long)n, (long long)n, host_cpu_name().c_str(), num_threads(),
              2.0 * n * n * n / best / 1e9, m.compile_seconds() * 1e3, err);
  return err < 1e-2 ? 0 : 1;
}
