// The autotuner: search space, replay of sampled and mutated candidates, the cost model,
// fault isolation, the log (resume, corrupt lines), deploy-time lookup, many tasks.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
#include <map>
#include <random>
#include <set>

#include "autotune/CostModel.h"
#include "autotune/Features.h"
#include "autotune/Records.h"
#include "autotune/TaskState.h"
#include "autotune/SearchSpace.h"
#include "autotune/Tracer.h"
#include "passes/Lower.h"
#include "schedule/ScheduleState.h"
#include "reference.h"

using namespace tessel;
using namespace tessel::autotune;

namespace {

std::string tmp(const std::string& name) {
  std::string p = std::string(TESSEL_TEST_TMP) + "/" + name;
  std::remove(p.c_str());
  return p;
}

// Runs a schedule and the default schedule on the same inputs; returns the max error.
double error_vs_default(const Workload& w, const std::vector<Step>& steps) {
  size_t n_in = w.args.size() - w.outputs.size();
  std::vector<Buffer> inputs;
  for (size_t i = 0; i < n_in; ++i) inputs.push_back(ref::random(w.args[i].shape(), 10 + i, w.args[i].dtype()));
  auto got = ref::run(Schedule::replay(w.outputs, steps), w.args, inputs);
  auto want = ref::run(ops::default_schedule(w.outputs), w.args, inputs);
  double err = 0;
  for (size_t i = 0; i < got.size(); ++i) err = std::max(err, max_relative_error(got[i], want[i]));
  return err;
}

// Up to `n` of `tries` fresh samples whose steps contain `step` (a JSON fragment).
std::vector<Candidate> samples_with_step(const SearchSpace& space, uint64_t seed, const std::string& step, size_t n,
                                         int tries) {
  std::mt19937_64 rng(seed);
  std::vector<Candidate> out;
  for (int i = 0; i < tries && out.size() < n; ++i) {
    Candidate c = space.sample(rng);
    if (c.key.find(step) != std::string::npos) out.push_back(std::move(c));
  }
  return out;
}

// Each candidate replays from its decisions; it and a mutant of it give the reference answer.
void expect_correct_with_mutants(const SearchSpace& space, const Workload& w, const std::vector<Candidate>& cands) {
  std::mt19937_64 rng(9);
  for (auto& cand : cands) {
    ASSERT_EQ(space.replay(cand.decisions, rng).key, cand.key);
    ASSERT_LE(error_vs_default(w, cand.steps), 1e-3) << w.key() << ": " << cand.key;
    Candidate mut = space.mutate(cand, rng);
    ASSERT_LE(error_vs_default(w, mut.steps), 1e-3) << w.key() << ": " << mut.key;
  }
}

TuneOptions small(int trials) {
  TuneOptions o;
  o.trials = trials;
  o.per_round = 4;
  o.population = 32;
  o.generations = 2;
  o.repeat = 1;
  o.min_repeat_ms = 1;
  o.remeasure_top = 1;
  o.timeout = 20;
  return o;
}

}  // namespace

struct SpaceCase {
  const char* op;
  const char* shape;
  size_t min_sketches;
  size_t min_distinct;  // distinct programs among 12 samples and 12 mutations (with AVX-512's 16 lanes, a space
                        // of one vector of input channels has fewer)
};

class Space : public ::testing::TestWithParam<SpaceCase> {};

TEST_P(Space, SampledAndMutatedCandidatesReplayAndAreCorrect) {
  SpaceCase c = GetParam();
  Workload w = make_workload(c.op, parse_shape(c.shape));
  SearchSpace space(w, Target::host());
  EXPECT_GE(space.sketch_names().size(), c.min_sketches);
  std::mt19937_64 rng(5);
  std::set<std::string> keys;
  for (int i = 0; i < 12; ++i) {
    Candidate cand = space.sample(rng);
    Candidate again = space.replay(cand.decisions, rng);
    ASSERT_EQ(again.key, cand.key) << "decisions must replay to the same steps";
    Candidate mut = space.mutate(cand, rng);
    for (const Candidate* x : {&cand, &mut}) {
      keys.insert(x->key);
      ASSERT_LE(error_vs_default(w, x->steps), 1e-3) << c.op << ": " << x->key;
    }
  }
  EXPECT_GE(keys.size(), c.min_distinct) << "samples and mutations should differ";
}

INSTANTIATE_TEST_SUITE_P(Autotune, Space,
                         ::testing::Values(SpaceCase{"matmul", "M=49,N=40,K=33", 3, 16},
                                           SpaceCase{"conv2d", "C=8,H=9,W=9,K=16,R=3,S=3,pad=1", 3, 16},
                                           SpaceCase{"conv2d", "C=8,H=9,W=9,K=16,R=3,S=3,pad=1,bias_relu=1", 2, 16},
                                           SpaceCase{"conv2d_nchwc", "C=16,H=7,W=7,K=32,R=3,S=3,pad=1", 3, 16},
                                           SpaceCase{"conv2d_winograd", "C=16,H=10,W=10,K=16,m=2,cb=8,kb=8", 1, 12},
                                           SpaceCase{"conv2d_winograd_nhwc", "C=16,H=9,W=9,K=16,m=4,cb=8,kb=8", 1, 12},
                                           SpaceCase{"conv2d_nhwc", "C=8,H=9,W=9,K=24,R=3,S=3,pad=1,stride=2", 3, 16},
                                           SpaceCase{"conv2d", "C=16,H=13,W=14,K=24,R=1,S=1,stride=2", 3, 12},
                                           SpaceCase{"depthwise_conv2d", "C=24,H=9,W=9,R=3,S=3,pad=1,stride=2", 3, 16},
                                           SpaceCase{"depthwise_conv2d_nhwc", "C=24,H=9,W=9,R=3,S=3,pad=1", 3, 16},
                                           SpaceCase{"dense", "M=9,N=40,K=24", 2, 16},
                                           SpaceCase{"softmax", "rows=6,cols=100", 1, 12},
                                           SpaceCase{"layer_norm", "rows=5,cols=48", 1, 12},
                                           SpaceCase{"max_pool2d", "C=4,H=9,W=9,R=3,stride=2,pad=1", 1, 4}));

TEST(Autotune, WinogradTransformsUnrollTheRowsOfTheirConstantMatrices) {
  // Each transform picks a row of B^T or A^T by a select on one of its axes (the output's
  // by the row modulo the tile; 10 rows are not a multiple of it). Every candidate unrolls
  // those loops, so no select on a row index is left in the program, and the input
  // transform is never recomputed inside the products' loops.
  Workload w = make_workload("conv2d_winograd", parse_shape("C=16,H=10,W=10,K=16,m=4,cb=8,kb=8"));
  SearchSpace space(w, Target::host());
  std::map<std::string, std::vector<std::pair<std::string, int64_t>>> rows;
  for (auto& st : space.stages())
    if (!st.row_axes.empty()) rows[st.name] = st.row_axes;
  using Rows = std::vector<std::pair<std::string, int64_t>>;
  EXPECT_EQ(rows["conv.nchwc.rows"], (Rows{{"m", 0}}));
  EXPECT_EQ(rows["conv.nchwc.input"], (Rows{{"i", 0}, {"j", 0}}));  // j: the rows' row
  EXPECT_EQ(rows["conv.nchwc.columns"], (Rows{{"m", 0}}));
  EXPECT_EQ(rows["conv.nchwc"], (Rows{{"k", 4}, {"l", 4}}));  // l: the columns' row
  EXPECT_EQ(rows["conv"], (Rows{{"k", 4}, {"l", 4}}));      // the NCHW copy reads conv.nchwc's
  EXPECT_EQ(rows.size(), 5u);
  std::mt19937_64 rng(3);
  for (int i = 0; i < 12; ++i) {
    Candidate c = i % 2 ? space.mutate(space.sample(rng), rng) : space.sample(rng);
    Schedule s = Schedule::replay(w.outputs, c.steps);
    std::string ir = lower(s, w.args, "k").str();
    EXPECT_EQ(ir.find("=="), std::string::npos) << s.to_cpp();
    EXPECT_EQ(c.key.find(R"(["compute_at","conv.nchwc.input","conv.nchwc.product")"), std::string::npos) << c.key;
    // The products' lanes run over the channel block: their other axes are shorter than a vector.
    EXPECT_EQ(c.key.find(R"(["reorder_storage","conv.nchwc.product")"), std::string::npos) << c.key;
  }
}

TEST(Autotune, ConvBiasReluFusesTheEpilogue) {
  Workload w = make_workload("conv2d", parse_shape("C=8,H=9,W=9,K=16,R=3,S=3,pad=1,bias_relu=1"));
  SearchSpace space(w, Target::host());
  bool fused = false;
  for (auto& st : space.stages()) fused |= st.name == "conv" && st.fused_consumer == "relu";
  EXPECT_TRUE(fused);
  std::mt19937_64 rng(1);
  Candidate c = space.sample(rng);
  EXPECT_NE(c.key.find(R"(["compute_at","conv","relu")"), std::string::npos) << c.key;
}

TEST(Autotune, GemmSpacePacksTheStridedOperandIntoBlocks) {
  // B[k, j] is read along the vector axis j with a row stride of N: some candidates copy it
  // into [N / b][K][b] blocks first. Those must be correct too, tails included (72 % 32).
  Workload w = make_workload("matmul", parse_shape("M=33,N=72,K=20"));
  SearchSpace space(w, Target::host());
  auto packed = samples_with_step(space, 7, R"(["pack","B",)", 3, 40);
  for (auto& c : packed) ASSERT_LE(error_vs_default(w, c.steps), 1e-3) << c.key;
  EXPECT_EQ(packed.size(), 3u);
}

TEST(Autotune, PackedInputsMayBePackedInsideTheirReadersTiles) {
  // An input packed inside the kernel (the right-hand side of a GEMM that is not marked
  // constant) is packed once at the root, or inside its reader's outermost tile loops, just
  // the part the tile reads: those candidates replay, mutate and give the reference answer.
  struct Case {
    const char* op;
    const char* shape;
    const char* input;
  };
  for (Case c : {Case{"matmul", "M=33,N=72,K=20", "B"}, Case{"batch_matmul", "B=2,M=5,N=40,K=8", "Bm"}}) {
    Workload w = make_workload(c.op, parse_shape(c.shape));
    SearchSpace space(w, Target::host());
    auto inside = samples_with_step(space, 5, std::string(R"(["compute_at",")") + c.input + ".pack\"", 3, 400);
    EXPECT_EQ(inside.size(), 3u) << c.op;
    expect_correct_with_mutants(space, w, inside);
  }
}

TEST(Autotune, SketchParallelLoopsShareEvenlyAmongTheCores) {
  // A 7x7 output on 2 cores: 7 rows of tiles (or 3, or 5) keep one core idle for the last
  // round. Every sampled parallel loop is a multiple of the cores or at least 8 rounds long.
  Target t = Target::host();
  t.num_cores = 2;
  for (const char* shape : {"C=64,H=7,W=7,K=64,R=1,S=1", "C=32,H=14,W=14,K=24,R=3,S=3,pad=1,stride=2"}) {
    Workload w = make_workload("conv2d_nhwc", parse_shape(shape));
    SearchSpace space(w, t);
    std::mt19937_64 rng(3);
    int checked = 0;
    for (int i = 0; i < 40; ++i) {
      Candidate c = space.sample(rng);
      if (c.decisions.empty()) continue;
      Schedule s = Schedule::replay(w.outputs, c.steps);
      for (const Step& st : c.steps) {
        if (st.kind != Step::Parallel || st.stage.find(".pad") != std::string::npos) continue;
        int64_t e = axis_extent(s, st.stage, st.axes[0]);
        EXPECT_TRUE(t.shares_evenly(e) && e >= 2) << shape << ": parallel loop of " << e << " in " << c.key;
        ++checked;
      }
    }
    EXPECT_GT(checked, 20) << shape;
  }
}

TEST(Autotune, OneByOneNchwConvolutionsMayTileTheirPixelsAsOneAxis) {
  // A 1x1 stride-1 NCHW convolution is a GEMM over the image's pixels: the rows and columns
  // may be fused into one vector axis, tiled in whole vectors (a power of two of them) and
  // outermost. Those
  // candidates, and their mutants, give the reference answer. At a stride they fuse only
  // over a subsampled copy of the input (two de-interleaves, phase 0 of each read). Where
  // the input's pixels are not consecutive otherwise (padding, a wider window) the two axes
  // are never fused. At stride 1 the input's pixels may be packed in blocks of the register
  // block's pixels (pack over the two image dimensions), at the root or in the outer tiles.
  Target t = Target::host();
  Workload w = make_workload("conv2d", parse_shape("C=12,H=8,W=8,K=20,R=1,S=1"));
  SearchSpace space(w, t);
  auto fused = samples_with_step(space, 3, R"(["fuse","conv",["k","l"]])", 4, 200);
  ASSERT_EQ(fused.size(), 4u);
  expect_correct_with_mutants(space, w, fused);
  auto panels = samples_with_step(space, 4, R"(["pack","X",["conv"],2,)", 4, 400);
  ASSERT_EQ(panels.size(), 4u);
  expect_correct_with_mutants(space, w, panels);
  for (const Candidate& c : panels)
    for (const Step& st : c.steps)
      if (st.kind == Step::Pack) EXPECT_EQ(st.ints, (std::vector<int64_t>{2, st.ints[1], 2})) << c.key;  // dims = 2
  fused.insert(fused.end(), panels.begin(), panels.end());
  for (const Candidate& c : fused) {
    Schedule s = Schedule::replay(w.outputs, c.steps);
    for (const Step& st : c.steps)
      if (st.kind == Step::Vectorize && st.stage == "conv") {
        int64_t lanes = t.vector_bytes / 4, extent = axis_extent(s, st.stage, st.axes[0]), vectors = extent / lanes;
        EXPECT_TRUE(extent % lanes == 0 && (vectors & (vectors - 1)) == 0) << extent << " lanes: " << c.key;
      }
  }
  Workload strided = make_workload("conv2d", parse_shape("C=12,H=16,W=15,K=20,R=1,S=1,stride=2"));
  SearchSpace strided_space(strided, t);
  auto subsampled = samples_with_step(strided_space, 3, R"(["fuse","conv",["k","l"]])", 3, 300);
  ASSERT_EQ(subsampled.size(), 3u);
  expect_correct_with_mutants(strided_space, strided, subsampled);
  for (const Candidate& c : subsampled)
    EXPECT_NE(c.key.find(R"(["subsample","X.sub",["conv"],2,2])"), std::string::npos) << c.key;
  // The subsampled copy is dense, so its panels may be packed like a stride-1 layer's input.
  auto packed = samples_with_step(strided_space, 5, R"(["pack","X.sub.sub",["conv"],2,)", 2, 400);
  ASSERT_EQ(packed.size(), 2u);
  expect_correct_with_mutants(strided_space, strided, packed);
  for (const char* shape : {"C=12,H=8,W=8,K=20,R=3,S=3,pad=1", "C=12,H=8,W=8,K=20,R=1,S=1,pad=1"})
    EXPECT_TRUE(samples_with_step(SearchSpace(make_workload("conv2d", parse_shape(shape)), t), 3,
                                  R"(["fuse","conv",["k","l"]])", 1, 100)
                    .empty())
        << shape;
}

TEST(Autotune, ConstantOperandsAreRewrittenIntoBlockedLayouts) {
  // Weights (and a matmul's B marked constant) may be stored blocked along the vector axis,
  // prepared once outside the kernel; in NCHW and depthwise convolutions the vector axis
  // may then be the channels, with the accumulators stored channels innermost. Every such
  // candidate replays and gives the reference answer, tails included.
  struct Case {
    const char* op;
    const char* shape;
    const char* input;
  };
  for (Case c : {Case{"conv2d", "C=6,H=11,W=11,K=24,R=3,S=3,pad=1,stride=2", "Wt"},
                 Case{"conv2d", "C=8,H=7,W=7,K=20,R=1,S=1,bias_relu=1", "Wt"},
                 Case{"conv2d_nhwc", "C=8,H=9,W=9,K=40,R=3,S=3,pad=1", "Wt"},
                 Case{"depthwise_conv2d", "C=24,H=9,W=9,R=3,S=3,pad=1,stride=2", "Wt"},
                 Case{"depthwise_conv2d_nhwc", "C=20,H=9,W=9,R=3,S=3,pad=1,stride=2", "Wt"},
                 Case{"dense", "M=9,N=40,K=24", "W"}, Case{"matmul", "M=9,N=40,K=24,const_b=1", "B"},
                 Case{"batch_matmul", "B=2,M=5,N=24,K=8,const_b=1", "Bm"}}) {
    Workload w = make_workload(c.op, parse_shape(c.shape));
    SearchSpace space(w, Target::host());
    auto rewritten = samples_with_step(space, 3, std::string(R"(["rewrite_layout",")") + c.input + "\"", 4, 200);
    EXPECT_EQ(rewritten.size(), 4u) << c.op << " " << c.shape;
    expect_correct_with_mutants(space, w, rewritten);
  }
  // Without the flag a matmul's B is an input like any other: packed per call, never rewritten.
  Workload plain = make_workload("matmul", parse_shape("M=9,N=40,K=24"));
  EXPECT_TRUE(samples_with_step(SearchSpace(plain, Target::host()), 3, "rewrite_layout", 1, 100).empty());
  EXPECT_EQ(plain.key(), "matmul[K=24,M=9,N=40]float32");
}

TEST(Autotune, MicroKernelSketchUnrollsItsBlockAndInnermostReduction) {
  // The micro-kernel form keeps the whole reduction on a register block: the cache-write
  // stage is computed inside the consumer's second tile level, its S2 level is 1, and the
  // block with the channel loop around it (ici, 16 here) is straight-line code.
  Workload w = make_workload("conv2d_nchwc", parse_shape("C=32,H=7,W=7,K=32,R=3,S=3,pad=1"));
  SearchSpace space(w, Target::host());
  auto micro = samples_with_step(space, 11, R"(["unroll","conv.local","ici.inner"])", 3, 60);
  for (auto& c : micro) {
    std::map<std::string, int64_t> factor;  // split factor = extent of the inner part
    for (const Step& st : c.steps)
      if (st.kind == Step::Split && st.stage == "conv.local") factor[st.axes[0]] = st.ints[0];
    for (std::string x : {"j", "k", "l", "m"})  // S2 * S3 == S3
      EXPECT_EQ(factor[x + ".inner"], factor[x + ".inner.inner"]) << x << ": " << c.key;
    ASSERT_LE(error_vs_default(w, c.steps), 1e-3) << c.key;
  }
  EXPECT_EQ(micro.size(), 3u);
}

TEST(Autotune, SketchCopiesARegisterBlockOutUnrolled) {
  // A cache-write block computed at the consumer's second tile level, of whole vectors along the
  // output's rows and within the registers, is copied out by unrolled statements (in a loop the
  // block would live in memory): the consumer's block loops other than the vector are unrolled.
  Workload w = make_workload("conv2d", parse_shape("C=3,H=64,W=64,K=32,R=3,S=3,stride=2,pad=1"));
  SearchSpace space(w, Target::host());
  auto unrolled = samples_with_step(space, 5, R"(["unroll","conv",)", 3, 200);
  for (auto& c : unrolled) {
    std::string ir = build(Schedule::replay(w.outputs, c.steps), w.args).lowered().str();
    EXPECT_FALSE(ref::copies_local_in_a_loop(ir)) << c.key << "\n" << ir;
    ASSERT_LE(error_vs_default(w, c.steps), 1e-3) << c.key;
  }
  EXPECT_EQ(unrolled.size(), 3u);
}

TEST(Autotune, TileSizesNeedNotDivide) {
  // Extents 7, 49 and 1000: a divisor-only space would be tiny for 7 and 49.
  Workload w = make_workload("matmul", parse_shape("M=7,N=1000,K=49"));
  SearchSpace space(w, Target::host());
  std::mt19937_64 rng(3);
  bool non_dividing = false;
  for (int i = 0; i < 40 && !non_dividing; ++i)
    for (auto& d : space.sample(rng).decisions)
      if (d.kind == Decision::Tile) {
        int64_t p = 1;
        for (int64_t f : d.value) p *= f;
        non_dividing |= d.range % p != 0;
      }
  EXPECT_TRUE(non_dividing);
}

TEST(Autotune, FreshSamplesMostlyKeepRegisterAndCacheWriteBlocksSmall) {
  // GEMM 1024: the accumulator block (S3 of i times S3 of j in vectors) within the target's
  // vector registers less four, and a cache-write block within 128 KiB, for most samples
  // (one in ten goes unbounded). Without the bounds about half the blocks were larger.
  // Most rows of the block are two vectors wide (16-24 in 100 samples before they were
  // preferred).
  Workload w = make_workload("matmul", parse_shape("M=1024,N=1024,K=1024"));
  for (int registers : {16, 32}) {
    Target t = Target::host();
    t.vector_registers = registers;
    SearchSpace space(w, t);
    std::mt19937_64 rng(registers);
    int lanes = t.vector_bytes / 4, n = 100, in_regs = 0, two_vector_rows = 0, with_local = 0, small_local = 0;
    for (int i = 0; i < n; ++i) {
      Candidate c = space.sample(rng);
      std::vector<const Decision*> spatial;  // the first two 3-level tiles: i and j
      for (auto& d : c.decisions)
        if (d.kind == Decision::Tile && d.value.size() == 3 && spatial.size() < 2) spatial.push_back(&d);
      ASSERT_EQ(spatial.size(), 2u);
      int64_t regs = spatial[0]->value[2] * ((spatial[1]->value[2] + lanes - 1) / lanes);
      in_regs += regs >= 4 && regs <= registers - 4;
      two_vector_rows += spatial[1]->value[2] == 2 * lanes;
      std::string ir = lower(Schedule::replay(w.outputs, c.steps), w.args).str();
      size_t at = ir.find("allocate C.local[float32 * ");
      if (at == std::string::npos) continue;
      ++with_local;
      small_local += std::stoll(ir.substr(at + 27)) * 4 <= 128 << 10;
    }
    EXPECT_GE(in_regs, n * 8 / 10) << registers << " registers";
    EXPECT_GE(two_vector_rows, n / 2) << registers << " registers";
    EXPECT_GT(with_local, n / 4);
    EXPECT_GE(small_local, with_local * 8 / 10) << registers << " registers";
  }
}

// A register block of rows of one vector is reshaped into rows of two with half as many
// rows (and back) by one mutation: the two single steps between such blocks are both slower,
// so the search would not keep either.
TEST(Autotune, MutationsReshapeTheRegisterBlock) {
  // An AVX2 target on any host (the kernels run anywhere on x86): with AVX-512's 16-lane
  // vectors 6x1-vector blocks are too rare a sample, and a conv block of 16 channels is
  // only one vector wide.
  Target avx2 = Target::host();
  avx2.vector_bytes = 32;
  avx2.vector_registers = 16;
  Workload w = make_workload("matmul", parse_shape("M=1024,N=1024,K=1024"));
  SearchSpace space(w, avx2);
  int64_t lanes = avx2.vector_bytes / 4;
  std::mt19937_64 rng(5);
  auto block = [](const Candidate& c) {  // innermost levels of the first two 3-level tiles: i, j
    std::vector<int64_t> b;
    for (auto& d : c.decisions)
      if (d.kind == Decision::Tile && d.value.size() == 3 && b.size() < 2) b.push_back(d.value[2]);
    return b;
  };
  for (int64_t rows : {6, 4}) {
    Candidate c;
    for (int i = 0; i < 2000 && !(block(c).size() == 2 && block(c)[0] == rows && block(c)[1] == lanes); ++i)
      c = space.sample(rng);
    ASSERT_EQ(block(c), (std::vector<int64_t>{rows, lanes})) << "no sample with a " << rows << "x1-vector block";
    int reshaped = 0;
    for (int i = 0; i < 200; ++i)
      reshaped += block(space.mutate(c, rng)) == std::vector<int64_t>{(rows + 1) / 2, 2 * lanes};
    EXPECT_GE(reshaped, 10) << rows << " rows of one vector";
  }
  // Conv 7x7: 7 columns of one vector become 2 x 4 columns of two (the last 4 guarded),
  // and the kernel still gives the reference answer.
  Workload conv = make_workload("conv2d_nchwc", parse_shape("C=16,H=7,W=7,K=32,R=3,S=3,pad=1"));
  SearchSpace conv_space(conv, avx2);
  auto tiles = [](const Candidate& c) {  // the 3-level tiles: i, j, k, l, m
    std::vector<std::vector<int64_t>> t;
    for (auto& d : c.decisions)
      if (d.kind == Decision::Tile && d.value.size() == 3) t.push_back(d.value);
    return t;
  };
  Candidate c;
  for (int i = 0; i < 3000; ++i) {
    c = conv_space.sample(rng);
    auto t = tiles(c);
    if (t.size() >= 5 && t[3] == std::vector<int64_t>{1, 1, 7} && t[4][2] == lanes) break;
  }
  ASSERT_EQ(tiles(c).at(3), (std::vector<int64_t>{1, 1, 7})) << c.key;
  Candidate m;
  for (int i = 0; i < 400; ++i) {
    m = conv_space.mutate(c, rng);
    if (tiles(m).at(3) == std::vector<int64_t>{1, 2, 4}) break;
  }
  ASSERT_EQ(tiles(m).at(3), (std::vector<int64_t>{1, 2, 4})) << "no reshape of " << c.key;
  EXPECT_EQ(tiles(m).at(4)[2], 2 * lanes);
  EXPECT_LE(error_vs_default(conv, m.steps), 1e-3) << m.key;
}

// A tile mutation may move a factor from one level to another (Ansor's), keeping the tile's
// size: a redraw of one level always changes it, and near the best programs that loses.
TEST(Autotune, MutationsMoveAFactorBetweenTileLevels) {
  Workload w = make_workload("matmul", parse_shape("M=256,N=256,K=256"));
  SearchSpace space(w, Target::host());
  std::mt19937_64 rng(3);
  auto product = [](const Decision& d) {
    int64_t p = 1;
    for (int64_t v : d.value) p *= v;
    return p;
  };
  int moved = 0;
  Candidate example;
  for (int s = 0; s < 8; ++s) {
    Candidate c = space.sample(rng);
    for (int i = 0; i < 100; ++i) {
      Candidate m = space.mutate(c, rng);
      if (m.decisions.size() != c.decisions.size()) continue;
      std::vector<size_t> changed;
      for (size_t k = 0; k < c.decisions.size(); ++k)
        if (!(m.decisions[k] == c.decisions[k])) changed.push_back(k);
      if (changed.size() != 1) continue;
      const Decision &a = c.decisions[changed[0]], &b = m.decisions[changed[0]];
      if (a.kind == Decision::Tile && product(a) == product(b)) ++moved, example = m;
    }
  }
  EXPECT_GE(moved, 20) << "of 800 mutants, " << moved << " moved a factor between two levels of a tile";
  ASSERT_FALSE(example.steps.empty());
  EXPECT_LE(error_vs_default(w, example.steps), 1e-3) << example.key;
}

TEST(Autotune, ParallelLoopsGiveEveryCoreWorkAndPaddingIsOftenAtTheRoot) {
  // Batch 1: the outermost loop has extent 1, and a parallel loop made of it alone is a
  // serial kernel (one draw in five was). The output's parallel loop fuses outer loops
  // until every core has an iteration, or fuses them all. The padding copy, computed per
  // tile in every tuned ResNet-50 3x3 kernel, is drawn at the root (once, in parallel) often.
  Workload w = make_workload("conv2d_nchwc", parse_shape("C=32,H=14,W=14,K=32,R=3,S=3,stride=1,pad=1"));
  Target t = Target::host();
  t.num_cores = 4;
  SearchSpace space(w, t);
  std::mt19937_64 rng(11);
  int n = 60, pad_at_root = 0;
  for (int i = 0; i < n; ++i) {
    Candidate c = space.sample(rng);
    Schedule s = Schedule::replay(w.outputs, c.steps);
    const StageState& conv = s.state().stage("conv");
    size_t fused = 0;  // the fuse step comes before the parallel step it makes
    for (auto& st : c.steps)
      if (st.kind == Step::Fuse && st.stage == "conv") fused = st.axes.size();
      else if (st.kind == Step::Parallel && st.stage == "conv") {
        int64_t ext = conv.axes[conv.find_axis(st.axes[0])].extent;
        EXPECT_TRUE(ext >= t.num_cores || fused == 5) << ext << " iterations of " << st.axes[0];
      }
    pad_at_root += c.key.find("[\"parallel\",\"conv.pad\"") != std::string::npos;
  }
  EXPECT_GE(pad_at_root, n / 8);
}

// A mutation that redraws where the padding is computed inlines it one time in four;
// samples, drawing among dozens of loops, seldom do. Where inlining wins, the evolution
// gets there from the tiles it has found.
TEST(Autotune, MutationsOfThePaddingLocationInlineItOften) {
  Workload w = make_workload("conv2d_nchwc", parse_shape("C=32,H=14,W=14,K=32,R=3,S=3,stride=1,pad=1"));
  SearchSpace space(w, Target::host());
  std::mt19937_64 rng(5);
  auto inlined = [](const Candidate& c) { return c.key.find("[\"compute_inline\",\"conv.pad\"]") != std::string::npos; };
  int n = 200, sampled = 0, relocated = 0, mutated_inline = 0;
  Candidate example;
  for (int i = 0; i < n; ++i) {
    Candidate c = space.sample(rng);
    sampled += inlined(c);
    for (int k = 0; k < 20; ++k) {
      Candidate m = space.mutate(c, rng);
      if (m.decisions.size() != c.decisions.size() || m.decisions.back() == c.decisions.back()) continue;
      ++relocated;  // the padding's location is the last decision
      if (inlined(m) && !inlined(c)) ++mutated_inline, example = m;
    }
  }
  EXPECT_LE(sampled, n / 10);
  ASSERT_GE(relocated, 20);
  EXPECT_GE(mutated_inline, relocated / 10) << "of " << relocated << " mutants that moved the padding";
  ASSERT_FALSE(example.steps.empty());
  EXPECT_LE(error_vs_default(w, example.steps), 1e-3) << example.key;
}

TEST(Autotune, FeaturesAreFixedSizeAndSeeVectorization) {
  Workload w = make_workload("matmul", parse_shape("M=64,N=64,K=64"));
  Schedule plain(w.outputs);
  Schedule vec(w.outputs);
  auto [o, i] = vec["C"].split("j", 16);
  vec["C"].vectorize(i);
  auto f0 = program_features(lower_program(plain, w.args, "k", Target::host(), {}).func.body);
  auto f1 = program_features(lower_program(vec, w.args, "k", Target::host(), {}).func.body);
  ASSERT_EQ(f0.size(), size_t(kProgramFeatures));
  ASSERT_EQ(f1.size(), size_t(kProgramFeatures));
  EXPECT_NE(f0, f1);
  EXPECT_GT(f1[kStoreFeatures + 7], f0[kStoreFeatures + 7]);  // mean vector lanes
}

TEST(Autotune, CostModelFollowsTheRowsThatCountMost) {
  // Two sources disagree on the same programs; the model sides with the important one.
  std::vector<std::vector<float>> rows;
  std::vector<float> labels, importance;
  for (int source = 0; source < 2; ++source)
    for (int i = 0; i < 40; ++i) {
      std::vector<float> f(kProgramFeatures, 0.f);
      f[0] = float(i);
      rows.push_back(f);
      labels.push_back(source == 0 ? i / 40.f : 1 - i / 40.f);
      importance.push_back(source == 0 ? 1.f : 0.02f);
    }
  CostModel m;
  m.train(rows, labels, importance);
  std::vector<float> p = m.predict({rows[5], rows[35]});
  EXPECT_LT(p[0], p[1]);
}

// Trained on real measurements of one machine (the first target in a log of tuning_logs/;
// costs of different CPUs do not compare), the model ranks held-out candidates much better
// than chance.
TEST(Autotune, CostModelRanksHeldOutCandidates) {
  std::string path = std::string(TESSEL_SOURCE_DIR) + "/tuning_logs/gemm_1024.json.gz";
  std::vector<Record> recs = read_log(path);
  ASSERT_GE(recs.size(), 200u) << "expected the GEMM tuning log in " << path;
  Workload w = make_workload("matmul", recs[0].shape);
  std::vector<std::vector<float>> x;
  std::vector<double> cost;
  for (auto& r : recs) {
    if (!r.ok() || r.message == kRemeasuredMessage || r.target_key != recs[0].target_key) continue;
    x.push_back(program_features(lower_program(Schedule::replay(w.outputs, r.steps), w.args, "k", Target::host(), {}).func.body));
    cost.push_back(r.mean_cost());
  }
  // Every fifth record is held out.
  std::vector<std::vector<float>> tx, vx;
  std::vector<float> ty;
  std::vector<double> vc;
  double best = *std::min_element(cost.begin(), cost.end());
  for (size_t i = 0; i < x.size(); ++i) {
    if (i % 5 == 0) vx.push_back(x[i]), vc.push_back(cost[i]);
    else tx.push_back(x[i]), ty.push_back(float(best / cost[i]));
  }
  CostModel m(7);
  m.train(tx, ty);
  std::vector<float> pred = m.predict(vx);
  ASSERT_GT(vx.size(), 20u);
  double accuracy = pairwise_accuracy(pred, vc);
  std::printf("cost model: %zu training, %zu held-out candidates, pairwise ranking accuracy %.3f (random 0.5)\n",
              tx.size(), vx.size(), accuracy);
  EXPECT_GT(accuracy, 0.7) << "pairwise ranking accuracy on held-out candidates (random: 0.5)";
  // Save and load keep the predictions.
  std::string file = tmp("model.json");
  m.save(file);
  CostModel back;
  back.load(file);
  EXPECT_EQ(back.predict(vx), pred);
}

TEST(Autotune, CrashingAndHangingCandidatesAreRecordedAndTuningGoesOn) {
  Workload w = make_workload("matmul", parse_shape("M=32,N=32,K=32"));
  TuneOptions o = small(8);
  o.log = tmp("faults.json");
  o.plant_crash_at = 1;
  o.plant_hang_at = 2;
  o.timeout = 5;
  TaskResult r = tune(w, o);
  EXPECT_EQ(r.trials, 8);
  EXPECT_GE(r.errors, 2);  // the two planted ones (a loaded machine might time out more)
  EXPECT_GT(r.best_gflops, 0);
  auto recs = read_log(o.log);
  bool crash = false, hang = false;
  for (auto& rec : recs) {
    crash |= rec.error == ErrorCode::Runtime && rec.message.find("signal 11") != std::string::npos;
    hang |= rec.error == ErrorCode::RunTimeout && rec.message.find("timeout") != std::string::npos;
  }
  EXPECT_TRUE(crash);
  EXPECT_TRUE(hang);
}

TEST(Autotune, ReportDrawsEveryTaskFromItsLog) {
  // A run with a crashing candidate and rounds proposed by a trained model: the page has a
  // chart per workload, the error by kind, the default line, a vendor line where given, and
  // the model's predicted-against-measured ranks; nothing in it is fetched from elsewhere.
  Workload w = make_workload("matmul", parse_shape("M=32,N=32,K=40"));
  TuneOptions o = small(24);
  o.log = tmp("report.json");
  std::remove(o.log.c_str());
  o.plant_crash_at = 2;
  tune(w, o);
  auto recs = read_log(o.log);
  EXPECT_TRUE(std::any_of(recs.begin(), recs.end(), [](const Record& r) { return std::isfinite(r.predicted); }));
  EXPECT_TRUE(std::any_of(recs.begin(), recs.end(), [&](const Record& r) { return r.flops == w.flops; }));
  ReportOptions ro;
  ro.vendor[w.key()] = {"vendor-blas", 12.5};
  std::string html = tmp("report.html");
  write_report({o.log}, html, ro);
  std::ifstream in(html);
  std::string page((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  for (std::string part : {std::string("<svg"), std::string("Best GFLOP/s against trials"),
                           std::string("Best GFLOP/s against tuning time"), std::string("runtime"),
                           std::string("default schedule"), std::string("vendor-blas 12.5"),
                           std::string("mean Spearman correlation"), w.key()})
    EXPECT_NE(page.find(part), std::string::npos) << part;
  EXPECT_EQ(page.find("http"), std::string::npos);
  EXPECT_EQ(page.find("<script"), std::string::npos);
  ref::expect_error([&] { write_report({tmp("no_such_log.json")}, html); }, {"no_such_log.json", "no tuning records"});
}

// Candidates build side by side: one whose build hangs is a build timeout, and the one
// built beside it, which then waited past the same deadline, is measured all the same.
TEST(Autotune, HangingBuildDoesNotTakeItsNeighbourDown) {
  Workload w = make_workload("matmul", parse_shape("M=32,N=32,K=32"));
  TuneOptions o = small(4);
  o.log = tmp("build_hang.json");
  o.build_workers = 2;
  o.plant_build_hang_at = 0;  // the first candidate (the log's second record)
  o.timeout = 3;
  o.remeasure_top = 0;
  tune(w, o);
  auto recs = read_log(o.log);
  ASSERT_GE(recs.size(), 3u);
  EXPECT_EQ(recs[1].error, ErrorCode::BuildTimeout) << recs[1].message;
  EXPECT_TRUE(recs[2].ok()) << error_name(recs[2].error) << ": " << recs[2].message;
}

// A kernel of a few nanoseconds is timed, not rounded to 0 (the worker wrote six decimals
// of a second: every candidate of this workload cost 0, and the cost model's labels,
// best cost over cost, were NaN).
TEST(Autotune, TinyKernelsHaveNonZeroCosts) {
  Workload w = make_workload("matmul", parse_shape("M=4,N=8,K=4"));
  TuneOptions o = small(4);
  o.log = tmp("tiny.json");
  tune(w, o);
  auto recs = read_log(o.log);
  ASSERT_GE(recs.size(), 4u);
  for (auto& rec : recs)
    for (double c : rec.costs) EXPECT_GT(c, 0) << steps_to_json(rec.steps);
}

// A flush touches what the network reads (graph::compile and graph::tune pass its tensors'
// bytes), never more than twice the last-level cache, which is also what 0 asks for.
TEST(Autotune, CacheFlusherTouchesWhatTheNetworkReads) {
  CacheFlusher most;
  EXPECT_GE(most.bytes(), 1 << 20);
  EXPECT_EQ(CacheFlusher(3 << 20).bytes(), std::min<int64_t>(3 << 20, most.bytes()));
  EXPECT_EQ(CacheFlusher(int64_t(1) << 50).bytes(), most.bytes());
  Buffer warm({256}, float32);
  warm.fill_random(1);
  CacheFlusher(1 << 20)({warm});
}

// Timed as in a network (graph::tune): each call after the caches are emptied, every repeat
// recorded.
TEST(Autotune, CacheFlushedTimingsAreRecordedPerRepeat) {
  Workload w = make_workload("dense", parse_shape("M=8,N=64,K=64"));
  TuneOptions o = small(4);
  o.log = tmp("flushed.json");
  o.flush_caches = true;
  tune(w, o);
  auto recs = read_log(o.log);
  ASSERT_GE(recs.size(), 4u);
  for (auto& rec : recs) {
    if (!rec.ok()) continue;
    // Fewer repeats only for a candidate that fell far behind (see the next test).
    EXPECT_LE(int(rec.costs.size()), o.repeat);
    for (double c : rec.costs) EXPECT_GT(c, 0);
  }
}

// A candidate far behind the best gets no more timing repeats once one is slower than the
// bound, flushed or not; without a bound, or under one never reached, every repeat is taken.
TEST(Autotune, TimingEndsAfterARepeatSlowerThanTheBound) {
  Workload w = make_workload("dense", parse_shape("M=8,N=64,K=64"));
  Module m = build(ops::default_schedule(w.outputs), w.args);
  std::vector<Buffer> args;
  for (auto& a : w.args) args.emplace_back(a.shape(), a.dtype());
  EXPECT_EQ(time_module(m, args, 3, 2, 0).size(), 3u);
  EXPECT_EQ(time_module(m, args, 3, 2, 0, {}, 0, {}, 1e-12).size(), 1u);
  EXPECT_EQ(time_module(m, args, 3, 2, 0, {}, 0, {}, 1e3).size(), 3u);
  EXPECT_EQ(time_module(m, args, 3, 0, 1, {}, 0, [] {}, 1e-12).size(), 1u);
}

// The run timeout catches a hung kernel, not a slow one: a candidate whose measurement
// takes far longer than the timeout in all, but makes progress within it, is measured.
TEST(Autotune, SlowButProgressingCandidateIsMeasuredNotTimedOut) {
  Workload w = make_workload("matmul", parse_shape("M=32,N=32,K=32"));
  TuneOptions o = small(4);
  o.log = tmp("slow.json");
  o.plant_slow_at = 0;  // the first candidate: the log's second record, after the default's
  o.timeout = 3;        // its pauses add up to at least 2 x 1.8 s
  tune(w, o);
  auto recs = read_log(o.log);
  ASSERT_GE(recs.size(), 2u);
  EXPECT_EQ(recs[0].message, kDefaultScheduleMessage);
  EXPECT_TRUE(recs[1].ok()) << error_name(recs[1].error) << ": " << recs[1].message;
}

TEST(Autotune, KillAndResumeLosesNothing) {
  Workload w = make_workload("matmul", parse_shape("M=48,N=48,K=48"));
  std::string log = tmp("resume.json");
  TuneOptions o = small(24);
  o.log = log;
  pid_t pid = fork();
  if (pid == 0) {
    tune(w, o);
    _exit(0);
  }
  // Kill the tuner once some records are on disk.
  for (int i = 0; i < 600 && read_log(log).size() < 6; ++i) usleep(50000);
  kill(pid, SIGKILL);
  waitpid(pid, nullptr, 0);
  std::vector<Record> before = read_log(log);
  ASSERT_GE(before.size(), 6u);
  ASSERT_LT(before.size(), 24u);
  o.resume = true;
  TaskResult r = tune(w, o);
  std::vector<Record> after = read_log(log);
  // Everything measured before the kill is still there, first, unchanged.
  for (size_t i = 0; i < before.size(); ++i) EXPECT_EQ(after[i].to_json(), before[i].to_json());
  // No candidate was measured twice (re-measurements of the best are marked as such).
  std::set<std::string> keys;
  for (auto& rec : after)
    if (rec.message != kRemeasuredMessage) EXPECT_TRUE(keys.insert(steps_to_json(rec.steps)).second);
  EXPECT_EQ(r.trials, 24);
  EXPECT_EQ(keys.size(), 24u);
}

// A log written by several builds holds each one's default schedule, all records without
// decisions: here this build's, then another build's. Resumed, the finals re-measure this
// build's default, not the last one in the log.
TEST(Autotune, FinalsRemeasureThisBuildsDefaultAndAnOlderOneAsAProgram) {
  // The log holds this build's default and an older build's (a program that may still be the
  // fastest): the finals measure this build's as the default, and the older one again as one
  // of the programs, so that its old, lucky time no longer decides.
  Workload w = make_workload("matmul", parse_shape("M=32,N=32,K=32"));
  std::string current = steps_to_json(default_schedule(w, Target::host()).steps());
  TuneOptions o = small(4);
  o.log = tmp("older_default.json");
  std::remove(o.log.c_str());
  Record mine = make_record(w, Target::host()), other = mine;
  {
    LogWriter log(o.log);
    mine.steps = default_schedule(w, Target::host()).steps();
    mine.costs = {1e-3};
    other.steps = {Step{Step::Split, "C", {"i"}, {4}, "", {}}};
    other.costs = {1e-9};  // looks fastest of all
    mine.message = other.message = kDefaultScheduleMessage;
    log.append(mine);
    log.append(other);
  }
  o.resume = true;
  TaskResult res = tune(w, o);
  std::map<std::string, int> finals;
  for (const Record& r : read_log(o.log))
    if (r.message == kRemeasuredMessage && r.decisions.empty()) ++finals[steps_to_json(r.steps)];
  EXPECT_GT(finals[current], 0);
  EXPECT_GT(finals[steps_to_json(other.steps)], 0);
  EXPECT_GT(res.best_seconds, 1e-9);
  // The default's figure is this build's default's finals alone, not the older one's too.
  std::vector<double> mine_finals;
  for (const Record& r : read_log(o.log))
    if (r.message == kRemeasuredMessage && steps_to_json(r.steps) == current) mine_finals.push_back(r.min_cost());
  ASSERT_FALSE(mine_finals.empty());
  EXPECT_DOUBLE_EQ(res.default_seconds, median(mine_finals));
}

// Records of other workloads train the model before the first round: four trials of a new
// matmul (five records with its default, too few to train on) still end with a saved model.
TEST(Autotune, HistoryOfOtherWorkloadsTrainsTheModelFromTheStart) {
  TuneOptions first = small(12);
  first.log = tmp("history.json");
  tune(make_workload("matmul", parse_shape("M=32,N=32,K=32")), first);

  Workload w = make_workload("matmul", parse_shape("M=40,N=24,K=40"));
  TuneOptions o = small(4);
  o.cost_model_out = tmp("cold.model");
  tune(w, o);
  EXPECT_FALSE(std::ifstream(o.cost_model_out).good()) << "a model from five records";
  o.history = {first.log};
  o.cost_model_out = tmp("warm.model");
  tune(w, o);
  EXPECT_TRUE(std::ifstream(o.cost_model_out).good());

  o.history = {tmp("no_such_log.json")};
  try {
    tune(w, o);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("cannot read the history log"), std::string::npos) << e.what();
  }
}

TEST(Autotune, CorruptLinesAreSkippedWithTheirLineNumber) {
  Workload w = make_workload("matmul", parse_shape("M=8,N=8,K=8"));
  Record r = make_record(w, Target::host());
  r.costs = {1e-6};
  std::string path = tmp("corrupt.json");
  {
    std::ofstream f(path);
    f << r.to_json() << "\n";
    f << r.to_json().substr(0, 40) << "\n";  // truncated by a crash
    f << "{\"v\": 99, \"workload\": {}}\n";    // a future format
    f << r.to_json() << "\n";
  }
  std::vector<std::string> warnings;
  auto recs = read_log(path, &warnings);
  EXPECT_EQ(recs.size(), 2u);
  ASSERT_EQ(warnings.size(), 2u);
  EXPECT_NE(warnings[0].find("corrupt.json:2: skipped: not valid JSON"), std::string::npos) << warnings[0];
  EXPECT_NE(warnings[1].find(":3: skipped: record of format version 99; this Tessel reads version 1"),
            std::string::npos) << warnings[1];
}

TEST(Autotune, LookupChoosesByTheFinalsElseBySlowestMeasurement) {
  Workload w = make_workload("matmul", parse_shape("M=8,N=8,K=8"));
  Record p = make_record(w, Target::host()), q = p, r = p;
  p.steps = {Step{Step::Split, "C", {"i"}, {4}, "", {}}};
  q.steps = {Step{Step::Split, "C", {"j"}, {4}, "", {}}};
  r.steps = {Step{Step::Split, "C", {"k"}, {4}, "", {}}};
  auto write = [&](const std::string& path, bool finals) {
    LogWriter log(path);
    p.message = q.message = "";
    // The search: P once at 1 ms and once at 3 ms, Q at 2 ms, R at 0.5 ms (a lucky timing).
    for (double c : {1e-3, 3e-3}) p.costs = {c}, log.append(p);
    q.costs = {2e-3}, log.append(q);
    r.costs = {0.5e-3}, log.append(r);
    if (!finals) return;
    // The finals (P and Q): medians 3 ms and 2.1 ms. R did not make them.
    for (double c : {3e-3, 3.2e-3, 1e-3}) p.costs = {c}, p.message = kRemeasuredMessage, log.append(p);
    for (double c : {2.1e-3, 2.0e-3, 2.2e-3}) q.costs = {c}, q.message = kRemeasuredMessage, log.append(q);
  };
  std::string with_finals = tmp("finals.json"), without = tmp("no_finals.json");
  write(with_finals, true);
  write(without, false);
  auto best = best_schedule(with_finals, w);
  ASSERT_TRUE(best.has_value());
  EXPECT_EQ(steps_to_json(best->steps), steps_to_json(q.steps));
  EXPECT_DOUBLE_EQ(best->seconds, 2.1e-3);
  std::string kept = tmp("finals_best.json");
  EXPECT_EQ(keep_best(with_finals, kept), 1);
  EXPECT_EQ(steps_to_json(read_log(kept).at(0).steps), steps_to_json(q.steps));
  // Without finals, each program counts at its slowest measurement: R (0.5 ms) wins, P
  // (slowest 3 ms) would lose to Q.
  best = best_schedule(without, w);
  ASSERT_TRUE(best.has_value());
  EXPECT_EQ(steps_to_json(best->steps), steps_to_json(r.steps));
  // A resumed run searched more and held new finals: they alone decide (P 1.5 ms, Q 2.5 ms).
  {
    LogWriter log(with_finals);
    r.costs = {4e-3}, log.append(r);
    p.message = q.message = kRemeasuredMessage;
    for (double c : {1.5e-3, 1.4e-3, 1.6e-3}) p.costs = {c}, log.append(p);
    for (double c : {2.5e-3, 2.4e-3, 2.6e-3}) q.costs = {c}, log.append(q);
  }
  best = best_schedule(with_finals, w);
  ASSERT_TRUE(best.has_value());
  EXPECT_EQ(steps_to_json(best->steps), steps_to_json(p.steps));
  EXPECT_DOUBLE_EQ(best->seconds, 1.5e-3);
  // Finals of three repeats each, P's rounds each with one repeat in a slow spell: P is
  // compared by its fastest repeats (1.0 ms against Q's 1.2 ms), not by its means (1.67
  // against 1.23).
  {
    LogWriter log(with_finals);
    r.costs = {4e-3}, log.append(r);
    for (int round = 0; round < 3; ++round) {
      p.costs = {1.0e-3, 3.0e-3, 1.0e-3}, log.append(p);
      q.costs = {1.2e-3, 1.3e-3, 1.2e-3}, log.append(q);
    }
  }
  best = best_schedule(with_finals, w);
  ASSERT_TRUE(best.has_value());
  EXPECT_EQ(steps_to_json(best->steps), steps_to_json(p.steps));
  EXPECT_DOUBLE_EQ(best->seconds, 1.0e-3);
  // The finals re-run on a noisy machine: Q 2% faster than P, the winner before, does not
  // replace it (kKeepMargin); 5% faster, it does.
  auto rerun = [&](double q_cost) {
    LogWriter log(with_finals);
    r.costs = {4e-3}, log.append(r);
    for (int round = 0; round < 3; ++round) p.costs = {1.0e-3}, log.append(p), q.costs = {q_cost}, log.append(q);
  };
  rerun(0.98e-3);
  best = best_schedule(with_finals, w);
  ASSERT_TRUE(best.has_value());
  EXPECT_EQ(steps_to_json(best->steps), steps_to_json(p.steps));
  EXPECT_DOUBLE_EQ(best->seconds, 1.0e-3);
  rerun(0.95e-3);
  best = best_schedule(with_finals, w);
  ASSERT_TRUE(best.has_value());
  EXPECT_EQ(steps_to_json(best->steps), steps_to_json(q.steps));
  EXPECT_DOUBLE_EQ(best->seconds, 0.95e-3);
  // Two runs' finals with nothing measured between them (`--resume --trials 1` twice) are two
  // verdicts, told apart by their rounds: Q, the winner before, 1% faster than P, stays. Pooled
  // into one block, the verdict before them (P) would have been the one kept.
  {
    LogWriter log(with_finals);
    for (int round = 0; round < 3; ++round) p.costs = {1.0e-3}, log.append(p), q.costs = {0.99e-3}, log.append(q);
  }
  best = best_schedule(with_finals, w);
  ASSERT_TRUE(best.has_value());
  EXPECT_EQ(steps_to_json(best->steps), steps_to_json(q.steps));
  EXPECT_DOUBLE_EQ(best->seconds, 0.99e-3);
}

// Resumed finals measure the previous finals' winner again even where the search's timings
// leave it out of the best few, so that it can defend its place.
TEST(Autotune, ResumedFinalsMeasureThePreviousWinnerAgain) {
  Workload w = make_workload("matmul", parse_shape("M=32,N=32,K=32"));
  TuneOptions o = small(2);
  o.log = tmp("incumbent.json");
  std::remove(o.log.c_str());
  Record p = make_record(w, Target::host()), q = p;
  p.steps = {Step{Step::Split, "C", {"i"}, {4}, "", {}}};
  q.steps = {Step{Step::Split, "C", {"j"}, {4}, "", {}}};
  {
    LogWriter log(o.log);
    p.costs = {1e-3}, log.append(p);  // the search: P looked faster
    q.costs = {2e-3}, log.append(q);
    p.message = q.message = kRemeasuredMessage;  // the finals: Q won
    for (int round = 0; round < 3; ++round) p.costs = {2e-3}, log.append(p), q.costs = {1e-3}, log.append(q);
  }
  o.resume = true;
  o.remeasure_top = 1;  // P alone by the search's timings
  tune(w, o);
  auto recs = read_log(o.log);
  int q_finals = 0;
  for (size_t i = 8; i < recs.size(); ++i)
    if (recs[i].message == kRemeasuredMessage && steps_to_json(recs[i].steps) == steps_to_json(q.steps)) ++q_finals;
  EXPECT_EQ(q_finals, 3);
}

TEST(Autotune, RecordWithALayoutRewriteRebuildsFromTheUsersWeights) {
  // The best record rewrites the weights' layout: build_best's Module takes them as the
  // user has them (OIHW), prepares the blocked copy once and gives the reference answer.
  // A record of the same workload without a rewrite (as logs before rewriting were) still
  // loads and builds.
  Workload w = make_workload("conv2d", parse_shape("C=6,H=11,W=11,K=24,R=3,S=3,pad=1,stride=2"));
  SearchSpace space(w, Target::host());
  auto rewritten = samples_with_step(space, 3, R"(["rewrite_layout","Wt")", 1, 200);
  auto plain = samples_with_step(space, 4, R"(["split","conv")", 1, 10);
  ASSERT_EQ(rewritten.size(), 1u);
  ASSERT_EQ(plain.size(), 1u);
  ASSERT_EQ(plain[0].key.find("rewrite_layout"), std::string::npos);
  std::vector<Buffer> inputs{ref::random(w.args[0].shape(), 1), ref::random(w.args[1].shape(), 2)};
  Buffer want = ref::run(ops::default_schedule(w.outputs), w.args, inputs)[0];
  for (const Candidate* c : {&rewritten[0], &plain[0]}) {
    std::string path = tmp("rewrite.json");
    {
      Record r = make_record(w, Target::host());
      r.steps = c->steps;
      r.costs = {1e-3};
      LogWriter(path).append(r);
    }
    bool found = false;
    Module m = build_best(path, w, Target::host(), &found);
    EXPECT_TRUE(found);
    EXPECT_EQ(m.layout_rewrites().size(), c == &rewritten[0] ? 1u : 0u);
    EXPECT_EQ(m.args()[1].shape, w.args[1].shape());  // the user's layout
    Buffer y(w.args.back().shape(), float32);
    m({inputs[0], inputs[1], y});
    EXPECT_LE(max_relative_error(y, want), 1e-4);
  }
}

TEST(Autotune, AThreeByThreeConvolutionDeploysByWinogradWhereItsRecordIsFaster) {
  // tune also tunes a 3x3 stride-1 convolution in NCHW or NHWC by Winograd's algorithm (its
  // companion workload); build_best builds whichever record is faster, by Winograd as a Module
  // that takes the caller's weights (OIHW, HWIO) and transforms them once.
  auto m_of = [](const char* shape) { return winograd_companion(make_workload("conv2d", parse_shape(shape))); };
  EXPECT_EQ(m_of("C=16,H=28,W=28,K=32,R=3,S=3,pad=1")->shape.at("m"), 4);  // F(4x4) from 28x28
  for (const char* none : {"C=16,H=14,W=14,K=32,R=3,S=3,pad=1,stride=2", "C=16,H=7,W=7,K=32,R=3,S=3,pad=1",
                           "C=16,H=14,W=14,K=32,R=1,S=1", "C=12,H=14,W=14,K=32,R=3,S=3,pad=1"})
    EXPECT_FALSE(m_of(none).has_value()) << none;
  for (const char* op : {"conv2d", "conv2d_nhwc"}) {
    SCOPED_TRACE(op);
    Workload w = make_workload(op, parse_shape("C=16,H=14,W=14,K=32,R=3,S=3,pad=1"));
    std::optional<Workload> wino = winograd_companion(w);
    ASSERT_TRUE(wino.has_value());
    EXPECT_EQ(wino->op, std::string(op) == "conv2d" ? "conv2d_winograd" : "conv2d_winograd_nhwc");
    EXPECT_EQ(wino->shape.at("m"), 2);  // 7x7 tiles of 2
    std::vector<Buffer> inputs{ref::random(w.args[0].shape(), 1), ref::random(w.args[1].shape(), 2)};
    Buffer want = ref::run(ops::default_schedule(w.outputs), w.args, inputs)[0];
    for (double wino_seconds : {1e-6, 1.0}) {
      std::string path = tmp("winograd.json");
      {
        LogWriter out(path);
        Record direct = make_record(w, Target::host()), by_wino = make_record(*wino, Target::host());
        direct.steps = autotune::default_schedule(w).steps(), direct.costs = {1e-3};
        by_wino.steps = autotune::default_schedule(*wino).steps(), by_wino.costs = {wino_seconds};
        out.append(direct);
        out.append(by_wino);
      }
      bool found = false;
      Module m = build_best(path, w, Target::host(), &found);
      EXPECT_TRUE(found);
      bool transformed = !m.layout_rewrites().empty() && m.layout_rewrites()[0].transform == "winograd F(2x2, 3x3)";
      EXPECT_EQ(transformed, wino_seconds < 1e-3);
      EXPECT_EQ(m.args()[1].shape, w.args[1].shape());  // the user's layout
      Buffer y(w.args.back().shape(), float32);
      m({inputs[0], inputs[1], y});
      EXPECT_LE(max_relative_error(y, want), 1e-4);
      if (transformed)
        ref::expect_error([&] { m.export_library(tmp("wino.so"), tmp("wino.h")); }, {"winograd F(2x2, 3x3)"});
    }
  }
}

TEST(Autotune, ARecordThatNoLongerBuildsFallsBackToTheDefaultWithAWarning) {
  // Records edited (or corrupted) into steps that do not fit the workload: the deployment
  // still gets a working kernel, the default schedule, and is told why.
  Workload w = make_workload("matmul", parse_shape("M=16,N=24,K=8"));
  std::string log = tmp("unbuildable.json");
  {
    LogWriter out(log);
    Record r = make_record(w, Target::host());
    r.steps = {Step::from_json(R"(["split","C","no_such_axis",4])")};
    r.costs = {1e-6};
    out.append(r);
  }
  bool found = true;
  testing::internal::CaptureStderr();
  Module m = build_best(log, w, Target::host(), &found);
  std::string err = testing::internal::GetCapturedStderr();
  EXPECT_FALSE(found);
  EXPECT_NE(err.find("does not build"), std::string::npos) << err;
  EXPECT_NE(err.find("no_such_axis"), std::string::npos) << err;
  Buffer a = ref::random({16, 8}, 1), b = ref::random({8, 24}, 2), c({16, 24}, float32);
  m({a, b, c});
  ref::expect_close(c, ref::matmul(a, b));
}

TEST(Autotune, LookupRoundTripsThroughAFileInANewProcess) {
  Workload w = make_workload("matmul", parse_shape("M=40,N=24,K=16"));
  TuneOptions o = small(8);
  o.log = tmp("lookup.json");
  TaskResult tuned = tune(w, o);
  ASSERT_FALSE(tuned.best_steps.empty());
  pid_t pid = fork();
  if (pid == 0) {
    // A new process: only the log file connects it to the tuning run.
    Workload again = make_workload("matmul", parse_shape("M=40,N=24,K=16"));
    auto best = best_schedule(o.log, again);
    if (!best || best->steps.empty()) _exit(3);
    bool found = false;
    Module m = build_best(o.log, again, Target::host(), &found);
    Buffer a = ref::random({40, 16}, 1), b = ref::random({16, 24}, 2), c({40, 24}, float32);
    m(a, b, c);
    _exit(found && max_relative_error(c, ref::matmul(a, b)) < 1e-4 ? 0 : 4);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "status " << status;
  // A workload the log does not hold: said loudly, default schedule built.
  Workload other = make_workload("matmul", parse_shape("M=41,N=24,K=16"));
  testing::internal::CaptureStderr();
  bool found = true;
  build_best(o.log, other, Target::host(), &found);
  std::string err = testing::internal::GetCapturedStderr();
  EXPECT_FALSE(found);
  EXPECT_NE(err.find("no tuning record for workload matmul[K=16,M=41,N=24]float32"), std::string::npos) << err;
  EXPECT_NE(err.find("DEFAULT schedule"), std::string::npos) << err;
  // The record prints as C++ that rebuilds it.
  std::string cpp = Schedule::replay(w.outputs, tuned.best_steps).to_cpp();
  EXPECT_NE(cpp.find("s[\""), std::string::npos) << cpp;
}

// A log tuned on another CPU of the same vector width (one x86 server's log deployed or
// resumed on another): the lookup builds that CPU's best schedule and says so; a resumed run
// measures that CPU's best programs first. Another vector width does not stand in.
TEST(Autotune, AnotherCpusLogStandsInForThisOne) {
  Workload w = make_workload("matmul", parse_shape("M=40,N=24,K=16"));
  TuneOptions o = small(12);
  o.log = tmp("this_cpu.json");
  tune(w, o);
  Target host = Target::host();
  auto as_other_cpu = [&](const std::string& path, const std::string& cpu, int vector_bytes, bool old_key) {
    LogWriter out(path);
    for (Record r : read_log(o.log)) {
      r.target_key = std::string(host.kind_name()) + "/" + cpu;
      if (!old_key) r.target_key += "/v" + std::to_string(vector_bytes * 8);
      r.target_str = std::string(host.kind_name()) + " -mcpu=" + cpu + " -mattr=" + host.features;
      r.vector_bytes = vector_bytes;
      out.append(r);
    }
  };
  std::string other = tmp("other_cpu.json"), wider = tmp("wider_cpu.json"), same_name = tmp("same_name_cpu.json");
  as_other_cpu(other, "othercpu", host.vector_bytes, false);
  as_other_cpu(wider, "othercpu", host.vector_bytes * 2, false);
  // A log written before keys named the vector width, by this CPU model with twice the width
  // (AVX-512 shown to one machine, hidden from another): not this machine's records.
  as_other_cpu(same_name, host.cpu, host.vector_bytes * 2, true);
  EXPECT_EQ(read_log(same_name).at(0).target_key, "llvm/" + host.cpu + "/v" + std::to_string(host.vector_bytes * 16));
  auto theirs = best_schedule(other, w, host, /*stand_in=*/false);
  EXPECT_FALSE(theirs.has_value()) << "an exact lookup ignores other CPUs";
  theirs = best_schedule(other, w, host, /*stand_in=*/true);
  ASSERT_TRUE(theirs.has_value());
  EXPECT_EQ(theirs->target_key, "llvm/othercpu/v" + std::to_string(host.vector_bytes * 8));
  EXPECT_EQ(steps_to_json(theirs->steps), steps_to_json(best_schedule(o.log, w)->steps));

  testing::internal::CaptureStderr();
  bool found = false;
  Module m = build_best(other, w, host, &found);
  std::string err = testing::internal::GetCapturedStderr();
  EXPECT_TRUE(found);
  EXPECT_NE(err.find("building the schedule tuned on llvm/othercpu/v"), std::string::npos) << err;
  Buffer a = ref::random({40, 16}, 1), b = ref::random({16, 24}, 2), c({40, 24}, float32);
  m(a, b, c);
  EXPECT_LT(max_relative_error(c, ref::matmul(a, b)), 1e-4);
  testing::internal::CaptureStderr();
  build_best(wider, w, host, &found);
  err = testing::internal::GetCapturedStderr();
  EXPECT_FALSE(found);
  EXPECT_NE(err.find("DEFAULT schedule"), std::string::npos) << err;
  testing::internal::CaptureStderr();
  build_best(same_name, w, host, &found);
  err = testing::internal::GetCapturedStderr();
  EXPECT_FALSE(found);
  EXPECT_NE(err.find("DEFAULT schedule"), std::string::npos) << err;

  // Resumed here, the other CPU's programs are measured first, best first, none twice.
  std::map<std::string, std::vector<double>> costs;  // their searched programs' timings there
  for (auto& r : read_log(other))
    if (r.ok() && !r.decisions.empty()) costs[steps_to_json(r.steps)].push_back(r.mean_cost());
  std::vector<std::pair<double, std::string>> ranked;  // by median, best first
  for (auto& [steps, c] : costs) ranked.emplace_back(median(c), steps);
  std::sort(ranked.begin(), ranked.end());
  ASSERT_GE(ranked.size(), 4u);
  TuneOptions again = small(int(ranked.size()) + 5);
  again.log = other;
  again.resume = true;
  testing::internal::CaptureStderr();
  tune(w, again);
  err = testing::internal::GetCapturedStderr();
  EXPECT_NE(err.find("stand-in: " + w.key() + " was tuned on llvm/othercpu/v"), std::string::npos) << err;
  std::vector<std::string> here;  // this CPU's searched programs, in the order measured
  for (auto& r : read_log(other))
    if (r.target_key == host.key() && !r.decisions.empty() && r.message != kRemeasuredMessage)
      here.push_back(steps_to_json(r.steps));
  ASSERT_GE(here.size(), ranked.size());
  for (size_t i = 0; i < ranked.size(); ++i) EXPECT_EQ(here[i], ranked[i].second) << "program " << i;
  EXPECT_EQ(std::set<std::string>(here.begin(), here.end()).size(), here.size());
}

TEST(Autotune, ManyTasksShareOneBudget) {
  Workload a = make_workload("matmul", parse_shape("M=32,N=32,K=32"));
  Workload b = make_workload("softmax", parse_shape("rows=16,cols=64"));
  TuneOptions o = small(16);
  o.log = tmp("tasks.json");
  auto res = tune_tasks({a, b}, {1.0, 1.0}, o);
  ASSERT_EQ(res.size(), 2u);
  EXPECT_EQ(res[0].trials + res[1].trials, 16);
  EXPECT_GE(res[0].trials, 4);
  EXPECT_GE(res[1].trials, 4);
  // Each task's first record is its default schedule, timed in a worker like the rest.
  std::map<std::string, int> defaults;
  for (auto& r : read_log(o.log)) defaults[r.workload_key] += r.message == kDefaultScheduleMessage;
  EXPECT_EQ(defaults[a.key()], 1);
  EXPECT_EQ(defaults[b.key()], 1);
  for (auto& r : res) EXPECT_GT(r.default_gflops, 0) << r.key;
  // keep_best leaves one record per workload.
  std::string best = tmp("tasks_best.json");
  EXPECT_EQ(keep_best(o.log, best), 2);
  EXPECT_EQ(merge_logs({o.log, o.log}, tmp("merged.json")), 2 * int(read_log(o.log).size()));
}

// The curve follows the search's best, and each of its steps names the logged program
// behind it (bench_search times those again side by side).
TEST(Autotune, CurveStepsNameTheirPrograms) {
  Workload w = make_workload("matmul", parse_shape("M=32,N=32,K=32"));
  TuneOptions o = small(16);
  o.remeasure_top = 0;
  o.log = tmp("curve.json");
  TaskResult r = tune(w, o);
  ASSERT_FALSE(r.curve.empty());
  ASSERT_FALSE(r.improvements.empty());
  std::map<std::string, double> logged;  // gflops by steps
  for (auto& rec : read_log(o.log))
    if (rec.ok()) logged[steps_to_json(rec.steps)] = w.flops / rec.mean_cost() / 1e9;
  for (size_t i = 1; i < r.curve.size(); ++i) EXPECT_GE(r.curve[i].second, r.curve[i - 1].second);
  for (auto& [t, steps] : r.improvements) {
    auto point = std::find_if(r.curve.begin(), r.curve.end(), [t = t](auto& p) { return p.first == t; });
    ASSERT_NE(point, r.curve.end()) << t;
    ASSERT_TRUE(logged.count(steps_to_json(steps)));
    EXPECT_NEAR(logged[steps_to_json(steps)], point->second, 1e-6 * point->second);
  }
  EXPECT_NEAR(logged[steps_to_json(r.improvements.back().second)], r.curve.back().second, 1e-6 * r.curve.back().second);
}

TEST(Autotune, BadOptionsAreClearErrors) {
  Workload w = make_workload("matmul", parse_shape("M=8,N=8,K=8"));
  TuneOptions o;
  o.trials = 0;
  try {
    tune(w, o);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("budget must be positive"), std::string::npos);
  }
  o.trials = 4;
  o.remeasure_top = -1;
  try {
    tune(w, o);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("the finals) must be 0 (none) or more, got -1"), std::string::npos);
  }
  o.remeasure_top = 1;
  o.log = tmp("committed.json.gz");  // the committed logs are compressed; the tuner appends to plain ones
  ref::expect_error([&] { tune(w, o); }, {"committed.json.gz' is compressed", "gunzip -k"});
  o.log.clear();
  try {
    parse_shape("M=8,N=x");
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("'x' is not a non-negative integer"), std::string::npos);
  }
  try {
    make_workload("gemm", {});
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("unknown operator 'gemm'; known operators: matmul"), std::string::npos);
  }
}

// A candidate that would unroll into thousands of statements is not worth building (see
// kMaxUnrolledStatements): the search scores it nothing, as it does one that does not lower.
TEST(Autotune, CandidatesUnrollingPastTheBudgetAreNotScored) {
  Workload w = make_workload("matmul", {{"M", 64}, {"N", 64}, {"K", 64}});
  Schedule s({w.outputs});
  Stage c = s[w.outputs[0]];
  auto [jo, ji] = c.split("j", 16);
  c.reorder({"i", jo, "k", ji});
  c.vectorize(ji);
  std::vector<Step> small = s.steps();
  c.unroll("k");
  c.unroll(jo);  // 4 x 64 vector statements a row: within the budget
  std::vector<Step> within = s.steps();
  c.unroll("i");  // 64 x 256: past it
  std::vector<Step> past = s.steps();
  auto rows = program_features_of(w, Target::host(), {&small, &within, &past});
  EXPECT_FALSE(rows[0].empty());
  EXPECT_FALSE(rows[1].empty());
  EXPECT_TRUE(rows[2].empty());
}
