// Complex operators split into simpler ones where that helps. A batch norm that no
// convolution absorbed (fold_batch_norm) becomes a multiplication and an addition by
// per-channel constants computed here, rather than a square root per element; both then fuse
// into their neighbours like any element-wise node.
#include <cmath>

#include "graph/passes/Passes.h"

namespace tessel::graph {

Graph split_operators(Graph g) {
  std::vector<Node> out;
  for (Node& n : g.nodes) {
    bool constants = n.op == "BatchNormalization" && !n.attr_int("training_mode", 0) && n.inputs.size() >= 5;
    for (size_t i = 1; constants && i < 5; ++i)
      constants = n.inputs[i] >= 0 && g.values[size_t(n.inputs[i])].is_constant() &&
                  g.values[size_t(n.inputs[i])].dtype == float32;
    const Value& x = g.values[size_t(n.inputs[0])];
    if (!constants || x.shape.size() < 2 || x.dtype != float32) {
      out.push_back(std::move(n));
      continue;
    }
    // Per-channel scale and shift, shaped [C, 1, ...] to broadcast along axis 1.
    int64_t C = x.shape[1];
    std::vector<int64_t> shape(x.shape.size() - 1, 1);
    shape[0] = C;
    Buffer s(shape, float32), t(shape, float32);
    auto param = [&](size_t i, int64_t c) { return g.values[size_t(n.inputs[i])].constant.get(c); };
    double eps = n.attr_float("epsilon", 1e-5);
    for (int64_t c = 0; c < C; ++c) {
      double scale = param(1, c) / std::sqrt(param(4, c) + eps);
      s.set(c, scale), t.set(c, param(2, c) - param(3, c) * scale);
    }
    std::string base = g.values[size_t(n.outputs[0])].name;
    Value vs, vt, mid;
    vs.name = base + "_scale", vs.constant = s, vs.shape = shape;
    vt.name = base + "_shift", vt.constant = t, vt.shape = shape;
    mid.name = base + "_scaled", mid.shape = x.shape;
    Node mul, add;
    mul.op = "Mul", mul.name = n.name + "_mul", mul.opset = n.opset;
    add.op = "Add", add.name = n.name + "_add", add.opset = n.opset;
    mul.inputs = {n.inputs[0], g.add_value(vs)};
    mul.outputs = {g.add_value(mid)};
    add.inputs = {mul.outputs[0], g.add_value(vt)};
    add.outputs = {n.outputs[0]};
    out.push_back(mul), out.push_back(add);
  }
  g.nodes = std::move(out);
  g.index_producers();
  return g;
}

}  // namespace tessel::graph
