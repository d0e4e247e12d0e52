// Math-heavy layers, where a vectorized loop is only as fast as its exp, tanh or erf:
// softmax 4096x1024, layer norm 4096x1024 and dense 512x1024x1024 + bias + GELU (erf) +
// residual, with Tessel's default schedules built two ways (vector math, the default; and
// libm per lane, as before it) against Eigen in the same run. Figures are GFLOP/s of the
// layer's arithmetic (softmax 5, layer norm 8 flops an element; the dense layer its GEMM).
//   bench_math [threads=1]
#include <Eigen/Dense>
#include <unsupported/Eigen/SpecialFunctions>
#include <cstdio>
#include <cstdlib>

#include "Harness.h"
#include "tessel/ops.h"
#include "tessel/tessel.h"

using namespace tessel;
using RowMat = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

namespace {

Buffer random_buffer(std::vector<int64_t> shape, uint64_t seed) {
  Buffer b(shape, float32);
  b.fill_random(seed, -2, 2);
  return b;
}

Eigen::Map<RowMat> view(const Buffer& b) {
  return Eigen::Map<RowMat>(b.data<float>(), b.shape()[0], b.shape().size() > 1 ? b.shape()[1] : 1);
}

// Tessel's default schedule with and without vector math, and the Eigen version of a layer.
void compare(bench::Report& report, const std::string& shape, int threads, double flops,
             const std::vector<Tensor>& args, const std::vector<Tensor>& outs, std::vector<Buffer> bufs,
             const std::function<void()>& eigen) {
  Module vec = build(ops::default_schedule(outs), args, {.name = "vec"});
  Module lib = build(ops::default_schedule(outs), args, {.name = "libm", .libm_math = true});
  auto best = bench::time_interleaved({{"tessel", [&] { vec(bufs); }},
                                       {"tessel-libm", [&] { lib(bufs); }},
                                       {"eigen", eigen}});
  for (auto& [impl, s] : best) report.add(shape, impl, threads, flops / s / 1e9);
}

}  // namespace

int main(int argc, char** argv) {
  int threads = argc > 1 ? std::atoi(argv[1]) : 1;
  set_num_threads(threads);
  Eigen::setNbThreads(threads);
  bench::Report report("math");
  {  // softmax over rows
    const int64_t R = 4096, C = 1024;
    Tensor X = placeholder({R, C}, float32, "X");
    Tensor Y = ops::softmax(X);
    Buffer x = random_buffer({R, C}, 1), y({R, C}, float32), ye({R, C}, float32);
    compare(report, "softmax 4096x1024", threads, 5.0 * R * C, {X, Y}, {Y}, {x, y}, [&] {
      auto in = view(x);
      auto out = view(ye);
      out = (in.colwise() - in.rowwise().maxCoeff()).array().exp().matrix();
      out.array().colwise() /= out.rowwise().sum().array();
    });
  }
  {  // layer norm over rows
    const int64_t R = 4096, C = 1024;
    Tensor X = placeholder({R, C}, float32, "X");
    Tensor g = placeholder({C}, float32, "gamma"), b = placeholder({C}, float32, "beta");
    Tensor Y = ops::layer_norm(X, g, b);
    Buffer x = random_buffer({R, C}, 2), gb = random_buffer({C}, 3), bb = random_buffer({C}, 4);
    Buffer y({R, C}, float32), ye({R, C}, float32);
    compare(report, "layer_norm 4096x1024", threads, 8.0 * R * C, {X, g, b, Y}, {Y}, {x, gb, bb, y}, [&] {
      auto in = view(x);
      auto out = view(ye);
      Eigen::Map<Eigen::RowVectorXf> gv(gb.data<float>(), C), bv(bb.data<float>(), C);
      Eigen::VectorXf mean = in.rowwise().mean();
      out = in.colwise() - mean;
      Eigen::VectorXf inv = ((out.array().square().rowwise().sum() / float(C)) + 1e-5f).rsqrt();
      out = (out.array().colwise() * inv.array()).matrix();
      out = (out.array().rowwise() * gv.array()).rowwise() + bv.array();
    });
  }
  {  // dense + bias + GELU (erf) + residual
    const int64_t M = 512, N = 1024, K = 1024;
    Tensor X = placeholder({M, K}, float32, "X"), W = placeholder({N, K}, float32, "W");
    Tensor bias = placeholder({N}, float32, "bias"), Rs = placeholder({M, N}, float32, "R");
    Tensor H = ops::dense(X, W, bias, ops::Activation::Gelu, "H");
    Tensor Y = compute({M, N}, [&](Var i, Var j) { return H(i, j) + Rs(i, j); }, "Y");
    Buffer x = random_buffer({M, K}, 5), w = random_buffer({N, K}, 6), bb = random_buffer({N}, 7);
    Buffer r = random_buffer({M, N}, 8), y({M, N}, float32), ye({M, N}, float32);
    compare(report, "dense+gelu 512x1024x1024", threads, 2.0 * M * N * K, {X, W, bias, Rs, Y}, {Y},
            {x, w, bb, r, y}, [&] {
              auto out = view(ye);
              out.noalias() = view(x) * view(w).transpose();
              Eigen::Map<Eigen::RowVectorXf> bv(bb.data<float>(), N);
              out.rowwise() += bv;
              auto a = out.array();
              out = (a * 0.5f * (1.0f + (a * float(M_SQRT1_2)).erf())).matrix() + view(r);
            });
  }
  report.ratio("tessel", "eigen");
  report.ratio("tessel", "tessel-libm");
  return 0;
}
