// A tiled shared-memory GEMM for GPUs, written by hand: 64x64 output tiles per thread
// block, 16x16 threads with a 4x4 register tile each, 16-wide slices of A and B staged
// in shared memory and fetched by all 256 threads as float4s. Prints the CUDA source and
// what ptxas says it uses, then runs it on a CUDA device if there is one, and as OpenCL
// (PoCL: on this CPU, not a GPU figure) otherwise, and checks the answer.
//   example_matmul_gpu [N]      (default 512)
#include <cstdio>
#include <cstdlib>

#include "tessel/ops.h"
#include "tessel/tessel.h"

using namespace tessel;

Schedule tiled_gemm(const Tensor& A, const Tensor& B, const Tensor& C) {
  Schedule s({C});
  Tensor CL = s.cache_write(C, "local");
  auto t = s[C].tile("i", "j", 64, 64);
  auto [ty, ri] = s[C].split(t.xi, 4);
  auto [tx, rj] = s[C].split(t.yi, 4);
  s[C].reorder({t.xo, t.yo, ty, tx, ri, rj});
  s[C].bind(t.xo, "blockIdx.y");
  s[C].bind(t.yo, "blockIdx.x");
  s[C].bind(ty, "threadIdx.y");
  s[C].bind(tx, "threadIdx.x");
  s[CL].compute_at(s[C], tx);
  auto [ko, ki] = s[CL].split("k", 16);
  s[CL].reorder({ko, ki, "i", "j"});
  s[CL].unroll("i");
  s[CL].unroll("j");
  for (const Tensor& in : {A, B}) {
    Tensor sh = s.cache_read(in, "shared", {CL});
    s[sh].compute_at(s[CL], ko);
    auto [rest, vec] = s[sh].split(s[sh].fuse("i", "j"), 4);
    auto [rest2, x] = s[sh].split(rest, 16);
    auto [rest3, y] = s[sh].split(rest2, 16);
    s[sh].bind(x, "threadIdx.x");
    s[sh].bind(y, "threadIdx.y");
    s[sh].vectorize(vec);
  }
  return s;
}

int main(int argc, char** argv) {
  int64_t n = argc > 1 ? std::atoll(argv[1]) : 512;
  Tensor A = placeholder({n, n}, float32, "A");
  Tensor B = placeholder({n, n}, float32, "B");
  Tensor C = ops::matmul(A, B);
  Schedule s = tiled_gemm(A, B, C);
  std::printf("// schedule, as C++:\n%s\n", s.to_cpp().c_str());

  Target cuda = Target::parse("cuda -arch=sm_90");
  bool run_cuda = false;
  try {
    Module m = build(s, {A, B, C}, {.name = "gemm", .target = cuda});
    KernelResources r = m.resources();
    std::printf("%s\n// ptxas (sm_90): %d registers, %d bytes spilled, %d bytes shared memory; NVRTC %.0f ms\n\n",
                m.source().c_str(), r.registers, r.spill_bytes, r.shared_bytes, m.compile_seconds() * 1e3);
    run_cuda = m.device().find("no device") == std::string::npos;
  } catch (const Error& e) {
    std::printf("// no CUDA build: %s\n", e.what());
  }
  Target target = run_cuda ? cuda : Target::parse("opencl");
  Module m = build(s, {A, B, C}, {.name = "gemm", .target = target});
  if (!run_cuda) std::printf("%s\n", m.source().c_str());
  Buffer a({n, n}, float32), b({n, n}, float32), c({n, n}, float32);
  a.fill_random(1), b.fill_random(2);
  m(a, b, c);
  double err = 0;
  for (int64_t i = 0; i < n; i += 37)
    for (int64_t j = 0; j < n; j += 41) {
      double want = 0;
      for (int64_t k = 0; k < n; ++k) want += a.get(i * n + k) * b.get(k * n + j);
      err = std::max(err, std::abs(want - c.get(i * n + j)));
    }
  double seconds = m.time({a, b, c}, 5);
  std::printf("// ran on %s: %.3f ms, %.1f GFLOP/s%s; max error %.2e\n", m.device().c_str(), seconds * 1e3,
              2.0 * n * n * n / seconds / 1e9, run_cuda ? "" : " (OpenCL on this CPU, not a GPU figure)", err);
  return err < 1e-3 ? 0 : 1;
}
