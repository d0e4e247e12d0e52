// Operators that move elements without arithmetic (Reshape, Transpose, Concat, Slice,
// Gather, Expand, ...) and those whose result depends only on shapes (Shape, Size,
// ConstantOfShape): the latter are folded into constants when the graph is loaded.
#include <algorithm>
#include <numeric>

#include "graph/Operators.h"

namespace tessel::graph {

namespace {

std::vector<Expr> exprs(const std::vector<Var>& v) { return std::vector<Expr>(v.begin(), v.end()); }

Tensor constant_tensor(const OpInputs& in, const std::vector<int64_t>& shape, DType t,
                       const std::function<double(int64_t)>& value) {
  return output(shape, [&](const std::vector<Var>& i) {
    int64_t n = product(shape);
    if (n == 0) return make_const(t, 0);
    Expr linear = 0;
    for (size_t k = 0; k < shape.size(); ++k) linear = linear * Expr(int(shape[k])) + i[k];
    Expr e = make_const(t, value(n - 1));
    for (int64_t k = n - 2; k >= 0; --k) e = select(linear == Expr(int(k)), make_const(t, value(k)), e);
    return e;
  }, in, "injective");
}

std::vector<int64_t> axes_of(const OpInputs& in, size_t input, const char* attr) {
  // Opset 13 moved Squeeze/Unsqueeze/ReduceSum's axes from an attribute to an input.
  if (in.node.opset >= 13) return in.given(input) ? in.ints(input, "axes") : std::vector<int64_t>{};
  return in.node.attr_ints(attr);
}

}  // namespace

void add_shape_ops(OpTable& t) {
  t["Reshape"] = [](const OpInputs& in) {
    std::vector<int64_t> want = in.ints(1, "shape"), from = in[0].shape();
    bool allowzero = in.node.attr_int("allowzero", 0) != 0;
    int infer = -1;
    for (size_t k = 0; k < want.size(); ++k) {
      if (want[k] == 0 && !allowzero) {
        if (k >= from.size()) in.fail("shape entry ", k, " is 0 (copy) but the input has rank ", from.size());
        want[k] = from[k];
      } else if (want[k] == -1) {
        if (infer >= 0) in.fail("the shape has more than one -1");
        infer = int(k);
      } else if (want[k] < 0) {
        in.fail("shape entry ", k, " is ", want[k], " (valid: a size, 0 to copy, -1 to infer)");
      }
    }
    if (infer >= 0) {
      int64_t known = 1;
      for (size_t k = 0; k < want.size(); ++k) known *= int(k) == infer ? 1 : want[k];
      want[size_t(infer)] = known ? product(from) / known : 0;
    }
    return std::vector<Tensor>{reshape(in, in[0], want, stage_name(in))};
  };
  t["Flatten"] = [](const OpInputs& in) {
    std::vector<int64_t> s = in[0].shape();
    // axis counts from 0 to the rank: -1 is rank - 1, not the rank.
    int64_t rank = int64_t(s.size()), axis = in.node.attr_int("axis", 1);
    if (axis < -rank || axis > rank) in.fail("axis ", axis, " is outside -", rank, " to ", rank);
    if (axis < 0) axis += rank;
    return std::vector<Tensor>{
        reshape(in, in[0], {product(s, 0, size_t(axis)), product(s, size_t(axis))}, stage_name(in))};
  };
  t["Squeeze"] = [](const OpInputs& in) {
    std::vector<int64_t> s = in[0].shape(), axes = axes_of(in, 1, "axes"), out;
    for (int64_t& a : axes) a = normalize_axis(in, a, int64_t(s.size()));
    for (size_t k = 0; k < s.size(); ++k) {
      bool named = std::count(axes.begin(), axes.end(), int64_t(k)) > 0;
      if (named && s[k] != 1) in.fail("cannot squeeze axis ", k, " of size ", s[k]);
      if (!(named || (axes.empty() && s[k] == 1))) out.push_back(s[k]);
    }
    return std::vector<Tensor>{reshape(in, in[0], out, stage_name(in))};
  };
  t["Unsqueeze"] = [](const OpInputs& in) {
    std::vector<int64_t> s = in[0].shape(), axes = axes_of(in, 1, "axes");
    int64_t rank = int64_t(s.size() + axes.size());
    for (int64_t& a : axes) a = normalize_axis(in, a, rank);
    std::vector<int64_t> out;
    for (int64_t k = 0, from = 0; k < rank; ++k)
      out.push_back(std::count(axes.begin(), axes.end(), k) ? 1 : s.at(size_t(from++)));
    return std::vector<Tensor>{reshape(in, in[0], out, stage_name(in))};
  };
  t["Transpose"] = [](const OpInputs& in) {
    const Tensor& x = in[0];
    size_t rank = x.shape().size();
    std::vector<int64_t> perm = in.node.attr_ints("perm"), shape(rank);
    if (perm.empty())
      for (size_t k = 0; k < rank; ++k) perm.push_back(int64_t(rank - 1 - k));
    std::vector<int64_t> sorted = perm;
    std::sort(sorted.begin(), sorted.end());
    for (size_t k = 0; k < sorted.size(); ++k)
      if (sorted.size() != rank || sorted[k] != int64_t(k)) in.fail("perm is not a permutation of 0..", rank - 1);
    for (size_t k = 0; k < rank; ++k) shape[k] = x.shape()[size_t(perm[k])];
    return std::vector<Tensor>{output(shape, [&](const std::vector<Var>& i) {
      std::vector<Expr> at(rank);
      for (size_t k = 0; k < rank; ++k) at[size_t(perm[k])] = i[k];
      return x(at);
    }, in, "injective")};
  };
  t["Concat"] = [](const OpInputs& in) {
    std::vector<int64_t> shape = in[0].shape();
    int64_t axis = normalize_axis(in, in.node.attr_int("axis", 0), int64_t(shape.size()));
    std::vector<int64_t> offsets{0};
    for (size_t k = 0; k < in.size(); ++k) {
      std::vector<int64_t> s = in[k].shape();
      for (size_t d = 0; d < shape.size(); ++d)
        if (s.size() != shape.size() || (int64_t(d) != axis && s[d] != shape[d]))
          in.fail("input ", k, " has shape ", shape_str(s), ", which does not fit ", shape_str(in[0].shape()),
                  " along any axis but ", axis);
      offsets.push_back(offsets.back() + s[size_t(axis)]);
    }
    shape[size_t(axis)] = offsets.back();
    return std::vector<Tensor>{output(shape, [&](const std::vector<Var>& i) {
      Expr e;
      for (size_t k = in.size(); k-- > 0;) {
        // Each input's read is clamped into it: select evaluates both of its sides.
        std::vector<Expr> at = exprs(i);
        int64_t len = in[k].shape()[size_t(axis)];
        if (len == 0) continue;
        at[size_t(axis)] = min(max(i[size_t(axis)] - Expr(int(offsets[k])), Expr(0)), Expr(int(len - 1)));
        e = e.defined() ? select(i[size_t(axis)] < Expr(int(offsets[k + 1])), in[k](at), e) : in[k](at);
      }
      return e;
    }, in, "injective")};
  };
  t["Slice"] = [](const OpInputs& in) {
    const Tensor& x = in[0];
    std::vector<int64_t> s = x.shape(), starts, ends, axes, steps;
    if (in.node.opset < 10) {
      starts = in.node.attr_ints("starts"), ends = in.node.attr_ints("ends"), axes = in.node.attr_ints("axes");
    } else {
      starts = in.ints(1, "starts"), ends = in.ints(2, "ends");
      if (in.given(3)) axes = in.ints(3, "axes");
      if (in.given(4)) steps = in.ints(4, "steps");
    }
    if (axes.empty())
      for (size_t k = 0; k < starts.size(); ++k) axes.push_back(int64_t(k));
    if (steps.empty()) steps.assign(starts.size(), 1);
    if (ends.size() != starts.size() || axes.size() != starts.size() || steps.size() != starts.size())
      in.fail("starts, ends, axes and steps must have the same length");
    std::vector<int64_t> first(s.size(), 0), step(s.size(), 1), shape = s;
    for (size_t k = 0; k < starts.size(); ++k) {
      size_t a = size_t(normalize_axis(in, axes[k], int64_t(s.size())));
      int64_t d = s[a], st = steps[k], b = starts[k], e = ends[k];
      if (st == 0) in.fail("a step is 0");
      if (b < 0) b += d;
      if (e < 0) e += d;
      if (st > 0) b = std::clamp<int64_t>(b, 0, d), e = std::clamp<int64_t>(e, 0, d);
      else b = std::clamp<int64_t>(b, 0, d - 1), e = std::clamp<int64_t>(e, -1, d - 1);
      first[a] = b, step[a] = st;
      shape[a] = std::max<int64_t>(0, st > 0 ? (e - b + st - 1) / st : (b - e + (-st) - 1) / (-st));
    }
    return std::vector<Tensor>{output(shape, [&](const std::vector<Var>& i) {
      std::vector<Expr> at;
      for (size_t k = 0; k < s.size(); ++k) at.push_back(Expr(int(first[k])) + i[k] * Expr(int(step[k])));
      return x(at);
    }, in, "injective")};
  };
  t["Gather"] = [](const OpInputs& in) {
    const Tensor &x = in[0], &idx = in[1];
    if (!idx.dtype().is_integer()) in.fail("indices must be integers, not ", idx.dtype().str());
    int64_t axis = normalize_axis(in, in.node.attr_int("axis", 0), x.ndim());
    std::vector<int64_t> shape(x.shape().begin(), x.shape().begin() + axis);
    shape.insert(shape.end(), idx.shape().begin(), idx.shape().end());
    shape.insert(shape.end(), x.shape().begin() + axis + 1, x.shape().end());
    int64_t dim = x.shape()[size_t(axis)];
    return std::vector<Tensor>{output(shape, [&](const std::vector<Var>& i) {
      std::vector<Expr> at(i.begin(), i.begin() + axis), pick(i.begin() + axis, i.begin() + axis + idx.ndim());
      Expr j = cast(int32, idx(pick));
      at.push_back(select(j < Expr(0), j + Expr(int(dim)), j));  // negative indices count from the end
      at.insert(at.end(), i.begin() + axis + idx.ndim(), i.end());
      return x(at);
    }, in, "injective")};
  };
  t["Expand"] = [](const OpInputs& in) {
    const Tensor& x = in[0];
    std::vector<int64_t> shape = broadcast_shapes(in, x.shape(), in.ints(1, "shape"));
    return std::vector<Tensor>{output(shape, [&](const std::vector<Var>& i) { return broadcast_load(x, i, shape); },
                                      in, "broadcast")};
  };
  t["Shape"] = [](const OpInputs& in) {
    std::vector<int64_t> s = in[0].shape();
    int64_t rank = int64_t(s.size());
    int64_t b = in.node.attr_int("start", 0), e = in.node.attr_int("end", rank);  // opset 15
    if (b < 0) b += rank;
    if (e < 0) e += rank;
    b = std::clamp<int64_t>(b, 0, rank), e = std::clamp<int64_t>(e, b, rank);
    std::vector<int64_t> part(s.begin() + b, s.begin() + e);
    return std::vector<Tensor>{constant_tensor(in, {int64_t(part.size())}, int64,
                                               [&](int64_t k) { return double(part[size_t(k)]); })};
  };
  t["Size"] = [](const OpInputs& in) {
    int64_t n = product(in[0].shape());
    return std::vector<Tensor>{constant_tensor(in, {}, int64, [n](int64_t) { return double(n); })};
  };
  t["ConstantOfShape"] = [](const OpInputs& in) {
    std::vector<int64_t> shape = in.ints(0, "shape");
    Buffer v = in.node.has("value") ? in.node.attrs.at("value").t : Buffer({1}, float32);
    if (v.size() != 1) in.fail("value must hold one element, not ", v.size());
    double x = v.get(0);
    DType d = v.dtype();
    return std::vector<Tensor>{output(shape, [&](const std::vector<Var>&) { return make_const(d, x); }, in,
                                      "injective")};
  };
}

}  // namespace tessel::graph
