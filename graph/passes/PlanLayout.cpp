// Layout planning: convolutions, the element-wise nodes between them and the pools run in a
// layout of their own, and a value changes layout only where a node needs the other
// one: one transform in per value that enters a chain, one back per value that leaves it
// (graph.md §2: transforms only where a consumer needs another layout, shared by all
// consumers). Weights are transformed here, once.
// - NHWC: Tessel's depthwise convolutions keep the channels as the vector, which NCHW's
//   depthwise layers could not; pools vectorize over the channels, rather than run in NCHW
//   between two transposes of a large input.
// - NCHWc, blocks of one vector of channels: a convolution's accumulators are its output's
//   own layout, so a fused bias, residual and activation read and write whole vectors, and
//   pools vectorize over the block whatever their stride (in NCHW, a 1x1 convolution's
//   epilogue transposed its accumulator tile by gathers).
#include <cstring>
#include <map>
#include <set>

#include "graph/passes/Passes.h"

namespace tessel::graph {

namespace {

std::vector<int64_t> permuted(const std::vector<int64_t>& s, const std::vector<int64_t>& perm) {
  std::vector<int64_t> out;
  for (int64_t p : perm) out.push_back(s[size_t(p)]);
  return out;
}

struct Planner {
  Graph& g;
  LayoutPlan layout;
  int lanes;                      // NCHWc: channels per block where they divide (else 1)
  std::vector<Node> out;
  std::map<int, int> twin_of;     // NCHW value -> its twin in the chain's layout
  std::set<int> deferred;         // NCHW values not computed yet (their twin is)

  bool nhwc() const { return layout == LayoutPlan::NHWC; }
  int64_t block(int64_t channels) const { return channels % lanes == 0 ? lanes : 1; }
  std::vector<int64_t> twin_shape(const std::vector<int64_t>& s) const {
    if (nhwc()) return permuted(s, {0, 2, 3, 1});
    int64_t b = block(s[1]);
    return {s[0], s[1] / b, s[2], s[3], b};
  }

  int add_value(const std::string& name, DType d, const std::vector<int64_t>& shape, const Buffer& data = Buffer()) {
    Value v;
    v.name = name, v.dtype = d, v.shape = shape, v.constant = data;
    return g.add_value(v);
  }
  // The node that computes `to` from `from`, into the chain's layout or back out of it.
  Node transform(int from, int to, bool into, int opset) {
    Node t;
    t.name = g.values[size_t(to)].name + (into ? "_in" : "_out"), t.opset = opset;
    t.inputs = {from}, t.outputs = {to};
    if (nhwc()) {
      t.op = "Transpose";
      t.attrs["perm"] = Attribute(into ? std::vector<int64_t>{0, 2, 3, 1} : std::vector<int64_t>{0, 3, 1, 2});
    } else {
      t.op = into ? "tessel.ToNchwc" : "tessel.FromNchwc";
      if (into) t.attrs["block"] = Attribute(int64_t(block(g.values[size_t(from)].shape[1])));
    }
    return t;
  }
  const char* suffix() const { return nhwc() ? "_nhwc" : "_nchwc"; }
  // The twin of a 4-D value, transformed into existence where needed.
  int twin(int v, int opset) {
    auto it = twin_of.find(v);
    if (it != twin_of.end()) return it->second;
    const Value& x = g.values[size_t(v)];
    int t = add_value(x.name + suffix(), x.dtype, twin_shape(x.shape));
    out.push_back(transform(v, t, true, opset));
    return twin_of[v] = t;
  }
  // The NCHW value itself, transformed back where only its twin was computed.
  void materialize(int v, int opset) {
    if (!deferred.erase(v)) return;
    out.push_back(transform(twin_of.at(v), v, false, opset));
  }
  // Adds `n` computing the twin of NCHW value `v`, which is then made only if needed.
  void emit(Node n, int v) {
    const Value& y = g.values[size_t(v)];
    n.outputs = {add_value(y.name + suffix(), y.dtype, twin_shape(y.shape))};
    twin_of[v] = n.outputs[0], deferred.insert(v);
    out.push_back(n);
  }
  bool four_d(int v) const { return v >= 0 && g.values[size_t(v)].shape.size() == 4; }
  bool is_const(int v) const { return v >= 0 && g.values[size_t(v)].is_constant(); }

  bool convert_conv(const Node& n) {
    if (n.op != "Conv" || !four_d(n.inputs[0]) || !is_const(n.inputs[1]) ||
        (n.inputs.size() > 2 && n.inputs[2] >= 0 && !is_const(n.inputs[2])))
      return false;
    Buffer w = g.values[size_t(n.inputs[1])].constant;  // a handle: adding values moves them
    const std::vector<int64_t>& ws = w.shape();
    int64_t groups = n.attr_int("group", 1), C = g.values[size_t(n.inputs[0])].shape[1], K = ws[0];
    bool depthwise = groups > 1 && groups == C && ws[1] == 1;
    Node c = n;
    Buffer moved;
    if (nhwc()) {
      if (groups > 1 && !depthwise) return false;
      c.op = "tessel.ConvNhwc";
      moved = transposed(w, ws, {2, 3, 1, 0});  // KCRS -> RSCK; depthwise [C*m, 1, R, S] -> [R, S, 1, C*m]
      if (depthwise) moved = transposed(moved, {ws[2], ws[3], C, K / C}, {0, 1, 2, 3});  // as [R, S, C, m]
    } else {
      // The output in whole vectors of channels; the input in blocks of them, or in blocks of
      // one channel (the 3 channels of an image: NCHW itself).
      if (groups > 1 || K % lanes) return false;
      c.op = "tessel.ConvNchwc";
      int64_t cb = block(C), kb = lanes;
      // [K/kb, kb, C/cb, cb, R, S] -> [K/kb, C/cb, R, S, cb, kb]
      moved = transposed(w, {K / kb, kb, C / cb, cb, ws[2], ws[3]}, {0, 2, 4, 5, 3, 1});
    }
    c.inputs[0] = twin(n.inputs[0], n.opset);
    c.inputs[1] = add_value(g.values[size_t(n.inputs[1])].name + suffix(), w.dtype(), moved.shape(), moved);
    emit(c, n.outputs[0]);
    return true;
  }

  // Pools read and write the chain's layout.
  bool convert_pool(const Node& n) {
    if ((n.op != "MaxPool" && n.op != "AveragePool" && n.op != "GlobalAveragePool") || !four_d(n.inputs[0]) ||
        !twin_of.count(n.inputs[0]) || n.outputs.size() != 1)
      return false;
    Node p = n;
    p.op = "tessel." + n.op + (nhwc() ? "Nhwc" : "Nchwc");
    p.inputs[0] = twin_of.at(n.inputs[0]);
    emit(p, n.outputs[0]);
    return true;
  }

  // An element-wise node whose 4-D inputs all have twins, and whose other inputs are scalars
  // or per-channel constants ([C, 1, 1]: [C] along NHWC's last axis, [C/b, 1, 1, b] in NCHWc).
  bool convert_elementwise(const Node& n) {
    if (op_kind(n.op) != OpKind::Elemwise || n.op == "BatchNormalization" || n.outputs.size() != 1 ||
        !four_d(n.outputs[0]))
      return false;
    std::vector<int> inputs;
    bool any = false;
    int64_t C = g.values[size_t(n.outputs[0])].shape[1];
    for (int i : n.inputs) {
      if (i >= 0 && twin_of.count(i)) {
        inputs.push_back(twin_of.at(i)), any = true;
        continue;
      }
      const Value* v = i < 0 ? nullptr : &g.values[size_t(i)];
      if (!v || (v->is_constant() && v->elements() == 1)) {
        inputs.push_back(i);
        continue;
      }
      std::vector<int64_t> s = v->shape;
      while (s.size() < 4) s.insert(s.begin(), 1);
      if (!v->is_constant() || s != std::vector<int64_t>{1, C, 1, 1}) return false;
      std::vector<int64_t> shape{C};
      if (!nhwc()) shape = {C / block(C), 1, 1, block(C)};
      Buffer row(shape, v->dtype);
      std::memcpy(row.raw(), v->constant.raw(), size_t(row.bytes()));
      inputs.push_back(add_value(v->name + suffix(), v->dtype, shape, row));
    }
    if (!any) return false;
    Node e = n;
    e.inputs = inputs;
    emit(e, n.outputs[0]);
    return true;
  }
};

}  // namespace

Graph plan_layout(Graph g, LayoutPlan layout, const Target& target) {
  Planner p{g, layout, std::max(1, target.vector_bytes / 4), {}, {}, {}};
  std::vector<Node> nodes = g.nodes;
  for (const Node& n : nodes) {
    if (p.convert_conv(n) || p.convert_pool(n) || p.convert_elementwise(n)) continue;
    for (int i : n.inputs)
      if (i >= 0) p.materialize(i, n.opset);
    p.out.push_back(n);
  }
  for (int o : g.outputs) p.materialize(o, nodes.empty() ? 17 : nodes.back().opset);
  g.nodes = std::move(p.out);
  g.index_producers();
  return remove_dead_nodes(g);
}

}  // namespace tessel::graph
