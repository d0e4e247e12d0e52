#pragma once
// Reference networks written as ONNX models in code: batch 1, float32, random weights from a
// fixed seed (IR 8, opset 17, which Debian's libonnx and onnxruntime both read). They are
// what the graph compiler's tests, example and benchmark run.
#include <string>

namespace tessel::graph::models {

// ResNet-18 (basic blocks) or ResNet-50 (bottlenecks), ImageNet head: input "image"
// [1, 3, size, size], output [1, 1000]. Convolutions are followed by BatchNormalization, as
// exporters write them before folding.
std::string resnet(int depth, int size = 224);
// MobileNetV2 (width 1.0): input [1, 3, size, size], output [1, 1000]; ReLU6 as Clip.
std::string mobilenet_v2(int size = 224);
// One BERT-base encoder layer: input [1, seq, hidden], self-attention with `heads` heads,
// feed-forward of `ffn` with GELU written as exporters write it (x * 0.5 * (1 + erf(x / sqrt 2))),
// LayerNormalization after each residual addition.
std::string bert_layer(int seq = 128, int hidden = 768, int heads = 12, int ffn = 3072);

// The blocks alone, for tests: a ResNet basic block on [1, channels, size, size] (stride 2
// with a 1x1 projection shortcut), and a MobileNetV2 inverted residual.
std::string resnet_basic_block(int channels, int size, int stride);
std::string inverted_residual(int in_channels, int out_channels, int expand, int stride, int size);

}  // namespace tessel::graph::models
