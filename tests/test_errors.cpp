// Programs that must fail: every user error names what is wrong (checked by substring),
// and is a tessel::Error, not a crash or an internal error.
#include "reference.h"

using namespace tessel;
using ref::expect_error;

namespace {

struct Mm {
  Tensor A = placeholder({32, 16}, float32, "A");
  Tensor B = placeholder({16, 24}, float32, "B");
  IterVar k = reduce_axis(16, "k");
  Tensor C = compute({32, 24}, [this](Var i, Var j) { return sum(A(i, k) * B(k, j), {k}); }, "C");
  Tensor D = compute({32, 24}, [this](Var i, Var j) { return C(i, j) + 1.0f; }, "D");
};

}  // namespace

TEST(Errors, PackBadDimBlockOrReader) {
  Mm m;
  Schedule s({m.D});
  expect_error([&] { s.pack(m.B, {m.C}, 2, 4); }, {"pack of 'B'", "dim 2", "2-dimensional", "use 0..1"});
  expect_error([&] { s.pack(m.B, {m.C}, 1, 25); }, {"pack of 'B'", "block 25", "extent of dimension 1 (24)"});
  expect_error([&] { s.pack(m.B, {m.C}, 1, 4, 2); }, {"pack of 'B'", "2 dimensions from dim 1", "use 1..1"});
  expect_error([&] { s.pack(m.B, {m.D}, 1, 8); }, {"pack of 'B'", "stage 'D' does not read it", "readers: C"});
}

TEST(Errors, VectorizeTooWideExtent) {
  Mm m;
  Schedule s({m.D});
  // Extents are compile-time constants here; a vector longer than 64 lanes is refused.
  Tensor E = compute({1000}, [&](Var i) { return m.A(i % 32, 0) * 2.0f; }, "E");
  Schedule t({E});
  expect_error([&] { t[E].vectorize("i"); }, {"vectorize", "stage 'E'", "axis 'i'", "extent 1000", "split"});
}

TEST(Errors, ReorderAxisOfAnotherStage) {
  Mm m;
  Schedule s({m.D});
  expect_error([&] { s[m.D].reorder({"j", "k"}); }, {"reorder", "'k'", "stage 'D'", "its axes are i, j"});
}

TEST(Errors, SplitFactorNotPositive) {
  Mm m;
  Schedule s({m.D});
  expect_error([&] { s[m.C].split("i", 0); }, {"split", "stage 'C'", "axis 'i'", "factor is 0", "positive"});
  expect_error([&] { s[m.C].split_nparts("j", -2); }, {"nparts is -2"});
}

TEST(Errors, ComputeAtAxisNotInConsumer) {
  Mm m;
  Schedule s({m.D});
  expect_error([&] { s[m.C].compute_at(s[m.D], "k"); },
               {"compute_at", "'k' is not a loop axis of consumer 'D'", "legal places", "i, j"});
  Tensor E = compute({32, 24}, [&](Var i, Var j) { return m.A(i, 0) * 2.0f; }, "E");
  Schedule t({m.D, E});
  expect_error([&] { t[m.C].compute_at(t[E], "i"); }, {"'E' does not read 'C'", "consumers: D"});
}

TEST(Errors, ComputeAtWithAReaderOutside) {
  Mm m;
  Tensor E = compute({32, 24}, [&](Var i, Var j) { return m.C(i, j) * 2.0f; }, "E");
  Schedule s({m.D, E});
  s[m.C].compute_at(s[m.D], "i");
  expect_error([&] { lower(s, {m.A, m.B, m.D, E}); }, {"'E' also reads it outside that loop"});
}

TEST(Errors, InlineReduction) {
  Mm m;
  Schedule s({m.D});
  expect_error([&] { s[m.C].compute_inline(); }, {"compute_inline", "stage 'C'", "reduction", "compute_at"});
}

TEST(Errors, InlineOutput) {
  Mm m;
  Schedule s({m.D});
  expect_error([&] { s[m.D].compute_inline(); }, {"'D' is an output"});
}

TEST(Errors, FuseNonAdjacent) {
  Mm m;
  Schedule s({m.D});
  s[m.C].split("i", 4);
  expect_error([&] { s[m.C].fuse("i.outer", "j"); },
               {"fuse", "stage 'C'", "'i.outer' and 'j' are not adjacent", "reorder them first"});
  expect_error([&] { s[m.C].fuse("j", "k"); }, {"mix a spatial and a reduction axis"});
}

TEST(Errors, BindTwice) {
  Mm m;
  Schedule s({m.D});
  s[m.D].bind("i", "blockIdx.x");
  expect_error([&] { s[m.D].bind("i", "threadIdx.x"); }, {"bind", "axis 'i'", "already bound to blockIdx.x"});
  expect_error([&] { s[m.D].bind("j", "blockIdx.x"); }, {"blockIdx.x is already bound to axis 'i'"});
  expect_error([&] { s[m.D].bind("j", "warp.x"); }, {"unknown thread tag 'warp.x'"});
}

TEST(Errors, AxisGoneAfterSplit) {
  Mm m;
  Schedule s({m.D});
  s[m.D].split("i", 4);
  expect_error([&] { s[m.D].parallel("i"); }, {"no loop axis 'i' any more", "i.outer, i.inner, j"});
}

TEST(Errors, UnknownStage) {
  Mm m;
  Schedule s({m.D});
  expect_error([&] { s["Q"]; }, {"no stage named 'Q'", "A, B, C, D"});
}

TEST(Errors, ParallelReduction) {
  Mm m;
  Schedule s({m.D});
  expect_error([&] { s[m.C].parallel("k"); }, {"parallel", "reduction axis"});
}

TEST(Errors, CacheWriteAfterTransform) {
  Mm m;
  Schedule s({m.D});
  s[m.C].split("i", 4);
  expect_error([&] { s.cache_write(m.C, "local"); }, {"cache_write", "before scheduling it"});
}

TEST(Errors, CallWithWrongShapesOrDtypes) {
  Mm m;
  Module mod = build(Schedule({m.D}), {m.A, m.B, m.D});
  Buffer a({32, 16}, float32), b({16, 24}, float32), d({32, 24}, float32);
  expect_error([&] { mod(a, b); }, {"takes 3 buffers, got 2"});
  expect_error([&] { mod(a, Buffer({16, 25}, float32), d); }, {"argument 1 ('B') must be float32[16, 24]", "float32[16, 25]"});
  expect_error([&] { mod(a, b, Buffer({32, 24}, float64)); }, {"('D') must be float32[32, 24]", "float64[32, 24]"});
  expect_error([&] { mod(a, Buffer(), d); }, {"empty Buffer"});
}

TEST(Errors, BuildArguments) {
  Mm m;
  Schedule s({m.D});
  expect_error([&] { build(s, {m.A, m.D}); }, {"input 'B' is read", "not in the argument list"});
  expect_error([&] { build(s, {m.A, m.B}); }, {"output 'D' must be in the argument list"});
}

TEST(Errors, BadTensorDefinitions) {
  Tensor A = placeholder({4, 4}, float32, "A");
  // An input may hold no elements (a graph's empty shape tensor); a computed tensor may not.
  EXPECT_EQ(placeholder({4, 0}, float32, "Z").shape()[1], 0);
  expect_error([&] { compute({4, 0}, [&](Var i, Var j) { return A(i, j); }, "Z"); }, {"dimension 1 has extent 0"});
  expect_error([&] { A(1); }, {"'A' has 2 dimensions but is indexed with 1"});
  expect_error([&] { A(Expr(1.5f), Expr(0)); }, {"index 0 of tensor 'A' has type float32"});
  IterVar k = reduce_axis(4, "k");
  expect_error([&] { compute({4}, [&](Var i) { return A(i, k); }, "bad"); }, {"uses variable 'k'"});
  expect_error([&] { compute({4}, [&](Var i) { return sum(A(i, k), {k}) + 1.0f; }, "bad2"); },
               {"a reduction must be the whole body"});
  expect_error([&] { reduce_axis(0, "r"); }, {"reduce_axis 'r' has extent 0"});
  expect_error([&] { ops::matmul(A, placeholder({5, 4}, float32, "B")); }, {"disagree on the reduction length: 4 vs 5"});
  expect_error([&] { ops::conv2d_nchw(placeholder({1, 3, 4, 4}, float32, "X"), placeholder({8, 3, 7, 7}, float32, "W")); },
               {"the height output size is -2", "does not fit"});
}

TEST(Errors, ReadsOutsideATensorAreCaughtWhenLowered) {
  // A 3x3 blur as a new user writes it: its output as large as its input, so the window
  // reads one element past each edge. The read, the index and its range are named.
  Tensor In = placeholder({16, 20}, float32, "In");
  auto blur = [&](int64_t h, int64_t w, const char* name) {
    return compute({h, w}, [&](Var y, Var x) {
      Expr s = In(y, x);
      for (int d = 1; d < 3; ++d) s = s + In(y + d, x) + In(y, x + d);
      return s;
    }, name);
  };
  Tensor Bad = blur(16, 20, "Bad");
  expect_error([&] { build(Schedule({Bad}), {In, Bad}); },
               {"'Bad' reads In[", "index 0, (i + 1), ranges over [1, 16]", "In has 16 elements in dimension 0",
                "valid: 0 to 15"});
  Tensor Good = blur(14, 18, "Good");
  EXPECT_NO_THROW(build(Schedule({Good}), {In, Good}));
  // A select evaluates both branches, so it guards nothing: clamped indices build, a read
  // "guarded" by a select is named with the reason. A reduction's `where` does guard.
  Tensor Clamped = compute({16, 20}, [&](Var y, Var x) {
    return select(x < 19, In(y, min(x + 1, Expr(19))), 0.0f) + In(max(y - 1, Expr(0)), x);
  }, "Clamped");
  EXPECT_NO_THROW(build(Schedule({Clamped}), {In, Clamped}));
  Tensor Selected = compute({16, 20}, [&](Var y, Var x) { return select(x < 19, In(y, x + 1), 0.0f); }, "Selected");
  expect_error([&] { build(Schedule({Selected}), {In, Selected}); },
               {"ranges over [1, 20]", "a select evaluates both of its branches"});
  IterVar r = reduce_axis(8, "r");
  Tensor Where = compute({16}, [&](Var y) { return sum(In(y, r + 14), {r}, r < 6); }, "Where");
  EXPECT_NO_THROW(build(Schedule({Where}), {In, Where}));
  Tensor Leaky = compute({16}, [&](Var y) { return sum(In(y, r + 14), {r}, r < 7); }, "Leaky");
  expect_error([&] { build(Schedule({Leaky}), {In, Leaky}); },
               {"ranges over [14, 20] where its reduction's condition holds"});
  // A condition that couples two variables proves nothing either way: no error is claimed.
  IterVar q = reduce_axis(20, "q");
  Tensor Coupled = compute({16}, [&](Var y) { return sum(In(y, y + q), {q}, y + q < 20); }, "Coupled");
  EXPECT_NO_THROW(build(Schedule({Coupled}), {In, Coupled}));
}

TEST(Errors, CheckedBuildsStopAtAReadOutsideWhenItHappens) {
  // Reads lowering cannot prove inside: a gather through an index tensor, and an index
  // whose range interval arithmetic overestimates (x % 2 + x, written with a division). A
  // checked build runs them, vectorized too, and stops with the message at the first read
  // outside; a plain build does not check them.
  Tensor In = placeholder({16}, float32, "In");
  Tensor Idx = placeholder({16}, int32, "Idx");
  auto odd = [](Expr x) { return x - x / 2 * 2 + x; };
  Tensor Gather = compute({16}, [&](Var i) { return In(Idx(i)) + In(odd(i) / 2); }, "Gather");
  Schedule s({Gather});
  auto [o, v] = s[Gather].split("i", 8);
  s[Gather].vectorize(v);
  BuildOptions checked;
  checked.lower.check_bounds = true;
  Module m = build(s, {In, Idx, Gather}, checked);
  EXPECT_EQ(m.lowered().index_errors.size(), 2u);
  Buffer in = ref::random({16}, 1), idx({16}, int32), out({16}, float32);
  for (int i = 0; i < 16; ++i) idx.set(i, 15 - i);
  m({in, idx, out});
  for (int i = 0; i < 16; ++i) EXPECT_FLOAT_EQ(float(out.get(i)), float(in.get(15 - i) + in.get((i % 2 + i) / 2)));
  idx.set(11, 16);
  EXPECT_DEATH(m({in, idx, out}), "checked kernel stopped: 'Gather' reads In\\[Idx\\(i\\)\\].*index 0, Idx\\(i\\), "
                                  "was outside when the kernel ran, but In has 16 elements");
  Tensor Past = compute({16}, [&](Var i) { return In(odd(i)); }, "Past");  // 16 at i = 15
  BuildOptions checked_gpu = checked;
  checked_gpu.target = Target::parse("opencl");
  expect_error([&] { build(Schedule({Past}), {In, Past}, checked_gpu); }, {"a checked build is for CPU targets"});
  Module p = build(Schedule({Past}), {In, Past}, checked);
  EXPECT_DEATH(p({in, out}), "checked kernel stopped: 'Past' reads In\\[");
  EXPECT_TRUE(build(Schedule({Past}), {In, Past}).lowered().index_errors.empty());
}

TEST(Errors, UnknownPragmaAndTarget) {
  Mm m;
  Schedule s({m.D});
  expect_error([&] { s[m.D].pragma("i", "unroll_everything", 1); }, {"unknown pragma 'unroll_everything'"});
  expect_error([&] { Target::parse("cuda9"); }, {"unknown target 'cuda9'", "\"llvm\"", "\"cuda -arch=sm_XY\"", "\"opencl\""});
  expect_error([&] { Target::parse("cuda -arch=sm_61"); }, {"unknown architecture 'sm_61'"});
  expect_error([&] { Target::parse("llvm -O3"); }, {"unknown option '-O3'"});
}

TEST(Errors, InternalErrorsSayTheyAreBugs) {
  InternalError e("x");
  EXPECT_NE(std::string(e.what()).find("this is a bug in Tessel"), std::string::npos);
}
