// Winograd convolution: a 3x3 stride-1 convolution in NCHWc becomes tessel.ConvWinogradNchwc
// (ops::conv2d_winograd_nchwc), its weights transformed here, once, where the image has
// enough output tiles to reuse them (ops::winograd_tile: F(4x4, 3x3) from 28x28, F(2x2, 3x3) at
// 14x14, none at 7x7; ResNet-50's 256@14 at 2 threads ran 0.70 ms direct and 0.70 by F(4x4)
// with 16 tiles).
#include "graph/passes/Passes.h"
#include "tessel/ops.h"

namespace tessel::graph {

Graph winograd(Graph g) {
  for (Node& n : g.nodes) {
    if (n.op != "tessel.ConvNchwc" || n.inputs.size() < 2 || !g.values[size_t(n.inputs[1])].is_constant()) continue;
    const Value& w = g.values[size_t(n.inputs[1])];
    const std::vector<int64_t>& ws = w.shape;
    const std::vector<int64_t>& out = g.values[size_t(n.outputs[0])].shape;
    auto ones = [&](const char* attr) {
      for (int64_t v : n.attr_ints(attr, {1, 1}))
        if (v != 1) return false;
      return true;
    };
    // Input channels in whole vectors (not an image's 3 in blocks of one), a 3x3 window at stride 1.
    bool fits = w.dtype == float32 && ws.size() == 6 && ws[2] == 3 && ws[3] == 3 && ws[4] >= 8 && ones("strides") &&
                ones("dilations") && n.attr_int("group", 1) == 1;
    int64_t m = ops::winograd_tile(out[2], out[3]);
    if (!fits || !m) continue;
    Value u;
    u.name = w.name + "_winograd", u.dtype = w.dtype, u.constant = ops::winograd_weights(w.constant, m);
    u.shape = u.constant.shape();
    n.op = "tessel.ConvWinogradNchwc";
    n.inputs[1] = g.add_value(u);
  }
  g.index_producers();
  return remove_dead_nodes(g);
}

}  // namespace tessel::graph
