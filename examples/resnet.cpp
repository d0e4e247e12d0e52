// A ResNet-18 written as an ONNX model in code (random weights), compiled by the graph
// compiler, run, and reported: what was fused, each kernel's schedule and time, the memory
// plan, and the latency.
//   example_resnet [tuning log]      (a log from `tessel-compile resnet18.onnx --tune --log ...`)
#include <chrono>
#include <cmath>
#include <cstdio>

#include "tessel/graph.h"

using namespace tessel;

namespace {

struct ResNet18 {
  graph::OnnxBuilder b;

  std::string conv_bn(const std::string& x, int64_t cin, int64_t cout, int64_t k, int64_t stride, bool relu) {
    std::string w = b.random("w", {cout, cin, k, k}, std::sqrt(6.0 / double(cin * k * k)));
    std::string y = b.node("Conv", {x, w}, {{"kernel_shape", {k, k}}, {"strides", {stride, stride}},
                                            {"pads", {k / 2, k / 2, k / 2, k / 2}}});
    y = b.node("BatchNormalization", {y, b.random("gamma", {cout}, 1.0, true), b.random("beta", {cout}, 0.1),
                                      b.random("mean", {cout}, 0.1), b.random("var", {cout}, 1.0, true)});
    return relu ? b.node("Relu", {y}) : y;
  }

  std::string block(const std::string& x, int64_t cin, int64_t cout, int64_t stride) {
    std::string y = conv_bn(conv_bn(x, cin, cout, 3, stride, true), cout, cout, 3, 1, false);
    std::string skip = stride == 1 && cin == cout ? x : conv_bn(x, cin, cout, 1, stride, false);
    return b.node("Relu", {b.node("Add", {y, skip})});
  }

  std::string build() {
    std::string x = b.input("image", float32, {1, 3, 224, 224});
    x = conv_bn(x, 3, 64, 7, 2, true);
    x = b.node("MaxPool", {x}, {{"kernel_shape", {3, 3}}, {"strides", {2, 2}}, {"pads", {1, 1, 1, 1}}});
    int64_t channels = 64;
    for (int64_t width : {64, 128, 256, 512}) {
      x = block(x, channels, width, width == 64 ? 1 : 2);
      x = block(x, width, width, 1);
      channels = width;
    }
    x = b.node("Flatten", {b.node("GlobalAveragePool", {x})});
    x = b.node("Gemm", {x, b.random("fc_w", {1000, 512}, 0.08), b.random("fc_b", {1000}, 0.1)}, {{"transB", 1}});
    b.output(x);
    return b.bytes();
  }
};

}  // namespace

int main(int argc, char** argv) {
  std::string model = ResNet18().build();  // could as well be b.save("resnet18.onnx")
  graph::Graph g = graph::load_onnx_bytes(model);
  auto t0 = std::chrono::steady_clock::now();
  graph::Network net = graph::compile(g, {.log = argc > 1 ? argv[1] : ""});
  double compile_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  Buffer image({1, 3, 224, 224}, float32);
  image.fill_random(1);
  std::vector<Buffer> out = net.run({image});
  double best = 1e9;
  for (int k = 0; k < 20; ++k) {
    auto t = std::chrono::steady_clock::now();
    net.run({image});
    best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count());
  }
  net.profile({image});
  std::printf("ResNet-18: %zu ONNX nodes, compiled in %.2f s\n%s", g.nodes.size(), compile_s, net.report().c_str());
  int top = 0;
  for (int k = 1; k < 1000; ++k)
    if (out[0].get(k) > out[0].get(top)) top = k;
  std::printf("latency %.2f ms (best of 20, %d threads); class %d scores highest\n", best * 1e3, num_threads(), top);
}
