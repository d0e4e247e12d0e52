// Pooling, softmax, layer norm, element-wise and broadcasting operators.
#include <cmath>

#include "schedules/Common.h"

namespace tessel::ops {

Expr apply_activation(Expr v, Activation act) {
  switch (act) {
    case Activation::None: return v;
    case Activation::Relu: return max(v, make_const(v.dtype(), 0));
    case Activation::Sigmoid: return sigmoid(v);
    case Activation::Tanh: return tanh(v);
    case Activation::Gelu: return v * make_const(v.dtype(), 0.5) * (make_const(v.dtype(), 1) + erf(v * make_const(v.dtype(), M_SQRT1_2)));
  }
  return v;
}

namespace {
Tensor pool(const Tensor& X, const Pool2dParams& p, bool is_max, const std::string& name) {
  const char* op = is_max ? "max_pool2d" : "avg_pool2d";
  check_rank(op, "X", X, 4);
  TESSEL_USER_CHECK(p.kernel_h > 0 && p.kernel_w > 0 && p.stride_h > 0 && p.stride_w > 0, op,
                    ": kernel and stride must be positive");
  TESSEL_USER_CHECK(p.pad_h >= 0 && p.pad_w >= 0 && p.pad_h < p.kernel_h && p.pad_w < p.kernel_w, op,
                    ": padding must be >= 0 and smaller than the kernel");
  auto& s = X.shape();
  int64_t OH = (s[2] + 2 * p.pad_h - p.kernel_h) / p.stride_h + 1;
  int64_t OW = (s[3] + 2 * p.pad_w - p.kernel_w) / p.stride_w + 1;
  TESSEL_USER_CHECK(OH > 0 && OW > 0, op, ": the window does not fit the input ", shape_str(s));
  IterVar ry = reduce_axis(p.kernel_h, "ry"), rx = reduce_axis(p.kernel_w, "rx");
  int sh = int(p.stride_h), sw = int(p.stride_w), ph = int(p.pad_h), pw = int(p.pad_w);
  auto in_bounds = [&](Expr y, Expr x) { return y >= 0 && y < int(s[2]) && x >= 0 && x < int(s[3]); };
  if (is_max) {
    return compute({s[0], s[1], OH, OW}, [&](Var n, Var c, Var i, Var j) {
      Expr y = i * sh + ry - ph, x = j * sw + rx - pw;
      if (!p.pad_h && !p.pad_w) return max(X(n, c, y, x), {ry, rx});
      return max(X(n, c, max(min(y, int(s[2] - 1)), 0), max(min(x, int(s[3] - 1)), 0)), {ry, rx}, in_bounds(y, x));
    }, name, "pool");
  }
  Tensor total = compute({s[0], s[1], OH, OW}, [&](Var n, Var c, Var i, Var j) {
    Expr y = i * sh + ry - ph, x = j * sw + rx - pw;
    if (!p.pad_h && !p.pad_w) return sum(X(n, c, y, x), {ry, rx});
    return sum(X(n, c, max(min(y, int(s[2] - 1)), 0), max(min(x, int(s[3] - 1)), 0)), {ry, rx}, in_bounds(y, x));
  }, name + ".sum", "pool");
  return compute({s[0], s[1], OH, OW}, [&](Var n, Var c, Var i, Var j) {
    // Elements of the window inside the input (padding does not count).
    Expr y0 = max(i * sh - ph, 0), y1 = min(i * sh - ph + int(p.kernel_h), int(s[2]));
    Expr x0 = max(j * sw - pw, 0), x1 = min(j * sw - pw + int(p.kernel_w), int(s[3]));
    return total(n, c, i, j) / cast(X.dtype(), (y1 - y0) * (x1 - x0));
  }, name, "elemwise");
}
}  // namespace

Tensor max_pool2d(const Tensor& X, const Pool2dParams& p, const std::string& name) { return pool(X, p, true, name); }
Tensor avg_pool2d(const Tensor& X, const Pool2dParams& p, const std::string& name) { return pool(X, p, false, name); }

namespace {
// Index lists and shapes without the last (row) dimension.
std::vector<Expr> outer(const std::vector<Var>& v) { return std::vector<Expr>(v.begin(), v.end() - 1); }
std::vector<int64_t> outer_shape(const Tensor& X) {
  std::vector<int64_t> s = X.shape();
  s.pop_back();
  if (s.empty()) s.push_back(1);
  return s;
}
}  // namespace

Tensor softmax(const Tensor& X, const std::string& name) {
  TESSEL_USER_CHECK(X.defined() && X.ndim() >= 1 && X.dtype().is_float(), "softmax: X must be a float tensor");
  int64_t L = X.shape().back();
  bool scalar_outer = X.ndim() == 1;
  auto rows = [&](const std::vector<Var>& v) { return scalar_outer ? std::vector<Expr>{} : outer(v); };
  auto red_idx = [&](const std::vector<Var>& v, Expr last) {
    std::vector<Expr> idx = scalar_outer ? std::vector<Expr>{} : std::vector<Expr>(v.begin(), v.end());
    idx.push_back(last);
    return idx;
  };
  IterVar k1 = reduce_axis(L, "rk");
  Tensor mx = compute(outer_shape(X), ComputeFn([&](const std::vector<Var>& v) {
    return max(X(red_idx(v, k1)), {k1});
  }), name + ".max", "reduce");
  Tensor ex = compute(X.shape(), ComputeFn([&](const std::vector<Var>& v) {
    std::vector<Expr> r = rows(v);
    if (scalar_outer) r = {Expr(0)};
    return exp(X(std::vector<Expr>(v.begin(), v.end())) - mx(r));
  }), name + ".exp", "elemwise");
  IterVar k2 = reduce_axis(L, "rk");
  Tensor sm = compute(outer_shape(X), ComputeFn([&](const std::vector<Var>& v) {
    return sum(ex(red_idx(v, k2)), {k2});
  }), name + ".sum", "reduce");
  return compute(X.shape(), ComputeFn([&](const std::vector<Var>& v) {
    std::vector<Expr> r = rows(v);
    if (scalar_outer) r = {Expr(0)};
    // The row's reciprocal once, a product per element (within an ulp of the quotient): a vector
    // division holds the divider for 10-16 cycles, half of what an element of softmax costs.
    return ex(std::vector<Expr>(v.begin(), v.end())) * (make_const(X.dtype(), 1) / sm(r));
  }), name, "elemwise");
}

Tensor layer_norm(const Tensor& X, const Tensor& gamma, const Tensor& beta, double eps, const std::string& name) {
  TESSEL_USER_CHECK(X.defined() && X.ndim() >= 2 && X.dtype().is_float(),
                    "layer_norm: X must be a float tensor of at least 2 dimensions");
  int64_t L = X.shape().back();
  check_rank("layer_norm", "gamma", gamma, 1);
  check_rank("layer_norm", "beta", beta, 1);
  TESSEL_USER_CHECK(gamma.shape()[0] == L && beta.shape()[0] == L, "layer_norm: gamma and beta must have ", L,
                    " elements (the last dimension of X)");
  DType t = X.dtype();
  IterVar k1 = reduce_axis(L, "rk");
  Tensor mean = compute(outer_shape(X), ComputeFn([&](const std::vector<Var>& v) {
    std::vector<Expr> idx(v.begin(), v.end());
    idx.push_back(k1);
    return sum(X(idx) * make_const(t, 1.0 / double(L)), {k1});
  }), name + ".mean", "reduce");
  IterVar k2 = reduce_axis(L, "rk");
  Tensor var = compute(outer_shape(X), ComputeFn([&](const std::vector<Var>& v) {
    std::vector<Expr> idx(v.begin(), v.end());
    idx.push_back(k2);
    Expr d = X(idx) - mean(std::vector<Expr>(v.begin(), v.end()));
    return sum(d * d * make_const(t, 1.0 / double(L)), {k2});
  }), name + ".var", "reduce");
  return compute(X.shape(), ComputeFn([&](const std::vector<Var>& v) {
    std::vector<Expr> r = outer(v);
    Expr x = X(std::vector<Expr>(v.begin(), v.end()));
    return (x - mean(r)) * rsqrt(var(r) + make_const(t, eps)) * gamma(v.back()) + beta(v.back());
  }), name, "elemwise");
}

namespace {
// Numpy broadcasting over trailing dimensions.
Tensor broadcast(const Tensor& A, const Tensor& B, const std::string& name, const char* op,
                 Expr (*f)(Expr, Expr)) {
  size_t nd = std::max(A.shape().size(), B.shape().size());
  std::vector<int64_t> shape(nd);
  for (size_t d = 0; d < nd; ++d) {
    int64_t a = d + A.shape().size() >= nd ? A.shape()[d + A.shape().size() - nd] : 1;
    int64_t b = d + B.shape().size() >= nd ? B.shape()[d + B.shape().size() - nd] : 1;
    TESSEL_USER_CHECK(a == b || a == 1 || b == 1, op, ": shapes ", shape_str(A.shape()), " and ", shape_str(B.shape()),
                      " do not broadcast (dimension ", d, ": ", a, " vs ", b, ")");
    shape[d] = std::max(a, b);
  }
  auto index = [&](const Tensor& T, const std::vector<Var>& v) {
    std::vector<Expr> idx;
    size_t off = nd - T.shape().size();
    for (size_t d = 0; d < T.shape().size(); ++d) idx.push_back(T.shape()[d] == 1 ? Expr(0) : Expr(v[d + off]));
    return idx;
  };
  bool same = A.shape() == B.shape();
  return compute(shape, ComputeFn([&](const std::vector<Var>& v) { return f(A(index(A, v)), B(index(B, v))); }), name,
                 same ? "elemwise" : "broadcast");
}
}  // namespace

Tensor add(const Tensor& A, const Tensor& B, const std::string& n) {
  return broadcast(A, B, n, "add", [](Expr a, Expr b) { return a + b; });
}
Tensor subtract(const Tensor& A, const Tensor& B, const std::string& n) {
  return broadcast(A, B, n, "subtract", [](Expr a, Expr b) { return a - b; });
}
Tensor multiply(const Tensor& A, const Tensor& B, const std::string& n) {
  return broadcast(A, B, n, "multiply", [](Expr a, Expr b) { return a * b; });
}
Tensor divide(const Tensor& A, const Tensor& B, const std::string& n) {
  return broadcast(A, B, n, "divide", [](Expr a, Expr b) { return a / b; });
}
Tensor maximum(const Tensor& A, const Tensor& B, const std::string& n) {
  return broadcast(A, B, n, "maximum", [](Expr a, Expr b) { return max(a, b); });
}

Tensor activation(const Tensor& X, Activation act, const std::string& name) {
  return compute(X.shape(), ComputeFn([&](const std::vector<Var>& v) {
    return apply_activation(X(std::vector<Expr>(v.begin(), v.end())), act);
  }), name, "elemwise");
}
Tensor relu(const Tensor& X, const std::string& name) { return activation(X, Activation::Relu, name); }

Tensor bias_add(const Tensor& X, const Tensor& bias, int axis, const std::string& name) {
  check_rank("bias_add", "bias", bias, 1);
  int ax = axis < 0 ? X.ndim() + axis : axis;
  TESSEL_USER_CHECK(ax >= 0 && ax < X.ndim(), "bias_add: axis ", axis, " is outside X", shape_str(X.shape()));
  TESSEL_USER_CHECK(X.shape()[ax] == bias.shape()[0], "bias_add: bias has ", bias.shape()[0],
                    " elements but X", shape_str(X.shape()), " has ", X.shape()[ax], " along axis ", ax);
  return compute(X.shape(), ComputeFn([&](const std::vector<Var>& v) {
    return X(std::vector<Expr>(v.begin(), v.end())) + bias(v[ax]);
  }), name, "broadcast");
}

Tensor cast(const Tensor& X, DType t, const std::string& name) {
  return compute(X.shape(), ComputeFn([&](const std::vector<Var>& v) {
    return tessel::cast(t, X(std::vector<Expr>(v.begin(), v.end())));
  }), name, "elemwise");
}

}  // namespace tessel::ops
