// Winograd convolution F(m x m, 3x3) in NCHW[x]c (Lavin and Gray, "Fast Algorithms for
// Convolutional Neural Networks", 2016): each m x m tile of the output comes from an
// (m + 2)^2 tile of the input through (m + 2)^2 products per channel pair instead of 9 m^2,
// so a 3x3 layer multiplies 2.25x (m = 2) or 4x (m = 4) less. The weights are transformed once
// (winograd_weights); the input and output transforms are additions and multiplications by
// small constants, written out term by term so that the unrolled copies carry only the
// nonzero ones.
#include <functional>

#include "schedules/Common.h"

namespace tessel::ops {

namespace {

using Matrix = std::vector<std::vector<double>>;

// B^T (input), A^T (output) and G (weights) of F(m x m, 3x3) for m = 2 (points 0, 1, -1,
// infinity) and m = 4 (0, 1, -1, 2, -2, infinity).
struct Transforms {
  Matrix BT, AT, G;
};

const Transforms& transforms(int64_t m) {
  static const Transforms f2{{{1, 0, -1, 0}, {0, 1, 1, 0}, {0, -1, 1, 0}, {0, 1, 0, -1}},
                             {{1, 1, 1, 0}, {0, 1, -1, -1}},
                             {{1, 0, 0}, {0.5, 0.5, 0.5}, {0.5, -0.5, 0.5}, {0, 0, 1}}};
  static const Transforms f4{
      {{4, 0, -5, 0, 1, 0}, {0, -4, -4, 1, 1, 0}, {0, 4, -4, -1, 1, 0}, {0, -2, -1, 2, 1, 0}, {0, 2, -1, -2, 1, 0},
       {0, 4, 0, -5, 0, 1}},
      {{1, 1, 1, 1, 1, 0}, {0, 1, -1, 2, -2, 0}, {0, 1, 1, 4, 4, 0}, {0, 1, -1, 8, -8, 1}},
      {{1 / 4., 0, 0}, {-1 / 6., -1 / 6., -1 / 6.}, {-1 / 6., 1 / 6., -1 / 6.}, {1 / 24., 1 / 12., 1 / 6.},
       {1 / 24., -1 / 12., 1 / 6.}, {0, 0, 1}}};
  TESSEL_USER_CHECK(m == 2 || m == 4, "Winograd convolution: output tiles of 2 or 4, not ", m);
  return m == 2 ? f2 : f4;
}

// Row i of `m` applied to term(0..): the sum of m[i][k] * term(k) over the nonzero
// coefficients, as a select over i. Its loop is unrolled, so each copy is one sum.
Expr apply_rows(const Matrix& m, Expr i, const std::function<Expr(int)>& term, DType t) {
  Expr e;
  for (int r = int(m.size()) - 1; r >= 0; --r) {
    Expr s;
    for (int k = 0; k < int(m[size_t(r)].size()); ++k) {
      double c = m[size_t(r)][size_t(k)];
      if (c == 0) continue;
      Expr x = term(k);
      Expr tk = c == 1 ? x : c == -1 ? -x : x * make_const(t, c);
      s = s.defined() ? s + tk : tk;
    }
    e = e.defined() ? select(i == r, s, e) : s;
  }
  return e;
}

}  // namespace

int64_t winograd_tile(int64_t OH, int64_t OW) {
  auto tiles = [&](int64_t m) { return ((OH + m - 1) / m) * ((OW + m - 1) / m); };
  return tiles(4) >= 49 ? 4 : tiles(2) >= 49 ? 2 : 0;
}

bool winograd_applies(const std::vector<int64_t>& weights, const Conv2dParams& p) {
  return weights.size() == 6 && weights[2] == 3 && weights[3] == 3 && p.stride_h == 1 && p.stride_w == 1 &&
         p.dilation_h == 1 && p.dilation_w == 1 && p.groups == 1;
}

Buffer winograd_weights(const Buffer& W, int64_t tile) {
  const std::vector<int64_t>& s = W.shape();
  TESSEL_USER_CHECK(s.size() == 6 && s[2] == 3 && s[3] == 3, "winograd_weights: W", shape_str(s),
                    " must be [K/kb, C/cb, 3, 3, cb, kb]");
  const Matrix& G = transforms(tile).G;
  int64_t KO = s[0], CO = s[1], cb = s[4], kb = s[5], a = tile + 2;
  Buffer U({a, a, KO, CO, cb, kb}, W.dtype());
  int64_t block = cb * kb, plane = KO * CO * block;
  for (int64_t o = 0; o < KO * CO; ++o)
    for (int64_t l = 0; l < block; ++l) {
      double g[3][3], gt[6][3];
      for (int r = 0; r < 3; ++r)
        for (int c = 0; c < 3; ++c) g[r][c] = W.get((o * 9 + r * 3 + c) * block + l);
      for (int64_t i = 0; i < a; ++i)
        for (int c = 0; c < 3; ++c) {
          const std::vector<double>& gi = G[size_t(i)];
          gt[i][c] = gi[0] * g[0][c] + gi[1] * g[1][c] + gi[2] * g[2][c];
        }
      for (int64_t i = 0; i < a; ++i)
        for (int64_t j = 0; j < a; ++j) {
          const std::vector<double>& gj = G[size_t(j)];
          U.set((i * a + j) * plane + o * block + l, gt[i][0] * gj[0] + gt[i][1] * gj[1] + gt[i][2] * gj[2]);
        }
    }
  return U;
}

namespace {
// The weights as users have them (OIHW, or HWIO) transformed: blocked as NCHW[x]c's, then G g G^T.
Buffer winograd_weights_of(const Buffer& W, bool hwio, int64_t cb, int64_t kb, int64_t tile) {
  const std::vector<int64_t>& s = W.shape();
  int64_t K = hwio ? s.back() : s[0], C = hwio ? s[2] : s[1];
  bool three = s.size() == 4 && s[hwio ? 0 : 2] == 3 && s[hwio ? 1 : 3] == 3;
  TESSEL_USER_CHECK(three && cb > 0 && kb > 0 && K % kb == 0 && C % cb == 0, "winograd_weights_",
                    hwio ? "hwio" : "oihw", ": W", shape_str(s), " must be ", hwio ? "[3, 3, C, K]" : "[K, C, 3, 3]",
                    " with K a multiple of kb=", kb, " and C of cb=", cb);
  // -> [K/kb, C/cb, 3, 3, cb, kb], from [3, 3, C/cb, cb, K/kb, kb] or [K/kb, kb, C/cb, cb, 3, 3]
  Buffer blocked = hwio ? transposed(W, {3, 3, C / cb, cb, K / kb, kb}, {4, 2, 0, 1, 3, 5})
                        : transposed(W, {K / kb, kb, C / cb, cb, 3, 3}, {0, 2, 4, 5, 3, 1});
  return winograd_weights(blocked, tile);
}
}  // namespace

Buffer winograd_weights_oihw(const Buffer& W, int64_t cb, int64_t kb, int64_t tile) {
  return winograd_weights_of(W, false, cb, kb, tile);
}
Buffer winograd_weights_hwio(const Buffer& W, int64_t cb, int64_t kb, int64_t tile) {
  return winograd_weights_of(W, true, cb, kb, tile);
}

Tensor conv2d_winograd_nchw(const Tensor& X, const Tensor& U, const Conv2dParams& p, const std::string& name) {
  check_rank("conv2d_winograd_nchw", "X", X, 4);
  check_rank("conv2d_winograd_nchw", "U", U, 6);
  Tensor packed = nchw_to_nchwc(X, U.shape()[4], name + ".pack");
  return nchwc_to_nchw(conv2d_winograd_nchwc(packed, U, p, name + ".nchwc"), name);
}

Tensor conv2d_winograd_nhwc(const Tensor& X, const Tensor& U, const Conv2dParams& p, const std::string& name) {
  check_rank("conv2d_winograd_nhwc", "X", X, 4);
  check_rank("conv2d_winograd_nhwc", "U", U, 6);
  const std::vector<int64_t>& s = X.shape();
  int cb = int(U.shape()[4]);
  TESSEL_USER_CHECK(s[3] % cb == 0, "conv2d_winograd_nhwc: C=", s[3], " must be a multiple of U's block ", cb);
  Tensor packed = compute({s[0], s[3] / cb, s[1], s[2], cb},
                          [&](Var n, Var c, Var h, Var w, Var b) { return X(n, h, w, c * cb + b); }, name + ".pack",
                          "layout");
  Tensor y = conv2d_winograd_nchwc(packed, U, p, name + ".nchwc");
  const std::vector<int64_t>& ys = y.shape();
  int kb = int(ys[4]);
  return compute({ys[0], ys[2], ys[3], ys[1] * ys[4]},
                 [&](Var n, Var h, Var w, Var k) { return y(n, k / kb, h, w, k % kb); }, name, "layout");
}

Tensor conv2d_winograd_nchwc(const Tensor& X, const Tensor& U, const Conv2dParams& p, const std::string& name) {
  check_rank("conv2d_winograd_nchwc", "X", X, 5);
  check_rank("conv2d_winograd_nchwc", "U", U, 6);
  const std::vector<int64_t>&xs = X.shape(), &us = U.shape();
  int64_t N = xs[0], CO = xs[1], H = xs[2], W = xs[3], cb = xs[4], KO = us[2], kb = us[5];
  int64_t a = us[0], m = a - 2;
  TESSEL_USER_CHECK((a == 4 || a == 6) && us[1] == a && us[3] == CO && us[4] == cb, "conv2d_winograd_nchwc: U",
                    shape_str(us), " must be [4, 4 or 6, 6, K/kb, ", CO, ", ", cb, ", kb] (winograd_weights) for X",
                    shape_str(xs));
  const Transforms& f = transforms(m);
  TESSEL_USER_CHECK(p.stride_h == 1 && p.stride_w == 1 && p.dilation_h == 1 && p.dilation_w == 1 && p.groups == 1,
                    "conv2d_winograd_nchwc: stride, dilation and groups must be 1");
  int64_t OH = H + 2 * p.pad_h - 2, OW = W + 2 * p.pad_w - 2;
  TESSEL_USER_CHECK(OH > 0 && OW > 0, "conv2d_winograd_nchwc: a 3x3 window does not fit X", shape_str(xs));
  int64_t TH = (OH + m - 1) / m, TW = (OW + m - 1) / m, T = TH * TW;
  DType t = X.dtype();
  // Padded to whole tiles: rows and columns past the image read as zeros.
  Tensor Xp = pad(X, {0, 0, p.pad_h, p.pad_w, 0},
                  {0, 0, TH * m + 2 - H - p.pad_h, TW * m + 2 - W - p.pad_w, 0}, 0.0, name + ".pad");
  Expr tw = int(TW), mm = int(m);
  // Input transform, B^T d B: along the rows of each tile, then along its columns.
  Tensor D = compute({N, CO, T, a, a, cb}, ComputeFn([&](const std::vector<Var>& v) {
    Expr y = (v[2] / tw) * mm + v[3], x = (v[2] % tw) * mm;
    return apply_rows(f.BT, v[4], [&](int s) { return Xp(v[0], v[1], y, x + s, v[5]); }, t);
  }), name + ".rows", "winograd_input");
  Tensor V = compute({a, a, N, CO, T, cb}, ComputeFn([&](const std::vector<Var>& v) {
    return apply_rows(f.BT, v[0], [&](int r) { return D(v[2], v[3], v[4], r, v[1], v[5]); }, t);
  }), name + ".input", "winograd_input");
  // One product of the channels per point of the input tile, each a 1x1 convolution over
  // the tiles.
  IterVar rc = reduce_axis(CO, "rc"), ri = reduce_axis(cb, "ri");
  Tensor M = compute({a, a, N, KO, T, kb}, ComputeFn([&](const std::vector<Var>& v) {
    return sum(V(v[0], v[1], v[2], rc, v[4], ri) * U(v[0], v[1], v[3], rc, ri, v[5]), {rc, ri});
  }), name + ".product", "winograd_product");
  // Output transform, A^T m A, along the columns, then the rows.
  Tensor O = compute({N, KO, T, a, m, kb}, ComputeFn([&](const std::vector<Var>& v) {
    return apply_rows(f.AT, v[4], [&](int nu) { return M(v[3], nu, v[0], v[1], v[2], v[5]); }, t);
  }), name + ".columns", "winograd_output");
  return compute({N, KO, OH, OW, kb}, ComputeFn([&](const std::vector<Var>& v) {
    Expr tile = (v[2] / mm) * tw + v[3] / mm;
    return apply_rows(f.AT, v[2] % mm, [&](int e) { return O(v[0], v[1], tile, e, v[3] % mm, v[4]); }, t);
  }), name, "winograd");
}

}  // namespace tessel::ops
