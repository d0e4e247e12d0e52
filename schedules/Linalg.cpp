// matmul, dense and batch_matmul.
#include "schedules/Common.h"

namespace tessel::ops {

Tensor matmul(const Tensor& A, const Tensor& B, bool ta, bool tb, const std::string& name) {
  check_rank("matmul", "A", A, 2);
  check_rank("matmul", "B", B, 2);
  int64_t M = ta ? A.shape()[1] : A.shape()[0], K = ta ? A.shape()[0] : A.shape()[1];
  int64_t KB = tb ? B.shape()[1] : B.shape()[0], N = tb ? B.shape()[0] : B.shape()[1];
  TESSEL_USER_CHECK(K == KB, "matmul: A", shape_str(A.shape()), ta ? " (transposed)" : "", " and B",
                    shape_str(B.shape()), tb ? " (transposed)" : "", " disagree on the reduction length: ", K,
                    " vs ", KB);
  IterVar k = reduce_axis(K, "k");
  return compute({M, N}, [&](Var i, Var j) {
    Expr a = ta ? A(k, i) : A(i, k);
    Expr b = tb ? B(j, k) : B(k, j);
    return sum(a * b, {k});
  }, name, "matmul");
}

PackedMatmul matmul_packed(const Tensor& A, const Tensor& B, int64_t bn, const std::string& name) {
  check_rank("matmul_packed", "A", A, 2);
  check_rank("matmul_packed", "B", B, 2);
  int64_t M = A.shape()[0], K = A.shape()[1], N = B.shape()[1];
  TESSEL_USER_CHECK(B.shape()[0] == K, "matmul_packed: A", shape_str(A.shape()), " and B", shape_str(B.shape()),
                    " disagree on K");
  TESSEL_USER_CHECK(bn > 0 && N % bn == 0, "matmul_packed: N=", N, " must be a multiple of the panel width bn=", bn);
  int b = int(bn);
  Tensor P = compute({N / bn, K, bn}, [&](Var x, Var y, Var z) { return B(y, x * b + z); }, name + ".packedB", "layout");
  IterVar k = reduce_axis(K, "k");
  Tensor C = compute({M, N}, [&](Var i, Var j) { return sum(A(i, k) * P(j / b, k, j % b), {k}); }, name, "matmul");
  return {P, C};
}

Schedule hand_schedule(const PackedMatmul& mm, int64_t bm, int64_t mr) {
  Schedule s({mm.C});
  int64_t bn = mm.packed_b.shape()[2];
  Tensor CC = s.cache_write(mm.C, "local");
  Stage c = s[mm.C];
  auto t = c.tile("i", "j", bm, bn);
  auto [iio, iii] = c.split(t.xi, mr);
  c.parallel(c.fuse(t.xo, t.yo));
  auto [jvo, jvi] = c.split(t.yi, std::min<int64_t>(bn, 16));
  c.vectorize(jvi);
  Stage cc = s[CC];
  cc.compute_at(c, iio);  // the local block is mr x bn: registers after unrolling
  auto [jo, ji] = cc.split("j", std::min<int64_t>(bn, 16));
  auto [ko, ki] = cc.split("k", 4);
  cc.reorder({ko, ki, "i", jo, ji});
  cc.unroll(ki);
  cc.unroll("i");
  cc.unroll(jo);
  cc.vectorize(ji);
  Stage p = s[mm.packed_b];
  p.parallel("i");
  auto [po, pi] = p.split("k", std::min<int64_t>(bn, 16));
  p.vectorize(pi);
  return s;
}

Tensor dense(const Tensor& X, const Tensor& W, const std::optional<Tensor>& bias, Activation act,
             const std::string& name) {
  check_rank("dense", "X", X, 2);
  check_rank("dense", "W", W, 2);
  TESSEL_USER_CHECK(X.shape()[1] == W.shape()[1], "dense: X", shape_str(X.shape()), " and W", shape_str(W.shape()),
                    " need the same K (X is [M, K], W is [N, K])");
  bool epilogue = bias.has_value() || act != Activation::None;
  Tensor Y = matmul(X, W, false, true, epilogue ? name + ".matmul" : name);
  if (!epilogue) return Y;
  if (bias) {
    check_rank("dense", "bias", *bias, 1);
    TESSEL_USER_CHECK(bias->shape()[0] == W.shape()[0], "dense: bias", shape_str(bias->shape()), " must have N = ",
                      W.shape()[0], " elements");
  }
  return compute(Y.shape(), [&](Var i, Var j) {
    Expr v = Y(i, j);
    if (bias) v = v + (*bias)(j);
    return apply_activation(v, act);
  }, name, "elemwise");
}

Tensor batch_matmul(const Tensor& A, const Tensor& B, bool ta, bool tb, const std::string& name) {
  check_rank("batch_matmul", "A", A, 3);
  check_rank("batch_matmul", "B", B, 3);
  TESSEL_USER_CHECK(A.shape()[0] == B.shape()[0], "batch_matmul: batch sizes differ: ", A.shape()[0], " vs ",
                    B.shape()[0]);
  int64_t M = ta ? A.shape()[2] : A.shape()[1], K = ta ? A.shape()[1] : A.shape()[2];
  int64_t KB = tb ? B.shape()[2] : B.shape()[1], N = tb ? B.shape()[1] : B.shape()[2];
  TESSEL_USER_CHECK(K == KB, "batch_matmul: reduction lengths differ: ", K, " vs ", KB);
  IterVar k = reduce_axis(K, "rk");  // "k" is the third spatial axis here
  return compute({A.shape()[0], M, N}, [&](Var b, Var i, Var j) {
    Expr x = ta ? A(b, k, i) : A(b, i, k);
    Expr y = tb ? B(b, j, k) : B(b, k, j);
    return sum(x * y, {k});
  }, name, "matmul");
}

}  // namespace tessel::ops
