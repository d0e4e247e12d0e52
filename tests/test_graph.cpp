// The graph compiler on whole networks: optimised (fused, memory planned) and node by node
// give the same outputs; each pass before and after; the memory plan never overlaps tensors
// alive together; bad models give one clear error.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "gpu_targets.h"
#include "graph/MemoryPlan.h"
#include "graph/Partition.h"
#include "graph/Vendor.h"
#include "graph/passes/Passes.h"
#include "tessel/error.h"
#include "tessel/graph.h"
#include "tessel/graph_models.h"

using namespace tessel;
using namespace tessel::graph;

namespace {

// Runs the model optimised and node by node on one random input; returns the largest
// relative difference of the outputs, and checks that they are finite.
double optimised_against_node_by_node(const std::string& bytes, Network* optimised = nullptr) {
  Graph g = load_onnx_bytes(bytes);
  Network fused = compile(g), plain = compile(g, {.rewrite = false, .fuse = false, .plan_memory = false});
  if (optimised) *optimised = fused;
  EXPECT_LT(fused.num_kernels(), plain.num_kernels()) << "fusion put nothing together";
  EXPECT_LE(fused.arena_bytes(), fused.separate_bytes());
  std::vector<Buffer> in;
  for (int id : g.inputs) {
    in.emplace_back(g.values[size_t(id)].shape, g.values[size_t(id)].dtype);
    in.back().fill_random(7);
  }
  std::vector<Buffer> a = fused.run(in), b = plain.run(in);
  double worst = 0;
  for (size_t k = 0; k < a.size(); ++k) {
    for (int64_t i = 0; i < a[k].size(); ++i) EXPECT_TRUE(std::isfinite(a[k].get(i)));
    worst = std::max(worst, max_relative_error(a[k], b[k]));
  }
  return worst;
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

// Saves `net` to `dir` and runs it there on `x` with the deploy-time program; its output.
Buffer run_saved(const Network& net, const std::string& dir, const Buffer& x, const std::vector<int64_t>& out_shape) {
  std::filesystem::remove_all(dir);
  net.save(dir);
  std::string in = dir + "/x.bin", out = dir + "/y.bin";
  {
    std::ofstream f(in, std::ios::binary);
    int64_t rank = x.shape().size();
    f.write(reinterpret_cast<const char*>(&rank), 8);
    f.write(reinterpret_cast<const char*>(x.shape().data()), 8 * rank);
    f.write(static_cast<const char*>(x.raw()), x.bytes());
  }
  EXPECT_EQ(std::system((std::string(DEPLOY_RUN) + " " + dir + " " + in + " " + out).c_str()), 0);
  Buffer got(out_shape, float32);
  std::ifstream(out, std::ios::binary).read(static_cast<char*>(got.raw()), got.bytes());
  return got;
}

}  // namespace

TEST(Graph, ResNetBasicBlocksGiveTheSameOutputsOptimisedAndNodeByNode) {
  EXPECT_LT(optimised_against_node_by_node(models::resnet_basic_block(16, 14, 1)), 1e-4);
  EXPECT_LT(optimised_against_node_by_node(models::resnet_basic_block(16, 14, 2)), 1e-4);
}

TEST(Graph, MobileNetV2InvertedResidualsGiveTheSameOutputsOptimisedAndNodeByNode) {
  EXPECT_LT(optimised_against_node_by_node(models::inverted_residual(16, 16, 6, 1, 14)), 1e-4);
  EXPECT_LT(optimised_against_node_by_node(models::inverted_residual(16, 24, 6, 2, 14)), 1e-4);
}

TEST(Graph, TransformerEncoderLayerGivesTheSameOutputsOptimisedAndNodeByNode) {
  Network net;
  EXPECT_LT(optimised_against_node_by_node(models::bert_layer(16, 64, 4, 128), &net), 1e-4);
  std::printf("%s", net.report().c_str());
  EXPECT_LE(net.num_kernels(), 19);  // each matmul with its bias, scaling, residual or GELU
  EXPECT_LT(net.arena_bytes(), net.separate_bytes() / 2);
}

// On a GPU every tensor stays on the device between kernels: the network's outputs match the
// CPU's, run after run with new inputs, and node by node (each output downloaded) too.
TEST(Graph, GpuNetworksKeepTheirTensorsOnTheDevice) {
  for (const std::string& model : {models::resnet_basic_block(16, 14, 2), models::inverted_residual(16, 24, 6, 1, 10),
                                   models::bert_layer(16, 64, 4, 128)}) {
    Graph g = load_onnx_bytes(model);
    Network cpu = compile(g);
    for (const Target& t : ref::gpu_run_targets()) {
      SCOPED_TRACE(t.str());
      Network gpu = compile(g, {.target = t});
      for (uint64_t seed : {1, 2}) {
        std::vector<Buffer> in;
        for (int id : g.inputs) {
          in.emplace_back(g.values[size_t(id)].shape, g.values[size_t(id)].dtype);
          in.back().fill_random(seed);
        }
        std::vector<Buffer> want = cpu.run(in), got = gpu.run(in);
        for (size_t k = 0; k < want.size(); ++k) EXPECT_LT(max_relative_error(got[k], want[k]), 1e-4) << seed;
      }
      // Node by node: each kernel's outputs, downloaded as it finishes (the arena reuses
      // memory, so each is copied when handed out).
      std::map<std::string, Buffer> cpu_values, gpu_values;
      auto keep = [](std::map<std::string, Buffer>& into) {
        return [&into](const std::string& name, const Buffer& b) {
          Buffer c(b.shape(), b.dtype());
          std::memcpy(c.raw(), b.raw(), size_t(b.bytes()));
          into[name] = c;
        };
      };
      std::vector<Buffer> in;
      for (int id : g.inputs) {
        in.emplace_back(g.values[size_t(id)].shape, g.values[size_t(id)].dtype);
        in.back().fill_random(3);
      }
      cpu.run(in, keep(cpu_values));
      gpu.run(in, keep(gpu_values));
      ASSERT_EQ(gpu_values.size(), cpu_values.size());
      for (auto& [name, b] : gpu_values) EXPECT_LT(max_relative_error(b, cpu_values[name]), 1e-4) << name;
    }
  }
}

TEST(Graph, NodeByNodeModeHandsOutEveryIntermediateValue) {
  Graph g = load_onnx_bytes(models::resnet_basic_block(8, 8, 1));
  Network net = compile(g, {.rewrite = false, .fuse = false});
  Buffer x(g.values[size_t(g.inputs[0])].shape, float32);
  x.fill_random(3);
  std::vector<std::string> seen;
  Buffer last;
  std::vector<Buffer> out = net.run({x}, [&](const std::string& name, const Buffer& b) {
    seen.push_back(name);
    last = b;
  });
  EXPECT_EQ(seen.size(), g.nodes.size());  // one value per node: Conv, BN, Relu, Conv, BN, Add, Relu
  EXPECT_EQ(max_relative_error(last, out[0]), 0);
}

TEST(Graph, FoldConstantsDropsNodesComputedWhenLoading) {
  OnnxBuilder b;
  std::string x = b.input("x", float32, {2, 6});
  // The shape of x, computed in the graph, reshapes it: all of it is known when loading.
  std::string shape = b.node("Shape", {x});
  std::string half = b.node("Div", {shape, b.ints("two", {1, 2})});
  std::string y = b.node("Reshape", {x, b.node("Concat", {half, b.ints("more", {2})}, {{"axis", 0}})});
  b.output(b.node("Relu", {y}));
  Graph before = b.graph();
  Graph after = fold_constants(before);
  std::printf("before:\n%safter:\n%s", before.str().c_str(), after.str().c_str());
  EXPECT_EQ(before.nodes.size(), 5u);
  ASSERT_EQ(after.nodes.size(), 2u);
  EXPECT_EQ(after.nodes[0].op, "Reshape");
  EXPECT_EQ(after.values[size_t(after.outputs[0])].shape, (std::vector<int64_t>{2, 3, 2}));
  EXPECT_NE(after.str().find("Reshape(%x, $"), std::string::npos) << "the shape is now a constant";
}

TEST(Graph, RemoveDeadNodesKeepsWhatTheOutputsNeed) {
  OnnxBuilder b;
  std::string x = b.input("x", float32, {4});
  std::string used = b.node("Relu", {x});
  b.node("Sigmoid", {x});  // nothing reads it
  std::vector<std::string> drop = b.node("Dropout", {used}, {}, 2);  // its mask is not read
  b.output(drop[0]);
  Graph before = b.graph(), after = remove_dead_nodes(before);
  std::printf("before:\n%safter:\n%s", before.str().c_str(), after.str().c_str());
  ASSERT_EQ(after.nodes.size(), 2u);
  EXPECT_EQ(after.nodes[1].op, "Dropout");
  EXPECT_EQ(after.nodes[1].outputs[1], -1) << "an output nobody reads is not computed";
}

TEST(Graph, FuseGroupsEpiloguesWithTheirProducerAndStopsAtSharedOutputs) {
  OnnxBuilder b;
  std::string x = b.input("x", float32, {1, 8, 6, 6});
  std::string c = b.node("Conv", {x, b.random("w", {8, 8, 3, 3}, 0.3), b.random("b", {8}, 0.1)},
                         {{"pads", std::vector<int64_t>{1, 1, 1, 1}}});
  std::string r = b.node("Relu", {b.node("Add", {c, x})});  // conv + bias + residual + relu: one kernel
  std::string p = b.node("MaxPool", {r}, {{"kernel_shape", {2, 2}}, {"strides", {2, 2}}});
  std::string c2 = b.node("Conv", {p, b.random("w", {8, 8, 1, 1}, 0.3)});
  // c2 is read twice: its two readers may not both join its kernel, and neither is needed to.
  b.output(b.node("Sigmoid", {c2}));
  b.output(b.node("Tanh", {c2}));
  Graph before = b.graph(), after = fuse(before);
  std::printf("before:\n%safter:\n%s", before.str().c_str(), after.str().c_str());
  auto group = [&](const std::string& op, int nth = 0) {
    for (const Node& n : after.nodes)
      if (n.op == op && nth-- == 0) return n.group;
    return -2;
  };
  EXPECT_EQ(group("Add"), group("Conv"));
  EXPECT_EQ(group("Relu"), group("Conv"));
  EXPECT_NE(group("MaxPool"), group("Conv"));
  EXPECT_NE(group("Sigmoid"), group("Conv", 1));
  EXPECT_NE(group("Tanh"), group("Conv", 1));
  EXPECT_NE(group("Conv", 1), group("Conv"));
}

TEST(Graph, FoldBatchNormScalesTheConvolutionBeforeIt) {
  OnnxBuilder b;
  std::string x = b.input("x", float32, {1, 4, 5, 5});
  std::string c = b.node("Conv", {x, b.random("w", {6, 4, 3, 3}, 0.5), b.random("b", {6}, 0.5)});
  auto bn = [&](const std::string& in, int64_t ch) {
    return b.node("BatchNormalization", {in, b.random("s", {ch}, 1.0, true), b.random("t", {ch}, 0.5),
                                         b.random("m", {ch}, 0.5), b.random("v", {ch}, 1.0, true)});
  };
  b.output(bn(bn(c, 6), 6));  // the second has no convolution of its own: split, not folded
  Graph before = b.graph(), after = split_operators(fold_batch_norm(before));
  std::printf("before:\n%safter:\n%s", before.str().c_str(), after.str().c_str());
  ASSERT_EQ(after.nodes.size(), 3u);
  EXPECT_EQ(after.nodes[0].op, "Conv");
  EXPECT_EQ(after.nodes[1].op, "Mul");
  EXPECT_EQ(after.nodes[2].op, "Add");
  Buffer in({1, 4, 5, 5}, float32);
  in.fill_random(2);
  Buffer want = compile(before, {.rewrite = false, .fuse = false}).run({in})[0];
  EXPECT_LT(max_relative_error(compile(before).run({in})[0], want), 1e-5);
}

TEST(Graph, FusePatternsFindsLayerNormSoftmaxAndGeluAsExportersWriteThem) {
  OnnxBuilder b;
  std::string x = b.input("x", float32, {1, 8, 32});
  auto mean = [&](const std::string& t) { return b.node("ReduceMean", {t}, {{"axes", {-1}}}); };
  for (bool pow : {true, false}) {  // (x - m)^2 as Pow, or as Mul(d, d)
    std::string d = b.node("Sub", {x, mean(x)});
    std::string var = mean(pow ? b.node("Pow", {d, b.scalar("c", 2)}) : b.node("Mul", {d, d}));
    std::string y = b.node("Div", {d, b.node("Sqrt", {b.node("Add", {var, b.scalar("c", 1e-5)})})});
    x = b.node("Add", {b.node("Mul", {y, b.random("gamma", {32}, 1.0, true)}), b.random("beta", {32}, 0.2)});
  }
  std::string e = b.node("Exp", {b.node("Sub", {x, b.node("ReduceMax", {x}, {{"axes", {-1}}})})});
  x = b.node("Div", {e, b.node("ReduceSum", {e, b.ints("axes", {-1})})});
  // GELU: x (erf(x / sqrt(2)) + 1) 0.5, its factors in three orders, the division as a product.
  for (int order = 0; order < 3; ++order) {
    std::string s = order == 2 ? b.node("Mul", {x, b.scalar("c", M_SQRT1_2)})
                               : b.node("Div", {x, b.scalar("c", M_SQRT2)});
    std::string one = b.node("Add", {b.scalar("c", 1), b.node("Erf", {s})}), half = b.scalar("c", 0.5);
    x = order == 0 ? b.node("Mul", {b.node("Mul", {x, one}), half})
      : order == 1 ? b.node("Mul", {x, b.node("Mul", {one, half})})
                   : b.node("Mul", {b.node("Mul", {half, x}), one});
  }
  std::string not_gelu = b.node("Add", {b.node("Erf", {b.node("Div", {x, b.scalar("c", 2)})}), b.scalar("c", 1)});
  b.output(b.node("Mul", {x, not_gelu}));
  Graph before = b.graph(), after = fuse_patterns(before);
  std::printf("before:\n%safter:\n%s", before.str().c_str(), after.str().c_str());
  std::vector<std::string> ops;
  for (const Node& n : after.nodes) ops.push_back(n.op);
  EXPECT_EQ(ops, (std::vector<std::string>{"LayerNormalization", "LayerNormalization", "Softmax", "Gelu", "Gelu",
                                           "Gelu", "Div", "Erf", "Add", "Mul"}));  // the last is not GELU
  Buffer in({1, 8, 32}, float32);
  in.fill_random(4);
  Buffer want = compile(before, {.rewrite = false, .fuse = false}).run({in})[0];
  EXPECT_LT(max_relative_error(compile(before).run({in})[0], want), 1e-4);
}

// Runs every part of `opt` that `vendor`'s kernel computes, on random inputs, against Tessel's
// kernel of the part; returns how many there were.
int check_vendor_kernels(const Graph& opt, const std::string& vendor) {
  int vendors = 0;
  for (const Part& p : partition(opt)) {
    auto k = vendor_kernel(opt, p, Target::host());
    if (!k || k->name != vendor) continue;
    ++vendors;
    std::vector<Buffer> args, ref;
    for (int id : p.compute.input_ids) {
      const Value& v = opt.values[size_t(id)];
      args.push_back(v.is_constant() ? v.constant : Buffer(v.shape, v.dtype));
      if (!v.is_constant()) args.back().fill_random(id);
    }
    for (int id : p.compute.output_ids) args.emplace_back(opt.values[size_t(id)].shape, float32);
    ref = args;
    ref.back() = Buffer(args.back().shape(), float32);
    k->run(args);
    Module m = build_kernel(p.compute, opt, {});
    m(ref);
    EXPECT_LT(max_relative_error(args.back(), ref.back()), 1e-5) << p.ops;
  }
  return vendors;
}

TEST(Graph, VendorGemmWithATesselEpilogueMatchesAndSelectionPicksTheFastest) {
  OnnxBuilder b;
  std::string x = b.input("x", float32, {2, 24, 48});
  std::string h = b.node("Add", {b.node("MatMul", {x, b.random("w", {48, 40}, 0.3)}), b.random("b", {40}, 0.3)});
  std::string y = b.node("Gemm", {b.node("Reshape", {b.node("Relu", {h}), b.ints("s", {48, 40})}),
                                  b.random("w2", {32, 40}, 0.3), b.random("c", {32}, 0.3)},
                         {{"transB", 1}});
  b.output(y);
  Graph g = b.graph();
  Buffer in({2, 24, 48}, float32);
  in.fill_random(6);
  Buffer want = compile(g, {.rewrite = false, .fuse = false}).run({in})[0];
  // Every part that starts with a MatMul or Gemm, run by OpenBLAS and its Tessel epilogue.
  EXPECT_EQ(check_vendor_kernels(optimize(g), "openblas"), 2);
  // Products of two rows and of one (a matrix-vector product), sliced over the threads by
  // columns; A and B transposed, or not.
  for (int64_t rows : {2, 1})
    for (int64_t trans : {0, 1}) {
      OnnxBuilder few;
      std::vector<int64_t> a = trans ? std::vector<int64_t>{16, rows} : std::vector<int64_t>{rows, 16};
      std::vector<int64_t> w = trans ? std::vector<int64_t>{40, 16} : std::vector<int64_t>{16, 40};
      few.output(few.node("Gemm", {few.input("x", float32, a), few.random("w", w, 0.3), few.random("c", {40}, 0.3)},
                          {{"transA", trans}, {"transB", trans}}));
      EXPECT_EQ(check_vendor_kernels(optimize(few.graph()), "openblas"), 1) << rows << " rows, transposed " << trans;
    }
  Network net = compile(g, {.select = "measure"});
  net.profile({in});
  std::printf("%s", net.report().c_str());
  EXPECT_LT(max_relative_error(net.run({in})[0], want), 1e-5);
}

TEST(Graph, OnednnConvolutionsWithPostOpsMatchTesselsKernels) {
  // In NCHWc: the stem (its input in blocks of one channel), conv + bias + ReLU, conv + residual
  // + ReLU, projections; 1x1 convolutions + Clip (ReLU6) around a depthwise one, which stays
  // NCHW. In NHWC: the depthwise one too.
  std::vector<std::pair<std::string, std::string>> cases{{models::resnet(18, 64), "NCHWc"},
                                                         {models::inverted_residual(16, 16, 6, 1, 14), "NCHWc"},
                                                         {models::inverted_residual(16, 24, 6, 2, 14), "NHWC"}};
  for (auto& [model, layout] : cases) {
    Graph g = load_onnx_bytes(model), opt = optimize(g, {.layout = layout});
    int convs = 0;
    for (const Node& n : opt.nodes) convs += n.op == "tessel.ConvNchwc" || n.op == "tessel.ConvNhwc";
    EXPECT_EQ(check_vendor_kernels(opt, "onednn"), convs) << layout;
    Buffer in(g.values[size_t(g.inputs[0])].shape, float32);
    in.fill_random(3);
    Buffer want = compile(g, {.rewrite = false, .fuse = false}).run({in})[0];
    Network net = compile(g, {.select = "measure", .layout = layout});
    net.profile({in});
    std::printf("%s", net.report().c_str());
    EXPECT_LT(max_relative_error(net.run({in})[0], want), 1e-4) << layout;
  }
}

TEST(Graph, NhwcLayoutTransposesOnlyWhereAChainBeginsAndEnds) {
  // ResNet-18's max pool and global average pool run in NHWC too.
  for (const std::string& model : {models::inverted_residual(16, 16, 6, 1, 14), models::resnet_basic_block(8, 8, 2),
                                   models::resnet(18, 64)}) {
    Graph g = load_onnx_bytes(model);
    Graph before = optimize(g, {.fuse = false}), after = optimize(g, {.fuse = false, .layout = "NHWC"});
    std::printf("before:\n%safter:\n%s", before.str().c_str(), after.str().c_str());
    int transposes = 0, convs = 0, pools = 0, nchw_pools = 0;
    for (const Node& n : after.nodes) {
      transposes += n.op == "Transpose", convs += n.op == "tessel.ConvNhwc";
      pools += n.op == "tessel.MaxPoolNhwc" || n.op == "tessel.GlobalAveragePoolNhwc";
      nchw_pools += n.op == "MaxPool" || n.op == "GlobalAveragePool";
    }
    EXPECT_EQ(transposes, 2);  // the input into NHWC, the output back
    EXPECT_GE(convs, 3);
    EXPECT_EQ(nchw_pools, 0);
    EXPECT_EQ(pools, model == models::resnet(18, 64) ? 2 : 0);
    Buffer in(g.values[size_t(g.inputs[0])].shape, float32);
    in.fill_random(8);
    Buffer want = compile(g, {.rewrite = false, .fuse = false}).run({in})[0];
    EXPECT_LT(max_relative_error(compile(g, {.layout = "NHWC"}).run({in})[0], want), 1e-4);
  }
}

TEST(Graph, NchwcLayoutBlocksConvolutionsAndPoolsWithOneTransformInAndOneOut) {
  // ResNet-18 at 64x64: the 3-channel stem (blocks of 1), max pool, strided blocks with
  // projections, global average pool; and a basic block alone.
  for (const std::string& model : {models::resnet(18, 64), models::resnet_basic_block(16, 8, 2)}) {
    Graph g = load_onnx_bytes(model);
    Graph after = optimize(g, {.fuse = false, .layout = "NCHWc"});
    std::printf("after:\n%s", after.str().c_str());
    int into = 0, back = 0, convs = 0, nchw_convs = 0;
    for (const Node& n : after.nodes) {
      into += n.op == "tessel.ToNchwc", back += n.op == "tessel.FromNchwc";
      convs += n.op == "tessel.ConvNchwc", nchw_convs += n.op == "Conv";
    }
    EXPECT_EQ(into, 1);
    EXPECT_EQ(back, 1);
    EXPECT_GE(convs, 3);
    EXPECT_EQ(nchw_convs, 0);
    Buffer in(g.values[size_t(g.inputs[0])].shape, float32);
    in.fill_random(8);
    Buffer want = compile(g, {.rewrite = false, .fuse = false}).run({in})[0];
    EXPECT_LT(max_relative_error(compile(g, {.layout = "NCHWc"}).run({in})[0], want), 1e-4);
  }
}

TEST(Graph, MemoryPlanNeverOverlapsTensorsAliveTogether) {
  std::vector<TensorLifetime> uses;
  for (int k = 0; k < 40; ++k) uses.push_back({int64_t(64 + (k * 37) % 500), k % 13, k % 13 + k % 5});
  uses[7].alias = 6;  // in place: takes over a tensor that dies where it is written
  uses[7].first = uses[6].last = 3, uses[6].first = 1, uses[7].last = 6, uses[7].bytes = uses[6].bytes;
  MemoryPlan plan = plan_memory(uses);
  EXPECT_EQ(plan.offsets[7], plan.offsets[6]);
  EXPECT_LT(plan.arena_bytes, plan.separate_bytes);
  for (size_t a = 0; a < uses.size(); ++a)
    for (size_t b = a + 1; b < uses.size(); ++b) {
      if (uses[a].alias == int(b) || uses[b].alias == int(a)) continue;
      bool together = !(uses[a].last < uses[b].first || uses[b].last < uses[a].first);
      bool overlap =
          plan.offsets[a] < plan.offsets[b] + uses[b].bytes && plan.offsets[b] < plan.offsets[a] + uses[a].bytes;
      EXPECT_FALSE(together && overlap) << a << " and " << b;
      EXPECT_EQ(plan.offsets[a] % 64, 0);
    }
}

TEST(Graph, WinogradRunsTheThreeByThreeConvolutionsOfLargeImages) {
  // In NCHWc, 3x3 stride-1 convolutions with 7x7 tiles or more: F(4x4) at 28x28, F(2x2) at
  // 14x14; not the strided one, nor those of a 7x7 image. With winograd off, none.
  struct Case {
    int size, stride, tile4, tile2;
  };
  for (Case c : {Case{28, 1, 2, 0}, Case{28, 2, 0, 1}, Case{14, 1, 0, 2}, Case{7, 1, 0, 0}}) {
    SCOPED_TRACE(std::to_string(c.size) + "x" + std::to_string(c.size) + ", stride " + std::to_string(c.stride));
    Graph g = load_onnx_bytes(models::resnet_basic_block(16, c.size, c.stride));
    int tile4 = 0, tile2 = 0;
    Graph after = optimize(g, {.layout = "NCHWc"});
    for (const Node& n : after.nodes) {
      if (n.op != "tessel.ConvWinogradNchwc") continue;
      int64_t points = after.values[size_t(n.inputs[1])].shape[0];
      tile4 += points == 6, tile2 += points == 4;
    }
    EXPECT_EQ(tile4, c.tile4);
    EXPECT_EQ(tile2, c.tile2);
    for (const Node& n : optimize(g, {.layout = "NCHWc", .winograd = false}).nodes)
      EXPECT_NE(n.op, "tessel.ConvWinogradNchwc");
    Buffer x(g.values[size_t(g.inputs[0])].shape, float32);
    x.fill_random(3);
    Buffer want = compile(g, {.rewrite = false, .fuse = false}).run({x})[0];
    Network net = compile(g, {.layout = "NCHWc"});
    EXPECT_LT(max_relative_error(net.run({x})[0], want), 1e-4);
    if (c.size == 28 && c.stride == 1)  // saved with its transformed weights
      EXPECT_LT(max_relative_error(run_saved(net, std::string(TESSEL_TEST_TMP) + "/saved_winograd", x, want.shape()),
                                   want), 1e-4);
  }
}

TEST(Graph, SavedNetworksRunWithoutTheCompiler) {
  Graph g = load_onnx_bytes(models::inverted_residual(16, 16, 6, 1, 14));
  Network net = compile(g);
  std::string dir = std::string(TESSEL_TEST_TMP) + "/saved_block";
  Buffer x(g.values[size_t(g.inputs[0])].shape, float32);
  x.fill_random(5);
  Buffer want = compile(g, {.rewrite = false, .fuse = false}).run({x})[0];
  EXPECT_LT(max_relative_error(run_saved(net, dir, x, want.shape()), want), 1e-5);
  // The deploy-time program loads no compiler.
  std::string ldd = dir + "/ldd.txt";
  ASSERT_EQ(std::system(("ldd " + std::string(DEPLOY_RUN) + " > " + ldd).c_str()), 0);
  std::stringstream libs;
  libs << std::ifstream(ldd).rdbuf();
  EXPECT_EQ(libs.str().find("LLVM"), std::string::npos) << libs.str();
  EXPECT_EQ(libs.str().find("libtessel.so"), std::string::npos) << libs.str();
  EXPECT_NE(libs.str().find("libtessel_deploy"), std::string::npos) << libs.str();
}

TEST(Graph, TunedKernelsComeFromTheLogAndARecordThatDoesNotFitGivesTheDefault) {
  auto block = [](bool identity_first) {
    OnnxBuilder b;
    std::string x = b.input("x", float32, {1, 8, 10, 10});
    if (identity_first) x = b.node("Identity", {x});  // shifts every value id: stage names differ
    std::string y = b.node("Conv", {x, b.random("w", {8, 8, 3, 3}, 0.3)}, {{"pads", {1, 1, 1, 1}}});
    b.output(b.node("Relu", {y}));
    return b.graph();
  };
  Graph g = block(false);
  std::string log = std::string(TESSEL_TEST_TMP) + "/graph_tuning.json";
  std::filesystem::remove(log);
  autotune::TuneOptions to;
  to.trials = 4, to.per_round = 4, to.log = log, to.remeasure_top = 0;
  std::vector<autotune::TaskResult> results = tune(g, to);
  ASSERT_EQ(results.size(), 1u);
  Buffer in({1, 8, 10, 10}, float32);
  in.fill_random(9);
  Network tuned = compile(g, {.log = log});
  EXPECT_EQ(tuned.num_tuned(), 1);
  Buffer want = compile(g, {.rewrite = false, .fuse = false}).run({in})[0];
  EXPECT_LT(max_relative_error(tuned.run({in})[0], want), 1e-5);
  // The same kernel in another graph: its record is found but names stages this one lacks.
  testing::internal::CaptureStderr();
  Network other = compile(block(true), {.log = log});
  std::string err = testing::internal::GetCapturedStderr();
  EXPECT_EQ(other.num_tuned(), 0);
  EXPECT_NE(err.find("does not build here"), std::string::npos) << err;
  EXPECT_LT(max_relative_error(other.run({in})[0], want), 1e-5);
}

TEST(Graph, BadModelsGiveAClearError) {
  auto with = [](const std::function<void(OnnxBuilder&)>& body, int opset = 17) {
    OnnxBuilder b(opset);
    body(b);
    return error_of([&] { b.graph(); });
  };
  std::string e = with([](OnnxBuilder& b) { b.output(b.node("NonMaxSuppression", {b.input("x", float32, {4})})); });
  EXPECT_NE(e.find("node 'NonMaxSuppression' (NonMaxSuppression): operator NonMaxSuppression is not supported"),
            std::string::npos) << e;
  e = with([](OnnxBuilder& b) { b.output(b.node("Relu", {b.input("x", float32, {4})})); }, 18);
  EXPECT_NE(e.find("opset 18; Tessel reads opsets 1 to 17"), std::string::npos) << e;
  e = with([](OnnxBuilder& b) {
    b.output(b.node("Add", {b.input("x", float32, {2, 3}), b.input("y", float32, {4})}));
  });
  EXPECT_NE(e.find("node 'Add' (Add, opset 17): shapes [2, 3] and [4] do not broadcast"), std::string::npos) << e;
  e = with([](OnnxBuilder& b) { b.output(b.node("Relu", {"nowhere"})); });
  EXPECT_NE(e.find("input 'nowhere' is not defined"), std::string::npos) << e;
  std::string model = models::resnet_basic_block(4, 4, 1);
  e = error_of([&] { load_onnx_bytes(model.substr(0, model.size() / 2)); });
  EXPECT_NE(e.find("not an ONNX model"), std::string::npos) << e;
  e = error_of([&] { load_onnx("/nonexistent/model.onnx"); });
  EXPECT_NE(e.find("cannot open ONNX model '/nonexistent/model.onnx'"), std::string::npos) << e;
  Graph g = load_onnx_bytes(model);
  Network net = compile(g);
  e = error_of([&] { net.run({Buffer({1, 4, 4, 5}, float32)}); });
  EXPECT_NE(e.find("input 0 ('x') must be float32[1, 4, 4, 4], not float32[1, 4, 4, 5]"), std::string::npos) << e;
}
