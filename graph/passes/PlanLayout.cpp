// Layout planning: convolutions and the element-wise nodes between them run in NHWC, where
// Tessel's depthwise convolutions keep the channels as the vector (MobileNetV2's depthwise
// layers in NCHW reached 0.28-0.90x oneDNN tuned, 0.69-1.99x in NHWC). A value changes layout
// only where a node needs the other one: one Transpose into NHWC per value that enters a
// chain, one back per value that leaves it (graph.md §2: transforms only where a consumer
// needs another layout, shared by all consumers). Weights are transposed here, once.
#include <cstring>
#include <map>
#include <set>

#include "graph/passes/Passes.h"

namespace tessel::graph {

namespace {

const std::vector<int64_t> kToNhwc{0, 2, 3, 1}, kToNchw{0, 3, 1, 2};

std::vector<int64_t> permuted(const std::vector<int64_t>& s, const std::vector<int64_t>& perm) {
  std::vector<int64_t> out;
  for (int64_t p : perm) out.push_back(s[size_t(p)]);
  return out;
}

Buffer transpose(const Buffer& b, const std::vector<int64_t>& perm) {
  std::vector<int64_t> s = b.shape(), shape = permuted(s, perm), stride(s.size(), 1);
  for (size_t d = s.size() - 1; d-- > 0;) stride[d] = stride[d + 1] * s[d + 1];
  Buffer out(shape, b.dtype());
  std::vector<int64_t> idx(shape.size(), 0);
  for (int64_t k = 0; k < out.size(); ++k) {
    int64_t from = 0;
    for (size_t d = 0; d < shape.size(); ++d) from += idx[d] * stride[size_t(perm[d])];
    out.set(k, b.get(from));
    for (size_t d = shape.size(); d-- > 0;)
      if (++idx[d] < shape[d]) break;
      else idx[d] = 0;
  }
  return out;
}

struct Planner {
  Graph& g;
  std::vector<Node> out;
  std::map<int, int> nhwc;        // NCHW value -> its NHWC twin
  std::set<int> deferred;         // NCHW values not computed yet (their twin is)

  int add_value(const std::string& name, DType d, const std::vector<int64_t>& shape, const Buffer& data = Buffer()) {
    Value v;
    v.name = name, v.dtype = d, v.shape = shape, v.constant = data;
    return g.add_value(v);
  }
  Node transpose_node(int from, int to, const std::vector<int64_t>& perm, int opset) {
    Node t;
    t.op = "Transpose", t.name = g.values[size_t(to)].name + "_transpose", t.opset = opset;
    t.inputs = {from}, t.outputs = {to};
    t.attrs["perm"] = Attribute(perm);
    return t;
  }
  // The NHWC twin of a 4-D value, transposed into existence where needed.
  int twin(int v, int opset) {
    auto it = nhwc.find(v);
    if (it != nhwc.end()) return it->second;
    const Value& x = g.values[size_t(v)];
    int t = add_value(x.name + "_nhwc", x.dtype, permuted(x.shape, kToNhwc));
    out.push_back(transpose_node(v, t, kToNhwc, opset));
    return nhwc[v] = t;
  }
  // The NCHW value itself, transposed back where only its twin was computed.
  void materialize(int v, int opset) {
    if (!deferred.erase(v)) return;
    out.push_back(transpose_node(nhwc.at(v), v, kToNchw, opset));
  }
  // Adds `n` computing the NHWC twin of NCHW value `v`, which is then made only if needed.
  void emit_nhwc(Node n, int v) {
    const Value& y = g.values[size_t(v)];
    n.outputs = {add_value(y.name + "_nhwc", y.dtype, permuted(y.shape, kToNhwc))};
    nhwc[v] = n.outputs[0], deferred.insert(v);
    out.push_back(n);
  }
  bool four_d(int v) const { return v >= 0 && g.values[size_t(v)].shape.size() == 4; }
  bool is_const(int v) const { return v >= 0 && g.values[size_t(v)].is_constant(); }

  bool convert_conv(const Node& n) {
    if (n.op != "Conv" || !four_d(n.inputs[0]) || !is_const(n.inputs[1]) ||
        (n.inputs.size() > 2 && n.inputs[2] >= 0 && !is_const(n.inputs[2])))
      return false;
    Buffer w = g.values[size_t(n.inputs[1])].constant;  // a handle: adding values moves them
    int64_t groups = n.attr_int("group", 1), C = g.values[size_t(n.inputs[0])].shape[1];
    bool depthwise = groups > 1 && groups == C && w.shape()[1] == 1;
    if (groups > 1 && !depthwise) return false;
    Node c = n;
    c.op = "tessel.ConvNhwc";
    c.inputs[0] = twin(n.inputs[0], n.opset);
    // KCRS -> RSCK; depthwise [C*m, 1, R, S] -> [R, S, C, m].
    Buffer hw = transpose(w, {2, 3, 1, 0});
    if (depthwise) {
      std::vector<int64_t> s = hw.shape();  // [R, S, 1, C*m] holds the same order as [R, S, C, m]
      Buffer r({s[0], s[1], C, s[3] / C}, hw.dtype());
      std::memcpy(r.raw(), hw.raw(), size_t(hw.bytes()));
      hw = r;
    }
    c.inputs[1] = add_value(g.values[size_t(n.inputs[1])].name + "_hwio", w.dtype(), hw.shape(), hw);
    emit_nhwc(c, n.outputs[0]);
    return true;
  }

  // An element-wise node whose 4-D inputs all have twins, and whose other inputs are scalars
  // or per-channel constants ([C, 1, 1] becomes [C], broadcast along NHWC's last axis).
  bool convert_elementwise(const Node& n) {
    if (op_kind(n.op) != OpKind::Elemwise || n.op == "BatchNormalization" || n.outputs.size() != 1 ||
        !four_d(n.outputs[0]))
      return false;
    std::vector<int> inputs;
    bool any = false;
    int64_t C = g.values[size_t(n.outputs[0])].shape[1];
    for (int i : n.inputs) {
      if (i >= 0 && nhwc.count(i)) {
        inputs.push_back(nhwc.at(i)), any = true;
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
      Buffer row({C}, v->dtype);
      std::memcpy(row.raw(), v->constant.raw(), size_t(row.bytes()));
      inputs.push_back(add_value(v->name + "_row", v->dtype, {C}, row));
    }
    if (!any) return false;
    Node e = n;
    e.inputs = inputs;
    emit_nhwc(e, n.outputs[0]);
    return true;
  }
};

}  // namespace

Graph plan_layout_nhwc(Graph g) {
  Planner p{g, {}, {}, {}};
  std::vector<Node> nodes = g.nodes;
  for (const Node& n : nodes) {
    if (p.convert_conv(n) || p.convert_elementwise(n)) continue;
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
