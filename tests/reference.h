#pragma once
// Reference implementations (plain loops, Eigen for matrix products) and helpers.
#include <gtest/gtest.h>

#include <Eigen/Dense>
#include <cmath>
#include <functional>
#include <sstream>

#include "tessel/ops.h"
#include "tessel/tessel.h"
#include "gpu_targets.h"

namespace ref {

using tessel::Buffer;

inline Buffer random(std::vector<int64_t> shape, uint64_t seed, tessel::DType t = tessel::float32,
                     double lo = -1, double hi = 1) {
  Buffer b(std::move(shape), t);
  b.fill_random(seed, lo, hi);
  return b;
}

// Row-major strides of a shape.
inline std::vector<int64_t> strides(const std::vector<int64_t>& s) {
  std::vector<int64_t> st(s.size(), 1);
  for (int d = int(s.size()) - 2; d >= 0; --d) st[d] = st[d + 1] * s[d + 1];
  return st;
}

struct View {
  const Buffer& b;
  std::vector<int64_t> st;
  explicit View(const Buffer& buf) : b(buf), st(strides(buf.shape())) {}
  double operator()(std::initializer_list<int64_t> idx) const {
    int64_t f = 0, d = 0;
    for (int64_t i : idx) f += i * st[d++];
    return b.get(f);
  }
};

// Y = X with its dimensions reordered: Y's dimension d is X's dimension perm[d].
inline Buffer permute(const Buffer& X, const std::vector<int>& perm) {
  const auto& xs = X.shape();
  std::vector<int64_t> ys;
  for (int d : perm) ys.push_back(xs[size_t(d)]);
  Buffer Y(ys, X.dtype());
  std::vector<int64_t> xst = strides(xs), idx(ys.size(), 0);
  for (int64_t f = 0; f < Y.size(); ++f) {
    int64_t src = 0;
    for (size_t d = 0; d < ys.size(); ++d) src += idx[d] * xst[size_t(perm[d])];
    Y.set(f, X.get(src));
    for (size_t d = ys.size(); d-- > 0 && ++idx[d] == ys[d];) idx[d] = 0;
  }
  return Y;
}

// C = A x B with Eigen, in double.
inline Buffer matmul(const Buffer& A, const Buffer& B, bool ta = false, bool tb = false) {
  using Mat = Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  auto load = [](const Buffer& X) {
    Mat m(X.shape()[0], X.shape()[1]);
    for (int64_t i = 0; i < X.size(); ++i) m.data()[i] = X.get(i);
    return m;
  };
  Mat a = load(A), b = load(B);
  if (ta) a.transposeInPlace();
  if (tb) b.transposeInPlace();
  Mat c = a * b;
  Buffer C({c.rows(), c.cols()}, tessel::float64);
  for (int64_t i = 0; i < C.size(); ++i) C.set(i, c.data()[i]);
  return C;
}

// A user error whose message holds every one of `parts` (a crash or an internal error fails).
template <typename F>
void expect_error(F f, std::initializer_list<const char*> parts) {
  try {
    f();
  } catch (const tessel::InternalError& e) {
    FAIL() << "internal error instead of a user error: " << e.what();
  } catch (const tessel::Error& e) {
    std::string msg = e.what();
    for (const char* p : parts) EXPECT_NE(msg.find(p), std::string::npos) << "'" << p << "' missing from: " << msg;
    return;
  }
  FAIL() << "no error was raised";
}

// Builds and runs a schedule on the given inputs; returns the outputs (zero-initialised).
inline std::vector<Buffer> run(const tessel::Schedule& s, const std::vector<tessel::Tensor>& args,
                               const std::vector<Buffer>& inputs, const tessel::BuildOptions& opts = {}) {
  tessel::Module m = tessel::build(s, args, opts);
  std::vector<Buffer> all = inputs, outs;
  for (size_t i = inputs.size(); i < args.size(); ++i) {
    outs.emplace_back(args[i].shape(), args[i].dtype());
    all.push_back(outs.back());
  }
  m(all);
  return outs;
}

// How often `what` occurs in `text` (instructions in assembly, lines in generated source).
inline size_t occurrences(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

// Whether lowered code copies a local (register) block out in a loop: a loop whose first
// statement reads a `.local` buffer on its right-hand side.
inline bool copies_local_in_a_loop(const std::string& lowered) {
  std::istringstream lines(lowered);
  bool after_for = false;
  for (std::string line; std::getline(lines, line);) {
    size_t local = line.find(".local["), assign = line.find(" = ");
    if (after_for && local != std::string::npos && assign != std::string::npos && local > assign) return true;
    after_for = line.find("for (") != std::string::npos;
  }
  return false;
}

inline void expect_close(const Buffer& got, const Buffer& want, double tol = 1e-4) {
  ASSERT_EQ(got.shape(), want.shape());
  EXPECT_LE(tessel::max_relative_error(got, want), tol);
}

// Reference convolution, NCHW, any groups.
inline Buffer conv2d_nchw(const Buffer& X, const Buffer& W, const tessel::ops::Conv2dParams& p) {
  auto xs = X.shape(), ws = W.shape();
  int64_t N = xs[0], C = xs[1], H = xs[2], Wd = xs[3], K = ws[0], Cg = ws[1], R = ws[2], S = ws[3];
  int64_t OH = (H + 2 * p.pad_h - p.dilation_h * (R - 1) - 1) / p.stride_h + 1;
  int64_t OW = (Wd + 2 * p.pad_w - p.dilation_w * (S - 1) - 1) / p.stride_w + 1;
  int64_t Kg = K / p.groups;
  Buffer out({N, K, OH, OW}, X.dtype());
  View x(X), w(W);
  auto os = strides(out.shape());
  for (int64_t n = 0; n < N; ++n)
    for (int64_t k = 0; k < K; ++k)
      for (int64_t oy = 0; oy < OH; ++oy)
        for (int64_t ox = 0; ox < OW; ++ox) {
          double acc = 0;
          for (int64_t c = 0; c < Cg; ++c)
            for (int64_t r = 0; r < R; ++r)
              for (int64_t s = 0; s < S; ++s) {
                int64_t iy = oy * p.stride_h + r * p.dilation_h - p.pad_h;
                int64_t ix = ox * p.stride_w + s * p.dilation_w - p.pad_w;
                if (iy < 0 || iy >= H || ix < 0 || ix >= Wd) continue;
                acc += x({n, (k / Kg) * Cg + c, iy, ix}) * w({k, c, r, s});
              }
          out.set(n * os[0] + k * os[1] + oy * os[2] + ox, acc);
        }
  (void)C;
  return out;
}

}  // namespace ref
