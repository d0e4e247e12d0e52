// oneDNN's convolution as a candidate for a convolution kernel in NCHWc (the layout oneDNN's
// own CPU convolutions use) or NHWC, depthwise ones included: the convolution with its bias,
// and the nodes fused after it that oneDNN computes as post-ops before writing (a residual
// Add, Relu, Clip). The weights are reordered once, here, into the layout oneDNN's kernel
// chooses.
#include <oneapi/dnnl/dnnl.hpp>
#include <omp.h>

#include <algorithm>
#include <array>
#include <optional>
#include <tuple>
#include <unordered_map>

#include "graph/Vendor.h"

namespace tessel::graph {

namespace {

using tag = dnnl::memory::format_tag;

// The descriptor of a tensor in a layout the layout passes make: NHWC, or [N, C/cb, H, W, cb]
// with cb a vector (nChw8c, nChw16c) or 1 (NCHW).
std::optional<dnnl::memory::desc> activation_desc(const std::vector<int64_t>& s) {
  using dt = dnnl::memory::data_type;
  if (s.size() == 4) return dnnl::memory::desc({s[0], s[3], s[1], s[2]}, dt::f32, tag::nhwc);
  if (s.size() != 5) return std::nullopt;
  tag t = s[4] == 1 ? tag::nchw : s[4] == 8 ? tag::nChw8c : s[4] == 16 ? tag::nChw16c : tag::undef;
  if (t == tag::undef) return std::nullopt;
  return dnnl::memory::desc({s[0], s[1] * s[4], s[2], s[3]}, dt::f32, t);
}

// The weights as the layout passes store them: NHWC's [R, S, C, K] (hwio; depthwise [R, S, C,
// m]: hwigo with C groups), NCHWc's [K/kb, C/cb, R, S, cb, kb] (OIhw8i8o, or Oihw8o, which
// oneDNN calls Abcd8a, for blocks of one input channel).
std::optional<dnnl::memory::desc> weights_desc(const std::vector<int64_t>& s, int64_t groups) {
  using dt = dnnl::memory::data_type;
  if (s.size() == 4 && groups == 1) return dnnl::memory::desc({s[3], s[2], s[0], s[1]}, dt::f32, tag::hwio);
  if (s.size() == 4 && groups == s[2]) return dnnl::memory::desc({s[2], s[3], 1, s[0], s[1]}, dt::f32, tag::hwigo);
  if (s.size() != 6 || groups != 1) return std::nullopt;
  tag t = tag::undef;
  if (s[5] == 8) t = s[4] == 1 ? tag::Abcd8a : s[4] == 8 ? tag::OIhw8i8o : tag::undef;
  if (s[5] == 16) t = s[4] == 1 ? tag::Abcd16a : s[4] == 16 ? tag::OIhw16i16o : tag::undef;
  if (t == tag::undef) return std::nullopt;
  return dnnl::memory::desc({s[0] * s[5], s[1] * s[4], s[2], s[3]}, dt::f32, t);
}

// A scalar constant input (Clip's bounds), if the node has one.
std::optional<float> scalar(const Graph& g, const Node& n, size_t input) {
  if (n.inputs.size() <= input || n.inputs[input] < 0) return std::nullopt;
  const Value& v = g.values[size_t(n.inputs[input])];
  if (!v.is_constant() || v.elements() != 1) return std::nullopt;
  return float(v.constant.get(0));
}

// A convolution computing one slice of the output: its arguments, made once, and where each
// call points them, (oneDNN's argument, the step's, offset in floats).
struct Slice {
  dnnl::convolution_forward prim;
  dnnl::stream stream;
  std::unordered_map<int, dnnl::memory> args;
  std::vector<std::tuple<int, int, int64_t>> bound;
};

enum class PostOp { Relu, Clip, Residual };

// The convolution as the graph has it, the post-ops after it, and which of the step's
// arguments it reads and writes (-1: none).
struct Conv {
  dnnl::memory::desc src, dst, weights;  // in the layouts of the graph's tensors
  const Buffer* weight_data;
  std::vector<int64_t> weight_shape, stride, dilation, pads;
  int64_t groups;
  bool blocked;
  std::vector<std::pair<PostOp, std::array<float, 2>>> post;  // Clip's bounds
  int src_arg, dst_arg, bias_arg = -1, residual_arg = -1;
};

// `slices` convolutions, each of a part of the output: output channel blocks in NCHWc, output
// rows in NHWC (for one image, both contiguous in memory). A row slice reads the input rows
// its windows cover, padded where they pass the image's edge. None where oneDNN has no fast
// kernel for a slice.
std::optional<std::vector<Slice>> make_slices(const Conv& c, int64_t slices, const dnnl::engine& engine) {
  dnnl::memory::dims xd = c.src.dims(), yd = c.dst.dims();
  int64_t N = xd[0], C = xd[1], H = xd[2], W = xd[3], K = yd[1], OH = yd[2], OW = yd[3];
  int64_t kb = c.blocked ? c.weight_shape[5] : 1, units = c.blocked ? K / kb : OH;
  std::vector<Slice> made;
  for (int64_t s = 0; s < slices; ++s) {
    int64_t from = units * s / slices, to = units * (s + 1) / slices;
    std::optional<dnnl::memory::desc> src = c.src, dst = c.dst, weights = c.weights;
    dnnl::memory::dims pad_l{c.pads[0], c.pads[1]}, pad_r{c.pads[2], c.pads[3]};
    const float* data = c.weight_data->data<float>();
    int64_t src_offset = 0, dst_offset = 0, bias_offset = 0;
    if (slices > 1 && c.blocked) {
      std::vector<int64_t> ws = c.weight_shape;
      data += from * (c.weight_data->size() / ws[0]);
      ws[0] = to - from;
      dst = activation_desc({N, to - from, OH, OW, kb}), weights = weights_desc(ws, c.groups);
      dst_offset = from * OH * OW * kb, bias_offset = from * kb;
    } else if (slices > 1) {
      int64_t first = from * c.stride[0] - c.pads[0];
      int64_t last = (to - 1) * c.stride[0] - c.pads[0] + (c.weight_shape[0] - 1) * c.dilation[0];
      int64_t i0 = std::max<int64_t>(0, first), i1 = std::min(H - 1, last) + 1;
      if (i1 <= i0) return std::nullopt;
      pad_l[0] = i0 - first, pad_r[0] = last - (i1 - 1);
      src = activation_desc({N, i1 - i0, W, C}), dst = activation_desc({N, to - from, OW, K});
      src_offset = i0 * W * C, dst_offset = from * OW * K;
    }
    dnnl::post_ops ops;
    for (auto& [op, bounds] : c.post) {
      if (op == PostOp::Residual) ops.append_binary(dnnl::algorithm::binary_add, *dst);
      else if (op == PostOp::Relu) ops.append_eltwise(1.f, dnnl::algorithm::eltwise_relu, 0.f, 0.f);
      else ops.append_eltwise(1.f, dnnl::algorithm::eltwise_clip, bounds[0], bounds[1]);
    }
    dnnl::primitive_attr attr;
    attr.set_post_ops(ops);
    dnnl::memory::desc any_weights(weights->dims(), dnnl::memory::data_type::f32, tag::any);
    dnnl::memory::desc bias({dst->dims()[1]}, dnnl::memory::data_type::f32, tag::x);
    dnnl::convolution_forward::primitive_desc pd;
    try {
      dnnl::convolution_forward::desc d(dnnl::prop_kind::forward_inference, dnnl::algorithm::convolution_direct, *src,
                                        any_weights, c.bias_arg >= 0 ? bias : dnnl::memory::desc(), *dst,
                                        {c.stride[0], c.stride[1]}, {c.dilation[0] - 1, c.dilation[1] - 1}, pad_l,
                                        pad_r);
      pd = dnnl::convolution_forward::primitive_desc(d, attr, engine);
    } catch (const dnnl::error&) {
      return std::nullopt;  // a shape or post-op oneDNN does not take
    }
    // oneDNN's reference kernels are far slower than any of Tessel's; not a candidate.
    if (std::string(pd.impl_info_str()).rfind("ref", 0) == 0) return std::nullopt;
    Slice sl{dnnl::convolution_forward(pd), dnnl::stream(engine), {}, {}};
    dnnl::memory reordered(pd.weights_desc(), engine), given(*weights, engine, const_cast<float*>(data));
    dnnl::reorder(given, reordered).execute(sl.stream, given, reordered);
    sl.stream.wait();
    sl.args[DNNL_ARG_WEIGHTS] = reordered;
    auto bind = [&](int arg, int step_arg, int64_t offset, const dnnl::memory::desc& d) {
      if (step_arg < 0) return;
      sl.args[arg] = dnnl::memory(d, engine, nullptr);
      sl.bound.emplace_back(arg, step_arg, offset);
    };
    bind(DNNL_ARG_SRC, c.src_arg, src_offset, *src);
    bind(DNNL_ARG_DST, c.dst_arg, dst_offset, *dst);
    bind(DNNL_ARG_BIAS, c.bias_arg, bias_offset, bias);
    for (size_t k = 0; k < c.post.size(); ++k)
      if (c.post[k].first == PostOp::Residual)
        bind(DNNL_ARG_ATTR_MULTIPLE_POST_OP(int(k)) | DNNL_ARG_SRC_1, c.residual_arg, dst_offset, *dst);
    made.push_back(sl);
  }
  return made;
}

}  // namespace

std::shared_ptr<VendorKernel> onednn_conv(const Graph& g, const Part& p) {
  const Node& conv = g.nodes[size_t(p.nodes[0])];
  if ((conv.op != "tessel.ConvNchwc" && conv.op != "tessel.ConvNhwc") || p.compute.output_ids.size() != 1 ||
      conv.attr_string("auto_pad", "NOTSET") != "NOTSET")
    return nullptr;
  const Value &x = g.values[size_t(conv.inputs[0])], &w = g.values[size_t(conv.inputs[1])];
  const Value& y = g.values[size_t(conv.outputs[0])];
  Conv c;
  c.groups = conv.attr_int("group", 1);
  auto src = activation_desc(x.shape), dst = activation_desc(y.shape), weights = weights_desc(w.shape, c.groups);
  if (x.dtype != float32 || !w.is_constant() || !src || !dst || !weights) return nullptr;
  c.src = *src, c.dst = *dst, c.weights = *weights, c.weight_data = &w.constant, c.weight_shape = w.shape;
  c.stride = conv.attr_ints("strides", {1, 1}), c.dilation = conv.attr_ints("dilations", {1, 1});
  c.pads = conv.attr_ints("pads", {0, 0, 0, 0});
  c.blocked = x.shape.size() == 5;
  c.src_arg = step_argument(p, conv.inputs[0]);
  if (conv.inputs.size() > 2 && conv.inputs[2] >= 0) c.bias_arg = step_argument(p, conv.inputs[2]);

  // The nodes after the convolution, each reading the one before: post-ops.
  int cur = conv.outputs[0];
  for (size_t k = 1; k < p.nodes.size(); ++k) {
    const Node& n = g.nodes[size_t(p.nodes[k])];
    if (n.inputs.empty() || n.outputs.size() != 1) return nullptr;
    if (n.op == "Relu" && n.inputs[0] == cur) {
      c.post.push_back({PostOp::Relu, {0, 0}});
    } else if (n.op == "Clip" && n.inputs[0] == cur) {
      bool attrs = n.opset < 11;
      std::optional<float> lo = attrs ? float(n.attr_float("min", -3.4e38)) : scalar(g, n, 1);
      std::optional<float> hi = attrs ? float(n.attr_float("max", 3.4e38)) : scalar(g, n, 2);
      auto given = [&](size_t i) { return n.inputs.size() > i && n.inputs[i] >= 0; };
      if (!attrs && ((given(1) && !lo) || (given(2) && !hi))) return nullptr;  // bounds computed in the graph
      c.post.push_back({PostOp::Clip, {lo.value_or(-3.4e38f), hi.value_or(3.4e38f)}});
    } else if (n.op == "Add" && n.inputs.size() == 2 && c.residual_arg < 0 &&
               (n.inputs[0] == cur || n.inputs[1] == cur)) {
      int other = n.inputs[0] == cur ? n.inputs[1] : n.inputs[0];
      const Value& o = g.values[size_t(other)];
      if (o.is_constant() || o.shape != y.shape || o.dtype != float32) return nullptr;
      c.residual_arg = step_argument(p, other);
      if (c.residual_arg < 0) return nullptr;
      c.post.push_back({PostOp::Residual, {0, 0}});
    } else {
      return nullptr;
    }
    cur = n.outputs[0];
  }
  if (cur != p.compute.output_ids[0]) return nullptr;
  c.dst_arg = step_argument(p, cur);

  // A slice per thread, run on Tessel's threads with oneDNN's own threading off; where oneDNN
  // has no fast kernel for the slices (a 1x1 convolution with a residual and one block of
  // output channels), the whole output at once.
  dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  omp_set_num_threads(1);  // oneDNN chooses its blocking for the threads it will have
  int64_t units = c.blocked ? y.shape[1] : c.dst.dims()[2];
  std::optional<std::vector<Slice>> made;
  if (x.shape[0] == 1) made = make_slices(c, std::min<int64_t>(num_threads(), units), engine);
  if (!made) made = make_slices(c, 1, engine);
  if (!made) return nullptr;

  auto k = std::make_shared<VendorKernel>();
  k->name = "onednn";
  k->run = [made = *made](const std::vector<Buffer>& args) {
    parallel_for(int64_t(made.size()), [&](int64_t begin, int64_t end) {
      omp_set_num_threads(1);
      for (int64_t s = begin; s < end; ++s) {
        const Slice& sl = made[size_t(s)];
        for (auto& [arg, step_arg, offset] : sl.bound)
          sl.args.at(arg).set_data_handle(args[size_t(step_arg)].data<float>() + offset);
        dnnl::stream stream = sl.stream;
        sl.prim.execute(stream, sl.args);
        stream.wait();
      }
    });
  };
  return k;
}

}  // namespace tessel::graph
