// Element-wise and broadcasting operators: arithmetic, activations, Clip, Cast, and the
// operators that are identities at inference (Identity, Dropout).
#include <cmath>
#include <limits>
#include <optional>

#include "graph/Operators.h"

namespace tessel::graph {

namespace {

Tensor unary(const OpInputs& in, const std::function<Expr(Expr)>& f, const std::string& tag = "elemwise") {
  const Tensor& x = in[0];
  return output(x.shape(), [&](const std::vector<Var>& i) { return f(x(std::vector<Expr>(i.begin(), i.end()))); },
                in, tag);
}

Tensor binary(const OpInputs& in, const std::function<Expr(Expr, Expr)>& f) {
  const Tensor &a = in[0], &b = in[1];
  if (a.dtype() != b.dtype() && in.node.op != "Pow")
    in.fail("inputs have different element types, ", a.dtype().str(), " and ", b.dtype().str());
  std::vector<int64_t> shape = broadcast_shapes(in, a.shape(), b.shape());
  return output(shape, [&](const std::vector<Var>& i) {
    return f(broadcast_load(a, i, shape), broadcast_load(b, i, shape));
  }, in, a.shape() == b.shape() ? "elemwise" : "broadcast");
}

Expr scalar_of(const Tensor& t) { return t(std::vector<Expr>(t.shape().size(), Expr(0))); }

}  // namespace

void add_elementwise_ops(OpTable& t) {
  t["Add"] = [](const OpInputs& in) { return std::vector<Tensor>{binary(in, [](Expr a, Expr b) { return a + b; })}; };
  t["Sub"] = [](const OpInputs& in) { return std::vector<Tensor>{binary(in, [](Expr a, Expr b) { return a - b; })}; };
  t["Mul"] = [](const OpInputs& in) { return std::vector<Tensor>{binary(in, [](Expr a, Expr b) { return a * b; })}; };
  t["Div"] = [](const OpInputs& in) { return std::vector<Tensor>{binary(in, [](Expr a, Expr b) { return a / b; })}; };
  t["Pow"] = [](const OpInputs& in) {
    DType base = in[0].dtype();
    return std::vector<Tensor>{binary(in, [base](Expr a, Expr b) {
      if (base.is_float()) return pow(a, cast(base, b));
      // Integer powers are exact in double up to 2^53; ONNX rounds toward zero like C.
      return cast(base, pow(cast(float64, a), cast(float64, b)));
    })};
  };
  auto act = [&t](const char* name, std::function<Expr(Expr)> f) {
    t[name] = [f](const OpInputs& in) {
      if (!in[0].dtype().is_float()) in.fail("input must be floating point, not ", in[0].dtype().str());
      return std::vector<Tensor>{unary(in, f)};
    };
  };
  act("Relu", [](Expr x) { return max(x, make_const(x.dtype(), 0)); });
  act("Sigmoid", [](Expr x) { return sigmoid(x); });
  act("Tanh", [](Expr x) { return tanh(x); });
  act("Erf", [](Expr x) { return erf(x); });
  act("Exp", [](Expr x) { return exp(x); });
  // Exact GELU (fuse_patterns makes it from its Erf pattern; ONNX defines it from opset 20).
  act("Gelu", [](Expr x) {
    auto c = [&](double v) { return make_const(x.dtype(), v); };
    return x * c(0.5) * (c(1) + erf(x * c(M_SQRT1_2)));
  });
  act("Sqrt", [](Expr x) { return sqrt(x); });
  act("Reciprocal", [](Expr x) { return make_const(x.dtype(), 1) / x; });
  t["Neg"] = [](const OpInputs& in) { return std::vector<Tensor>{unary(in, [](Expr x) { return -x; })}; };
  t["LeakyRelu"] = [](const OpInputs& in) {
    double alpha = in.node.attr_float("alpha", 0.01);
    return std::vector<Tensor>{unary(in, [alpha](Expr x) {
      return select(x < make_const(x.dtype(), 0), x * make_const(x.dtype(), alpha), x);
    })};
  };
  t["Clip"] = [](const OpInputs& in) {
    // Before opset 11 the bounds are attributes; from 11 on, optional scalar inputs.
    std::optional<Expr> lo, hi;
    DType d = in[0].dtype();
    if (in.node.opset < 11) {
      lo = make_const(d, in.node.attr_float("min", -std::numeric_limits<float>::max()));
      hi = make_const(d, in.node.attr_float("max", std::numeric_limits<float>::max()));
    }
    Tensor tlo = in.given(1) ? in[1] : Tensor(), thi = in.given(2) ? in[2] : Tensor();
    for (const Tensor* b : {&tlo, &thi})
      if (b->defined() && (b->ndim() > 1 || (b->ndim() == 1 && b->shape()[0] != 1)))
        in.fail("min and max must be scalars, got ", shape_str(b->shape()));
    return std::vector<Tensor>{unary(in, [&](Expr x) {
      if (lo) x = max(x, *lo);
      if (tlo.defined()) x = max(x, scalar_of(tlo));
      if (hi) x = min(x, *hi);
      if (thi.defined()) x = min(x, scalar_of(thi));
      return x;
    })};
  };
  t["Cast"] = [](const OpInputs& in) {
    DType to = onnx_dtype(in.node.attr_int("to", 1), in.where());
    return std::vector<Tensor>{unary(in, [to](Expr x) {
      // ONNX casts to bool by comparing with zero, as C does.
      return to.is_bool() ? cast(to, x != make_const(x.dtype(), 0)) : cast(to, x);
    })};
  };
  t["Identity"] = [](const OpInputs& in) { return std::vector<Tensor>{unary(in, [](Expr x) { return x; })}; };
  t["Dropout"] = [](const OpInputs& in) {
    // Inference: the input passes through and the mask is all true. Training mode drops at
    // random, which a compiled network does not do, unless the ratio is zero.
    bool training = in.given(2) && in.constant(2, "training_mode").get(0) != 0;
    if (training && (in.given(1) ? in.constant(1, "ratio").get(0) : in.node.attr_float("ratio", 0.5)) != 0)
      in.fail("training mode drops elements at random; Tessel compiles networks for inference "
              "(set training_mode to false, or the ratio to 0)");
    std::vector<Tensor> out{unary(in, [](Expr x) { return x; })};
    if (in.node.outputs.size() > 1 && in.node.outputs[1] >= 0)
      out.push_back(output(in[0].shape(), [](const std::vector<Var>&) { return make_const(boolean, 1); }, in,
                           "elemwise", 1));
    return out;
  };
}

}  // namespace tessel::graph
