// Reductions over any set of axes: ReduceSum/Mean/Max, and the helper that softmax, layer
// norm and the global pools share.
#include <algorithm>

#include "graph/Operators.h"

namespace tessel::graph {

Tensor reduce(const Tensor& x, std::vector<int64_t> axes, bool keep, const std::string& kind, const std::string& name,
              const std::function<Expr(Expr, const std::vector<Expr>&)>& pre) {
  std::sort(axes.begin(), axes.end());
  axes.erase(std::unique(axes.begin(), axes.end()), axes.end());
  const std::vector<int64_t>& s = x.shape();
  std::vector<int64_t> shape;
  int64_t count = 1;
  for (size_t k = 0; k < s.size(); ++k) {
    bool reduced = std::count(axes.begin(), axes.end(), int64_t(k)) > 0;
    if (reduced) count *= s[k];
    if (!reduced || keep) shape.push_back(reduced ? 1 : s[k]);
  }
  std::vector<IterVar> r;
  for (int64_t a : axes) r.push_back(reduce_axis(s[size_t(a)], "r" + std::to_string(a)));
  return compute(shape, ComputeFn([&](const std::vector<Var>& v) {
    std::vector<Expr> at, out(v.begin(), v.end());
    for (size_t k = 0, j = 0, o = 0; k < s.size(); ++k) {
      bool reduced = j < axes.size() && axes[j] == int64_t(k);
      at.push_back(reduced ? Expr(r[j++].var()) : Expr(v[o]));
      if (!reduced || keep) ++o;
    }
    Expr e = x(at);
    if (pre) e = pre(e, out);
    if (kind == "max") return max(e, r);
    if (kind == "mean") return sum(e * make_const(e.dtype(), 1.0 / double(count)), r);
    return sum(e, r);
  }), name, "reduce");
}

void add_reduce_ops(OpTable& t) {
  for (std::string kind : {"Sum", "Mean", "Max"}) {
    t["Reduce" + kind] = [kind](const OpInputs& in) {
      const Tensor& x = in[0];
      // ReduceSum's axes became an input at opset 13 (the other reductions' at 18).
      bool input_axes = kind == "Sum" && in.node.opset >= 13;
      std::vector<int64_t> axes = input_axes ? (in.given(1) ? in.ints(1, "axes") : std::vector<int64_t>{})
                                             : in.node.attr_ints("axes");
      if (axes.empty() && input_axes && in.node.attr_int("noop_with_empty_axes", 0))
        return std::vector<Tensor>{output(x.shape(), [&](const std::vector<Var>& i) {
          return x(std::vector<Expr>(i.begin(), i.end()));
        }, in, "elemwise")};
      if (axes.empty())
        for (int k = 0; k < x.ndim(); ++k) axes.push_back(k);
      for (int64_t& a : axes) a = normalize_axis(in, a, x.ndim());
      std::string k = kind == "Sum" ? "sum" : kind == "Mean" ? "mean" : "max";
      return std::vector<Tensor>{reduce(x, axes, in.node.attr_int("keepdims", 1) != 0, k, stage_name(in))};
    };
  }
}

}  // namespace tessel::graph
