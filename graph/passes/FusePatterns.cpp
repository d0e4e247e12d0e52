// Subgraphs that exporters write for one operator, rewritten as that operator: layer norm
// (ReduceMean, Sub, Pow, ReduceMean, Add, Sqrt, Div, Mul, Add: onnxruntime's LayerNormFusion
// pattern, graph.md §3), softmax (ReduceMax, Sub, Exp, ReduceSum, Div) and GELU (Div, Erf, Add,
// Mul, Mul). The rewritten node's kernel reads each row for its statistics and writes it once,
// where the pieces would be separate reductions and passes; GELU's multiplies by 1 / sqrt(2)
// where the pattern divides (within an ulp of it), as onnxruntime's fused Gelu does. Only the
// last axis is matched; the pieces' intermediate values must have no other readers. Dead pieces
// are left for remove_dead_nodes.
#include <cmath>

#include "graph/passes/Passes.h"

namespace tessel::graph {

namespace {

struct Matcher {
  const Graph& g;
  std::vector<int> readers;

  explicit Matcher(const Graph& graph) : g(graph), readers(graph.readers()) {}
  // The node computing `value` if it is `op` and `value` has at most `uses` readers.
  const Node* made_by(int value, const std::string& op, int uses = 1) const {
    if (value < 0 || readers[size_t(value)] > uses) return nullptr;
    int p = g.values[size_t(value)].producer;
    return p >= 0 && g.nodes[size_t(p)].op == op ? &g.nodes[size_t(p)] : nullptr;
  }
  bool constant(int value) const { return value >= 0 && g.values[size_t(value)].is_constant(); }
  double scalar(int value) const {
    const Value& v = g.values[size_t(value)];
    return v.is_constant() && v.elements() == 1 ? v.constant.get(0) : std::nan("");
  }
  // A reduction over the last axis only, keeping it.
  bool last_axis(const Node& r) const {
    int64_t rank = int64_t(g.values[size_t(r.inputs[0])].shape.size());
    std::vector<int64_t> axes = r.attr_ints("axes");
    if (r.inputs.size() > 1 && r.inputs[1] >= 0 && constant(r.inputs[1])) {
      const Buffer& b = g.values[size_t(r.inputs[1])].constant;
      axes.clear();
      for (int64_t k = 0; k < b.size(); ++k) axes.push_back(int64_t(b.get(k)));
    }
    return r.attr_int("keepdims", 1) == 1 && axes.size() == 1 && (axes[0] == -1 || axes[0] == rank - 1);
  }
  // The other input of a binary node, given one of them.
  static int other(const Node& n, int one) { return n.inputs[0] == one ? n.inputs[1] : n.inputs[0]; }
};

// y = (x - mean) / sqrt(mean((x - mean)^2) + eps) * gamma + beta
bool layer_norm(const Matcher& m, Node& add) {
  if (add.op != "Add" || add.inputs.size() != 2) return false;
  for (int side = 0; side < 2; ++side) {
    const Node* mul = m.made_by(add.inputs[size_t(side)], "Mul");
    int beta = add.inputs[size_t(1 - side)];
    if (!mul || !m.constant(beta)) continue;
    for (int s2 = 0; s2 < 2; ++s2) {
      const Node* div = m.made_by(mul->inputs[size_t(s2)], "Div");
      int gamma = mul->inputs[size_t(1 - s2)];
      if (!div || !m.constant(gamma)) continue;
      const Node* sqrt = m.made_by(div->inputs[1], "Sqrt");
      const Node* sub = m.made_by(div->inputs[0], "Sub", 3);  // read by Pow (or twice by Mul) and Div
      if (!sqrt || !sub) continue;
      const Node* add_eps = m.made_by(sqrt->inputs[0], "Add");
      if (!add_eps) continue;
      int var_value = m.constant(add_eps->inputs[1]) ? add_eps->inputs[0] : add_eps->inputs[1];
      double eps = m.scalar(Matcher::other(*add_eps, var_value));
      const Node* var = m.made_by(var_value, "ReduceMean");
      if (std::isnan(eps) || !var || !m.last_axis(*var)) continue;
      const Node* sq = m.made_by(var->inputs[0], "Pow");
      if (sq ? m.scalar(sq->inputs[1]) != 2 : !(sq = m.made_by(var->inputs[0], "Mul")))
        continue;
      int d = div->inputs[0];
      if (sq->inputs[0] != d || (sq->op == "Mul" && sq->inputs[1] != d)) continue;
      int x = sub->inputs[0];
      const Node* mean = m.made_by(sub->inputs[1], "ReduceMean");
      if (!mean || mean->inputs[0] != x || !m.last_axis(*mean)) continue;
      Node ln;
      ln.op = "LayerNormalization", ln.name = add.name + "_layer_norm", ln.opset = 17;
      ln.inputs = {x, gamma, beta};
      ln.outputs = add.outputs;
      ln.attrs["axis"] = Attribute(int64_t(-1));
      ln.attrs["epsilon"] = Attribute(eps);
      add = ln;
      return true;
    }
  }
  return false;
}

// y = exp(x - max(x)) / sum(exp(x - max(x)))
bool softmax(const Matcher& m, Node& div) {
  if (div.op != "Div" || div.inputs.size() != 2) return false;
  const Node* exp = m.made_by(div.inputs[0], "Exp", 2);
  const Node* sum = m.made_by(div.inputs[1], "ReduceSum");
  if (!exp || !sum || sum->inputs[0] != div.inputs[0] || !m.last_axis(*sum)) return false;
  int x = exp->inputs[0];
  if (const Node* sub = m.made_by(exp->inputs[0], "Sub")) {
    const Node* mx = m.made_by(sub->inputs[1], "ReduceMax");
    if (!mx || mx->inputs[0] != sub->inputs[0] || !m.last_axis(*mx)) return false;
    x = sub->inputs[0];
  }
  Node sm;
  sm.op = "Softmax", sm.name = div.name + "_softmax", sm.opset = 13;
  sm.inputs = {x};
  sm.outputs = div.outputs;
  sm.attrs["axis"] = Attribute(int64_t(-1));
  div = sm;
  return true;
}

// y = x * (erf(x / sqrt(2)) + 1) * 0.5, the three factors multiplied in any order, the division
// possibly a multiplication by 1 / sqrt(2) (PyTorch's export of exact GELU).
bool gelu(const Matcher& m, Node& mul) {
  if (mul.op != "Mul" || mul.inputs.size() != 2) return false;
  std::vector<int> factors;
  for (int in : mul.inputs) {
    if (const Node* inner = m.made_by(in, "Mul"))
      factors.insert(factors.end(), inner->inputs.begin(), inner->inputs.end());
    else
      factors.push_back(in);
  }
  if (factors.size() != 3) return false;
  for (int half = 0; half < 3; ++half) {
    if (m.scalar(factors[size_t(half)]) != 0.5) continue;
    for (int one = 0; one < 3; ++one) {
      const Node* add = one == half ? nullptr : m.made_by(factors[size_t(one)], "Add");
      if (!add) continue;
      int x = factors[size_t(3 - half - one)];
      int e = m.scalar(add->inputs[1]) == 1 ? add->inputs[0] : add->inputs[1];
      const Node* erf = m.scalar(Matcher::other(*add, e)) == 1 ? m.made_by(e, "Erf") : nullptr;
      const Node* scale = erf ? m.made_by(erf->inputs[0], "Div") : nullptr;
      double by = scale ? m.scalar(scale->inputs[1]) : 0;
      if (erf && !scale && (scale = m.made_by(erf->inputs[0], "Mul")))
        by = 1 / m.scalar(scale->inputs[1]);
      if (!scale || scale->inputs[0] != x || std::abs(by - std::sqrt(2.0)) > 1e-6) continue;
      Node g;
      g.op = "Gelu", g.name = mul.name + "_gelu", g.opset = 20;
      g.inputs = {x};
      g.outputs = mul.outputs;
      mul = g;
      return true;
    }
  }
  return false;
}

}  // namespace

Graph fuse_patterns(Graph g) {
  bool changed = false;
  for (size_t k = 0; k < g.nodes.size(); ++k) {
    Matcher m(g);  // readers as the graph is now
    Node& n = g.nodes[k];
    changed |= layer_norm(m, n) || softmax(m, n) || gelu(m, n);
  }
  return changed ? remove_dead_nodes(g) : g;
}

}  // namespace tessel::graph
