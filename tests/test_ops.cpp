// Every operator of the library, built with its default schedule, against a reference.
#include "reference.h"

using namespace tessel;
using ref::Buffer;

namespace {

std::vector<Buffer> run_default(const std::vector<Tensor>& args, const std::vector<Buffer>& inputs) {
  std::vector<Tensor> outs(args.begin() + long(inputs.size()), args.end());
  return ref::run(ops::default_schedule(outs), args, inputs);
}

// An NHWC convolution's reference answer: the NCHW reference on transposed copies, `w_kcrs` the
// weights as [K, C/groups, R, S], the answer transposed back to NHWC.
Buffer conv2d_nhwc_reference(const Buffer& x, const Buffer& w_kcrs, const ops::Conv2dParams& p) {
  return ref::permute(ref::conv2d_nchw(ref::permute(x, {0, 3, 1, 2}), w_kcrs, p), {0, 2, 3, 1});
}

}  // namespace

class MatmulShapes : public ::testing::TestWithParam<std::tuple<int, int, int, bool, bool>> {};

TEST_P(MatmulShapes, MatchesEigen) {
  auto [M, N, K, ta, tb] = GetParam();
  Tensor A = placeholder(ta ? std::vector<int64_t>{K, M} : std::vector<int64_t>{M, K}, float32, "A");
  Tensor B = placeholder(tb ? std::vector<int64_t>{N, K} : std::vector<int64_t>{K, N}, float32, "B");
  Tensor C = ops::matmul(A, B, ta, tb);
  Buffer a = ref::random(A.shape(), 1), b = ref::random(B.shape(), 2);
  ref::expect_close(run_default({A, B, C}, {a, b})[0], ref::matmul(a, b, ta, tb));
}

INSTANTIATE_TEST_SUITE_P(Ops, MatmulShapes,
                         ::testing::Values(std::make_tuple(64, 64, 64, false, false),
                                           std::make_tuple(100, 70, 33, false, false),  // nothing divides
                                           std::make_tuple(7, 1000, 49, false, false),
                                           std::make_tuple(128, 96, 64, true, false),
                                           std::make_tuple(96, 128, 80, false, true),
                                           std::make_tuple(17, 9, 5, true, true)));

TEST(Ops, MatmulDefaultBlocksTheColumnOperand) {
  // A constant B (the weights) is rewritten once into panels [N / 32, K, 32], plain or
  // transposed; one that is not is packed per call where it is transposed or its rows, a
  // multiple of 4 KB apart, alias in the cache (K = 1024 rows of 1024 floats), and read as
  // given otherwise.
  for (auto [M, K, N, tb, constant, layout] : std::vector<std::tuple<int, int, int, bool, bool, std::string>>{
           {40, 96, 64, false, true, "rewrite_layout"},
           {40, 96, 64, true, true, "rewrite_layout"},
           {40, 96, 64, true, false, "pack"},
           {40, 96, 64, false, false, ""},
           {16, 1024, 1024, false, false, "pack"}}) {
    Tensor A = placeholder({M, K}, float32, "A");
    Tensor B = placeholder(tb ? std::vector<int64_t>{N, K} : std::vector<int64_t>{K, N}, float32, "B");
    Tensor C = ops::matmul(A, B, false, tb);
    Schedule s = ops::default_schedule({C}, Target::host(), constant ? std::vector<Tensor>{B} : std::vector<Tensor>{});
    std::string cpp = s.to_cpp();
    for (std::string step : {"rewrite_layout", "pack"})
      EXPECT_EQ(cpp.find("s." + step + "(s.tensor(\"B\")") != std::string::npos, step == layout) << cpp;
    Buffer a = ref::random(A.shape(), 1), b = ref::random(B.shape(), 2);
    ref::expect_close(ref::run(s, {A, B, C}, {a, b})[0], ref::matmul(a, b, false, tb));
  }
}

TEST(Ops, ElementWiseChainsAfterAProductAreItsEpilogue) {
  // product + bias, then x * erf(x) of the biased product (read twice, as exporters write
  // GELU): both are computed on the product's register block, the bias stage inlined; no
  // buffer of the whole product is allocated.
  Tensor A = placeholder({24, 40}, float32, "A"), B = placeholder({40, 48}, float32, "B");
  Tensor bias = placeholder({48}, float32, "bias");
  Tensor C = ops::matmul(A, B);
  Tensor D = compute({24, 48}, [&](Var i, Var j) { return C(i, j) + bias(j); }, "D", "broadcast");
  Tensor G = compute({24, 48}, [&](Var i, Var j) { return D(i, j) * erf(D(i, j)); }, "G", "elemwise");
  Schedule s = ops::default_schedule({G}, Target::host(), {B});
  std::string cpp = s.to_cpp();
  EXPECT_NE(cpp.find(R"(s["D"].compute_inline())"), std::string::npos) << cpp;
  EXPECT_NE(cpp.find(R"(].compute_at(s["G"])"), std::string::npos) << cpp;
  Buffer a = ref::random(A.shape(), 1), b = ref::random(B.shape(), 2), c = ref::random(bias.shape(), 3);
  Module m = build(s, {A, B, bias, G});
  EXPECT_EQ(m.lowered().str().find("[float32 * 1152]"), std::string::npos) << m.lowered().str();
  Buffer want = ref::matmul(a, b, false, false);
  for (int64_t i = 0; i < want.size(); ++i) {
    double v = want.get(i) + c.get(i % 48);
    want.set(i, v * std::erf(v));
  }
  ref::expect_close(ref::run(s, {A, B, bias, G}, {a, b, c})[0], want);

  // An NHWC convolution + bias + ReLU: its constant weights are still read rewritten.
  Tensor X = placeholder({1, 6, 6, 16}, float32, "X"), W = placeholder({3, 3, 16, 32}, float32, "W");
  Tensor Y = ops::conv2d_nhwc(X, W, {1, 1, 1, 1, 1, 1, 1}, "conv");
  Tensor bias32 = placeholder({32}, float32, "bias32");
  Tensor Yb = compute({1, 6, 6, 32}, [&](Var n, Var y, Var x, Var k) { return Y(n, y, x, k) + bias32(k); }, "Yb",
                      "broadcast");
  Tensor R = compute({1, 6, 6, 32}, [&](Var n, Var y, Var x, Var k) { return max(Yb(n, y, x, k), Expr(0.0f)); }, "R",
                     "elemwise");
  Schedule sc = ops::default_schedule({R}, Target::host(), {W});
  cpp = sc.to_cpp();
  EXPECT_NE(cpp.find(R"(s.rewrite_layout(s.tensor("W"))"), std::string::npos) << cpp;
  EXPECT_NE(cpp.find(R"(].compute_at(s["R"])"), std::string::npos) << cpp;
  Buffer x = ref::random(X.shape(), 4), w = ref::random(W.shape(), 5), b32 = ref::random({32}, 6);
  Buffer conv = conv2d_nhwc_reference(x, ref::permute(w, {3, 2, 0, 1}), {1, 1, 1, 1, 1, 1, 1});
  for (int64_t i = 0; i < conv.size(); ++i) conv.set(i, std::max(0.0, conv.get(i) + b32.get(i % 32)));
  ref::expect_close(ref::run(sc, {X, W, bias32, R}, {x, w, b32})[0], conv);
}

TEST(Ops, DenseBiasRelu) {
  Tensor X = placeholder({37, 64}, float32, "X");
  Tensor W = placeholder({50, 64}, float32, "W");
  Tensor b = placeholder({50}, float32, "b");
  Tensor Y = ops::dense(X, W, b, ops::Activation::Relu);
  Buffer x = ref::random(X.shape(), 3), w = ref::random(W.shape(), 4), bias = ref::random(b.shape(), 5);
  Buffer want = ref::matmul(x, w, false, true);
  for (int64_t i = 0; i < want.size(); ++i) want.set(i, std::max(0.0, want.get(i) + bias.get(i % 50)));
  ref::expect_close(run_default({X, W, b, Y}, {x, w, bias})[0], want);
}

TEST(Ops, DenseGelu) {
  Tensor X = placeholder({16, 32}, float32, "X");
  Tensor W = placeholder({24, 32}, float32, "W");
  Tensor Y = ops::dense(X, W, std::nullopt, ops::Activation::Gelu);
  Buffer x = ref::random(X.shape(), 3), w = ref::random(W.shape(), 4);
  Buffer want = ref::matmul(x, w, false, true);
  for (int64_t i = 0; i < want.size(); ++i) {
    double v = want.get(i);
    want.set(i, 0.5 * v * (1 + std::erf(v / std::sqrt(2.0))));
  }
  ref::expect_close(run_default({X, W, Y}, {x, w})[0], want);
}

TEST(Ops, BatchMatmul) {
  Tensor A = placeholder({3, 20, 30}, float32, "A");
  Tensor B = placeholder({3, 40, 30}, float32, "B");
  Tensor C = ops::batch_matmul(A, B, false, true);
  Buffer a = ref::random(A.shape(), 1), b = ref::random(B.shape(), 2);
  Buffer got = run_default({A, B, C}, {a, b})[0];
  for (int bi = 0; bi < 3; ++bi) {
    Buffer ab({20, 30}, float32), bb({40, 30}, float32);
    for (int i = 0; i < 600; ++i) ab.set(i, a.get(bi * 600 + i));
    for (int i = 0; i < 1200; ++i) bb.set(i, b.get(bi * 1200 + i));
    Buffer want = ref::matmul(ab, bb, false, true);
    for (int i = 0; i < 800; ++i) EXPECT_NEAR(got.get(bi * 800 + i), want.get(i), 1e-4);
  }
}

struct ConvCase {
  int64_t N, C, H, W, K, R, S;
  ops::Conv2dParams p;
};

class Conv2d : public ::testing::TestWithParam<ConvCase> {};

TEST_P(Conv2d, NchwMatchesLoops) {
  ConvCase c = GetParam();
  Tensor X = placeholder({c.N, c.C, c.H, c.W}, float32, "X");
  Tensor W = placeholder({c.K, c.C / c.p.groups, c.R, c.S}, float32, "W");
  Tensor Y = ops::conv2d_nchw(X, W, c.p);
  Buffer x = ref::random(X.shape(), 7), w = ref::random(W.shape(), 8);
  Buffer want = ref::conv2d_nchw(x, w, c.p);
  ref::expect_close(run_default({X, W, Y}, {x, w})[0], want);
  // Weights marked constant: read through a rewritten layout, prepared by the Module.
  ref::expect_close(ref::run(ops::default_schedule({Y}, Target::host(), {W}), {X, W, Y}, {x, w})[0], want);
}

TEST_P(Conv2d, NhwcMatchesLoops) {
  ConvCase c = GetParam();
  Tensor X = placeholder({c.N, c.H, c.W, c.C}, float32, "X");
  Tensor W = placeholder({c.R, c.S, c.C / c.p.groups, c.K}, float32, "W");
  Tensor Y = ops::conv2d_nhwc(X, W, c.p);
  Buffer x = ref::random(X.shape(), 7), w = ref::random(W.shape(), 8);
  // Same numbers in NCHW / KCRS order for the reference, its answer back in NHWC.
  Buffer want = conv2d_nhwc_reference(x, ref::permute(w, {3, 2, 0, 1}), c.p);
  ref::expect_close(run_default({X, W, Y}, {x, w})[0], want);
  // Weights marked constant: read blocked by output channels, prepared by the Module.
  ref::expect_close(ref::run(ops::default_schedule({Y}, Target::host(), {W}), {X, W, Y}, {x, w})[0], want);
}

TEST_P(Conv2d, NchwcWithLayoutTransformsMatchesLoops) {
  ConvCase c = GetParam();
  if (c.p.groups != 1 || c.C % 4 || c.K % 8) GTEST_SKIP() << "blocked layout needs groups=1 and blockable channels";
  Tensor X = placeholder({c.N, c.C, c.H, c.W}, float32, "X");
  Tensor W = placeholder({c.K, c.C, c.R, c.S}, float32, "W");
  Tensor Xb = ops::nchw_to_nchwc(X, 4);
  Tensor Wb = ops::kcrs_to_kcrsck(W, 4, 8);
  Tensor Yb = ops::conv2d_nchwc(Xb, Wb, c.p);
  Tensor Y = ops::nchwc_to_nchw(Yb);
  Buffer x = ref::random(X.shape(), 7), w = ref::random(W.shape(), 8);
  ref::expect_close(run_default({X, W, Y}, {x, w})[0], ref::conv2d_nchw(x, w, c.p));
  if (c.K % 16) return;
  // Blocks of 16 output channels: two vectors with AVX2, so fewer columns per register block.
  Tensor Y16 = ops::nchwc_to_nchw(ops::conv2d_nchwc(Xb, ops::kcrs_to_kcrsck(W, 4, 16), c.p));
  ref::expect_close(run_default({X, W, Y16}, {x, w})[0], ref::conv2d_nchw(x, w, c.p));
}

INSTANTIATE_TEST_SUITE_P(
    Ops, Conv2d,
    ::testing::Values(ConvCase{1, 8, 12, 12, 16, 3, 3, {1, 1, 1, 1, 1, 1, 1}},
                      ConvCase{2, 4, 9, 11, 8, 3, 3, {2, 2, 1, 1, 1, 1, 1}},        // stride 2, odd sizes
                      ConvCase{1, 8, 10, 10, 16, 1, 1, {1, 1, 0, 0, 1, 1, 1}},      // 1x1
                      ConvCase{1, 4, 13, 13, 8, 3, 3, {1, 1, 2, 2, 2, 2, 1}},       // dilation 2
                      ConvCase{1, 8, 7, 7, 16, 3, 3, {1, 1, 1, 1, 1, 1, 4}},        // groups 4
                      ConvCase{1, 12, 14, 14, 24, 5, 5, {1, 2, 2, 0, 1, 1, 1}},     // asymmetric
                      ConvCase{1, 8, 34, 34, 16, 1, 1, {1, 1, 0, 0, 1, 1, 1}},      // short and wide: columns
                      ConvCase{1, 4, 9, 9, 12, 3, 3, {1, 1, 1, 1, 1, 1, 1}},        // 12 channels: columns
                      ConvCase{1, 6, 15, 15, 10, 5, 5, {2, 2, 2, 2, 1, 1, 1}},      // columns, stride 2: taps unrolled
                      ConvCase{1, 8, 11, 11, 16, 3, 3, {2, 2, 1, 1, 1, 1, 1}},      // stride 2, padding read in place
                      ConvCase{2, 8, 8, 12, 20, 1, 1, {1, 1, 0, 0, 1, 1, 1}}));     // 1x1 over 96 pixels: a GEMM

TEST(Ops, NchwcDefaultPairsChannelBlocksWith32Registers) {
  // With AVX-512's 32 registers, two blocks of 16 output channels share each broadcast input,
  // columns a divisor of the row; run here with this CPU's own vectors, the answer is the same.
  // Where the weights are larger than a 14x14 input, the reduction runs in chunks of 16 KB of
  // weights outside the image (one block of 16 input channels at 3x3, eight at 1x1).
  Target t = Target::host();
  t.vector_bytes = 64, t.vector_registers = 32;
  struct Case {
    int64_t stride, R, C, K;
    const char* chunk;
  };
  for (Case c : {Case{1, 3, 16, 64, R"(split("ico", 1))"}, Case{2, 3, 16, 64, nullptr},
                 Case{1, 1, 256, 256, R"(split("ico", 8))"}}) {
    ops::Conv2dParams p{c.stride, c.stride, c.R / 2, c.R / 2, 1, 1, 1};
    Tensor X = placeholder({1, c.C, 14, 14}, float32, "X"), W = placeholder({c.K, c.C, c.R, c.R}, float32, "W");
    Tensor Yb = ops::conv2d_nchwc(ops::nchw_to_nchwc(X, 16), ops::kcrs_to_kcrsck(W, 16, 16), p, "conv");
    Tensor Y = ops::nchwc_to_nchw(Yb);
    Schedule s = ops::default_schedule({Y}, t);
    std::string cpp = s.to_cpp();
    EXPECT_NE(cpp.find(R"(s["conv"].split("j", 2))"), std::string::npos) << cpp;
    EXPECT_EQ(cpp.find("split(\"ico\"") != std::string::npos, c.chunk != nullptr) << cpp;
    if (c.chunk) EXPECT_NE(cpp.find(c.chunk), std::string::npos) << cpp;
    Buffer x = ref::random(X.shape(), 1), w = ref::random(W.shape(), 2);
    ref::expect_close(ref::run(s, {X, W, Y}, {x, w}, {.target = t})[0], ref::conv2d_nchw(x, w, p));
  }
}

TEST(Ops, WinogradConv2dMatchesTheDirectSum) {
  // F(2x2) and F(4x4), with and without padding, on images that end in partial tiles, with a
  // ReLU epilogue computed per output tile; the weights transformed once, as a network does.
  struct Case {
    int64_t tile, H, W, pad;
  };
  for (Case c : {Case{2, 9, 12, 1}, Case{4, 13, 13, 1}, Case{4, 10, 9, 0}, Case{2, 6, 5, 0}}) {
    SCOPED_TRACE("F(" + std::to_string(c.tile) + "), " + std::to_string(c.H) + "x" + std::to_string(c.W));
    ops::Conv2dParams p{1, 1, c.pad, c.pad, 1, 1, 1};
    Tensor X = placeholder({1, 3, c.H, c.W, 8}, float32, "X"), W = placeholder({4, 3, 3, 3, 8, 8}, float32, "W");
    int64_t a = c.tile + 2;
    Tensor U = placeholder({a, a, 4, 3, 8, 8}, float32, "U");
    auto relu = [](const Tensor& y) {
      return compute(y.shape(), ComputeFn([&](const std::vector<Var>& v) {
        return max(y(std::vector<Expr>(v.begin(), v.end())), make_const(float32, 0));
      }), "relu", "elemwise");
    };
    Tensor direct = relu(ops::conv2d_nchwc(X, W, p, "direct"));
    Tensor wino = relu(ops::conv2d_winograd_nchwc(X, U, p, "conv"));
    Buffer x = ref::random(X.shape(), 1), w = ref::random(W.shape(), 2);
    Buffer want = run_default({X, W, direct}, {x, w})[0];
    Schedule s = ops::default_schedule({wino}, Target::host(), {U});
    std::string cpp = s.to_cpp();  // the output transform is computed in its epilogue
    EXPECT_NE(cpp.find(R"(s["conv"].compute_inline())"), std::string::npos) << cpp;
    ref::expect_close(ref::run(s, {X, U, wino}, {x, ops::winograd_weights(w, c.tile)})[0], want);
  }
  Tensor X = placeholder({1, 1, 8, 8, 8}, float32, "X"), U = placeholder({5, 5, 1, 1, 8, 8}, float32, "U");
  EXPECT_THROW(ops::conv2d_winograd_nchwc(X, U), Error);
  EXPECT_THROW(ops::winograd_weights(ref::random({1, 1, 5, 5, 8, 8}, 1)), Error);
}

TEST(Ops, WinogradConv2dInNchwAndNhwcMatchesTheDirectSum) {
  // The layouts users give: packed into channel blocks first, unpacked last; the weights as
  // users have them (OIHW, HWIO), transformed and blocked once.
  struct Case {
    int64_t tile, C, K, H, W, pad;
  };
  for (Case c : {Case{4, 16, 32, 13, 11, 1}, Case{2, 32, 16, 10, 10, 0}}) {
    SCOPED_TRACE("F(" + std::to_string(c.tile) + "), " + std::to_string(c.H) + "x" + std::to_string(c.W));
    ops::Conv2dParams p{1, 1, c.pad, c.pad, 1, 1, 1};
    Tensor X = placeholder({1, c.C, c.H, c.W}, float32, "X"), W = placeholder({c.K, c.C, 3, 3}, float32, "W");
    int64_t a = c.tile + 2;
    Tensor U = placeholder({a, a, c.K / 8, c.C / 8, 8, 8}, float32, "U");
    Tensor wino = ops::conv2d_winograd_nchw(X, U, p);
    Buffer x = ref::random(X.shape(), 1), w = ref::random(W.shape(), 2);
    Buffer u = ops::winograd_weights_oihw(w, 8, 8, c.tile);
    Buffer want = ref::conv2d_nchw(x, w, p);
    ref::expect_close(ref::run(ops::default_schedule({wino}), {X, U, wino}, {x, u})[0], want);
    Tensor Xh = placeholder({1, c.H, c.W, c.C}, float32, "X");
    Tensor nhwc = ops::conv2d_winograd_nhwc(Xh, U, p);
    Buffer uh = ops::winograd_weights_hwio(ref::permute(w, {2, 3, 1, 0}), 8, 8, c.tile);
    ref::expect_close(ref::run(ops::default_schedule({nhwc}), {Xh, U, nhwc}, {ref::permute(x, {0, 2, 3, 1}), uh})[0],
                      ref::permute(want, {0, 2, 3, 1}));
  }
  EXPECT_THROW(ops::winograd_weights_oihw(ref::random({16, 12, 3, 3}, 1), 8, 8), Error);  // 12 channels, blocks of 8
}

TEST(Ops, OneByOneNchwDefaultIsAGemmOverThePixels) {
  // The rows and columns run as one axis of pixels in vector lanes (whole vectors across
  // the ends of 12-column rows), blocks of output channels with a tail (20 is not a multiple
  // of the block), accumulated in place. 192 pixels fill whole blocks of two AVX2 vectors
  // and of four AVX-512 ones.
  Tensor X = placeholder({2, 8, 16, 12}, float32, "X");
  Tensor W = placeholder({20, 8, 1, 1}, float32, "W");
  Tensor Y = ops::conv2d_nchw(X, W, {});
  Schedule s = ops::default_schedule({Y});
  std::string cpp = s.to_cpp();
  EXPECT_NE(cpp.find(R"(s["conv"].fuse({"k", "l"}))"), std::string::npos) << cpp;
  EXPECT_EQ(cpp.find("cache_write"), std::string::npos) << cpp;
  Buffer x = ref::random(X.shape(), 7), w = ref::random(W.shape(), 8);
  ref::expect_close(ref::run(s, {X, W, Y}, {x, w})[0], ref::conv2d_nchw(x, w, {}));
}

TEST(Ops, NchwDefaultBlocksAWholeRowOfA1x1OrStridedLayer) {
  // Channel-blocked (196 output pixels are no whole number of vectors, the reduction is long):
  // the register block of a 1x1 or a strided layer may take all registers but four: with
  // AVX-512's 32, a row of 14 columns by two vectors of channels; a 3x3 stride-1 layer's keeps
  // 3/4 of them (24: two blocks of 7 columns).
  Target t = Target::host();
  int64_t lanes = t.vector_bytes / 4;
  for (auto [R, stride] : std::vector<std::pair<int64_t, int>>{{1, 1}, {3, 1}, {3, 2}}) {
    ops::Conv2dParams p{stride, stride, int(R / 2), int(R / 2), 1, 1, 1};
    Tensor X = placeholder({1, 9 * lanes, 14 * stride, 14 * stride}, float32, "X");
    Tensor W = placeholder({2 * lanes, 9 * lanes, R, R}, float32, "W");
    Tensor Y = ops::conv2d_nchw(X, W, p);
    Schedule s = ops::default_schedule({Y}, t, {W});
    bool whole_row = R == 1 || stride > 1;
    std::string split = R"(.split("l", )" + std::string(whole_row ? "14" : "7") + ");";
    if (t.vector_registers >= 32) EXPECT_NE(s.to_cpp().find(split), std::string::npos) << R << "\n" << s.to_cpp();
    Buffer x = ref::random(X.shape(), 13), w = ref::random(W.shape(), 14);
    ref::expect_close(ref::run(s, {X, W, Y}, {x, w})[0], ref::conv2d_nchw(x, w, p));
  }
}

TEST(Ops, NchwDefaultRunsAShortReductionOverThePixelsEndingInANarrowerVector) {
  // 1x1 at 14x14: 196 pixels end in a narrower vector. Over at most 8 vectors' worth of input
  // channels the GEMM over the pixels is the default; over more, the channel-blocked path.
  // At 7x7 the last block of pixels must be a power of two of them: 49 = 3 x 16 + 1 in AVX2's
  // blocks of 2 vectors, but 49 of AVX-512's 64 (channel-blocked). A wide layer (256 input
  // channels of 16 pixels fill 16 KB, 128 output channels) whose whole blocks share the cores
  // evenly (12 of AVX2's at 14x14 on 2 cores) packs its pixels' panels, the reduction over the
  // pixels however long.
  Target t = Target::host();
  t.num_cores = 2;
  int64_t lanes = t.vector_bytes / 4, block = t.vector_registers * 3 / 4 / 6 * lanes;
  struct Case {
    int64_t C, H, K;
  };
  for (Case c : {Case{4 * lanes, 14, 40}, Case{9 * lanes, 14, 40}, Case{4 * lanes, 7, 40}, Case{256, 14, 128}}) {
    auto [C, H, K] = c;
    Tensor X = placeholder({1, C, H, H}, float32, "X"), W = placeholder({K, C, 1, 1}, float32, "W");
    Tensor Y = ops::conv2d_nchw(X, W, {});
    Schedule s = ops::default_schedule({Y}, t, {W});
    std::string cpp = s.to_cpp();
    bool pixels = cpp.find("cache_write") == std::string::npos;
    int64_t last = H * H % block, blocks = H * H / block;
    bool packed = C * block * 4 >= (16 << 10) && K >= 120 && blocks >= 2 && t.shares_evenly(blocks);
    if (lanes == 8) EXPECT_EQ(packed, C == 256) << C;  // AVX2: the wide case packs
    EXPECT_EQ(pixels, packed || (C <= 8 * lanes && (last & (last - 1)) == 0)) << C << "@" << H << "\n" << cpp;
    EXPECT_EQ(cpp.find(R"(s.pack(s.tensor("X"), {s.tensor("conv")}, 2, )" + std::to_string(block) + ", 2);") !=
                  std::string::npos,
              packed)
        << C << "@" << H << "\n" << cpp;
    Buffer x = ref::random(X.shape(), 15), w = ref::random(W.shape(), 16);
    ref::expect_close(ref::run(s, {X, W, Y}, {x, w})[0], ref::conv2d_nchw(x, w, {}));
  }
}

TEST(Ops, NchwDefaultChunksTheReductionWhereTheWeightsOutweighTheInput) {
  // Weights larger than the input, output of 14x14: each block of output channels
  // accumulates over the whole image while the input channels run in chunks (their weights
  // within L1), then is copied out to NCHW rows (with 32 registers over the fused pixels: whole
  // vectors of a plane). Stride 1 and 2, weights rewritten once or packed per call. Not where the
  // blocks of channels do not share the cores evenly (3 on 2): row by row instead.
  int64_t kb = 2 * (Target::host().vector_bytes / 4);
  for (int64_t stride : {1, 2}) {
    int64_t C = stride == 1 ? 64 : 16, H = 14 * stride, K = stride == 1 ? 64 : 128;
    ops::Conv2dParams p{stride, stride, 1, 1, 1, 1, 1};
    Tensor X = placeholder({1, C, H, H}, float32, "X"), W = placeholder({K, C, 3, 3}, float32, "W");
    Tensor Y = ops::conv2d_nchw(X, W, p);
    Buffer x = ref::random(X.shape(), 5), w = ref::random(W.shape(), 6);
    Buffer want = ref::conv2d_nchw(x, w, p);
    Schedule rewritten = ops::default_schedule({Y}, Target::host(), {W});
    std::string cpp = rewritten.to_cpp();
    EXPECT_NE(cpp.find(R"(split("rc")"), std::string::npos) << cpp;
    EXPECT_EQ(cpp.find(R"(s["conv"].fuse({"k", "l"});)") != std::string::npos,
              Target::host().vector_registers >= 32) << cpp;
    ref::expect_close(ref::run(rewritten, {X, W, Y}, {x, w})[0], want);
    ref::expect_close(run_default({X, W, Y}, {x, w})[0], want);
  }
  Target two = Target::host();
  two.num_cores = 2;
  Tensor X = placeholder({1, 64, 14, 14}, float32, "X"), W = placeholder({3 * kb, 64, 3, 3}, float32, "W");
  Tensor Y = ops::conv2d_nchw(X, W, {1, 1, 1, 1, 1, 1, 1});
  Schedule uneven = ops::default_schedule({Y}, two, {W});
  EXPECT_EQ(uneven.to_cpp().find(R"(split("rc")"), std::string::npos) << uneven.to_cpp();
  Buffer x = ref::random(X.shape(), 7), w = ref::random(W.shape(), 8);
  ref::expect_close(ref::run(uneven, {X, W, Y}, {x, w})[0], ref::conv2d_nchw(x, w, {1, 1, 1, 1, 1, 1, 1}));
}

TEST(Ops, NchwDefaultChunksTheReductionOfSmallImagesWhereABlocksWeightsOutgrowL1) {
  // 7x7 output: the reduction runs in chunks where one block of output channels (two vectors)
  // has more than 48 KB of weights and the blocks share evenly among the cores; with fewer
  // input channels (a block's weights within L1), row by row. With AVX2 in chunks either way
  // (blocks of fused pixels: see NchwDefaultBlocksFusedPixelsOfNarrowImagesWithAvx2).
  Target t = Target::host();
  int64_t kb = 2 * (t.vector_bytes / 4), K = 4 * t.num_cores * kb, fit = 48 * 1024 / (4 * kb);
  for (int64_t C : {fit + kb, fit / 2}) {
    Tensor X = placeholder({1, C, 7, 7}, float32, "X"), W = placeholder({K, C, 1, 1}, float32, "W");
    Tensor Y = ops::conv2d_nchw(X, W, {});
    Schedule s = ops::default_schedule({Y}, t, {W});
    bool chunks = C > fit || t.vector_registers < 32;
    EXPECT_EQ(s.to_cpp().find(R"(split("rc")") != std::string::npos, chunks) << C << "\n" << s.to_cpp();
    Buffer x = ref::random(X.shape(), 19), w = ref::random(W.shape(), 20);
    ref::expect_close(ref::run(s, {X, W, Y}, {x, w})[0], ref::conv2d_nchw(x, w, {}));
  }
}

TEST(Ops, NchwWindowsRunInChunksWhereABlockOverTheImageFits256KB) {
  // A 3x3 layer whose weights are the smaller operand: where a block of output channels accumulated over the
  // whole image fits in 256 KB, its input channels run in chunks outside the rows (the chunk's weights stay in
  // L1); past that, row by row. At stride 2 on every CPU; at stride 1 where the pixels do not fuse (AVX-512).
  Target t = Target::host();
  t.num_cores = 2;
  int64_t kb = 2 * (t.vector_bytes / 4);
  for (int64_t H : {28, 56, 112})
    for (int64_t stride : {1, 2}) {
      if ((stride == 1 && (H > 56 || t.vector_registers < 32)) || (stride == 2 && H < 56)) continue;
      int64_t OH = H / stride;
      Tensor X = placeholder({1, 64, H, H}, float32, "X"), W = placeholder({64, 64, 3, 3}, float32, "W");
      ops::Conv2dParams p;
      p.stride_h = p.stride_w = stride;
      p.pad_h = p.pad_w = 1;
      Tensor Y = ops::conv2d_nchw(X, W, p);
      Schedule s = ops::default_schedule({Y}, t, {W});
      bool chunks = OH * OH * kb * 4 <= 256 * 1024;
      EXPECT_EQ(s.to_cpp().find(R"(split("rc")") != std::string::npos, chunks) << H << " " << stride << "\n"
                                                                                << s.to_cpp();
      Buffer x = ref::random(X.shape(), 25), w = ref::random(W.shape(), 26);
      ref::expect_close(ref::run(s, {X, W, Y}, {x, w})[0], ref::conv2d_nchw(x, w, p));
    }
}

TEST(Ops, NchwOneByOneRunsInputRowsThroughTheWeightsWhereARowFitsL1) {
  // A 1x1 layer whose input outgrows L1 while one row of all its channels fits a third of it,
  // with at least 8 blocks of output channels a core: each core takes its share of the blocks
  // and every row, the row copied into a dense block (X.local) first. Not where the whole input
  // fits in L1, nor where the blocks are fewer. At stride 2 the row copy reads the image's strided
  // row itself: its subsampled copy (X.sub.sub) is inlined, no pass of its own.
  for (int cores : {1, 2}) {
    Target t = Target::host();
    t.num_cores = cores;
    int64_t kb = 2 * (t.vector_bytes / 4);
    struct Case { int64_t C, H, K, stride; bool rows; };
    for (Case c : {Case{256, 7, 8 * cores * kb, 1, true}, Case{96, 7, 8 * cores * kb, 1, false},
                   Case{256, 7, 4 * cores * kb, 1, false}, Case{256, 14, 8 * cores * kb, 2, true}}) {
      Tensor X = placeholder({1, c.C, c.H, c.H}, float32, "X"), W = placeholder({c.K, c.C, 1, 1}, float32, "W");
      ops::Conv2dParams p;
      p.stride_h = p.stride_w = c.stride;
      Tensor Y = ops::conv2d_nchw(X, W, p);
      Schedule s = ops::default_schedule({Y}, t, {W});
      std::string cpp = s.to_cpp();
      bool rows = c.rows && t.vector_registers >= 32;  // with AVX2 the fused pixels
      std::string input = c.stride > 1 ? "X.sub.sub" : "X";
      EXPECT_EQ(cpp.find(R"(s.cache_read(s.tensor(")" + input + R"("), "local")") != std::string::npos, rows)
          << c.C << "\n" << cpp;
      if (c.stride > 1)
        EXPECT_EQ(cpp.find(R"(s["X.sub.sub"].compute_inline();)") != std::string::npos, rows) << cpp;
      Buffer x = ref::random(X.shape(), 23), w = ref::random(W.shape(), 24);
      ref::expect_close(ref::run(s, {X, W, Y}, {x, w})[0], ref::conv2d_nchw(x, w, p));
    }
  }
}

TEST(Ops, NchwOneByOnePrefetchesTheNextBlockOfPixelsWhereTheInputOutgrowsL2) {
  // A 1x1 layer over fused pixels whose input outgrows a core's L2 (2 MB), read by at most 16
  // blocks of output channels: each block of pixels runs in two halves of its channel blocks
  // in the parallel loop, each fetching the next block's panel ahead (AVX-512). Not with 17
  // blocks, nor under 2 MB of input; with AVX2 not at all.
  struct Case { int64_t C, H, K; bool prefetch; };
  for (std::string cpu : {"haswell", "skylake-avx512"}) {
    BuildOptions o;
    o.target = Target::parse("llvm -mcpu=" + cpu);
    for (Case c : {Case{256, 48, 64, true}, Case{256, 48, 17 * 6, false}, Case{256, 40, 64, false}}) {
      Tensor X = placeholder({1, c.C, c.H, c.H}, float32, "X"), W = placeholder({c.K, c.C, 1, 1}, float32, "W");
      Tensor Y = ops::conv2d_nchw(X, W, {});
      Schedule s = ops::default_schedule({Y}, o.target, {W});
      std::string cpp = s.to_cpp();
      bool prefetch = c.prefetch && o.target.avx512();
      EXPECT_EQ(cpp.find(R"(s["conv"].prefetch(s.tensor("X"))") != std::string::npos, prefetch) << c.K << "\n" << cpp;
      // 64 channels in 8 blocks of 8 (see NchwPixelBlockFitsTheOutputChannels): halves of 4.
      if (prefetch) EXPECT_NE(cpp.find(R"(s["conv"].split("j.outer", 4);)"), std::string::npos) << cpp;
      if (cpu != "haswell" && !Target::host().avx512()) continue;  // runs only where the CPU can
      Buffer x = ref::random(X.shape(), 25), w = ref::random(W.shape(), 26);
      ref::expect_close(ref::run(s, {X, W, Y}, {x, w}, o)[0], ref::conv2d_nchw(x, w, {}));
    }
  }
}

TEST(Ops, NchwPixelBlockFitsTheOutputChannels) {
  // The GEMM over the pixels accumulates 6 output channels x 4 vectors of pixels with AVX-512, or 8 x 3
  // where 8 divides the output channels and 6 does not and the pixels are whole vectors, or where 8 divides
  // 120 or more output channels and 3 blocks of 64 pixels end in a tail (14x14), each vector of the block its
  // own (unrolled); the latter's blocks of channels shared among the cores, not packed. AVX2's 6 x 2 whatever
  // the channels.
  struct Case { int64_t K, H; bool eight; };
  for (std::string cpu : {"haswell", "skylake-avx512"}) {
    BuildOptions o;
    o.target = Target::parse("llvm -mcpu=" + cpu);
    for (Case c : {Case{32, 28, true}, Case{40, 16, true}, Case{48, 28, false}, Case{32, 14, false},
                   Case{384, 14, true}}) {
      Tensor X = placeholder({1, 64, c.H, c.H}, float32, "X"), W = placeholder({c.K, 64, 1, 1}, float32, "W");
      Tensor Y = ops::conv2d_nchw(X, W, {});
      Schedule s = ops::default_schedule({Y}, o.target, {W});
      std::string cpp = s.to_cpp();
      ASSERT_EQ(cpp.find("cache_write"), std::string::npos) << cpp;  // the GEMM over the pixels
      bool eight = c.eight && o.target.avx512();
      int64_t lanes = o.target.vector_bytes / 4, pixels = (eight ? 3 : o.target.avx512() ? 4 : 2) * lanes;
      EXPECT_NE(cpp.find(R"(s["conv"].split("j", )" + std::string(eight ? "8" : "6") + ");"), std::string::npos)
          << c.K << "@" << c.H << "\n" << cpp;
      EXPECT_NE(cpp.find(R"(s["conv"].split("k.l.fused", )" + std::to_string(pixels) + ");"), std::string::npos)
          << c.K << "@" << c.H << "\n" << cpp;
      EXPECT_NE(cpp.find(R"(s["conv"].unroll("k.l.fused.inner.outer");)"), std::string::npos) << cpp;
      if (c.H == 14) EXPECT_EQ(cpp.find("s.pack("), std::string::npos) << cpp;
      if (cpu != "haswell" && !Target::host().avx512()) continue;  // runs only where the CPU can
      Buffer x = ref::random(X.shape(), 27), w = ref::random(W.shape(), 28);
      ref::expect_close(ref::run(s, {X, W, Y}, {x, w}, o)[0], ref::conv2d_nchw(x, w, {}));
    }
  }
}

TEST(Ops, NchwDefaultBlocksTwoRowsOfANarrowImageWhereUnchunkedWeightsOutgrowL1) {
  // 7x7 output, blocks of output channels (two vectors) with more than 48 KB of weights each:
  // where the blocks do not share evenly among the cores (so the reduction is not chunked), a
  // register block holds two rows (2 x 7 columns x 2 vectors, with 32 vector registers); with
  // fewer input channels (the weights within L1), one row.
  Target t = Target::host();
  int64_t lanes = t.vector_bytes / 4, kb = 2 * lanes, fit = 48 * 1024 / (4 * kb);
  int64_t blocks = t.num_cores + 1;  // never a multiple of the cores
  bool two_rows = !t.shares_evenly(blocks) && 2 * 7 * 2 <= t.vector_registers - 4;
  for (int64_t C : {fit + lanes, fit / 2}) {
    Tensor X = placeholder({1, C, 7, 7}, float32, "X"), W = placeholder({blocks * kb, C, 1, 1}, float32, "W");
    Tensor Y = ops::conv2d_nchw(X, W, {});
    Schedule s = ops::default_schedule({Y}, t, {W});
    std::string cpp = s.to_cpp();
    EXPECT_EQ(cpp.find(R"(s["conv"].split("k", 2);)") != std::string::npos, two_rows && C > fit) << C << "\n" << cpp;
    Buffer x = ref::random(X.shape(), 21), w = ref::random(W.shape(), 22);
    ref::expect_close(ref::run(s, {X, W, Y}, {x, w})[0], ref::conv2d_nchw(x, w, {}));
  }
}

TEST(Ops, NchwDefaultBlocksFusedPixelsOfNarrowImagesWithAvx2) {
  // With AVX2's 16 registers a layer read at stride 1 on a narrow image (1x1, 3x3, 5x5 and a
  // dilated 3x3 at 7x7, and a 1x1 at 14x14 subsampled at stride 2) accumulates blocks of 6
  // consecutive pixels across the ends of rows (the rows' 4 + 3 columns left too few
  // accumulators), the reduction in chunks, the window unrolled; with 32 registers, rows. A 3x3 layer at stride 2
  // (its padding read in place) keeps rows.
  struct Case {
    int64_t H, R, stride, dilation = 1;
  };
  for (std::string cpu : {"haswell", "skylake-avx512"}) {
    BuildOptions o;
    o.target = Target::parse("llvm -mcpu=" + cpu);
    int64_t kb = 2 * o.target.vector_bytes / 4, K = 2 * o.target.num_cores * kb;
    for (Case c : {Case{7, 1, 1}, Case{14, 1, 2}, Case{7, 3, 1}, Case{7, 5, 1}, Case{7, 3, 1, 2},
                   Case{14, 3, 2}}) {
      int64_t pad = c.dilation * (c.R / 2);
      ops::Conv2dParams p{c.stride, c.stride, pad, pad, c.dilation, c.dilation, 1};
      Tensor X = placeholder({1, 96, c.H, c.H}, float32, "X"), W = placeholder({K, 96, c.R, c.R}, float32, "W");
      Tensor Y = ops::conv2d_nchw(X, W, p);
      Schedule s = ops::default_schedule({Y}, o.target, {W});
      std::string cpp = s.to_cpp();
      bool fused = cpp.find(R"(s["conv.local"].fuse({"k", "l"});)") != std::string::npos;
      EXPECT_EQ(fused, cpu == "haswell" && (c.R == 1 || c.stride == 1)) << c.H << " " << c.R << "\n" << cpp;
      // The fused pixels' window is unrolled, so the block's accumulators stay in registers.
      for (const char* tap : {R"(s["conv.local"].unroll("ry");)", R"(s["conv.local"].unroll("rx");)"})
        if (fused) EXPECT_NE(cpp.find(tap), std::string::npos) << c.H << " " << c.R << "\n" << cpp;
      if (cpu != "haswell" && !Target::host().avx512()) continue;  // runs only where the CPU can
      Buffer x = ref::random(X.shape(), 23), w = ref::random(W.shape(), 24);
      ref::expect_close(ref::run(s, {X, W, Y}, {x, w}, o)[0], ref::conv2d_nchw(x, w, p));
    }
  }
}

TEST(Ops, NchwDefaultSubsamplesTheInputOfAStrided1x1Convolution) {
  // ResNet-50's downsampling layers, smaller: the pixels read at stride 2 are copied out once,
  // then fused into vectors (28x28 -> 14x14 output: whole vectors of pixels) or blocked by
  // output channels (7x7 output); odd input sizes read their last row and column. With 256
  // input channels and 20 blocks of 6 output channels or more, each block of 16 pixels packs
  // its panel from the copy (AVX2: 12 blocks share 2 cores evenly).
  struct Case {
    int64_t C, K, H;
    bool packed;
  };
  for (Case c : {Case{32, 48, 28, false}, Case{32, 48, 14, false}, Case{32, 48, 13, false},
                 Case{256, 128, 28, true}}) {
    ops::Conv2dParams p{2, 2, 0, 0, 1, 1, 1};
    Tensor X = placeholder({1, c.C, c.H, c.H}, float32, "X"), W = placeholder({c.K, c.C, 1, 1}, float32, "W");
    Tensor Y = ops::conv2d_nchw(X, W, p);
    Buffer x = ref::random(X.shape(), 9), w = ref::random(W.shape(), 10);
    Buffer want = ref::conv2d_nchw(x, w, p);
    Target avx2 = Target::parse("llvm -mcpu=znver3");
    avx2.num_cores = 2;
    Schedule rewritten = ops::default_schedule({Y}, c.packed ? avx2 : Target::host(), {W});
    std::string cpp = rewritten.to_cpp();
    EXPECT_NE(cpp.find(R"(s.subsample(s.tensor("X.sub"), {s.tensor("conv")}, 2, 2);)"), std::string::npos) << cpp;
    EXPECT_EQ(cpp.find(R"(s.pack(s.tensor("X.sub.sub"), {s.tensor("conv")}, 2, 16, 2);)") != std::string::npos,
              c.packed)
        << cpp;
    ref::expect_close(ref::run(rewritten, {X, W, Y}, {x, w})[0], want);
    ref::expect_close(run_default({X, W, Y}, {x, w})[0], want);
  }
}

TEST(Ops, NchwDefaultDeinterleavesAStridedInputOfFewChannels) {
  // The stems' shapes, smaller: 3 input channels at stride 2, the output columns the vector.
  // A 7x7 window's padded input is de-interleaved by the stride in one pass; a 3x3 window's
  // taps read their shared spans of the input in place. A row of taps is unrolled (so that its
  // taps share their spans), a 3x3 window's rows too.
  for (int r : {7, 3}) {
    ops::Conv2dParams p{2, 2, r / 2, r / 2, 1, 1, 1};
    Tensor X = placeholder({1, 3, 41, 112}, float32, "X"), W = placeholder({16, 3, r, r}, float32, "W");
    Tensor Y = ops::conv2d_nchw(X, W, p);
    Buffer x = ref::random(X.shape(), 7), w = ref::random(W.shape(), 8);
    Buffer want = ref::conv2d_nchw(x, w, p);
    Schedule rewritten = ops::default_schedule({Y}, Target::host(), {W});
    std::string cpp = rewritten.to_cpp();
    EXPECT_EQ(cpp.find("deinterleave(") != std::string::npos, r == 7) << cpp;
    EXPECT_NE(cpp.find(R"(s["conv"].vectorize("l.inner.inner"))"), std::string::npos) << cpp;  // each vector its own
    EXPECT_NE(cpp.find(R"(s["conv.local"].unroll("rx"))"), std::string::npos) << cpp;
    EXPECT_EQ(cpp.find(R"(s["conv.local"].unroll("ry"))") != std::string::npos, r == 3) << cpp;
    // With 32 registers a 3-wide window's block is 16 channels x one vector (its shuffles feed
    // twice the FMAs), a 7-wide one's 8 x 3 (56 columns: 4 vectors); with 16, 2 vectors.
    int64_t lanes = Target::host().vector_bytes / 4;
    bool wide_registers = Target::host().vector_registers >= 32;
    int64_t vectors = !wide_registers ? 2 : r == 3 ? 1 : 3;
    EXPECT_NE(cpp.find("s[\"conv\"].split(\"l\", " + std::to_string(vectors * lanes) + ")"), std::string::npos)
        << cpp;
    ref::expect_close(ref::run(rewritten, {X, W, Y}, {x, w})[0], want);
    ref::expect_close(run_default({X, W, Y}, {x, w})[0], want);
  }
}

TEST(Ops, DepthwiseConv2d) {
  ops::Conv2dParams p{1, 1, 1, 1, 1, 1, 1};
  Tensor X = placeholder({1, 6, 10, 10}, float32, "X");
  Tensor W = placeholder({12, 1, 3, 3}, float32, "W");  // multiplier 2
  Tensor Y = ops::depthwise_conv2d_nchw(X, W, p);
  Buffer x = ref::random(X.shape(), 1), w = ref::random(W.shape(), 2);
  p.groups = 6;  // a depthwise convolution is a grouped one with groups = C
  ref::expect_close(run_default({X, W, Y}, {x, w})[0], ref::conv2d_nchw(x, w, p));
  // Multiplier 1, channels a multiple of the vector: the channel-blocked path, with the
  // weights packed per call or rewritten once, at stride 1 and 2.
  for (int64_t stride : {1, 2}) {
    ops::Conv2dParams q{stride, stride, 1, 1, 1, 1, 1};
    Tensor X2 = placeholder({1, 24, 11, 11}, float32, "X"), W2 = placeholder({24, 1, 3, 3}, float32, "W");
    Tensor Y2 = ops::depthwise_conv2d_nchw(X2, W2, q);
    Buffer x2 = ref::random(X2.shape(), 3), w2 = ref::random(W2.shape(), 4);
    q.groups = 24;
    Buffer want = ref::conv2d_nchw(x2, w2, q);
    ref::expect_close(run_default({X2, W2, Y2}, {x2, w2})[0], want);
    ref::expect_close(ref::run(ops::default_schedule({Y2}, Target::host(), {W2}), {X2, W2, Y2}, {x2, w2})[0], want);
  }
}

TEST(Ops, NchwDepthwiseOfNarrowRowsRunsOverThePixels) {
  // Rows of at most half a vector (7x7 with AVX-512's 16 lanes, 4 columns with AVX2's 8), or
  // under one vector where the rows do not block (7 rows, a prime: 7x7 with AVX2): each
  // channel's pixels in vectors across the ends of rows, the padding's taps masked loads. At
  // stride 2 they stay rows (NchwDepthwiseAtStride2BlocksNarrowRows). Multiplier 2 included.
  int64_t lanes = Target::host().vector_bytes / 4, regs = Target::host().vector_registers;
  for (auto [H, W, stride, mult] :
       std::vector<std::array<int64_t, 4>>{{7, 7, 1, 1}, {8, 7, 1, 1}, {5, 4, 1, 2}, {9, 8, 2, 1}}) {
    int64_t C = 5, OW = (W - 1) / stride + 1, blocks = 0;
    for (int64_t b = 2; b <= regs / 4; ++b) blocks += H % b == 0;
    ops::Conv2dParams p{int(stride), int(stride), 1, 1, 1, 1, 1};
    Tensor X = placeholder({1, C, H, W}, float32, "X"), Wt = placeholder({C * mult, 1, 3, 3}, float32, "W");
    Tensor Y = ops::depthwise_conv2d_nchw(X, Wt, p);
    Buffer x = ref::random(X.shape(), 11), w = ref::random(Wt.shape(), 12);
    p.groups = int(C);
    Schedule s = ops::default_schedule({Y}, Target::host(), {Wt});
    bool pixels = s.to_cpp().find(R"(s["dwconv.local"].fuse({"k", "l"});)") != std::string::npos;
    EXPECT_EQ(pixels, stride == 1 && (2 * OW <= lanes || (OW < lanes && blocks == 0)))
        << H << "x" << W << " stride " << stride << "\n" << s.to_cpp();
    ref::expect_close(ref::run(s, {X, Wt, Y}, {x, w})[0], ref::conv2d_nchw(x, w, p));
  }
}

TEST(Ops, NchwDepthwiseAtStrideOneComputesABlockOfRows) {
  // At stride 1 a block of output rows (a divisor of the rows, at most a third of the vector
  // registers the 9 weights leave: 2 with AVX2, 7 with AVX-512) accumulates together, so that
  // each input row's loads serve the rows reading it (with a prime number of rows, one); at
  // stride 2 blocks of 4 rows of 2 vectors with AVX-512 (13 rows too, the last block partial), one
  // row at a time with AVX2.
  for (const char* cpu : {"haswell", "skylake-avx512"}) {
    Target t = Target::parse(std::string("llvm -mcpu=") + cpu);
    std::vector<std::array<int64_t, 3>> shapes = {{14, 20, 1}, {28, 40, 1}, {13, 20, 1}, {28, 40, 2}, {26, 40, 2}};
    for (auto [H, W, stride] : shapes) {
      int64_t C = 3, OH = (H - 1) / stride + 1, rows = 1;
      for (int64_t d = 1; d <= (t.vector_registers - 9) / 3 && stride == 1; ++d)
        if (OH % d == 0) rows = d;
      if (stride == 2 && t.vector_registers >= 32) rows = 4;
      ops::Conv2dParams p{int(stride), int(stride), 1, 1, 1, 1, 1};
      Tensor X = placeholder({1, C, H, W}, float32, "X"), Wt = placeholder({C, 1, 3, 3}, float32, "W");
      Tensor Y = ops::depthwise_conv2d_nchw(X, Wt, p);
      Schedule s = ops::default_schedule({Y}, t, {Wt});
      std::string split = R"(s["dwconv"].split("k", )" + std::to_string(rows) + ");";
      EXPECT_NE(s.to_cpp().find(split), std::string::npos) << cpu << " " << H << "x" << W << " stride " << stride
                                                            << "\n" << s.to_cpp();
      // the block's rows stored out unrolled (their accumulators stay in registers)
      EXPECT_NE(s.to_cpp().find(R"(s["dwconv"].unroll("k.inner");)"), std::string::npos) << s.to_cpp();
      if (t.avx512() && !Target::host().avx512()) continue;  // runs only where the CPU can
      Buffer x = ref::random(X.shape(), 13), w = ref::random(Wt.shape(), 14);
      p.groups = int(C);
      BuildOptions o;
      o.target = t;
      ref::expect_close(ref::run(s, {X, Wt, Y}, {x, w}, o)[0], ref::conv2d_nchw(x, w, p));
    }
  }
}

TEST(Ops, NchwDepthwiseOfAWindowWiderThanTheRegistersComputesRowsTogether) {
  // A 5x5 window with AVX2's 16 registers holds none of its 25 weights, so its rows accumulate
  // in blocks at any stride: of 2 rows, or of up to 8 (all 7 of a 7x7 output) where a row is one
  // vector.
  Target t = Target::parse("llvm -mcpu=haswell");
  for (auto [H, stride, rows] : std::vector<std::array<int64_t, 3>>{{14, 1, 2}, {7, 1, 7}, {28, 2, 2}, {14, 2, 7}}) {
    int64_t C = 3;
    ops::Conv2dParams p{int(stride), int(stride), 2, 2, 1, 1, 1};
    Tensor X = placeholder({1, C, H, H}, float32, "X"), Wt = placeholder({C, 1, 5, 5}, float32, "W");
    Tensor Y = ops::depthwise_conv2d_nchw(X, Wt, p);
    Schedule s = ops::default_schedule({Y}, t, {Wt});
    std::string split = R"(s["dwconv"].split("k", )" + std::to_string(rows) + ");";
    EXPECT_NE(s.to_cpp().find(split), std::string::npos) << H << " stride " << stride << "\n" << s.to_cpp();
    Buffer x = ref::random(X.shape(), 15), w = ref::random(Wt.shape(), 16);
    p.groups = int(C);
    BuildOptions o;
    o.target = t;
    ref::expect_close(ref::run(s, {X, Wt, Y}, {x, w}, o)[0], ref::conv2d_nchw(x, w, p));
  }
}

TEST(Ops, NchwDepthwiseOfAWideWindowRunsChannelBlocked) {
  // With AVX-512 a window wider than 3x3 runs on blocks of 16 channels: the input's planes packed
  // into [pixel][channel] per block, the weights blocked alike, the output copied out over the fused
  // pixels. Planes of 49, 81 and 196 pixels end in part of a tile of 16 pixels (of 1 pixel gathered,
  // of 4 transposed from masked loads), in the pack and the copy out. Two images, stride 1 and 2,
  // weights constant (rewritten) or not (packed per call), a bias + ReLU epilogue; 3x3 layers, AVX2
  // and strided layers whose output rows fill a vector (32x32 at stride 2) keep the planes' layout.
  struct Case { const char* cpu; int64_t H, R, stride; bool constant, epilogue, blocked; };
  for (auto c : std::vector<Case>{{"skylake-avx512", 7, 5, 1, true, false, true},
                                  {"skylake-avx512", 14, 5, 2, false, true, true},
                                  {"skylake-avx512", 14, 5, 1, true, false, true},
                                  {"skylake-avx512", 9, 7, 1, true, true, true},
                                  {"skylake-avx512", 28, 3, 2, true, false, false},
                                  {"skylake-avx512", 32, 5, 2, false, false, false},
                                  {"haswell", 7, 5, 1, true, false, false}}) {
    Target t = Target::parse(std::string("llvm -mcpu=") + c.cpu);
    int64_t C = 32, pad = c.R / 2;
    ops::Conv2dParams p{int(c.stride), int(c.stride), int(pad), int(pad), 1, 1, 1};
    Tensor X = placeholder({2, C, c.H, c.H}, float32, "X"), Wt = placeholder({C, 1, c.R, c.R}, float32, "W");
    Tensor B = placeholder({C}, float32, "B");
    Tensor Y = ops::depthwise_conv2d_nchw(X, Wt, p);
    if (c.epilogue) Y = ops::relu(ops::bias_add(Y, B, 1, "ba"), "r");
    Schedule s = ops::default_schedule({Y}, t, c.constant ? std::vector<Tensor>{Wt} : std::vector<Tensor>{});
    std::string cpp = s.to_cpp();
    EXPECT_EQ(cpp.find(R"(s.pack(s.tensor("X"), )") != std::string::npos, c.blocked) << c.cpu << " " << c.H << "\n"
                                                                                       << cpp;
    if (t.avx512() && !Target::host().avx512()) continue;  // runs only where the CPU can
    Buffer x = ref::random(X.shape(), 17), w = ref::random(Wt.shape(), 18), b = ref::random(B.shape(), 19);
    p.groups = int(C);
    Buffer want = ref::conv2d_nchw(x, w, p);
    if (c.epilogue)
      for (int64_t i = 0, plane = want.shape()[2] * want.shape()[3]; i < want.size(); ++i)
        want.set(i, std::max(0.0, want.get(i) + b.get(i / plane % C)));
    BuildOptions o;
    o.target = t;
    std::vector<Tensor> args = {X, Wt, Y};
    std::vector<Buffer> in = {x, w};
    if (c.epilogue) args.insert(args.begin() + 2, B), in.push_back(b);
    ref::expect_close(ref::run(s, args, in, o)[0], want);
  }
}

TEST(Ops, NchwDepthwiseAtStride2BlocksNarrowRows) {
  // A 3x3 window at stride 2 over output rows of at most half a vector (7 and 5 columns): rows in
  // blocks of up to 4 with AVX-512 (7 rows: 4 and a partial 3), each row a vector of its columns
  // (7 and 5 lanes), the window unrolled; a row's taps share one span of the input, the padding's
  // taps masked in their lanes, no gather. With a bias + ReLU epilogue, on the host and with AVX-512.
  for (const char* cpu : {"", "skylake-avx512"})
    for (int64_t H : {14, 10}) {
      Target t = *cpu ? Target::parse(std::string("llvm -mcpu=") + cpu) : Target::host();
      int64_t C = 24, OW = H / 2, rows = t.vector_registers >= 32 ? 4 : 1;
      ops::Conv2dParams p{2, 2, 1, 1, 1, 1, 1};
      Tensor X = placeholder({2, C, H, H}, float32, "X"), Wt = placeholder({C, 1, 3, 3}, float32, "W");
      Tensor B = placeholder({C}, float32, "B");
      Tensor Y = ops::relu(ops::bias_add(ops::depthwise_conv2d_nchw(X, Wt, p), B, 1, "ba"), "r");
      Schedule s = ops::default_schedule({Y}, t, {Wt});
      std::string cpp = s.to_cpp();
      EXPECT_NE(cpp.find(".split(\"k\", " + std::to_string(rows) + ")"), std::string::npos) << cpu << " " << H << "\n"
                                                                                          << cpp;
      EXPECT_NE(cpp.find(".split(\"l\", " + std::to_string(OW) + ")"), std::string::npos) << cpp;
      if (t.avx512() && !Target::host().avx512()) continue;  // runs only where the CPU can
      BuildOptions o;
      o.target = t;
      std::string ir = build(s, {X, Wt, B, Y}, o).llvm_ir();
      EXPECT_EQ(ir.find("masked.gather"), std::string::npos) << cpu << " " << H;
      Buffer x = ref::random(X.shape(), 23), w = ref::random(Wt.shape(), 24), b = ref::random(B.shape(), 25);
      p.groups = int(C);
      Buffer want = ref::conv2d_nchw(x, w, p);
      for (int64_t i = 0, plane = OW * OW; i < want.size(); ++i)
        want.set(i, std::max(0.0, want.get(i) + b.get(i / plane % C)));
      ref::expect_close(ref::run(s, {X, Wt, B, Y}, {x, w, b}, o)[0], want);
    }
}

TEST(Ops, NhwcDefaultBlocksAWholeRowOf14Columns) {
  // Rows of up to 28 columns: blocks of 14 columns by two vectors of channels with AVX-512's 32
  // registers (all but four hold accumulators); wider rows keep 3/4 of them (12 columns).
  Target t = Target::host();
  int64_t lanes = t.vector_bytes / 4;
  for (int64_t H : {14, 56}) {
    ops::Conv2dParams p{1, 1, 1, 1, 1, 1, 1};
    Tensor X = placeholder({1, H, H, 16}, float32, "X"), W = placeholder({3, 3, 16, 2 * lanes}, float32, "W");
    Tensor Y = ops::conv2d_nhwc(X, W, p);
    Schedule s = ops::default_schedule({Y}, t, {W});
    std::string split = R"(s["conv"].split("k", )" + std::string(H == 14 ? "14" : "12") + ");";
    if (t.vector_registers >= 32) EXPECT_NE(s.to_cpp().find(split), std::string::npos) << H << "\n" << s.to_cpp();
    Buffer x = ref::random(X.shape(), 15), w = ref::random(W.shape(), 16);
    Buffer want = conv2d_nhwc_reference(x, ref::permute(w, {3, 2, 0, 1}), p);
    ref::expect_close(ref::run(s, {X, W, Y}, {x, w})[0], want);
  }
}

TEST(Ops, NchwColumnsOfAFewChannelsTakeSeveralVectorsOfTheRow) {
  // 33 output channels (not a multiple of the vector): blocks of 3 channels by columns. With
  // AVX2's 16 registers a block takes 4 vectors of a 32-column row (12 accumulators), unrolled;
  // blocks of 5 channels (20) take 2, of 7 (14) one.
  Target t = Target::parse("llvm -mcpu=haswell");
  for (auto [K, cols] : std::vector<std::array<int64_t, 2>>{{33, 32}, {20, 16}, {14, 8}}) {
    Tensor X = placeholder({1, 17, 32, 32}, float32, "X"), W = placeholder({K, 17, 3, 3}, float32, "W");
    ops::Conv2dParams p{1, 1, 1, 1, 1, 1, 1};
    Tensor Y = ops::conv2d_nchw(X, W, p);
    Schedule s = ops::default_schedule({Y}, t, {W});
    std::string cpp = s.to_cpp();
    EXPECT_NE(cpp.find(R"(s["conv"].split("l", )" + std::to_string(cols) + ");"), std::string::npos) << cpp;
    EXPECT_EQ(cpp.find(R"(s["conv.local"].unroll("l.outer");)") != std::string::npos, cols > 8) << cpp;
    Buffer x = ref::random(X.shape(), 19), w = ref::random(W.shape(), 20);
    BuildOptions o;
    o.target = t;
    ref::expect_close(ref::run(s, {X, W, Y}, {x, w}, o)[0], ref::conv2d_nchw(x, w, p));
  }
}

TEST(Ops, NchwDefaultUnrollsAWindowWiderThan3) {
  // The channel-blocked path's window, where its reduction is not chunked: a 5x5 window's taps
  // unrolled, a 3x3 window's left in loops.
  for (int64_t R : {5, 3}) {
    Tensor X = placeholder({1, 16, 12, 12}, float32, "X"), W = placeholder({32, 16, R, R}, float32, "W");
    int pad = int(R / 2);
    ops::Conv2dParams p{1, 1, pad, pad, 1, 1, 1};
    Tensor Y = ops::conv2d_nchw(X, W, p);
    Schedule s = ops::default_schedule({Y}, Target::host(), {W});
    std::string cpp = s.to_cpp();
    EXPECT_EQ(cpp.find(R"(s["conv.local"].unroll("rx");)") != std::string::npos, R == 5) << cpp;
    EXPECT_EQ(cpp.find(R"(s["conv.local"].unroll("ry");)") != std::string::npos, R == 5) << cpp;
    Buffer x = ref::random(X.shape(), 23), w = ref::random(W.shape(), 24);
    ref::expect_close(ref::run(s, {X, W, Y}, {x, w})[0], ref::conv2d_nchw(x, w, p));
  }
}

TEST(Ops, NchwColumnsOfSmallBlocksTakeTwoRowsWith32Registers) {
  // With AVX-512's 32 registers a block of at most 16 accumulators takes two rows: 33 channels
  // (3 x 2 vectors of a 32-column row) and 40 at stride 2 (8 x 1 vector of 14 columns, the taps
  // unrolled); 40 channels over rows of 56 columns (8 x 2 vectors) keep one row, as does an odd
  // number of rows. All read their padding in place: the 3x3 windows, and the 5x5 at stride 2.
  Target t = Target::parse("llvm -mcpu=skylake-avx512");
  struct Case { int64_t C, H, K, R, stride, rows; };
  for (auto c : std::vector<Case>{{17, 32, 33, 3, 1, 2}, {72, 28, 40, 5, 2, 2}, {24, 56, 40, 3, 1, 1},
                                  {17, 31, 33, 3, 1, 1}}) {
    Tensor X = placeholder({1, c.C, c.H, c.H}, float32, "X"), W = placeholder({c.K, c.C, c.R, c.R}, float32, "W");
    int pad = int(c.R / 2);
    ops::Conv2dParams p{int(c.stride), int(c.stride), pad, pad, 1, 1, 1};
    Tensor Y = ops::conv2d_nchw(X, W, p);
    Schedule s = ops::default_schedule({Y}, t, {W});
    std::string cpp = s.to_cpp();
    EXPECT_EQ(cpp.find(R"(s["conv"].split("k", 2);)") != std::string::npos, c.rows == 2) << c.K << "\n" << cpp;
    EXPECT_NE(cpp.find(R"(s["conv.pad"].compute_inline();)"), std::string::npos) << cpp;
    if (!Target::host().avx512()) continue;  // runs only where the CPU can
    Buffer x = ref::random(X.shape(), 21), w = ref::random(W.shape(), 22);
    BuildOptions o;
    o.target = t;
    ref::expect_close(ref::run(s, {X, W, Y}, {x, w}, o)[0], ref::conv2d_nchw(x, w, p));
  }
}

TEST(Ops, NhwcDefaultBlocksThreeVectorsOfChannels) {
  // 24 or 120 output channels with AVX2's 8 lanes: blocks of three vectors (each its own, the
  // block's vectors unrolled), where 32 channels pair two vectors and 20 take one.
  Target t = Target::parse("llvm -mcpu=haswell");
  for (auto [K, kv] : std::vector<std::array<int64_t, 2>>{{24, 24}, {120, 24}, {32, 16}, {20, 8}}) {
    Tensor X = placeholder({1, 9, 10, 12}, float32, "X"), W = placeholder({1, 1, 12, K}, float32, "W");
    ops::Conv2dParams p{1, 1, 0, 0, 1, 1, 1};
    Tensor Y = ops::conv2d_nhwc(X, W, p);
    Schedule s = ops::default_schedule({Y}, t, {W});
    std::string cpp = s.to_cpp();
    EXPECT_NE(cpp.find(R"(s["conv"].split("l", )" + std::to_string(kv) + ");"), std::string::npos) << K << "\n" << cpp;
    EXPECT_EQ(cpp.find(R"(s["conv.local"].unroll("l.outer");)") != std::string::npos, kv == 24) << K << "\n" << cpp;
    Buffer x = ref::random(X.shape(), 21), w = ref::random(W.shape(), 22);
    Buffer want = conv2d_nhwc_reference(x, ref::permute(w, {3, 2, 0, 1}), p);
    BuildOptions o;
    o.target = t;
    ref::expect_close(ref::run(s, {X, W, Y}, {x, w}, o)[0], want);
  }
}

TEST(Ops, NhwcDepthwiseBlocksOneVectorOfChannelsByADivisorOfTheRow) {
  // One vector of channels x a divisor of the row of at most 8 columns (7 of 7 or 14, 8 of 56), the
  // window unrolled; at a stride over rows wider than 64, blocks of two vectors as before.
  Target t = Target::parse("llvm -mcpu=haswell");
  for (auto [H, R, stride, cols] : std::vector<std::array<int64_t, 4>>{
           {7, 5, 1, 7}, {27, 5, 2, 7}, {56, 3, 1, 8}, {112, 3, 2, 0}}) {
    int64_t C = 32;
    ops::Conv2dParams p{int(stride), int(stride), int(R / 2), int(R / 2), 1, 1, int(C)};
    Tensor X = placeholder({1, H, H, C}, float32, "X"), W = placeholder({R, R, C, 1}, float32, "W");
    Tensor Y = ops::depthwise_conv2d_nhwc(X, W, p);
    Schedule s = ops::default_schedule({Y}, t, {W});
    std::string cpp = s.to_cpp();
    bool rows = cols > 0;
    EXPECT_EQ(cpp.find(R"(s["dwconv"].split("l", 8);)") != std::string::npos, rows) << H << "\n" << cpp;
    EXPECT_EQ(cpp.find(R"(s["dwconv.local"].unroll("rx");)") != std::string::npos, rows) << H << "\n" << cpp;
    std::string split = R"(s["dwconv"].split("k", )" + std::to_string(cols) + ");";
    if (rows) EXPECT_NE(cpp.find(split), std::string::npos) << H << "\n" << cpp;
    Buffer x = ref::random(X.shape(), 23), w = ref::random(W.shape(), 24);
    Buffer want = conv2d_nhwc_reference(x, ref::permute(w, {2, 3, 0, 1}), p);
    BuildOptions o;
    o.target = t;
    ref::expect_close(ref::run(s, {X, W, Y}, {x, w}, o)[0], want);
  }
}

TEST(Ops, NhwcDefaultPadsTheInputOfAWideWindowOnce) {
  // A 3x3 window reads its padding in place (each guarded tap one condition a pixel), a 5x5 one
  // from a padded copy made once, at stride 1 and 2; a 5x5 depthwise layer in place still.
  for (auto [R, stride, depthwise] : std::vector<std::array<int64_t, 3>>{{3, 1, 0}, {5, 1, 0}, {5, 2, 0}, {5, 1, 1}}) {
    int64_t C = 16, K = depthwise ? 16 : 24;
    ops::Conv2dParams p{int(stride), int(stride), int(R / 2), int(R / 2), 1, 1, 1};
    Tensor X = placeholder({1, 13, 13, C}, float32, "X");
    Tensor W = placeholder({R, R, C, depthwise ? 1 : K}, float32, "W");
    Tensor Y = depthwise ? ops::depthwise_conv2d_nhwc(X, W, p) : ops::conv2d_nhwc(X, W, p);
    Schedule s = ops::default_schedule({Y}, Target::host(), {W});
    std::string pad = depthwise ? "dwconv.pad" : "conv.pad";
    bool in_place = s.to_cpp().find(R"(s[")" + pad + R"("].compute_inline();)") != std::string::npos;
    EXPECT_EQ(in_place, R == 3 || depthwise) << R << " stride " << stride << "\n" << s.to_cpp();
    Buffer x = ref::random(X.shape(), 17), w = ref::random(W.shape(), 18);
    if (depthwise) p.groups = int(C);
    Buffer w_kcrs = depthwise ? ref::permute(w, {2, 3, 0, 1}) : ref::permute(w, {3, 2, 0, 1});
    Buffer want = conv2d_nhwc_reference(x, w_kcrs, p);
    ref::expect_close(ref::run(s, {X, W, Y}, {x, w})[0], want);
  }
}

TEST(Ops, DepthwiseConv2dNhwc) {
  // Weights [R, S, C, m]: output channel c*m + j reads channel c with W[., ., c, j], as the
  // grouped NCHW convolution with weights [C*m, 1, R, S] does. Multiplier 2, and multiplier
  // 1 (the channels the vector) at stride 1 and 2, with the weights rewritten once too.
  struct Case {
    int64_t C, m, stride;
  };
  for (Case c : {Case{6, 2, 1}, Case{24, 1, 1}, Case{20, 1, 2}}) {
    ops::Conv2dParams p{c.stride, c.stride, 1, 1, 1, 1, 1};
    Tensor X = placeholder({1, 10, 11, c.C}, float32, "X"), W = placeholder({3, 3, c.C, c.m}, float32, "W");
    Tensor Y = ops::depthwise_conv2d_nhwc(X, W, p);
    Buffer x = ref::random(X.shape(), 5), w = ref::random(W.shape(), 6);
    Buffer cmrs = ref::permute(w, {2, 3, 0, 1}), wn({c.C * c.m, 1, 3, 3}, float32);
    for (int64_t i = 0; i < wn.size(); ++i) wn.set(i, cmrs.get(i));  // [C, m, R, S] is [C*m, 1, R, S] in memory
    p.groups = c.C;
    Buffer want = conv2d_nhwc_reference(x, wn, p);
    // The padding is read in place, not copied first.
    std::string cpp = ops::default_schedule({Y}).to_cpp();
    EXPECT_NE(cpp.find(R"(.pad"].compute_inline())"), std::string::npos) << cpp;
    ref::expect_close(run_default({X, W, Y}, {x, w})[0], want);
    ref::expect_close(ref::run(ops::default_schedule({Y}, Target::host(), {W}), {X, W, Y}, {x, w})[0], want);
  }
}

TEST(Ops, RegisterBlocksAreCopiedOutUnrolled) {
  // A register block of whole vectors is copied out to the output statement by statement: in a
  // loop over the block, the block lives in memory (zeroed, stored and loaded again). The NCHW
  // 3-channel stride-2 stem (16 channels x 1 vector) and an NHWC depthwise layer (a vector of
  // channels x 8 columns), both with their reference answer.
  ops::Conv2dParams p{2, 2, 1, 1, 1, 1, 1};
  Tensor X = placeholder({1, 3, 64, 64}, float32, "X"), W = placeholder({32, 3, 3, 3}, float32, "W");
  Tensor Y = ops::conv2d_nchw(X, W, p);
  Schedule s = ops::default_schedule({Y}, Target::host(), {W});
  std::string ir = build(s, {X, W, Y}).lowered().str();
  EXPECT_FALSE(ref::copies_local_in_a_loop(ir)) << ir;
  Buffer x = ref::random(X.shape(), 1), w = ref::random(W.shape(), 2);
  ref::expect_close(ref::run(s, {X, W, Y}, {x, w})[0], ref::conv2d_nchw(x, w, p));

  ops::Conv2dParams q{1, 1, 1, 1, 1, 1, 1};
  Tensor Xn = placeholder({1, 14, 14, 32}, float32, "X"), Wn = placeholder({3, 3, 32, 1}, float32, "W");
  Tensor Yn = ops::depthwise_conv2d_nhwc(Xn, Wn, q);
  Schedule sn = ops::default_schedule({Yn}, Target::host(), {Wn});
  ir = build(sn, {Xn, Wn, Yn}).lowered().str();
  EXPECT_FALSE(ref::copies_local_in_a_loop(ir)) << ir;
  Buffer xn = ref::random(Xn.shape(), 3), wn = ref::random(Wn.shape(), 4);
  Buffer wk = ref::permute(wn, {2, 3, 0, 1}), wg({32, 1, 3, 3}, float32);  // [C, 1, R, S]
  for (int64_t i = 0; i < wg.size(); ++i) wg.set(i, wk.get(i));
  q.groups = 32;
  ref::expect_close(ref::run(sn, {Xn, Wn, Yn}, {xn, wn})[0], conv2d_nhwc_reference(xn, wg, q));
}

TEST(Ops, Pooling) {
  Tensor X = placeholder({2, 3, 9, 9}, float32, "X");
  ops::Pool2dParams p{3, 3, 2, 2, 1, 1};
  Tensor Mx = ops::max_pool2d(X, p, "maxp");
  Tensor Av = ops::avg_pool2d(X, p, "avgp");
  Buffer x = ref::random(X.shape(), 9);
  auto got = ref::run(ops::default_schedule({Mx, Av}), {X, Mx, Av}, {x});
  ref::View xv(x), mv(got[0]), av(got[1]);
  for (int64_t n = 0; n < 2; ++n)
    for (int64_t c = 0; c < 3; ++c)
      for (int64_t i = 0; i < 5; ++i)
        for (int64_t j = 0; j < 5; ++j) {
          double m = -INFINITY, s = 0;
          int cnt = 0;
          for (int r = 0; r < 3; ++r)
            for (int q = 0; q < 3; ++q) {
              int64_t y = i * 2 + r - 1, xx = j * 2 + q - 1;
              if (y < 0 || y >= 9 || xx < 0 || xx >= 9) continue;
              m = std::max(m, xv({n, c, y, xx}));
              s += xv({n, c, y, xx});
              ++cnt;
            }
          EXPECT_NEAR(mv({n, c, i, j}), m, 1e-6);
          EXPECT_NEAR(av({n, c, i, j}), s / cnt, 1e-5);
        }
}

TEST(Ops, Softmax) {
  Tensor X = placeholder({7, 50}, float32, "X");
  Tensor Y = ops::softmax(X);
  Buffer x = ref::random(X.shape(), 11, float32, -5, 5);
  Buffer got = run_default({X, Y}, {x})[0];
  for (int i = 0; i < 7; ++i) {
    double mx = -INFINITY, s = 0;
    for (int j = 0; j < 50; ++j) mx = std::max(mx, x.get(i * 50 + j));
    for (int j = 0; j < 50; ++j) s += std::exp(x.get(i * 50 + j) - mx);
    for (int j = 0; j < 50; ++j) EXPECT_NEAR(got.get(i * 50 + j), std::exp(x.get(i * 50 + j) - mx) / s, 1e-6);
  }
}

TEST(Ops, LayerNorm) {
  Tensor X = placeholder({5, 64}, float32, "X");
  Tensor g = placeholder({64}, float32, "gamma");
  Tensor b = placeholder({64}, float32, "beta");
  Tensor Y = ops::layer_norm(X, g, b, 1e-5);
  Buffer x = ref::random(X.shape(), 1), gv = ref::random({64}, 2), bv = ref::random({64}, 3);
  Buffer got = run_default({X, g, b, Y}, {x, gv, bv})[0];
  for (int i = 0; i < 5; ++i) {
    double mean = 0, var = 0;
    for (int j = 0; j < 64; ++j) mean += x.get(i * 64 + j) / 64;
    for (int j = 0; j < 64; ++j) var += std::pow(x.get(i * 64 + j) - mean, 2) / 64;
    for (int j = 0; j < 64; ++j)
      EXPECT_NEAR(got.get(i * 64 + j), (x.get(i * 64 + j) - mean) / std::sqrt(var + 1e-5) * gv.get(j) + bv.get(j), 1e-4);
  }
}

TEST(Ops, ElementwiseAndBroadcast) {
  Tensor A = placeholder({4, 5, 6}, float32, "A");
  Tensor B = placeholder({5, 1}, float32, "B");
  Tensor bias = placeholder({5}, float32, "bias");
  Tensor S = ops::add(A, B, "s");
  Tensor M = ops::multiply(S, A, "m");
  Tensor D = ops::maximum(ops::subtract(M, A, "d0"), ops::divide(A, B, "d1"), "d");
  Tensor R = ops::relu(ops::bias_add(D, bias, 1, "ba"), "r");
  Buffer a = ref::random(A.shape(), 1), b = ref::random(B.shape(), 2, float32, 0.5, 2), bb = ref::random({5}, 3);
  Buffer got = run_default({A, B, bias, R}, {a, b, bb})[0];
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 5; ++j)
      for (int k = 0; k < 6; ++k) {
        double av = a.get((i * 5 + j) * 6 + k), bv = b.get(j);
        double m = (av + bv) * av;
        double d = std::max(m - av, av / bv);
        EXPECT_NEAR(got.get((i * 5 + j) * 6 + k), std::max(0.0, d + bb.get(j)), 1e-5);
      }
}

TEST(Ops, Float16StoredAsHalfComputedInFloat) {
  Tensor A = placeholder({33, 40}, float16, "A");
  Tensor B = placeholder({40, 20}, float16, "B");
  IterVar k = reduce_axis(40, "k");
  Tensor C = compute({33, 20}, [&](Var i, Var j) { return sum(cast(float32, A(i, k)) * cast(float32, B(k, j)), {k}); }, "C");
  Tensor H = ops::cast(C, float16, "H");
  Buffer a = ref::random(A.shape(), 1, float16), b = ref::random(B.shape(), 2, float16);
  Buffer got = run_default({A, B, H}, {a, b})[0];
  Buffer want = ref::matmul(a, b);
  EXPECT_EQ(got.dtype(), float16);
  for (int64_t i = 0; i < want.size(); ++i) EXPECT_NEAR(got.get(i), want.get(i), 1e-2 * std::max(1.0, std::abs(want.get(i))));
}

TEST(Ops, IntegerTypes) {
  Tensor A = placeholder({16, 24}, int8, "A");
  Tensor B = placeholder({24, 32}, uint8, "B");
  IterVar k = reduce_axis(24, "k");
  Tensor C = compute({16, 32}, [&](Var i, Var j) { return sum(cast(int32, A(i, k)) * cast(int32, B(k, j)), {k}); }, "C");
  Tensor L = compute({16, 32}, [&](Var i, Var j) { return cast(int64, C(i, j)) * int64_t(3); }, "L");
  Buffer a = ref::random(A.shape(), 1, int8, -100, 100), b = ref::random(B.shape(), 2, uint8, 0, 255);
  auto got = ref::run(ops::default_schedule({L}), {A, B, L}, {a, b})[0];
  Buffer want = ref::matmul(a, b);
  for (int64_t i = 0; i < want.size(); ++i) EXPECT_EQ(got.get(i), want.get(i) * 3);
}

TEST(Ops, BoolAndSelect) {
  Tensor A = placeholder({10, 10}, float32, "A");
  Tensor M = compute({10, 10}, [&](Var i, Var j) { return A(i, j) > 0.0f; }, "mask");
  Tensor Y = compute({10, 10}, [&](Var i, Var j) { return select(M(i, j), A(i, j), -A(i, j) * 2.0f); }, "Y");
  Schedule s({M, Y});
  Buffer a = ref::random(A.shape(), 4);
  auto got = ref::run(s, {A, M, Y}, {a});
  EXPECT_EQ(got[0].dtype(), boolean);
  for (int i = 0; i < 100; ++i) {
    EXPECT_EQ(got[0].get(i), a.get(i) > 0 ? 1.0 : 0.0);
    EXPECT_FLOAT_EQ(got[1].get(i), a.get(i) > 0 ? a.get(i) : -a.get(i) * 2);
  }
}

TEST(Ops, MathIntrinsics) {
  Tensor A = placeholder({64}, float32, "A");
  std::vector<std::pair<std::function<Expr(Expr)>, std::function<double(double)>>> fns = {
      {[](Expr x) { return exp(x); }, [](double x) { return std::exp(x); }},
      {[](Expr x) { return log(x); }, [](double x) { return std::log(x); }},
      {[](Expr x) { return sqrt(x); }, [](double x) { return std::sqrt(x); }},
      {[](Expr x) { return rsqrt(x); }, [](double x) { return 1 / std::sqrt(x); }},
      {[](Expr x) { return tanh(x); }, [](double x) { return std::tanh(x); }},
      {[](Expr x) { return sigmoid(x); }, [](double x) { return 1 / (1 + std::exp(-x)); }},
      {[](Expr x) { return erf(x); }, [](double x) { return std::erf(x); }},
      {[](Expr x) { return abs(x - 1.0f); }, [](double x) { return std::abs(x - 1); }},
      {[](Expr x) { return pow(x, 1.5f); }, [](double x) { return std::pow(x, 1.5); }},
      {[](Expr x) { return floor(x * 3.0f); }, [](double x) { return std::floor(x * 3); }},
      {[](Expr x) { return ceil(x * 3.0f); }, [](double x) { return std::ceil(x * 3); }},
  };
  Buffer a = ref::random(A.shape(), 5, float32, 0.1, 2.0);
  for (auto& [f, g] : fns) {
    Tensor Y = compute({64}, [&](Var i) { return f(A(i)); }, "Y");
    Schedule s({Y});
    auto [o, in] = s[Y].split("i", 16);
    s[Y].vectorize(in);
    Buffer got = ref::run(s, {A, Y}, {a})[0];
    for (int i = 0; i < 64; ++i) EXPECT_NEAR(got.get(i), g(a.get(i)), 1e-5 * std::max(1.0, std::abs(g(a.get(i)))));
  }
}
