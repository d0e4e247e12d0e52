// Batch norm folded into the convolution before it: at inference BatchNormalization is
// y = (x - mean) * scale / sqrt(var + eps) + B, per output channel, so the convolution's
// weights are scaled by s = scale / sqrt(var + eps) and its bias becomes (bias - mean) * s + B.
// The network then does no work for the batch norm at all (graph.md §3: ConvBN).
#include <cmath>

#include "graph/passes/Passes.h"

namespace tessel::graph {

namespace {
bool constant_float(const Graph& g, int id) {
  return id >= 0 && g.values[size_t(id)].is_constant() && g.values[size_t(id)].dtype == float32;
}
}  // namespace

Graph fold_batch_norm(Graph g) {
  std::vector<int> readers = g.readers();
  std::vector<bool> drop(g.nodes.size(), false);
  for (size_t k = 0; k < g.nodes.size(); ++k) {
    const Node& bn = g.nodes[k];
    if (bn.op != "BatchNormalization" || bn.attr_int("training_mode", 0) || bn.inputs.size() < 5) continue;
    int x = bn.inputs[0], p = g.values[size_t(x)].producer;
    if (p < 0 || g.nodes[size_t(p)].op != "Conv" || readers[size_t(x)] != 1) continue;
    Node& conv = g.nodes[size_t(p)];
    bool foldable = constant_float(g, conv.inputs[1]) && (conv.inputs.size() < 3 || conv.inputs[2] < 0 ||
                                                          constant_float(g, conv.inputs[2]));
    for (size_t i = 1; i < 5; ++i) foldable &= constant_float(g, bn.inputs[i]);
    if (!foldable) continue;
    const Buffer& w = g.values[size_t(conv.inputs[1])].constant;
    int64_t K = w.shape()[0], per = w.size() / K;
    auto param = [&](size_t i) { return g.values[size_t(bn.inputs[i])].constant; };
    Buffer scale = param(1), beta = param(2), mean = param(3), var = param(4);
    double eps = bn.attr_float("epsilon", 1e-5);
    Buffer w2(w.shape(), float32), b2({K}, float32);
    bool has_bias = conv.inputs.size() > 2 && conv.inputs[2] >= 0;
    for (int64_t c = 0; c < K; ++c) {
      double s = scale.get(c) / std::sqrt(var.get(c) + eps);
      for (int64_t e = 0; e < per; ++e) w2.data<float>()[c * per + e] = float(w.data<float>()[c * per + e] * s);
      double bias = has_bias ? g.values[size_t(conv.inputs[2])].constant.get(c) : 0.0;
      b2.set(c, (bias - mean.get(c)) * s + beta.get(c));
    }
    Value vw, vb;
    vw.name = g.values[size_t(conv.inputs[1])].name + "_bn", vw.constant = w2, vw.shape = w2.shape();
    vb.name = g.values[size_t(bn.outputs[0])].name + "_bias", vb.constant = b2, vb.shape = {K};
    conv.inputs.resize(3);
    conv.inputs[1] = g.add_value(vw);
    conv.inputs[2] = g.add_value(vb);
    conv.outputs[0] = bn.outputs[0];  // the conv now computes what the batch norm did
    drop[k] = true;
  }
  std::vector<Node> kept;
  for (size_t k = 0; k < g.nodes.size(); ++k)
    if (!drop[k]) kept.push_back(std::move(g.nodes[k]));
  g.nodes = std::move(kept);
  g.index_producers();
  return g;
}

}  // namespace tessel::graph
