// A ResNet-50 3x3 convolution in the blocked NCHW16c layout with the default schedule.
#include <chrono>
#include <cstdio>

#include "tessel/ops.h"
#include "tessel/tessel.h"

using namespace tessel;

int main() {
  const int64_t N = 1, C = 64, H = 56, W = 56, K = 64, R = 3, S = 3, cb = 16, kb = 16;
  ops::Conv2dParams p;
  p.pad_h = p.pad_w = 1;
  Tensor X = placeholder({N, C / cb, H, W, cb}, float32, "X");
  Tensor Wt = placeholder({K / kb, C / cb, R, S, cb, kb}, float32, "W");
  Tensor Y = ops::conv2d_nchwc(X, Wt, p, "conv");
  Schedule s = ops::default_schedule({Y});
  std::printf("// default schedule:\n%s\n", s.to_cpp().c_str());
  std::string ir = lower(s, {X, Wt, Y}).str();
  std::printf("// lowered IR (first lines):\n%.*s...\n\n", int(std::min<size_t>(ir.size(), 2000)), ir.c_str());
  Module m = build(s, {X, Wt, Y});
  Buffer x(X.shape(), float32), w(Wt.shape(), float32), y(Y.shape(), float32);
  x.fill_random(1), w.fill_random(2);
  m(x, w, y);
  // Check one output channel block against loops over the blocked layout.
  double err = 0;
  for (int64_t oh = 0; oh < H; oh += 5)
    for (int64_t ow = 0; ow < W; ow += 7)
      for (int64_t k = 0; k < K; k += 9) {
        double acc = 0;
        for (int64_t c = 0; c < C; ++c)
          for (int64_t r = 0; r < R; ++r)
            for (int64_t q = 0; q < S; ++q) {
              int64_t ih = oh + r - 1, iw = ow + q - 1;
              if (ih < 0 || ih >= H || iw < 0 || iw >= W) continue;
              acc += x.get((((c / cb) * H + ih) * W + iw) * cb + c % cb) *
                     w.get(((((k / kb) * (C / cb) + c / cb) * R + r) * S + q) * cb * kb + (c % cb) * kb + k % kb);
            }
        err = std::max(err, std::abs(acc - y.get((((k / kb) * H + oh) * W + ow) * kb + k % kb)));
      }
  double best = 1e30;
  for (int rep = 0; rep < 20; ++rep) {
    auto t0 = std::chrono::steady_clock::now();
    m(x, w, y);
    best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  double flops = 2.0 * N * K * H * W * C * R * S;
  std::printf("conv2d N=1,C=64,H=56,W=56,K=64,3x3,pad 1 (NCHW16c): %.1f GFLOP/s, max abs error %.2g\n",
              flops / best / 1e9, err);
  return err < 1e-3 ? 0 : 1;
}
