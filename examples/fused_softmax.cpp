// A custom fused kernel written in the DSL: row softmax whose max, exponentials and sum
// are all computed inside the row loop (compute_at), vectorized and parallel.
#include <chrono>
#include <cmath>
#include <cstdio>

#include "tessel/tessel.h"

using namespace tessel;

int main() {
  const int64_t rows = 4096, cols = 1024;
  Tensor X = placeholder({rows, cols}, float32, "X");
  IterVar k1 = reduce_axis(cols, "k1"), k2 = reduce_axis(cols, "k2");
  Tensor mx = compute({rows}, [&](Var i) { return max(X(i, k1), {k1}); }, "row_max");
  Tensor ex = compute({rows, cols}, [&](Var i, Var j) { return exp(X(i, j) - mx(i)); }, "exps");
  Tensor sm = compute({rows}, [&](Var i) { return sum(ex(i, k2), {k2}); }, "row_sum");
  Tensor Y = compute({rows, cols}, [&](Var i, Var j) { return ex(i, j) / sm(i); }, "softmax");

  Schedule s({Y});
  s[Y].parallel("i");
  auto [jo, ji] = s[Y].split("j", 16);
  s[Y].vectorize(ji);
  // Everything for one row is computed inside that row's iteration.
  for (Tensor t : {mx, ex, sm}) s[t].compute_at(s[Y], "i");
  auto [eo, ei] = s[ex].split("j", 16);
  s[ex].vectorize(ei);
  // The max and the sum reduce 16 partial results per lane, then across lanes.
  for (Tensor t : {mx, sm}) {
    auto [ro, ri] = s[t].split(t.reduce_axis(0).name(), 16);
    Tensor rf = s.rfactor(t, ri);
    s[rf].compute_at(s[Y], "i");
    s[rf].reorder({t.reduce_axis(0).name() + ".outer", rf.axis(0)});
    s[rf].vectorize(rf.axis(0));
  }
  std::string ir = lower(s, {X, Y}).str();
  std::printf("// lowered IR:\n%s\n", ir.c_str());

  Module m = build(s, {X, Y});
  Buffer x({rows, cols}, float32), y({rows, cols}, float32);
  x.fill_random(3, -4, 4);
  m(x, y);
  double err = 0;
  for (int64_t i = 0; i < rows; i += 97) {
    double mxv = -INFINITY, sum = 0;
    for (int64_t j = 0; j < cols; ++j) mxv = std::max(mxv, x.get(i * cols + j));
    for (int64_t j = 0; j < cols; ++j) sum += std::exp(x.get(i * cols + j) - mxv);
    for (int64_t j = 0; j < cols; ++j)
      err = std::max(err, std::abs(std::exp(x.get(i * cols + j) - mxv) / sum - y.get(i * cols + j)));
  }
  double best = 1e30;
  for (int rep = 0; rep < 10; ++rep) {
    auto t0 = std::chrono::steady_clock::now();
    m(x, y);
    best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  // max, subtract+exp, sum, divide: about 4 operations per element (exp counted as one).
  std::printf("softmax %lldx%lld: %.2f ms, %.1f GFLOP/s, %.1f GB/s, max abs error %.2g\n", (long long)rows,
              (long long)cols, best * 1e3, 4.0 * rows * cols / best / 1e9, 2.0 * 4 * rows * cols / best / 1e9, err);
  return err < 1e-5 ? 0 : 1;
}
