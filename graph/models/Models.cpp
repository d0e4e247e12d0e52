// The reference networks of tessel/graph_models.h, layer by layer as their papers give them.
#include <cmath>

#include "tessel/error.h"

#include "tessel/graph.h"
#include "tessel/graph_models.h"

namespace tessel::graph::models {

namespace {

struct Net {
  OnnxBuilder b;
  int64_t size = 0;  // the current feature map's height (= width)

  // Conv (no bias) + BatchNormalization, then ReLU, ReLU6 or nothing.
  std::string conv_bn(const std::string& x, int64_t cin, int64_t cout, int64_t k, int64_t stride, int64_t group = 1,
                      const std::string& act = "relu") {
    int64_t pad = k / 2;
    double scale = std::sqrt(6.0 / double(cin / group * k * k));
    std::string w = b.random("w", {cout, cin / group, k, k}, scale);
    std::string y = b.node("Conv", {x, w},
                           {{"kernel_shape", {k, k}}, {"strides", {stride, stride}},
                            {"pads", {pad, pad, pad, pad}}, {"group", group}});
    size = (size + 2 * pad - k) / stride + 1;
    y = b.node("BatchNormalization", {y, b.random("gamma", {cout}, 1.0, true), b.random("beta", {cout}, 0.1),
                                      b.random("mean", {cout}, 0.1), b.random("var", {cout}, 1.0, true)},
               {{"epsilon", 1e-5}});
    if (act == "relu") return b.node("Relu", {y});
    if (act == "relu6") return b.node("Clip", {y, b.scalar("c", 0), b.scalar("c", 6)});
    return y;
  }
  // A residual block's shortcut: x itself, or a strided 1x1 projection where the block changes
  // the shape (from the block's input size `in_size`).
  std::string shortcut(const std::string& x, int64_t cin, int64_t cout, int64_t stride, int64_t in_size) {
    if (stride == 1 && cin == cout) return x;
    int64_t out_size = size;
    size = in_size;
    std::string y = conv_bn(x, cin, cout, 1, stride, 1, "");
    size = out_size;
    return y;
  }
  std::string head(const std::string& x, int64_t channels) {
    std::string y = b.node("GlobalAveragePool", {x});
    y = b.node("Flatten", {y}, {{"axis", 1}});
    return b.node("Gemm", {y, b.random("fc_w", {1000, channels}, std::sqrt(3.0 / double(channels))),
                           b.random("fc_b", {1000}, 0.1)},
                  {{"transB", 1}});
  }
};

std::string basic_block(Net& n, const std::string& x, int64_t cin, int64_t cout, int64_t stride) {
  int64_t in_size = n.size;
  std::string y = n.conv_bn(x, cin, cout, 3, stride);
  y = n.conv_bn(y, cout, cout, 3, 1, 1, "");
  return n.b.node("Relu", {n.b.node("Add", {y, n.shortcut(x, cin, cout, stride, in_size)})});
}

std::string bottleneck(Net& n, const std::string& x, int64_t cin, int64_t mid, int64_t stride) {
  int64_t in_size = n.size, cout = mid * 4;
  std::string y = n.conv_bn(x, cin, mid, 1, 1);
  y = n.conv_bn(y, mid, mid, 3, stride);
  y = n.conv_bn(y, mid, cout, 1, 1, 1, "");
  return n.b.node("Relu", {n.b.node("Add", {y, n.shortcut(x, cin, cout, stride, in_size)})});
}

std::string inverted(Net& n, const std::string& x, int64_t cin, int64_t cout, int64_t expand, int64_t stride) {
  int64_t mid = cin * expand;
  std::string y = expand == 1 ? x : n.conv_bn(x, cin, mid, 1, 1, 1, "relu6");
  y = n.conv_bn(y, mid, mid, 3, stride, mid, "relu6");
  y = n.conv_bn(y, mid, cout, 1, 1, 1, "");
  return stride == 1 && cin == cout ? n.b.node("Add", {y, x}) : y;
}

}  // namespace

std::string resnet(int depth, int size) {
  TESSEL_USER_CHECK(depth == 18 || depth == 50, "models::resnet: depth must be 18 or 50, not ", depth);
  Net n;
  n.size = size;
  std::string x = n.b.input("image", float32, {1, 3, size, size});
  x = n.conv_bn(x, 3, 64, 7, 2);
  x = n.b.node("MaxPool", {x}, {{"kernel_shape", std::vector<int64_t>{3, 3}}, {"strides", std::vector<int64_t>{2, 2}},
                                {"pads", std::vector<int64_t>{1, 1, 1, 1}}});
  n.size = (n.size + 2 - 3) / 2 + 1;
  const int64_t blocks18[] = {2, 2, 2, 2}, blocks50[] = {3, 4, 6, 3};
  int64_t channels = 64;
  for (int stage = 0; stage < 4; ++stage) {
    int64_t width = 64 << stage;
    for (int64_t k = 0; k < (depth == 18 ? blocks18 : blocks50)[stage]; ++k) {
      int64_t stride = k == 0 && stage > 0 ? 2 : 1;
      if (depth == 18) {
        x = basic_block(n, x, channels, width, stride);
        channels = width;
      } else {
        x = bottleneck(n, x, channels, width, stride);
        channels = width * 4;
      }
    }
  }
  n.b.output(n.head(x, channels));
  return n.b.bytes();
}

std::string mobilenet_v2(int size) {
  Net n;
  n.size = size;
  std::string x = n.b.input("image", float32, {1, 3, size, size});
  x = n.conv_bn(x, 3, 32, 3, 2, 1, "relu6");
  // (expansion, output channels, repeats, first stride), from the paper's table 2
  const int64_t table[7][4] = {{1, 16, 1, 1}, {6, 24, 2, 2}, {6, 32, 3, 2}, {6, 64, 4, 2},
                               {6, 96, 3, 1}, {6, 160, 3, 2}, {6, 320, 1, 1}};
  int64_t channels = 32;
  for (const auto& row : table)
    for (int64_t k = 0; k < row[2]; ++k) {
      x = inverted(n, x, channels, row[1], row[0], k == 0 ? row[3] : 1);
      channels = row[1];
    }
  x = n.conv_bn(x, channels, 1280, 1, 1, 1, "relu6");
  n.b.output(n.head(x, 1280));
  return n.b.bytes();
}

std::string bert_layer(int seq, int hidden, int heads, int ffn) {
  TESSEL_USER_CHECK(hidden % heads == 0, "models::bert_layer: hidden (", hidden, ") must divide into ", heads,
                    " heads");
  OnnxBuilder b;
  int64_t S = seq, H = hidden, A = heads, D = hidden / heads;
  std::string x = b.input("hidden_states", float32, {1, S, H});
  auto dense = [&](const std::string& in, int64_t from, int64_t to) {
    std::string y = b.node("MatMul", {in, b.random("w", {from, to}, std::sqrt(3.0 / double(from)))});
    return b.node("Add", {y, b.random("b", {to}, 0.1)});
  };
  auto heads_of = [&](const std::string& t, std::vector<int64_t> perm) {  // [1, S, H] -> [1, A, S, D] (permuted)
    std::string r = b.node("Reshape", {t, b.ints("shape", {1, S, A, D})});
    return b.node("Transpose", {r}, {{"perm", perm}});
  };
  std::string q = heads_of(dense(x, H, H), {0, 2, 1, 3});
  std::string k = heads_of(dense(x, H, H), {0, 2, 3, 1});
  std::string v = heads_of(dense(x, H, H), {0, 2, 1, 3});
  std::string scores = b.node("Div", {b.node("MatMul", {q, k}), b.scalar("sqrt_d", std::sqrt(double(D)))});
  std::string probs = b.node("Softmax", {scores}, {{"axis", -1}});
  std::string ctx = b.node("Transpose", {b.node("MatMul", {probs, v})}, {{"perm", std::vector<int64_t>{0, 2, 1, 3}}});
  ctx = b.node("Reshape", {ctx, b.ints("shape", {1, S, H})});
  auto layer_norm = [&](const std::string& t) {
    return b.node("LayerNormalization", {t, b.random("gamma", {H}, 1.0, true), b.random("beta", {H}, 0.1)},
                  {{"axis", -1}, {"epsilon", 1e-12}});
  };
  std::string h1 = layer_norm(b.node("Add", {dense(ctx, H, H), x}));
  std::string f = dense(h1, H, ffn);
  std::string erf = b.node("Erf", {b.node("Div", {f, b.scalar("c", std::sqrt(2.0))})});
  std::string gelu = b.node("Mul", {b.node("Mul", {f, b.node("Add", {erf, b.scalar("c", 1.0)})}), b.scalar("c", 0.5)});
  b.output(layer_norm(b.node("Add", {dense(gelu, ffn, H), h1})));
  return b.bytes();
}

std::string resnet_basic_block(int channels, int size, int stride) {
  Net n;
  n.size = size;
  std::string x = n.b.input("x", float32, {1, channels, size, size});
  n.b.output(basic_block(n, x, channels, stride == 1 ? channels : channels * 2, stride));
  return n.b.bytes();
}

std::string inverted_residual(int in_channels, int out_channels, int expand, int stride, int size) {
  Net n;
  n.size = size;
  std::string x = n.b.input("x", float32, {1, in_channels, size, size});
  n.b.output(inverted(n, x, in_channels, out_channels, expand, stride));
  return n.b.bytes();
}

}  // namespace tessel::graph::models
