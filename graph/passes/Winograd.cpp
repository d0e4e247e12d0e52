// Winograd convolution: a 3x3 stride-1 convolution in NCHWc becomes tessel.ConvWinogradNchwc
// (ops::conv2d_winograd_nchwc), its weights transformed here, once, where the image has
// enough output tiles to reuse them. The transformed weights are (m + 2)^2 / 9 times the
// direct ones' size and each is read once per tile, so a network whose weights stream from
// memory needs many tiles: F(4x4, 3x3) from 7x7 tiles (28x28), F(2x2, 3x3) from 7x7 tiles
// (14x14); none on 7x7 images, whose 512-channel weights would cost more to stream than the
// multiplications they save. (ResNet-50 at 2 threads: 256@14 ran 0.70 ms direct, 0.70 by
// F(4x4) with 16 tiles.)
#include "graph/passes/Passes.h"
#include "tessel/ops.h"

namespace tessel::graph {

namespace {
constexpr int64_t kMinTiles = 49;
int64_t tiles(const std::vector<int64_t>& out, int64_t m) { return ((out[2] + m - 1) / m) * ((out[3] + m - 1) / m); }
}  // namespace

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
    int64_t m = tiles(out, 4) >= kMinTiles ? 4 : 2;
    if (!fits || tiles(out, m) < kMinTiles) continue;
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
