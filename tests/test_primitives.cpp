// Every schedule primitive, checked for numerical correctness against a reference, and
// the step record: JSON round trip, replay and C++ printing.
#include "reference.h"

using namespace tessel;
using ref::Buffer;

namespace {

struct Mm {
  Tensor A, B, C;
  IterVar k;
  Mm(int64_t M, int64_t N, int64_t K) {
    A = placeholder({M, K}, float32, "A");
    B = placeholder({K, N}, float32, "B");
    k = reduce_axis(K, "k");
    C = compute({M, N}, [&](Var i, Var j) { return sum(A(i, k) * B(k, j), {k}); }, "C");
  }
  void check(const Schedule& s) {
    Buffer a = ref::random(A.shape(), 1), b = ref::random(B.shape(), 2);
    ref::expect_close(ref::run(s, {A, B, C}, {a, b})[0], ref::matmul(a, b));
  }
};

}  // namespace

TEST(Primitives, SplitDividing) {
  Mm m(64, 32, 16);
  Schedule s({m.C});
  s[m.C].split("i", 8);
  s[m.C].split("j", 16);
  m.check(s);
}

TEST(Primitives, SplitNonDividingPartitionsTheTails) {
  Mm m(37, 29, 13);
  Schedule s({m.C});
  auto [io, ii] = s[m.C].split("i", 8);
  auto [ko, ki] = s[m.C].split("k", 5);
  s[m.C].split(ii, 3);
  m.check(s);
  // The four whole row tiles run as a loop of their own; the fifth is the guarded tail.
  std::string ir = lower(s, {m.A, m.B, m.C}).str();
  EXPECT_NE(ir.find("for (i.outer, 0, 4)"), std::string::npos) << ir;
}

TEST(Primitives, SplitNParts) {
  Mm m(30, 31, 7);
  Schedule s({m.C});
  s[m.C].split_nparts("i", 4);
  s[m.C].split_nparts("j", 3);
  m.check(s);
}

TEST(Primitives, SplitFactorLargerThanExtentIsClamped) {
  Mm m(10, 10, 10);
  Schedule s({m.C});
  s[m.C].split("i", 64);
  m.check(s);
}

TEST(Primitives, FuseAndReorder) {
  Mm m(24, 20, 9);
  Schedule s({m.C});
  s[m.C].reorder({"k", "j", "i"});
  m.check(s);
  Schedule t({m.C});
  t[m.C].fuse("i", "j");
  m.check(t);
  Schedule u({m.C});
  auto [jo, ji] = u[m.C].split("j", 6);
  u[m.C].reorder({jo, "i", ji});
  Axis f = u[m.C].fuse({jo, "i"});
  u[m.C].parallel(f);
  m.check(u);
}

TEST(Primitives, Tile) {
  Mm m(50, 40, 17);
  Schedule s({m.C});
  auto t = s[m.C].tile("i", "j", 8, 16);
  EXPECT_EQ(s[m.C].leaf_axes(), (std::vector<std::string>{"i.outer", "j.outer", "i.inner", "j.inner", "k"}));
  s[m.C].vectorize(t.yi);
  m.check(s);
}

TEST(Primitives, VectorizeUnrollParallel) {
  Mm m(64, 48, 20);
  Schedule s({m.C});
  auto t = s[m.C].tile("i", "j", 4, 16);
  s[m.C].reorder({t.xo, t.yo, "k", t.xi, t.yi});
  s[m.C].vectorize(t.yi);
  s[m.C].unroll(t.xi);
  s[m.C].parallel(t.xo);
  m.check(s);
}

TEST(Primitives, VectorizeNonDividingTailRunsNarrowerVectors) {
  // 21 columns in vectors of 8: the last 5 columns are one vector of 5 lanes, not a masked 8.
  Tensor A = placeholder({3, 21}, float32, "A");
  Tensor B = compute({3, 21}, [&](Var i, Var j) { return A(i, j) * 2.0f + 1.0f; }, "B");
  Schedule s({B});
  auto [jo, ji] = s[B].split("j", 8);
  s[B].vectorize(ji);
  std::string ir = lower(s, {A, B}).str();
  EXPECT_NE(ir.find(", 1, 8)]"), std::string::npos) << ir;
  EXPECT_NE(ir.find(", 1, 5)]"), std::string::npos) << ir;
  EXPECT_EQ(ir.find("if ("), std::string::npos) << ir;
  Buffer a = ref::random(A.shape(), 3);
  Buffer got = ref::run(s, {A, B}, {a})[0];
  for (int i = 0; i < 63; ++i) EXPECT_FLOAT_EQ(got.get(i), float(a.get(i) * 2 + 1));
}

// A block of lanes that divides into one row each: (j / 8) is one value per 4 lanes and
// (j % 8) a dense run. Below zero, C's division rounds a block's lanes apart: kept per lane.
TEST(Primitives, VectorizedDivisionByABlockIsOneRowPerVector) {
  Tensor A = placeholder({4, 8}, float32, "A");
  Tensor B = compute({32}, [&](Var j) { return A(j / 8, j % 8); }, "B");
  Tensor C = compute({32}, [&](Var j) { return cast(float32, (j - 12) / 8) + cast(float32, (j - 12) % 8); }, "C");
  Schedule s({B, C});
  for (const Tensor& t : {B, C}) {
    auto [jo, ji] = s[t].split("i", 4);
    s[t].vectorize(ji);
  }
  Buffer a = ref::random(A.shape(), 5);
  auto got = ref::run(s, {A, B, C}, {a});
  for (int j = 0; j < 32; ++j) {
    EXPECT_FLOAT_EQ(got[0].get(j), float(a.get(j)));
    EXPECT_FLOAT_EQ(got[1].get(j), float((j - 12) / 8 + (j - 12) % 8)) << j;
  }
}

TEST(Primitives, PragmaAutoUnroll) {
  Mm m(16, 32, 8);
  Schedule s({m.C});
  auto t = s[m.C].tile("i", "j", 4, 4);
  s[m.C].reorder({t.xo, t.yo, "k", t.xi, t.yi});
  s[m.C].pragma(t.xo, "auto_unroll_max_step", 16);
  std::string ir = lower(s, {m.A, m.B, m.C}).str();
  EXPECT_EQ(ir.find("for (i.inner"), std::string::npos) << ir;  // unrolled away
  m.check(s);
}

TEST(Primitives, ComputeInline) {
  Tensor A = placeholder({10, 12}, float32, "A");
  Tensor B = compute({10, 12}, [&](Var i, Var j) { return A(i, j) + 1.0f; }, "B");
  Tensor C = compute({10, 12}, [&](Var i, Var j) { return B(i, j) * B(i, j); }, "C");
  Schedule s({C});
  s[B].compute_inline();
  EXPECT_EQ(lower(s, {A, C}).str().find("allocate"), std::string::npos);
  Buffer a = ref::random(A.shape(), 1);
  Buffer got = ref::run(s, {A, C}, {a})[0];
  for (int i = 0; i < 120; ++i) EXPECT_FLOAT_EQ(got.get(i), float((a.get(i) + 1) * (a.get(i) + 1)));
}

TEST(Primitives, ComputeAtChainAndComputeRoot) {
  // pad -> blur -> scale, with blur computed at scale's rows and pad at blur's rows.
  Tensor A = placeholder({30, 30}, float32, "A");
  Tensor P = compute({32, 32}, [&](Var i, Var j) {
    return select(i >= 1 && i < 31 && j >= 1 && j < 31, A(max(i - 1, 0), max(j - 1, 0)), Expr(0.0f));
  }, "P");
  Tensor Bl = compute({30, 30}, [&](Var i, Var j) {
    return (P(i, j + 1) + P(i + 1, j + 1) + P(i + 2, j + 1) + P(i + 1, j) + P(i + 1, j + 2)) * 0.2f;
  }, "Bl");
  Tensor S = compute({30, 30}, [&](Var i, Var j) { return Bl(i, j) * 3.0f; }, "S");
  Buffer a = ref::random(A.shape(), 4);
  std::vector<double> want(900);
  auto pa = [&](int i, int j) { return i >= 1 && i < 31 && j >= 1 && j < 31 ? a.get((i - 1) * 30 + j - 1) : 0.0; };
  for (int i = 0; i < 30; ++i)
    for (int j = 0; j < 30; ++j)
      want[i * 30 + j] = (pa(i, j + 1) + pa(i + 1, j + 1) + pa(i + 2, j + 1) + pa(i + 1, j) + pa(i + 1, j + 2)) * 0.2 * 3;
  auto check = [&](const Schedule& s) {
    Buffer got = ref::run(s, {A, S}, {a})[0];
    for (int i = 0; i < 900; ++i) ASSERT_NEAR(got.get(i), want[i], 1e-5) << lower(s, {A, S}).str();
  };
  Schedule s({S});
  auto [io, ii] = s[S].split("i", 7);  // 30 is not a multiple of 7: the regions hang over the edge
  s[Bl].compute_at(s[S], io);
  auto [bo, bi] = s[Bl].split("i", 2);
  s[P].compute_at(s[Bl], bo);
  check(s);
  s[P].compute_root();
  check(s);
  Schedule t({S});
  t[Bl].compute_inline();
  t[P].compute_at(t[S], "j");
  check(t);
}

// A producer read through pad()'s clamped indices, computed at a band of its reader's rows,
// holds the band's rows (8 of 30: 6 rows of a 3x3 window) rather than the whole plane. The last
// band's rows start earlier rather than hang over the edge: with the bands in a parallel loop
// over channels and bands, its copy (rows and columns fused) would be guarded.
TEST(Primitives, ComputeAtThroughClampedPaddingHoldsTheBand) {
  Tensor A = placeholder({2, 30, 30}, float32, "A");
  Tensor Q = compute({2, 30, 30}, [&](Var c, Var i, Var j) { return A(c, i, j) * 2.0f; }, "Q");
  auto clamp = [](Expr e) { return max(min(e, 29), 0); };
  Tensor P = compute({2, 32, 32}, [&](Var c, Var i, Var j) {
    return select(i >= 1 && i < 31 && j >= 1 && j < 31, Q(c, clamp(i - 1), clamp(j - 1)), Expr(0.0f));
  }, "P");
  IterVar ry = reduce_axis(3, "ry"), rx = reduce_axis(3, "rx");
  Tensor B = compute({2, 30, 30}, [&](Var c, Var i, Var j) { return sum(P(c, i + ry, j + rx), {ry, rx}); }, "B");
  Buffer a = ref::random(A.shape(), 5);
  std::vector<double> want(1800, 0.0);
  for (int c = 0; c < 2; ++c)
    for (int i = 0; i < 30; ++i)
      for (int j = 0; j < 30; ++j)
        for (int y = i - 1; y <= i + 1; ++y)
          for (int x = j - 1; x <= j + 1; ++x)
            if (y >= 0 && y < 30 && x >= 0 && x < 30) want[(c * 30 + i) * 30 + j] += 2 * a.get((c * 30 + y) * 30 + x);
  Schedule s({B});
  s[P].compute_inline();
  auto [io, ii] = s[B].split(B.axis(1), 6);
  s[B].reorder({B.axis(0), io, ii, B.axis(2)});
  Axis band = s[B].fuse({B.axis(0), io});
  s[B].parallel(band);
  s[Q].compute_at(s[B], band);
  s[Q].fuse({Q.axis(1), Q.axis(2)});
  Buffer got = ref::run(s, {A, B}, {a})[0];
  for (int i = 0; i < 1800; ++i) ASSERT_NEAR(got.get(i), want[i], 1e-4) << i;
  std::string ir = lower(s, {A, B}).str();
  EXPECT_NE(ir.find("Q[float32 * 240]"), std::string::npos) << ir;
  EXPECT_EQ(ir.find("if ("), std::string::npos) << ir;
}

TEST(Primitives, CacheReadAndCacheWrite) {
  Mm m(40, 48, 24);
  Schedule s({m.C});
  Tensor CL = s.cache_write(m.C, "local");
  EXPECT_EQ(CL.name(), "C.local");
  Tensor AL = s.cache_read(m.A, "local", {CL});
  EXPECT_EQ(AL.name(), "A.local");
  auto t = s[m.C].tile("i", "j", 8, 16);
  s[CL].compute_at(s[m.C], t.yo);
  s[AL].compute_at(s[CL], "k");
  s[m.C].vectorize(t.yi);
  m.check(s);
}

TEST(Primitives, PackCutsADimensionIntoBlocks) {
  for (int64_t block : {16, 20}) {  // 20 does not divide 48: the last block is zero-filled
    Mm m(40, 48, 24);
    Schedule s({m.C});
    Tensor CL = s.cache_write(m.C, "local");
    Tensor BP = s.pack(m.B, {CL}, 1, block);
    EXPECT_EQ(BP.name(), "B.pack");
    EXPECT_EQ(BP.shape(), (std::vector<int64_t>{(48 + block - 1) / block, 24, block}));
    auto t = s[m.C].tile("i", "j", 8, block);
    s[CL].compute_at(s[m.C], t.yo);
    s[BP].parallel("i");
    m.check(s);
    if (block == 16) {
      // j = j.outer * 16 + j.inner: the block index and offset simplify to the loop variables.
      std::string ir = lower(s, {m.A, m.B, m.C}).str();
      EXPECT_EQ(ir.find("/16)"), std::string::npos) << ir;
      EXPECT_EQ(ir.find(" % 16"), std::string::npos) << ir;
    }
  }
}

// A 1x1 convolution in NCHW (7 channels in, 3 out, batch 2) over h x w pixels, scheduled as
// a GEMM over blocks of 16 pixels (with the batch, the parallel loop `blocks`), each block
// packing its panel of X (pack over the two image dimensions) where its loop runs.
struct PackedPixelBlocks {
  Tensor X, W, Y;
  Schedule s;
  Tensor XP;
  Axis blocks;
  PackedPixelBlocks(int64_t h, int64_t w)
      : X(placeholder({2, 7, h, w}, float32, "X")), W(placeholder({3, 7}, float32, "W")), Y(conv(X, W)), s({Y}) {
    XP = s.pack(X, {Y}, 2, 16, 2);
    Stage y = s[Y];
    auto [po, pi] = y.split(y.fuse({"k", "l"}), 16);  // y, x
    y.reorder({"i", po, "j", "c", pi});
    blocks = y.fuse({"i", po});
    y.parallel(blocks);
    s[XP].compute_at(y, blocks);
    s[XP].vectorize(s[XP].leaf_axes().back());
    y.vectorize(pi);
  }
  static Tensor conv(const Tensor& X, const Tensor& W) {
    IterVar c = reduce_axis(7, "c");
    return compute({2, 3, X.shape()[2], X.shape()[3]},
                   [&](Var n, Var k, Var y, Var x) { return sum(W(k, c) * X(n, c, y, x), {c}); }, "Y");
  }
};

// pack over two dimensions blocks them as one: an NCHW image's pixels, flattened row-major,
// in blocks of 16 that run across the ends of the 6-column rows (1x1 convolution as a GEMM
// over the pixels). 5 x 6 = 30 pixels: the second block is short and zero-filled. Each block's
// panel is packed where the block's loop runs; the step replays from its JSON.
TEST(Primitives, PackBlocksTrailingDimensionsAsOne) {
  PackedPixelBlocks b(5, 6);
  EXPECT_EQ(b.XP.shape(), (std::vector<int64_t>{2, 2, 7, 16}));
  Buffer x = ref::random(b.X.shape(), 5), w = ref::random(b.W.shape(), 6), want(b.Y.shape(), float32);
  for (int64_t n = 0; n < 2; ++n)
    for (int64_t k = 0; k < 3; ++k)
      for (int64_t p = 0; p < 30; ++p) {
        float acc = 0;
        for (int64_t ci = 0; ci < 7; ++ci) acc += w.data<float>()[k * 7 + ci] * x.data<float>()[(n * 7 + ci) * 30 + p];
        want.data<float>()[(n * 3 + k) * 30 + p] = acc;
      }
  std::vector<Tensor> args = {b.X, b.W, b.Y};
  ref::expect_close(ref::run(b.s, args, {x, w})[0], want);
  std::string ir = lower(b.s, args).str();
  EXPECT_NE(ir.find("X.pack[ramp((c*16), 1, 16)]"), std::string::npos) << ir;  // one contiguous vector a step
  Schedule r = Schedule::replay({b.Y}, steps_from_json(steps_to_json(b.s.steps())));
  ref::expect_close(ref::run(r, args, {x, w})[0], want);
  EXPECT_NE(b.s.to_cpp().find(R"(s.pack(s.tensor("X"), {s.tensor("Y")}, 2, 16, 2);)"), std::string::npos)
      << b.s.to_cpp();
}

// Each block of 16 pixels packs its panel (7 channels' rows, a plane of 32 pixels apart) and
// prefetches the next block's 7 lines, spread over the computation (j, c), not the packing.
TEST(Primitives, PrefetchOfAPackedPanelFetchesItsRowsDuringTheComputation) {
  PackedPixelBlocks b(4, 8);
  std::vector<Tensor> args = {b.X, b.W, b.Y};
  Buffer x = ref::random(b.X.shape(), 5), w = ref::random(b.W.shape(), 6);
  Buffer want = ref::run(Schedule({b.Y}), args, {x, w})[0];
  b.s[b.Y].prefetch(b.X, b.blocks);
  ref::expect_close(ref::run(b.s, args, {x, w})[0], want);
  std::string ir = lower(b.s, args).str();
  // the next block (fused + 1), one row of 16 floats every other (j, c) iteration
  size_t at = ir.find("prefetch(X[(((((i.k.l.fused.outer.fused + 1)/2)*224) + "
                      "(((i.k.l.fused.outer.fused + 1) % 2)*16)) + ((((j*7) + c)/2)*32))])");
  EXPECT_NE(at, std::string::npos) << ir;
  EXPECT_GT(at, ir.find("for (c, 0, 7)")) << ir;
}

// A stride-2 read of columns: every other element of A's rows, three taps, vectorized along
// the output's columns. De-interleaved, each tap reads one phase of the row contiguously.
TEST(Primitives, DeinterleaveSplitsADimensionIntoPhases) {
  for (int64_t cols : {37, 38}) {  // 37 is odd: phase 1 has a zero-filled last element
    int64_t out_cols = (cols - 3) / 2 + 1;
    Tensor A = placeholder({4, cols}, float32, "A");
    IterVar r = reduce_axis(3, "r");
    Tensor B = compute({4, out_cols}, [&](Var i, Var j) { return sum(A(i, j * 2 + r) * float(1.5), {r}); }, "B");
    Buffer a = ref::random(A.shape(), 3), want({4, out_cols}, float32);
    for (int64_t i = 0; i < 4; ++i)
      for (int64_t j = 0; j < out_cols; ++j) {
        float v = 0;
        for (int64_t k = 0; k < 3; ++k) v += float(a.get(i * cols + j * 2 + k)) * 1.5f;
        want.set(i * out_cols + j, v);
      }
    Schedule s({B});
    Tensor D = s.deinterleave(A, {B}, 1, 2);
    EXPECT_EQ(D.name(), "A.deint");
    EXPECT_EQ(D.shape(), (std::vector<int64_t>{4, 2, (cols + 1) / 2}));
    auto [jo, ji] = s[B].split("j", 8);
    s[B].reorder({"i", jo, "r", ji});
    s[B].unroll("r");
    s[B].vectorize(ji);
    s[D].parallel("i");
    ref::expect_close(ref::run(s, {A, B}, {a})[0], want);
    // The taps' phases and offsets are constants once r is unrolled: contiguous loads.
    std::string ir = lower(s, {A, B}).str();
    EXPECT_EQ(ir.find(" % 2"), std::string::npos) << ir;
    EXPECT_NE(s.to_cpp().find(R"(s.deinterleave(s.tensor("A"), {s.tensor("B")}, 1, 2);)"), std::string::npos);
    Schedule again = Schedule::replay({B}, steps_from_json(steps_to_json(s.steps())));
    ref::expect_close(ref::run(again, {A, B}, {a})[0], want);
  }
  Tensor A = placeholder({4, 9}, float32, "A");
  Tensor B = compute({4, 4}, [&](Var i, Var j) { return A(i, j * 2); }, "B");
  Schedule s({B});
  EXPECT_THROW(s.deinterleave(A, {B}, 2, 2), Error);
  EXPECT_THROW(s.deinterleave(A, {B}, 1, 1), Error);
}

// 2 x every other row and column of each n x n plane of a [3][n][n] buffer.
Buffer twice_every_other(const Buffer& a, int64_t n) {
  int64_t m = (n + 1) / 2;
  Buffer want({3, m, m}, float32);
  for (int64_t c = 0; c < 3; ++c)
    for (int64_t y = 0; y < m; ++y)
      for (int64_t x = 0; x < m; ++x) want.set((c * m + y) * m + x, 2 * a.get((c * n + 2 * y) * n + 2 * x));
  return want;
}

// A read of every other row and column, as a stride-2 1x1 convolution makes: de-interleaved
// along both, the reader takes only the first phase of each, and the copy at the root holds
// only that (a quarter of A), its rows contiguous.
TEST(Primitives, DeinterleavedCopyHoldsOnlyThePhasesItsReadersRead) {
  for (int64_t n : {12, 13}) {  // 13: the last row and column are read too, phase 0 has 7 of them
    int64_t m = (n + 1) / 2;
    Tensor A = placeholder({3, n, n}, float32, "A");
    Tensor B = compute({3, m, m}, [&](Var c, Var y, Var x) { return A(c, y * 2, x * 2) * float(2); }, "B");
    Buffer a = ref::random(A.shape(), 4), want = twice_every_other(a, n);
    Schedule s({B});
    Tensor cols = s.deinterleave(A, {B}, 2, 2);
    Tensor rows = s.deinterleave(cols, {B}, 1, 2);
    s[cols].compute_inline();
    s[rows].parallel(rows.axis(0));
    auto [xo, xi] = s[B].split(B.axis(2), 4);
    s[B].vectorize(xi);
    ref::expect_close(ref::run(s, {A, B}, {a})[0], want);
    std::string ir = lower(s, {A, B}).str();
    EXPECT_NE(ir.find("A.deint.deint[float32 * " + std::to_string(3 * m * m) + "]"), std::string::npos) << ir;
  }
}

// A stride-2 1x1 convolution's read of every other row and column (its window's taps at 0),
// subsampled along both: the copy is as dense as its reader's output, so its pixels, fused
// across rows, can be packed into blocks of 8 (here 49 = 6 blocks and 1 pixel, zero-filled).
// A read of other phases (a 3-tap stride-2 window) cannot be subsampled.
TEST(Primitives, SubsampleCopiesEveryOtherRowAndColumnDensely) {
  for (int64_t n : {14, 13}) {  // 13: the last row and column are read too
    int64_t m = (n + 1) / 2;
    Tensor A = placeholder({3, n, n}, float32, "A");
    IterVar r = reduce_axis(1, "r");
    Tensor B = compute({3, m, m}, [&](Var c, Var y, Var x) { return sum(A(c, y * 2 + r, x * 2) * float(2), {r}); },
                       "B");
    Buffer a = ref::random(A.shape(), 4), want = twice_every_other(a, n);
    Schedule s({B});
    Tensor cols = s.subsample(A, {B}, 2, 2);
    Tensor rows = s.subsample(cols, {B}, 1, 2);
    EXPECT_EQ(rows.name(), "A.sub.sub");
    EXPECT_EQ(rows.shape(), (std::vector<int64_t>{3, m, m}));
    s[cols].compute_inline();
    Axis p = s[B].fuse({B.axis(1), B.axis(2)});
    auto [po, pi] = s[B].split(p, 8);
    s[B].reorder({po, B.axis(0), pi});
    Tensor panel = s.pack(rows, {B}, 1, 8, 2);
    s[panel].compute_at(s[B], po);
    s[B].vectorize(pi);
    ref::expect_close(ref::run(s, {A, B}, {a})[0], want);
    std::string ir = lower(s, {A, B}).str();
    EXPECT_NE(ir.find("A.sub.sub.pack[ramp("), std::string::npos) << ir;  // the panel is read in whole vectors
    EXPECT_NE(s.to_cpp().find(R"(s.subsample(s.tensor("A.sub"), {s.tensor("B")}, 1, 2);)"), std::string::npos);
    Schedule again = Schedule::replay({B}, steps_from_json(steps_to_json(s.steps())));
    ref::expect_close(ref::run(again, {A, B}, {a})[0], want);
  }
  Tensor A = placeholder({4, 9}, float32, "A");
  IterVar r = reduce_axis(3, "r");
  Tensor B = compute({4, 4}, [&](Var i, Var j) { return sum(A(i, j * 2 + r), {r}); }, "B");
  Schedule s({B});
  ref::expect_error([&] { s.subsample(A, {B}, 1, 2); }, {"subsample of 'A'", "stage 'B' reads dimension 1 at",
                                                          "not always a multiple of 2", "deinterleave"});
  EXPECT_THROW(s.subsample(A, {B}, 1, 1), Error);
  EXPECT_THROW(s.subsample(A, {B}, 2, 2), Error);
}

// A matmul vectorized along j (B's last axis) with B's rows blocked, and a convolution
// vectorized along its output channels (OIHW weights: k is the slowest index) with the
// weights blocked by channel and the accumulator block stored channels innermost.
TEST(Primitives, RewriteLayoutPreparesAConstantInputOnce) {
  for (int64_t block : {16, 20}) {
    Mm m(40, 48, 24);
    Schedule s({m.C});
    Tensor CL = s.cache_write(m.C, "local");
    Tensor BL = s.rewrite_layout(m.B, 1, block);
    EXPECT_EQ(BL.name(), "B.layout");
    EXPECT_EQ(BL.shape(), (std::vector<int64_t>{(48 + block - 1) / block, 24, block}));
    auto t = s[m.C].tile("i", "j", 8, block);
    s[CL].compute_at(s[m.C], t.yo);
    m.check(s);
    Module mod = build(s, {m.A, m.B, m.C});
    ASSERT_EQ(mod.layout_rewrites().size(), 1u);
    EXPECT_EQ(mod.lowered().args[1].name(), "B.layout");  // the kernel reads the copy
    EXPECT_EQ(mod.args()[1].shape, (std::vector<int64_t>{24, 48}));  // the caller passes B
    Buffer a = ref::random(m.A.shape(), 1), b = ref::random(m.B.shape(), 2), c({40, 48}, float32);
    mod(a, b, c);
    ref::expect_close(c, ref::matmul(a, b));
    Buffer b2 = ref::random(m.B.shape(), 3);  // another buffer: prepared again
    mod(a, b2, c);
    ref::expect_close(c, ref::matmul(a, b2));
    b2.fill_random(4);  // changed in place: the copy is stale until prepare()
    mod.prepare({a, b2, c});
    mod(a, b2, c);
    ref::expect_close(c, ref::matmul(a, b2));
    EXPECT_GE(mod.prepare_seconds(), 0.0);
  }
  ops::Conv2dParams p;
  p.pad_h = p.pad_w = 1;
  p.stride_h = p.stride_w = 2;
  Tensor X = placeholder({1, 6, 11, 11}, float32, "X");
  Tensor W = placeholder({24, 6, 3, 3}, float32, "W");
  Tensor Y = ops::conv2d_nchw(X, W, p, "Y");
  Schedule s({Y});
  Tensor YL = s.cache_write(Y, "local");
  s.rewrite_layout(W, 0, 8);
  std::vector<std::string> a = s[Y].leaf_axes();  // n, k, y, x
  auto [ko, ki] = s[Y].split(a[1], 8);
  s[Y].reorder({a[0], ko, a[2], a[3], ki});
  s[YL].compute_at(s[Y], a[2]);
  std::vector<std::string> l = s[YL].leaf_axes();  // n, k, y, x, then the reduction: c, ry, rx
  s[YL].reorder_storage({l[0], l[2], l[3], l[1]});
  auto [lo, li] = s[YL].split(l[1], 8);
  s[YL].reorder({l[0], lo, l[2], l[4], l[5], l[6], l[3], li});
  s[YL].vectorize(li);
  std::string ir = lower(s, {X, W, Y}).str();
  EXPECT_NE(ir.find("W.layout: float32[3, 6, 3, 3, 8]"), std::string::npos) << ir;
  EXPECT_NE(ir.find("ramp("), std::string::npos) << ir;  // whole vectors of weights and accumulators
  Buffer x = ref::random(X.shape(), 1), w = ref::random(W.shape(), 2);
  ref::expect_close(ref::run(s, {X, W, Y}, {x, w})[0], ref::conv2d_nchw(x, w, p));
}

TEST(Primitives, LayoutStepsRejectWhatTheyCannotDo) {
  Mm m(16, 16, 16);
  Schedule s({m.C});
  auto expect_error = [](auto f, const char* what) {
    try {
      f();
      FAIL() << "expected an error containing: " << what;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(what), std::string::npos) << e.what();
    }
  };
  Tensor CL = s.cache_write(m.C, "local");
  expect_error([&] { s.rewrite_layout(CL, 0, 4); }, "is computed by the kernel");
  expect_error([&] { s.rewrite_layout(m.B, 2, 4); }, "dim 2 is not a dimension");
  expect_error([&] { s[m.C].reorder_storage({"j", "i"}); }, "is an output");
  expect_error([&] { s[CL].reorder_storage({"j"}); }, "name all 2 data axes");
  s.rewrite_layout(m.B, 1, 4);
  expect_error([&] { s.rewrite_layout(m.B, 1, 4); }, "is not read by the computation");
}

TEST(Primitives, RFactor) {
  Tensor A = placeholder({1000}, float32, "A");
  IterVar k = reduce_axis(1000, "k");
  Tensor S = compute({1}, [&](Var) { return sum(A(k), {k}); }, "S");
  Buffer a = ref::random(A.shape(), 5);
  double want = 0;
  for (int i = 0; i < 1000; ++i) want += a.get(i);
  for (int64_t f : {16, 24}) {  // 24 does not divide 1000
    Schedule s({S});
    auto [ko, ki] = s[S].split("k", f);
    Tensor RF = s.rfactor(S, ki);
    EXPECT_EQ(RF.shape()[0], f);
    s[RF].vectorize(RF.axis(0));
    Buffer got = ref::run(s, {A, S}, {a})[0];
    EXPECT_NEAR(got.get(0), want, 1e-3);
  }
  Schedule o({S});
  auto [ko, ki] = o[S].split("k", 8);
  Tensor RF = o.rfactor(S, ko);  // factor the outer part: 125 partial sums in parallel
  o[RF].parallel(RF.axis(0));
  EXPECT_NEAR(ref::run(o, {A, S}, {a})[0].get(0), want, 1e-3);
}

// A vectorized reduction axis: its lanes combined in a tree (an odd count of lanes sets one
// aside), then into the accumulator; with a predicate on the axis it stays a serial loop.
TEST(Primitives, VectorizedReductionAxis) {
  Tensor A = placeholder({6, 21}, float32, "A");
  Tensor I = placeholder({6, 21}, int32, "I");
  Tensor Sum = compute({6}, [&](Var i) { IterVar k = reduce_axis(21, "k1"); return sum(A(i, k), {k}); }, "Sum");
  Tensor Mx = compute({6}, [&](Var i) { IterVar k = reduce_axis(21, "k2"); return max(A(i, k), {k}); }, "Mx");
  Tensor Pr = compute({6}, [&](Var i) { IterVar k = reduce_axis(21, "k3"); return prod(A(i, k) + 2.0f, {k}); }, "Pr");
  Tensor Mn = compute({6}, [&](Var i) { IterVar k = reduce_axis(21, "k4"); return min(I(i, k), {k}); }, "Mn");
  Tensor Odd = compute({6}, [&](Var i) {
    IterVar k = reduce_axis(21, "k5");
    return sum(I(i, k), {k}, k % 2 == 0, Expr(int32_t(100)));
  }, "Odd");
  Buffer a = ref::random(A.shape(), 7), n({6, 21}, int32);
  for (int64_t e = 0; e < n.size(); ++e) n.set(e, double((e * 37) % 23) - 11);
  for (int64_t lanes : {16, 7}) {
    Schedule s({Sum, Mx, Pr, Mn, Odd});
    for (const Tensor& t : {Sum, Mx, Pr, Mn, Odd}) {
      auto axes = s[t].leaf_axes();
      auto [ko, ki] = s[t].split(axes.back(), lanes);
      s[t].vectorize(ki);
    }
    std::string ir = lower(s, {A, I, Sum, Mx, Pr, Mn, Odd}, "f").str();
    for (const char* vec : {"Sum[i] + vector_reduce", "max(Mx[i], vector_reduce", "Pr[i]*vector_reduce",
                            "min(Mn[i], vector_reduce"})
      EXPECT_NE(ir.find(vec), std::string::npos) << vec << " in\n" << ir;
    EXPECT_EQ(ir.find("Odd[i] + vector_reduce"), std::string::npos) << ir;
    auto got = ref::run(s, {A, I, Sum, Mx, Pr, Mn, Odd}, {a, n});
    for (int i = 0; i < 6; ++i) {
      double sm = 0, mx = -1e30, pr = 1, mn = 1e30, odd = 100;
      for (int k = 0; k < 21; ++k) {
        double x = a.get(i * 21 + k), m = n.get(i * 21 + k);
        sm += x, mx = std::max(mx, x), pr *= x + 2, mn = std::min(mn, m);
        if (k % 2 == 0) odd += m;
      }
      EXPECT_NEAR(got[0].get(i), sm, 1e-5) << "lanes " << lanes;
      EXPECT_EQ(got[1].get(i), float(mx)) << "lanes " << lanes;
      EXPECT_NEAR(got[2].get(i), pr, 1e-4 * std::abs(pr)) << "lanes " << lanes;
      EXPECT_EQ(got[3].get(i), mn) << "lanes " << lanes;
      EXPECT_EQ(got[4].get(i), odd) << "lanes " << lanes;
    }
  }
}

TEST(Primitives, ReductionWithPredicateAndInit) {
  Tensor A = placeholder({8, 20}, float32, "A");
  IterVar k = reduce_axis(20, "k");
  Tensor S = compute({8}, [&](Var i) { return sum(A(i, k), {k}, k % 3 == 0, Expr(10.0f)); }, "S");
  IterVar k2 = reduce_axis(20, "k2");
  Tensor P = compute({8}, [&](Var i) { return prod(A(i, k2) + 2.0f, {k2}, k2 < 4); }, "P");
  IterVar k3 = reduce_axis(20, "k3");
  Tensor Mn = compute({8}, [&](Var i) { return min(A(i, k3), {k3}); }, "Mn");
  Buffer a = ref::random(A.shape(), 6);
  auto got = ref::run(Schedule({S, P, Mn}), {A, S, P, Mn}, {a});
  for (int i = 0; i < 8; ++i) {
    double s = 10, p = 1, mn = 1e9;
    for (int j = 0; j < 20; ++j) {
      if (j % 3 == 0) s += a.get(i * 20 + j);
      if (j < 4) p *= a.get(i * 20 + j) + 2;
      mn = std::min(mn, a.get(i * 20 + j));
    }
    EXPECT_NEAR(got[0].get(i), s, 1e-5);
    EXPECT_NEAR(got[1].get(i), p, 1e-4);
    EXPECT_FLOAT_EQ(got[2].get(i), float(mn));
  }
}

TEST(Primitives, StorageAlign) {
  Tensor A = placeholder({16, 16}, float32, "A");
  Tensor B = compute({16, 16}, [&](Var i, Var j) { return A(i, j) + 1.0f; }, "B");
  Tensor C = compute({16, 16}, [&](Var i, Var j) { return B(j, i) * 2.0f; }, "C");
  Schedule s({C});
  s[B].storage_align("i", 16, 4);  // row stride 20 instead of 16
  std::string ir = lower(s, {A, C}).str();
  EXPECT_NE(ir.find("float32 * 320"), std::string::npos) << ir;  // 16 rows of stride 20
  Buffer a = ref::random(A.shape(), 1);
  Buffer got = ref::run(s, {A, C}, {a})[0];
  for (int i = 0; i < 16; ++i)
    for (int j = 0; j < 16; ++j) EXPECT_FLOAT_EQ(got.get(i * 16 + j), float((a.get(j * 16 + i) + 1) * 2));
}

TEST(Primitives, BindIsRecordedAndRejectedByTheCpuTarget) {
  Mm m(32, 32, 8);
  Schedule s({m.C});
  auto [io, ii] = s[m.C].split("i", 8);
  s[m.C].bind(io, "blockIdx.x");
  s[m.C].bind(ii, "threadIdx.x");
  EXPECT_EQ(s.steps().back().to_json(), R"(["bind","C","i.inner","threadIdx.x"])");
  try {
    build(s, {m.A, m.B, m.C});
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("bound to blockIdx.x"), std::string::npos) << e.what();
  }
}

TEST(Steps, JsonRoundTripReplayAndCpp) {
  Mm m(40, 48, 24);
  Schedule s({m.C});
  Tensor CL = s.cache_write(m.C, "local");
  auto t = s[m.C].tile("i", "j", 8, 16);
  s[m.C].parallel(s[m.C].fuse(t.xo, t.yo));
  s[CL].compute_at(s[m.C], t.yi);
  auto [ko, ki] = s[CL].split("k", 4);
  s[CL].unroll(ki);
  s[CL].pragma(ko, "auto_unroll_max_step", 64);
  s[m.C].storage_align("i", 4, 0);
  s[s.pack(m.B, {CL}, 1, 16)].parallel("i");
  s.rewrite_layout(m.A, 0, 8);
  s[CL].reorder_storage({"j", "i"});

  std::string json = steps_to_json(s.steps());
  std::vector<Step> back = steps_from_json(json);
  ASSERT_EQ(back.size(), s.steps().size());
  for (size_t i = 0; i < back.size(); ++i) EXPECT_TRUE(back[i] == s.steps()[i]) << back[i].to_json();
  // A fresh compute definition (new nodes, same names) replays to the same loops.
  Mm fresh(40, 48, 24);
  Schedule r = Schedule::replay({fresh.C}, back);
  EXPECT_EQ(lower(r, {fresh.A, fresh.B, fresh.C}).str(), lower(s, {m.A, m.B, m.C}).str());
  fresh.check(r);
  std::string cpp = s.to_cpp();
  EXPECT_NE(cpp.find(R"(s.cache_write(s.tensor("C"), "local");)"), std::string::npos) << cpp;
  EXPECT_NE(cpp.find(R"(s["C.local"].compute_at(s["C"], "j.inner");)"), std::string::npos) << cpp;
  EXPECT_NE(cpp.find(R"(s["C.local"].pragma("k.outer", "auto_unroll_max_step", 64);)"), std::string::npos) << cpp;
  EXPECT_NE(cpp.find(R"(s.pack(s.tensor("B"), {s.tensor("C.local")}, 1, 16);)"), std::string::npos) << cpp;
  EXPECT_NE(cpp.find(R"(s.rewrite_layout(s.tensor("A"), 0, 8);)"), std::string::npos) << cpp;
  EXPECT_NE(cpp.find(R"(s["C.local"].reorder_storage({"j", "i"});)"), std::string::npos) << cpp;
}

TEST(Steps, BadJsonIsAClearError) {
  auto msg = [](const std::string& text) {
    try {
      steps_from_json(text);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(msg("[[\"splt\", \"C\", \"i\", 4]]").find("unknown step kind 'splt'"), std::string::npos);
  EXPECT_NE(msg("[[\"split\", \"C\", \"i\"]]").find("a split step has 4 elements"), std::string::npos);
  EXPECT_NE(msg("[[\"split\", \"C\", \"i\", \"4\"]]").find("element 3 must be an integer"), std::string::npos);
  EXPECT_NE(msg("[[\"split\", ").find("not valid JSON"), std::string::npos);
}

// Each block of 16 columns prefetches the next block's panel of the rewritten B (24 rows of
// 16 floats, 24 lines) while it runs, spread over its 40 x 24 iterations of (i, k): one line
// each run of 32 of them. Without the rewrite, the rows of that panel.
TEST(Primitives, PrefetchFetchesWhatTheNextIterationReads) {
  Mm m(40, 64, 24);
  Schedule s({m.C});
  s.rewrite_layout(m.B, 1, 16);
  auto [jo, ji] = s[m.C].split("j", 16);
  s[m.C].reorder({jo, "i", "k", ji});
  s[m.C].vectorize(ji);
  s[m.C].prefetch(m.B, jo);
  m.check(s);
  std::string ir = lower(s, {m.A, m.B, m.C}).str();
  EXPECT_NE(ir.find("prefetch(B[(((j.outer*384) + ((((i*24) + k)/32)*16)) + 384)])"), std::string::npos) << ir;
  EXPECT_NE(build(s, {m.A, m.B, m.C}).llvm_ir().find("@llvm.prefetch"), std::string::npos);
  EXPECT_NE(s.to_cpp().find(R"(s["C"].prefetch(s.tensor("B"), "j.outer", 1);)"), std::string::npos) << s.to_cpp();
  m.check(Schedule::replay({m.C}, steps_from_json(steps_to_json(s.steps()))));

  // B in place: a block of columns reads 24 rows of 16 floats a row (64 floats) apart, so the
  // next block's 24 lines are fetched, not the 93 its rows span.
  Schedule r({m.C});
  auto [ro, ri] = r[m.C].split("j", 16);
  r[m.C].reorder({ro, "i", "k", ri});
  r[m.C].vectorize(ri);
  r[m.C].prefetch(m.B, ro);
  m.check(r);
  ir = lower(r, {m.A, m.B, m.C}).str();
  EXPECT_NE(ir.find("prefetch(B[(((j.outer*16) + ((((i*24) + k)/32)*64)) + 16)])"), std::string::npos) << ir;

  // A parallel loop whose last block is partial runs both of its parts in it (loop partitioning): the
  // main part's iterations prefetch, the last block's nothing.
  Mm p(40, 56, 24);
  Schedule u({p.C});
  auto [uo, ui] = u[p.C].split("j", 16);
  u[p.C].reorder({uo, "i", "k", ui});
  u[p.C].parallel(uo);
  u[p.C].vectorize(ui);
  u[p.C].prefetch(p.B, uo);
  p.check(u);
  ir = lower(u, {p.A, p.B, p.C}).str();
  size_t tail = ir.find("} else {", ir.find("let j.outer = (j.outer.spread - j.outer.tails)"));
  ASSERT_NE(tail, std::string::npos) << ir;
  EXPECT_LT(ir.find("prefetch(B["), tail) << ir;
  EXPECT_EQ(ir.find("prefetch(B[", tail), std::string::npos) << ir;

  ref::expect_error([&] { s[m.C].prefetch(m.B, jo, 0); }, {"prefetch", "1 or more iterations ahead"});
  ref::expect_error([&] { s[m.C].prefetch(placeholder({2}, float32, "X"), jo); }, {"prefetch", "no tensor 'X'"});
  Schedule t({m.C});
  t[m.C].prefetch(m.A, "i");  // a GPU kernel stages its reads in shared memory instead
  ref::expect_error([&] { build(t, {m.A, m.B, m.C}, {.target = Target::parse("opencl")}); },
                    {"loop 'i' prefetches", "only CPU targets"});
}

// PackedPixelBlocks' convolution of an image of `w` columns, its pixels in place (not packed): the
// schedule `s` is left to the test; lowered() checks it against the unscheduled answer and returns its IR.
struct PixelsInPlace {
  Tensor X, W, Y;
  Schedule s;
  explicit PixelsInPlace(int64_t w)
      : X(placeholder({2, 7, 4, w}, float32, "X")), W(placeholder({3, 7}, float32, "W")),
        Y(PackedPixelBlocks::conv(X, W)), s({Y}) {}
  std::string lowered(uint64_t seed) {
    std::vector<Tensor> args = {X, W, Y};
    Buffer x = ref::random(X.shape(), seed), w = ref::random(W.shape(), seed + 1);
    ref::expect_close(ref::run(s, args, {x, w})[0], ref::run(Schedule({Y}), args, {x, w})[0]);
    return lower(s, args).str();
  }
};

// The same prefetch where the register block of output channels is partial (3 channels in
// blocks of 2): the last block's nest is a copy of the reduction loop, which still counts as
// the loop whose iterations read the rows, so the next block's 7 rows are fetched, 7 lines,
// not the 13 lines of the span between them.
TEST(Primitives, PrefetchFindsTheRowsThroughAPartialBlocksCopyOfTheLoop) {
  PixelsInPlace p(8);
  Stage y = p.s[p.Y];
  auto [po, pi] = y.split(y.fuse({"k", "l"}), 16);
  auto [jo, ji] = y.split("j", 2);
  y.reorder({"i", po, jo, "c", ji, pi});
  Axis blocks = y.fuse({"i", po});
  y.parallel(blocks);
  y.unroll(ji);
  y.vectorize(pi);
  y.prefetch(p.X, blocks);
  std::string ir = p.lowered(5);
  EXPECT_NE(ir.find("prefetch(X[(((((i.k.l.fused.outer.fused + 1)/2)*224) + "
                    "(((i.k.l.fused.outer.fused + 1) % 2)*16)) + (c*32))])"), std::string::npos) << ir;
  EXPECT_EQ(ir.find(".prefetch, 0"), std::string::npos) << ir;  // no loop over the lines of a span
}

// Where the loop over the rows is the innermost of the nest and the loops outside it run about as many times as
// a row has lines (2 lines of 32 pixels, 3 output channels), iteration (j, c) fetches line j of row c: an address
// that moves by the rows' stride with c, no line number divided into a row and a line of it.
TEST(Primitives, PrefetchFetchesALineOfEachRowPerIterationOfTheLoopOverTheRows) {
  PixelsInPlace p(16);
  Stage y = p.s[p.Y];
  auto [po, pi] = y.split(y.fuse({"k", "l"}), 32);
  y.reorder({"i", po, "j", "c", pi});
  Axis blocks = y.fuse({"i", po});
  y.parallel(blocks);
  y.vectorize(pi);
  y.prefetch(p.X, blocks);
  std::string ir = p.lowered(7);
  size_t guard = ir.find("if ((j < 2))");
  ASSERT_NE(guard, std::string::npos) << ir;
  EXPECT_NE(ir.find("prefetch(X[((((((i.k.l.fused.outer.fused + 1)/2)*448) + "
                    "(((i.k.l.fused.outer.fused + 1) % 2)*32)) + (c*64)) + (j*16))])",
                    guard),
            std::string::npos)
      << ir;
}
