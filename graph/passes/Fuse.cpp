// Operator fusion: element-wise and broadcast nodes join the kernel of a node they read,
// so that a convolution or matmul computes its bias, activation and residual addition before
// writing (conv + bias + relu, matmul + bias + GELU), and chains of element-wise nodes run as
// one loop. A complex node's output joins only when nothing else reads it, so that the
// complex node stays the group's last heavy stage (TVM's rule; graph.md §1.2). Shape
// operators, reductions and complex nodes start kernels of their own.
#include <set>

#include "graph/passes/Passes.h"

namespace tessel::graph {

OpKind op_kind(const std::string& op) {
  static const std::set<std::string> elemwise = {
      "Add", "Sub", "Mul", "Div", "Pow", "Relu", "Sigmoid", "Tanh", "Erf", "Gelu", "Exp", "Neg", "Reciprocal", "Sqrt",
      "Clip", "LeakyRelu", "Cast", "Identity", "Dropout", "BatchNormalization"};
  static const std::set<std::string> complex = {
      "Conv", "tessel.ConvNhwc", "tessel.ConvNchwc", "tessel.ConvWinogradNchwc", "Gemm", "MatMul", "MaxPool",
      "AveragePool", "tessel.MaxPoolNhwc", "tessel.MaxPoolNchwc", "tessel.AveragePoolNhwc", "tessel.AveragePoolNchwc",
      "Softmax", "LayerNormalization"};
  static const std::set<std::string> reduce = {"ReduceSum", "ReduceMean", "ReduceMax", "GlobalAveragePool",
                                               "tessel.GlobalAveragePoolNhwc", "tessel.GlobalAveragePoolNchwc"};
  if (elemwise.count(op)) return OpKind::Elemwise;
  if (complex.count(op)) return OpKind::Complex;
  if (reduce.count(op)) return OpKind::Reduce;
  return OpKind::Injective;
}

Graph fuse(Graph g) {
  std::vector<int> consumers = g.readers();
  // Per group: its first node's kind and the groups it reads. A node may not join a group
  // that one of its other inputs depends on: the two kernels would wait for each other.
  std::vector<OpKind> anchor;
  std::vector<std::set<int>> reads_of;
  auto depends = [&](int from, int on) {
    std::vector<int> todo{from};
    std::set<int> seen;
    while (!todo.empty()) {
      int x = todo.back();
      todo.pop_back();
      if (x == on) return true;
      if (seen.insert(x).second) todo.insert(todo.end(), reads_of[size_t(x)].begin(), reads_of[size_t(x)].end());
    }
    return false;
  };
  auto group_of = [&](int value) {
    int p = value < 0 ? -1 : g.values[size_t(value)].producer;
    return p < 0 ? -1 : g.nodes[size_t(p)].group;
  };
  for (size_t k = 0; k < g.nodes.size(); ++k) {
    Node& n = g.nodes[k];
    std::set<int> reads;
    for (int i : n.inputs)
      if (group_of(i) >= 0) reads.insert(group_of(i));
    int join = -1;
    if (op_kind(n.op) == OpKind::Elemwise) {
      for (int i : n.inputs) {
        int grp = group_of(i);
        if (grp < 0 || (anchor[size_t(grp)] != OpKind::Complex && anchor[size_t(grp)] != OpKind::Elemwise)) continue;
        const Node& p = g.nodes[size_t(g.values[size_t(i)].producer)];
        if (op_kind(p.op) == OpKind::Complex && consumers[size_t(i)] != 1) continue;
        bool cycle = false;
        for (int r : reads) cycle |= r != grp && depends(r, grp);
        if (cycle) continue;
        if (join < 0 || anchor[size_t(grp)] == OpKind::Complex) join = grp;
        if (anchor[size_t(grp)] == OpKind::Complex) break;
      }
    }
    if (join < 0) {
      join = int(anchor.size());
      anchor.push_back(op_kind(n.op));
      reads_of.emplace_back();
    }
    n.group = join;
    for (int r : reads)
      if (r != join) reads_of[size_t(join)].insert(r);
  }
  return g;
}

}  // namespace tessel::graph
