// Convolution, GEMM and MatMul, pooling, batch norm, softmax and layer norm. Where the
// operator library has the operator (conv2d, matmul, softmax over the last axis, ...), the
// node is built from it, so that its default schedule and the tuner recognise it.
#include <algorithm>
#include <cmath>
#include <limits>

#include "graph/Operators.h"
#include "tessel/ops.h"

namespace tessel::graph {

namespace {

std::vector<Expr> exprs(const std::vector<Var>& v) { return std::vector<Expr>(v.begin(), v.end()); }

// Padding of a convolution or pool over its spatial dimensions, from `pads` or `auto_pad`.
struct Window {
  std::vector<int64_t> kernel, stride, dilation, before, after, out;
};

Window window(const OpInputs& in, const std::vector<int64_t>& spatial, std::vector<int64_t> kernel, bool ceil_mode) {
  size_t n = spatial.size();
  Window w;
  w.kernel = kernel;
  w.stride = in.node.attr_ints("strides", std::vector<int64_t>(n, 1));
  w.dilation = in.node.attr_ints("dilations", std::vector<int64_t>(n, 1));
  std::vector<int64_t> pads = in.node.attr_ints("pads", std::vector<int64_t>(2 * n, 0));
  if (kernel.size() != n || w.stride.size() != n || w.dilation.size() != n || pads.size() != 2 * n)
    in.fail("kernel_shape, strides and dilations need ", n, " values and pads ", 2 * n, " for ", n,
            " spatial dimensions");
  std::string autopad = in.node.attr_string("auto_pad", "NOTSET");
  for (size_t d = 0; d < n; ++d) {
    if (w.stride[d] < 1 || w.dilation[d] < 1 || kernel[d] < 1) in.fail("kernel, strides and dilations must be >= 1");
    int64_t extent = (kernel[d] - 1) * w.dilation[d] + 1;
    int64_t b = pads[d], e = pads[d + n];
    if (autopad == "SAME_UPPER" || autopad == "SAME_LOWER") {
      int64_t out = (spatial[d] + w.stride[d] - 1) / w.stride[d];
      int64_t total = std::max<int64_t>(0, (out - 1) * w.stride[d] + extent - spatial[d]);
      b = autopad == "SAME_UPPER" ? total / 2 : total - total / 2;
      e = total - b;
    } else if (autopad == "VALID") {
      b = e = 0;
    } else if (autopad != "NOTSET") {
      in.fail("auto_pad '", autopad, "' is not one of NOTSET, SAME_UPPER, SAME_LOWER, VALID");
    }
    int64_t span = spatial[d] + b + e - extent;
    if (span < 0) in.fail("the window (", extent, ") is larger than the padded input (", spatial[d] + b + e, ")");
    int64_t out = (ceil_mode ? (span + w.stride[d] - 1) / w.stride[d] : span / w.stride[d]) + 1;
    // A window that ceil mode adds must start inside the input or its left padding.
    if (ceil_mode && (out - 1) * w.stride[d] >= spatial[d] + b) --out;
    w.before.push_back(b), w.after.push_back(e), w.out.push_back(out);
  }
  return w;
}

Tensor add_bias(const OpInputs& in, const Tensor& y, const Tensor& bias, int axis) {
  return output(y.shape(), [&](const std::vector<Var>& i) { return y(exprs(i)) + bias(i[size_t(axis)]); }, in,
                "broadcast");
}

enum class Layout { NCHW, NHWC, NCHWc };

// Conv in the model's NCHW, and the two the layout passes make of it: tessel.ConvNhwc, input
// [N, H, W, C], weights [R, S, C/group, K] (depthwise: [R, S, C, multiplier]); and
// tessel.ConvNchwc, input [N, C/cb, H, W, cb], weights [K/kb, C/cb, R, S, cb, kb], no groups.
std::vector<Tensor> conv(const OpInputs& in, Layout layout) {
  const Tensor &x = in[0], &w = in[1];
  bool nhwc = layout == Layout::NHWC, blocked = layout == Layout::NCHWc;
  if (x.ndim() != (blocked ? 5 : 4) || w.ndim() != (blocked ? 6 : 4))
    in.fail("only 2-D convolutions (input [N, C, H, W], weights [K, C/group, R, S]) are supported; the input has ",
            x.ndim(), " dimensions");
  const std::vector<int64_t>& xs = x.shape();
  std::vector<int64_t> ws = w.shape();
  bool wino = in.node.op == "tessel.ConvWinogradNchwc";
  if (wino && ws.size() == 6) ws = {ws[2], ws[3], 3, 3, ws[4], ws[5]};  // U [m + 2, m + 2, K/kb, C/cb, cb, kb]
  int64_t C = nhwc ? xs[3] : blocked ? xs[1] * xs[4] : xs[1], H = nhwc ? xs[1] : xs[2], W = nhwc ? xs[2] : xs[3];
  int64_t groups = in.node.attr_int("group", 1);
  bool depthwise = groups > 1 && groups == C && (nhwc ? ws[2] == C : ws[1] == 1);
  int64_t K = nhwc ? (depthwise ? C * ws[3] : ws[3]) : blocked ? ws[0] * ws[5] : ws[0];
  int64_t per_group = nhwc ? (depthwise ? 1 : ws[2]) : blocked ? ws[1] * ws[4] : ws[1];
  int64_t R = nhwc ? ws[0] : ws[2], S = nhwc ? ws[1] : ws[3];
  if (groups < 1 || C % groups || K % groups || per_group != C / groups)
    in.fail("weights ", shape_str(ws), " do not fit an input of ", C, " channels in ", groups, " groups");
  if (nhwc && groups > 1 && !depthwise) in.fail("grouped convolutions in NHWC are depthwise only");
  if (blocked && groups > 1) in.fail("grouped convolutions in NCHWc are not supported");
  std::vector<int64_t> kernel = in.node.attr_ints("kernel_shape", {R, S});
  if (kernel != std::vector<int64_t>{R, S})
    in.fail("kernel_shape ", shape_str(kernel), " differs from the weights' ", shape_str(ws));
  Window win = window(in, {H, W}, kernel, false);
  Tensor src = x;
  ops::Conv2dParams p;
  p.stride_h = win.stride[0], p.stride_w = win.stride[1];
  p.dilation_h = win.dilation[0], p.dilation_w = win.dilation[1];
  p.groups = groups;
  if (win.before == win.after) {
    p.pad_h = win.before[0], p.pad_w = win.before[1];
  } else {  // asymmetric: pad first, convolve without padding
    std::vector<int64_t> before{0, 0, win.before[0], win.before[1]}, after{0, 0, win.after[0], win.after[1]};
    if (nhwc) before = {0, win.before[0], win.before[1], 0}, after = {0, win.after[0], win.after[1], 0};
    if (blocked) before.push_back(0), after.push_back(0);
    src = ops::pad(x, before, after, 0.0, stage_name(in, 0, "_pad"));
  }
  bool bias = in.given(2);
  std::string name = stage_name(in, 0, bias ? "_conv" : "");
  if (wino && !ops::winograd_applies(ws, p)) in.fail("Winograd convolutions are 3x3, stride 1, dilation 1");
  Tensor y = wino      ? ops::conv2d_winograd_nchwc(src, w, p, name)
             : blocked ? ops::conv2d_nchwc(src, w, p, name)
             : nhwc  ? (depthwise ? ops::depthwise_conv2d_nhwc(src, w, p, name) : ops::conv2d_nhwc(src, w, p, name))
                     : (depthwise ? ops::depthwise_conv2d_nchw(src, w, p, name) : ops::conv2d_nchw(src, w, p, name));
  if (!bias) return {y};
  if (!blocked) return {add_bias(in, y, in[2], nhwc ? 3 : 1)};
  const Tensor& b = in[2];
  Expr kb = int(ws[5]);
  return {output(y.shape(), [&](const std::vector<Var>& i) { return y(exprs(i)) + b(i[1] * kb + i[4]); }, in,
                 "broadcast")};
}

std::vector<Tensor> gemm(const OpInputs& in) {
  const Tensor &a = in[0], &b = in[1];
  if (a.ndim() != 2 || b.ndim() != 2) in.fail("A and B must be matrices");
  bool ta = in.node.attr_int("transA", 0), tb = in.node.attr_int("transB", 0);
  double alpha = in.node.attr_float("alpha", 1), beta = in.node.attr_float("beta", 1);
  int64_t ka = ta ? a.shape()[0] : a.shape()[1], kb = tb ? b.shape()[1] : b.shape()[0];
  if (ka != kb) in.fail("A ", shape_str(a.shape()), " and B ", shape_str(b.shape()), " do not multiply");
  bool epilogue = alpha != 1 || (in.given(2) && beta != 0);
  Tensor y = ops::matmul(a, b, ta, tb, stage_name(in, 0, epilogue ? "_mm" : ""));
  if (!epilogue) return {y};
  std::vector<int64_t> shape = y.shape();
  if (in.given(2)) broadcast_shapes(in, in[2].shape(), shape);
  DType d = y.dtype();
  return {output(shape, [&](const std::vector<Var>& i) {
    Expr e = y(exprs(i));
    if (alpha != 1) e = e * make_const(d, alpha);
    if (in.given(2) && beta != 0) {
      Expr c = broadcast_load(in[2], i, shape);
      e = e + (beta == 1 ? c : c * make_const(d, beta));
    }
    return e;
  }, in, "broadcast")};
}

std::vector<Tensor> matmul(const OpInputs& in) {
  Tensor a = in[0], b = in[1];
  if (a.ndim() == 2 && b.ndim() == 2) return {ops::matmul(a, b, false, false, stage_name(in))};
  std::vector<int64_t> shape_a = a.shape(), shape_b = b.shape();
  int64_t rows = 1, batches = 1;
  for (int k = 0; k + 1 < a.ndim(); ++k) rows *= shape_a[size_t(k)];
  for (int k = 0; k + 2 < a.ndim(); ++k) batches *= shape_a[size_t(k)];
  if (a.ndim() > 2 && b.ndim() == 2 && shape_a.back() == shape_b[0]) {
    // [..., M, K] x [K, N]: one GEMM over all the rows, the library's, which schedules know.
    std::vector<int64_t> out(shape_a.begin(), shape_a.end() - 1);
    out.push_back(shape_b[1]);
    Tensor flat = reshape(in, a, {rows, shape_a.back()}, stage_name(in, 0, "_rows"));
    return {reshape(in, ops::matmul(flat, b, false, false, stage_name(in, 0, "_mm")), out, stage_name(in))};
  }
  bool same_batches =
      a.ndim() > 2 && a.ndim() == b.ndim() && std::equal(shape_a.begin(), shape_a.end() - 2, shape_b.begin());
  if (same_batches && shape_a.back() == shape_b[shape_b.size() - 2]) {
    // Equal batch dimensions: one batched GEMM over their product.
    int64_t M = shape_a[shape_a.size() - 2], K = shape_a.back(), N = shape_b.back();
    std::vector<int64_t> out(shape_a.begin(), shape_a.end() - 1);
    out.push_back(N);
    Tensor a3 = a.ndim() == 3 ? a : reshape(in, a, {batches, M, K}, stage_name(in, 0, "_a"));
    Tensor b3 = b.ndim() == 3 ? b : reshape(in, b, {batches, K, N}, stage_name(in, 0, "_b"));
    if (a.ndim() == 3) return {ops::batch_matmul(a3, b3, false, false, stage_name(in))};
    return {reshape(in, ops::batch_matmul(a3, b3, false, false, stage_name(in, 0, "_bmm")), out, stage_name(in))};
  }
  // numpy's rules: a vector operand gains a dimension that the result then drops; the batch
  // dimensions broadcast.
  std::vector<int64_t> sa = a.shape(), sb = b.shape();
  if (sa.empty() || sb.empty()) in.fail("MatMul of a scalar");
  bool va = sa.size() == 1, vb = sb.size() == 1;
  if (va) sa.insert(sa.begin(), 1);
  if (vb) sb.push_back(1);
  int64_t K = sa.back();
  if (sb[sb.size() - 2] != K) in.fail("A ", shape_str(a.shape()), " and B ", shape_str(b.shape()), " do not multiply");
  std::vector<int64_t> batch = broadcast_shapes(in, std::vector<int64_t>(sa.begin(), sa.end() - 2),
                                                std::vector<int64_t>(sb.begin(), sb.end() - 2));
  std::vector<int64_t> shape = batch;
  if (!va) shape.push_back(sa[sa.size() - 2]);
  if (!vb) shape.push_back(sb.back());
  IterVar k = reduce_axis(K, "rk");
  auto operand = [&](const Tensor& t, const std::vector<Expr>& bidx, Expr r, Expr c, bool vec, bool first) {
    std::vector<Expr> at;
    size_t nb = t.shape().size() - (vec ? 1 : 2);
    for (size_t d = 0; d < nb; ++d)
      at.push_back(t.shape()[d] == 1 && batch[d + batch.size() - nb] != 1 ? Expr(0) : bidx[d + batch.size() - nb]);
    if (vec) at.push_back(first ? c : r);
    else at.push_back(r), at.push_back(c);
    return t(at);
  };
  return {output(shape, [&](const std::vector<Var>& i) {
    std::vector<Expr> bidx(i.begin(), i.begin() + int64_t(batch.size()));
    Expr row = va ? Expr(0) : Expr(i[batch.size()]);
    Expr col = vb ? Expr(0) : Expr(i.back());
    return sum(operand(a, bidx, row, k.var(), va, true) * operand(b, bidx, k.var(), col, vb, false), {k});
  }, in, "batch_matmul")};
}

// A pool's or global pool's spatial axes in `layout`: they start at `first`, and in the
// layouts the layout pass makes, the channels (NHWC) or the channel block (NCHWc) follow them.
struct SpatialAxes {
  size_t first;
  bool last;  // an axis after the spatial ones
  explicit SpatialAxes(Layout layout) : first(layout == Layout::NHWC ? 1 : 2), last(layout != Layout::NCHW) {}
};

std::vector<Tensor> pool(const OpInputs& in, bool is_max, Layout layout) {
  const Tensor& x = in[0];
  auto [first, last] = SpatialAxes(layout);
  if (x.ndim() < 3 + (layout == Layout::NCHWc)) in.fail("the input must be [N, C, spatial...]");
  if (in.node.outputs.size() > 1 && in.node.outputs[1] >= 0) in.fail("the Indices output is not supported");
  size_t n = size_t(x.ndim()) - first - last;
  std::vector<int64_t> spatial(x.shape().begin() + int64_t(first), x.shape().begin() + int64_t(first + n));
  Window w = window(in, spatial, in.node.attr_ints("kernel_shape"), in.node.attr_int("ceil_mode", 0) != 0);
  if (!is_max && w.dilation != std::vector<int64_t>(n, 1)) in.fail("AveragePool has no dilations before opset 19");
  // Pad to cover every window, ceil mode's extra one included.
  std::vector<int64_t> before(first, 0), after(first, 0);
  for (size_t d = 0; d < n; ++d) {
    before.push_back(w.before[d]);
    int64_t need = (w.out[d] - 1) * w.stride[d] + (w.kernel[d] - 1) * w.dilation[d] + 1;
    after.push_back(std::max<int64_t>(0, need - spatial[d] - w.before[d]));
  }
  if (last) before.push_back(0), after.push_back(0);
  DType t = x.dtype();
  double fill = is_max ? (t.is_float() ? -std::numeric_limits<double>::infinity()
                                       : t.is_uint() ? 0.0 : -std::pow(2.0, t.bits - 1))
                       : 0.0;
  Tensor padded = ops::pad(x, before, after, fill, stage_name(in, 0, "_pad"));
  bool include_pad = in.node.attr_int("count_include_pad", 0) != 0;
  std::vector<IterVar> r;
  for (size_t d = 0; d < n; ++d) r.push_back(reduce_axis(w.kernel[d], "r" + std::to_string(d)));
  std::vector<int64_t> shape(x.shape().begin(), x.shape().begin() + int64_t(first));
  shape.insert(shape.end(), w.out.begin(), w.out.end());
  if (last) shape.push_back(x.shape().back());
  auto window_at = [&](const std::vector<Var>& i) {
    std::vector<Expr> at(i.begin(), i.begin() + int64_t(first));
    for (size_t d = 0; d < n; ++d)
      at.push_back(i[d + first] * Expr(int(w.stride[d])) + r[d].var() * Expr(int(w.dilation[d])));
    if (last) at.push_back(i.back());
    return at;
  };
  if (is_max)
    return {output(shape, [&](const std::vector<Var>& i) { return max(padded(window_at(i)), r); }, in, "pool")};
  Tensor total = compute(shape, ComputeFn([&](const std::vector<Var>& i) { return sum(padded(window_at(i)), r); }),
                         stage_name(in, 0, "_sum"), "pool");
  return {output(shape, [&](const std::vector<Var>& i) {
    // The window's elements inside the input (or inside the padding, with count_include_pad),
    // never the ones ceil mode adds past the end.
    Expr count;
    for (size_t d = 0; d < n; ++d) {
      Expr lo = i[d + first] * Expr(int(w.stride[d])) - Expr(int(w.before[d]));
      Expr hi = lo + Expr(int(w.kernel[d]));
      Expr first = include_pad ? Expr(int(-w.before[d])) : Expr(0);
      Expr last = Expr(int(spatial[d] + (include_pad ? w.after[d] : 0)));
      Expr c = min(hi, last) - max(lo, first);
      count = count.defined() ? count * c : c;
    }
    return total(exprs(i)) / cast(t, count);
  }, in, "elemwise")};
}

std::vector<Tensor> softmax(const OpInputs& in) {
  const Tensor& x = in[0];
  if (!x.dtype().is_float()) in.fail("input must be floating point");
  int64_t rank = x.ndim();
  // From opset 13 one axis (default the last); before, the input is seen as 2-D at `axis`
  // (default 1) and each row of the trailing dimensions is normalised.
  bool v13 = in.node.opset >= 13;
  int64_t axis = normalize_axis(in, in.node.attr_int("axis", v13 ? -1 : 1), rank);
  std::vector<int64_t> axes;
  for (int64_t a = axis; a < (v13 ? axis + 1 : rank); ++a) axes.push_back(a);
  if (axes == std::vector<int64_t>{rank - 1}) return {ops::softmax(x, stage_name(in))};
  Tensor mx = reduce(x, axes, true, "max", stage_name(in, 0, "_max"));
  std::vector<int64_t> shape = x.shape();
  auto stat = [&](const Tensor& s, const std::vector<Var>& i) { return broadcast_load(s, i, shape); };
  Tensor ex = compute(shape, ComputeFn([&](const std::vector<Var>& i) { return exp(x(exprs(i)) - stat(mx, i)); }),
                      stage_name(in, 0, "_exp"), "elemwise");
  Tensor sm = reduce(ex, axes, true, "sum", stage_name(in, 0, "_sum"));
  return {output(shape, [&](const std::vector<Var>& i) { return ex(exprs(i)) / stat(sm, i); }, in, "elemwise")};
}

std::vector<Tensor> layer_norm(const OpInputs& in) {
  const Tensor &x = in[0], &scale = in[1];
  if (!x.dtype().is_float()) in.fail("input must be floating point");
  int64_t rank = x.ndim(), axis = normalize_axis(in, in.node.attr_int("axis", -1), rank);
  double eps = in.node.attr_float("epsilon", 1e-5);
  std::vector<int64_t> shape = x.shape(), axes;
  for (int64_t a = axis; a < rank; ++a) axes.push_back(a);
  broadcast_shapes(in, scale.shape(), shape);
  if (in.given(2)) broadcast_shapes(in, in[2].shape(), shape);
  auto live = [&](size_t k) { return in.node.outputs.size() > k && in.node.outputs[k] >= 0; };
  if (axis == rank - 1 && rank >= 2 && !live(1) && !live(2) && scale.ndim() == 1 && in.given(2) && in[2].ndim() == 1)
    return {ops::layer_norm(x, scale, in[2], eps, stage_name(in))};
  DType t = x.dtype();
  auto stat = [&](const Tensor& s, const std::vector<Var>& i) { return broadcast_load(s, i, shape); };
  Tensor mean = reduce(x, axes, true, "mean", live(1) ? stage_name(in, 1) : stage_name(in, 0, "_mean"));
  Tensor var = reduce(x, axes, true, "mean", stage_name(in, 0, "_var"),
                      [&](Expr e, const std::vector<Expr>& o) { Expr d = e - mean(o); return d * d; });
  Tensor inv = compute(var.shape(), ComputeFn([&](const std::vector<Var>& i) {
    return rsqrt(var(exprs(i)) + make_const(t, eps));
  }), live(2) ? stage_name(in, 2) : stage_name(in, 0, "_inv"), "elemwise");
  std::vector<Tensor> out{output(shape, [&](const std::vector<Var>& i) {
    Expr y = (x(exprs(i)) - stat(mean, i)) * stat(inv, i) * broadcast_load(scale, i, shape);
    return in.given(2) ? y + broadcast_load(in[2], i, shape) : y;
  }, in, "elemwise")};
  out.resize(in.node.outputs.size());
  if (live(1)) out[1] = mean;
  if (live(2)) out[2] = inv;
  return out;
}

}  // namespace

void add_nn_ops(OpTable& t) {
  t["Conv"] = [](const OpInputs& in) { return conv(in, Layout::NCHW); };
  t["tessel.ConvNhwc"] = [](const OpInputs& in) { return conv(in, Layout::NHWC); };
  t["tessel.ConvNchwc"] = [](const OpInputs& in) { return conv(in, Layout::NCHWc); };
  t["tessel.ConvWinogradNchwc"] = [](const OpInputs& in) { return conv(in, Layout::NCHWc); };
  t["Gemm"] = gemm;
  t["MatMul"] = matmul;
  for (auto [suffix, layout] : {std::pair{"", Layout::NCHW}, {"Nhwc", Layout::NHWC}, {"Nchwc", Layout::NCHWc}}) {
    std::string prefix = layout == Layout::NCHW ? "" : "tessel.";
    t[prefix + "MaxPool" + suffix] = [layout](const OpInputs& in) { return pool(in, true, layout); };
    t[prefix + "AveragePool" + suffix] = [layout](const OpInputs& in) { return pool(in, false, layout); };
    t[prefix + "GlobalAveragePool" + suffix] = [layout](const OpInputs& in) {
      std::vector<int64_t> axes;
      auto [first, last] = SpatialAxes(layout);
      for (int64_t k = int64_t(first); k < in[0].ndim() - last; ++k) axes.push_back(k);
      return std::vector<Tensor>{reduce(in[0], axes, true, "mean", stage_name(in))};
    };
  }
  // The layout pass's transforms into NCHWc (attribute `block`: channels per block) and back.
  t["tessel.ToNchwc"] = [](const OpInputs& in) {
    return std::vector<Tensor>{ops::nchw_to_nchwc(in[0], in.node.attr_int("block", 8), stage_name(in))};
  };
  t["tessel.FromNchwc"] = [](const OpInputs& in) {
    return std::vector<Tensor>{ops::nchwc_to_nchw(in[0], stage_name(in))};
  };
  t["BatchNormalization"] = [](const OpInputs& in) {
    if (in.node.attr_int("training_mode", 0) || (in.node.opset < 14 && in.node.outputs.size() > 1))
      in.fail("training mode (batch statistics, running mean and variance outputs) is not supported; Tessel "
              "compiles networks for inference");
    const Tensor &x = in[0], &scale = in[1], &bias = in[2], &mean = in[3], &var = in[4];
    double eps = in.node.attr_float("epsilon", 1e-5);
    for (const Tensor* p : {&scale, &bias, &mean, &var})
      if (p->ndim() != 1 || x.ndim() < 2 || p->shape()[0] != x.shape()[1])
        in.fail("scale, B, mean and var must be vectors of the ", x.shape().size() < 2 ? 0 : x.shape()[1],
                " channels (dimension 1 of the input)");
    DType d = x.dtype();
    return std::vector<Tensor>{output(x.shape(), [&](const std::vector<Var>& i) {
      Expr c = i[1];
      return (x(exprs(i)) - mean(c)) * (scale(c) * rsqrt(var(c) + make_const(d, eps))) + bias(c);
    }, in, "broadcast")};
  };
  t["Softmax"] = softmax;
  t["LayerNormalization"] = layer_norm;
}

}  // namespace tessel::graph
