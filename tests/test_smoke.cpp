#include <gtest/gtest.h>

#include "tessel/tessel.h"

using namespace tessel;

TEST(Smoke, Matmul) {
  int M = 64, N = 48, K = 32;
  Tensor A = placeholder({M, K}, float32, "A");
  Tensor B = placeholder({K, N}, float32, "B");
  IterVar k = reduce_axis(K, "k");
  Tensor C = compute({M, N}, [&](Var i, Var j) { return sum(A(i, k) * B(k, j), {k}); }, "C");
  Schedule s({C});
  auto [io, ii] = s[C].split("i", 8);
  auto [jo, ji] = s[C].split("j", 16);
  s[C].reorder({io, jo, "k", ii, ji});
  s[C].vectorize(ji);
  s[C].parallel(io);
  std::cout << lower(s, {A, B, C}).str();
  Module m = build(s, {A, B, C});
  Buffer a({M, K}, float32), b({K, N}, float32), c({M, N}, float32);
  a.fill_random(1), b.fill_random(2);
  m(a, b, c);
  double err = 0;
  for (int i = 0; i < M; ++i)
    for (int j = 0; j < N; ++j) {
      double r = 0;
      for (int x = 0; x < K; ++x) r += a.data<float>()[i * K + x] * b.data<float>()[x * N + j];
      err = std::max(err, std::abs(r - c.data<float>()[i * N + j]));
    }
  EXPECT_LT(err, 1e-4);
}
