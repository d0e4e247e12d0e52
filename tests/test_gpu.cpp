// GPU back end: every kernel runs as OpenCL on PoCL (work-groups, local memory and barriers
// executed for real on this CPU) and, where a CUDA device exists, on it, and is checked
// against the CPU build; its CUDA twin is compiled by NVRTC for sm_80 and sm_90 where the
// toolkit is.
#include <random>

#include "codegen/NVRTC.h"
#include "reference.h"
#include "runtime/OpenCL.h"
#include "schedule/ScheduleState.h"

using namespace tessel;
using ref::expect_error;
using ref::Buffer;

namespace {

const Target kOpenCL = Target::parse("opencl");

std::vector<Buffer> random_inputs(const std::vector<Tensor>& args, size_t n_in) {
  std::vector<Buffer> in;
  for (size_t i = 0; i < n_in; ++i) in.push_back(ref::random(args[i].shape(), 100 + i, args[i].dtype()));
  return in;
}

std::vector<Buffer> run_on(const Target& t, const Schedule& s, const std::vector<Tensor>& args,
                           const std::vector<Buffer>& inputs, const LowerOptions& lo = {}) {
  return ref::run(s, args, inputs, {.target = t, .lower = lo});
}

// The schedule's OpenCL run (and CUDA run, where a device exists) against the CPU default
// schedule's answer.
void expect_matches_cpu(const Schedule& s, const std::vector<Tensor>& args, size_t n_in, double tol = 1e-4) {
  auto in = random_inputs(args, n_in);
  std::vector<Tensor> outs(args.begin() + long(n_in), args.end());
  auto want = ref::run(ops::default_schedule(outs), args, in);
  for (const Target& t : ref::gpu_run_targets()) {
    SCOPED_TRACE(t.str());
    auto got = run_on(t, s, args, in);
    for (size_t i = 0; i < got.size(); ++i) ref::expect_close(got[i], want[i], tol);
  }
}

// The CUDA twin compiles for both architectures without spilling.
void expect_cuda_compiles(const Schedule& s, const std::vector<Tensor>& args) {
  if (!nvrtc_available()) return;
  for (const char* arch : {"cuda -arch=sm_80", "cuda -arch=sm_90"}) {
    Module m = build(s, args, {.target = Target::parse(arch)});
    KernelResources r = m.resources();
    EXPECT_GT(r.registers, 0) << arch;
    EXPECT_EQ(r.spill_bytes, 0) << arch << "\n" << m.source();
  }
}

struct OpCase {
  std::string name;
  std::function<std::vector<Tensor>()> make;  // inputs, then outputs
  size_t n_in;
};

std::vector<OpCase> op_cases() {
  using namespace ops;
  auto p = [](std::vector<int64_t> s, const char* n) { return placeholder(s, float32, n); };
  return {
      {"MatmulOdd", [=] { auto A = p({67, 31}, "A"), B = p({31, 53}, "B"); return std::vector{A, B, matmul(A, B)}; }, 2},
      {"MatmulAligned", [=] { auto A = p({128, 64}, "A"), B = p({64, 96}, "B"); return std::vector{A, B, matmul(A, B)}; }, 2},
      {"DenseBiasRelu", [=] {
         auto X = p({7, 64}, "X"), W = p({29, 64}, "W"), b = p({29}, "b");
         return std::vector{X, W, b, dense(X, W, b, Activation::Relu)};
       }, 3},
      {"BatchMatmul", [=] { auto A = p({3, 17, 19}, "A"), B = p({3, 19, 23}, "B"); return std::vector{A, B, batch_matmul(A, B)}; }, 2},
      {"Conv2dNchwPadded", [=] {
         auto X = p({1, 5, 13, 11}, "X"), W = p({7, 5, 3, 3}, "W");
         return std::vector{X, W, conv2d_nchw(X, W, {.pad_h = 1, .pad_w = 1})};
       }, 2},
      {"Conv2dNchwStride2", [=] {
         auto X = p({2, 4, 15, 15}, "X"), W = p({8, 4, 3, 3}, "W");
         return std::vector{X, W, conv2d_nchw(X, W, {.stride_h = 2, .stride_w = 2, .pad_h = 1, .pad_w = 1})};
       }, 2},
      {"Conv2dNhwc", [=] {
         auto X = p({1, 9, 9, 6}, "X"), W = p({3, 3, 6, 5}, "W");
         return std::vector{X, W, conv2d_nhwc(X, W, {.pad_h = 1, .pad_w = 1})};
       }, 2},
      {"DepthwiseConv2d", [=] {
         auto X = p({1, 6, 11, 11}, "X"), W = p({6, 1, 3, 3}, "W");
         return std::vector{X, W, depthwise_conv2d_nchw(X, W, {.pad_h = 1, .pad_w = 1})};
       }, 2},
      // MobileNetV2's second depthwise layer: its input tile outgrows shared memory at the
      // default tile sizes (a stride of 2 doubles it), so the default schedule shrinks them.
      {"DepthwiseConv2dStride2", [=] {
         auto X = p({1, 96, 112, 112}, "X"), W = p({96, 1, 3, 3}, "W");
         return std::vector{X, W, depthwise_conv2d_nchw(X, W, {.stride_h = 2, .stride_w = 2, .pad_h = 1, .pad_w = 1})};
       }, 2},
      {"MaxPool", [=] { auto X = p({1, 3, 13, 13}, "X"); return std::vector{X, max_pool2d(X, {3, 3, 2, 2, 1, 1})}; }, 1},
      {"AvgPool", [=] { auto X = p({2, 3, 12, 12}, "X"); return std::vector{X, avg_pool2d(X, {2, 2, 2, 2})}; }, 1},
      {"Softmax", [=] { auto X = p({37, 301}, "X"); return std::vector{X, softmax(X)}; }, 1},
      {"SoftmaxShortRows", [=] { auto X = p({5, 17}, "X"); return std::vector{X, softmax(X)}; }, 1},
      {"LayerNorm", [=] {
         auto X = p({11, 257}, "X"), g = p({257}, "g"), b = p({257}, "b");
         return std::vector{X, g, b, layer_norm(X, g, b)};
       }, 3},
      {"BroadcastAdd", [=] { auto A = p({3, 7, 13}, "A"), B = p({13}, "B"); return std::vector{A, B, add(A, B)}; }, 2},
      {"Relu", [=] { auto A = p({4, 1024}, "A"); return std::vector{A, relu(A)}; }, 1},
  };
}

void PrintTo(const OpCase& c, std::ostream* os) { *os << c.name; }

class GpuDefault : public ::testing::TestWithParam<OpCase> {};

TEST_P(GpuDefault, RunsOnTheGpuAndMatchesTheCpu) {
  auto args = GetParam().make();
  std::vector<Tensor> outs(args.begin() + long(GetParam().n_in), args.end());
  expect_matches_cpu(ops::default_schedule(outs, kOpenCL), args, GetParam().n_in);
}

TEST_P(GpuDefault, CompilesForSm80AndSm90WithoutSpills) {
  if (!nvrtc_available()) GTEST_SKIP() << "NVRTC (libnvrtc.so) is not installed";
  auto args = GetParam().make();
  std::vector<Tensor> outs(args.begin() + long(GetParam().n_in), args.end());
  expect_cuda_compiles(ops::default_schedule(outs, Target::parse("cuda")), args);
}

INSTANTIATE_TEST_SUITE_P(Ops, GpuDefault, ::testing::ValuesIn(op_cases()),
                         [](const auto& info) { return info.param.name; });

// Stages each of `ins` in shared memory at reduction step `ko` of `acc`, fetched by all
// tx x ty threads of the block (fetch loops fused, float4 lanes innermost when asked).
void stage_in_shared(Schedule& s, std::initializer_list<Tensor> ins, const Tensor& acc, const Axis& ko, int64_t tx,
                     int64_t ty, bool float4) {
  for (const Tensor& in : ins) {
    Tensor sh = s.cache_read(in, "shared", {acc});
    s[sh].compute_at(s[acc], ko);
    Axis f = s[sh].fuse("i", "j");
    if (float4) {
      auto [rest, lanes] = s[sh].split(f, 4);
      s[sh].vectorize(lanes);
      f = rest;
    }
    auto [o, x] = s[sh].split(f, tx);
    auto [oo, y] = s[sh].split(o, ty);
    s[sh].bind(x, "threadIdx.x");
    s[sh].bind(y, "threadIdx.y");
  }
}

// A tiled GEMM as users write it: shared-memory tiles fetched by all threads, a register
// tile per thread accumulated in a local buffer.
struct TiledGemm {
  Tensor A, B, C;
  Schedule s;
  TiledGemm(int64_t M, int64_t N, int64_t K, bool float4_fetch = false) : A(placeholder({M, K}, float32, "A")),
      B(placeholder({K, N}, float32, "B")), C(ops::matmul(A, B)), s({C}) {
    Tensor CL = s.cache_write(C, "local");
    auto t = s[C].tile("i", "j", 32, 32);
    auto [ty, ri] = s[C].split(t.xi, 4);
    auto [tx, rj] = s[C].split(t.yi, 4);
    s[C].reorder({t.xo, t.yo, ty, tx, ri, rj});
    s[C].bind(t.xo, "blockIdx.y");
    s[C].bind(t.yo, "blockIdx.x");
    s[C].bind(ty, "threadIdx.y");
    s[C].bind(tx, "threadIdx.x");
    s[CL].compute_at(s[C], tx);
    auto [ko, ki] = s[CL].split("k", 8);
    s[CL].reorder({ko, ki, "i", "j"});
    stage_in_shared(s, {A, B}, CL, ko, 8, 8, float4_fetch);
  }
};

TEST(Gpu, TiledGemmWithSharedMemoryIsCorrect) {
  TiledGemm g(96, 80, 72);
  expect_matches_cpu(g.s, {g.A, g.B, g.C}, 2);
  std::string src = build(g.s, {g.A, g.B, g.C}, {.target = kOpenCL}).source();
  EXPECT_NE(src.find("__local float A_shared"), std::string::npos) << src;
  EXPECT_NE(src.find("barrier(CLK_LOCAL_MEM_FENCE)"), std::string::npos) << src;
}

// A's tile rows are 8 long: the fused fetch index splits back into a row and a dense run
// of 4 columns, so both operands are read and staged as float4.
TEST(Gpu, FetchesOfShortRowsAreFloat4) {
  TiledGemm g(64, 64, 64, /*float4_fetch=*/true);
  expect_matches_cpu(g.s, {g.A, g.B, g.C}, 2);
  std::string src = build(g.s, {g.A, g.B, g.C}, {.target = Target::parse("cuda")}).source();
  EXPECT_NE(src.find("= *(float4*)(A + "), std::string::npos) << src;
  EXPECT_NE(src.find("= *(float4*)(B + "), std::string::npos) << src;
  EXPECT_NE(src.find("*(float4*)(A_shared + "), std::string::npos) << src;
}

TEST(Gpu, WithoutBarriersTheSharedMemoryGemmIsWrong) {
  TiledGemm g(96, 80, 72);
  auto in = random_inputs({g.A, g.B, g.C}, 2);
  auto want = ref::run(ops::default_schedule({g.C}), {g.A, g.B, g.C}, in);
  LowerOptions no_sync;
  no_sync.skip_thread_sync = true;
  std::string src = build(g.s, {g.A, g.B, g.C}, {.target = kOpenCL, .lower = no_sync}).source();
  EXPECT_EQ(src.find("barrier("), std::string::npos);
  auto got = run_on(kOpenCL, g.s, {g.A, g.B, g.C}, in, no_sync);
  EXPECT_GT(max_relative_error(got[0], want[0]), 1e-2) << "PoCL should expose the missing barriers";
}

// The register tile split over 2x2 virtual threads: strided outputs per thread, the
// shared tiles still fetched once per reduction step for all of them.
TEST(Gpu, VirtualThreadsShareTheirFetchAndSliceTheirAccumulator) {
  Tensor A = placeholder({64, 48}, float32, "A"), B = placeholder({48, 64}, float32, "B");
  Tensor C = ops::matmul(A, B);
  auto schedule = [&](int64_t vthreads) {
    Schedule s({C});
    Tensor CL = s.cache_write(C, "local");
    auto [io, ii] = s[C].split("i", 32);
    auto [jo, ji] = s[C].split("j", 32);
    auto [iv, it] = s[C].split_nparts(ii, vthreads);
    auto [jv, jt] = s[C].split_nparts(ji, vthreads);
    auto [ty, ri] = s[C].split(it, 2);
    auto [tx, rj] = s[C].split(jt, 2);
    s[C].reorder({io, jo, iv, jv, ty, tx, ri, rj});
    s[C].bind(io, "blockIdx.y");
    s[C].bind(jo, "blockIdx.x");
    s[C].bind(s[C].fuse(iv, jv), "vthread");
    s[C].bind(ty, "threadIdx.y");
    s[C].bind(tx, "threadIdx.x");
    s[CL].compute_at(s[C], tx);
    auto [ko, ki] = s[CL].split("k", 8);
    s[CL].reorder({ko, ki, "i", "j"});
    stage_in_shared(s, {A, B}, CL, ko, 8, 32 / (2 * vthreads), false);
    return s;
  };
  Schedule s = schedule(2);
  expect_matches_cpu(s, {A, B, C}, 2);
  std::string src = build(s, {A, B, C}, {.target = kOpenCL}).source();
  EXPECT_EQ(ref::occurrences(src, "for (int k_outer"), 1u) << src;    // one reduction loop, not one per virtual thread
  EXPECT_EQ(ref::occurrences(src, "float C_local[16];"), 1u) << src;  // 2x2 outputs for each of 4 virtual threads
}

TEST(Gpu, CudaSourceUsesSharedMemoryAndLaunchBounds) {
  TiledGemm g(64, 64, 64);
  Module m = build(g.s, {g.A, g.B, g.C}, {.target = Target::parse("cuda -arch=sm_90")});
  std::string src = m.source();
  EXPECT_NE(src.find("__shared__"), std::string::npos);
  EXPECT_NE(src.find("__syncthreads()"), std::string::npos);
  EXPECT_NE(src.find("__launch_bounds__(64)"), std::string::npos) << src;
}

TEST(Gpu, CrossThreadReductionOverThreadIdxX) {
  for (int64_t n : {31, 64, 100, 256}) {
    Tensor X = placeholder({5, n}, float32, "X");
    IterVar k = reduce_axis(n, "k");
    Tensor S = compute({5}, [&](Var i) { return sum(X(i, k), {k}); }, "S");
    Tensor M = compute({5}, [&](Var i) { return max(X(i, k), {k}); }, "M");
    for (int64_t threads : {16, 32, 64}) {
      Schedule s({S, M});
      for (auto& t : {S, M}) {
        auto [ko, ki] = s[t].split("k", threads);
        s[t].bind("i", "blockIdx.x");
        s[t].bind(ki, "threadIdx.x");
      }
      expect_matches_cpu(s, {X, S, M}, 1);
      if (nvrtc_available()) {
        std::string src = build(s, {X, S, M}, {.target = Target::parse("cuda")}).source();
        if (threads <= 32 && n >= threads) EXPECT_NE(src.find("__shfl_xor_sync"), std::string::npos) << src;
      }
    }
  }
}

TEST(Gpu, CrossThreadReductionAfterRfactor) {
  Tensor X = placeholder({6, 200}, float32, "X");
  IterVar k = reduce_axis(200, "k");
  Tensor S = compute({6}, [&](Var i) { return sum(X(i, k), {k}); }, "S");
  Schedule s({S});
  auto [ko, ki] = s[S].split("k", 32);
  Tensor RF = s.rfactor(S, ki);
  s[S].bind("i", "blockIdx.x");
  auto leaves = s[S].leaf_axes();
  s[S].bind(leaves.back(), "threadIdx.x");
  s[RF].compute_at(s[S], leaves.back());
  expect_matches_cpu(s, {X, S}, 1);
}

TEST(Gpu, ElementwiseVectorizedUsesFloat4) {
  Tensor A = placeholder({8, 256}, float32, "A");
  Tensor Y = ops::relu(A);
  Schedule s = ops::default_schedule({Y}, kOpenCL);
  std::string src = build(s, {A, Y}, {.target = kOpenCL}).source();
  EXPECT_NE(src.find("float4"), std::string::npos) << src;
  expect_matches_cpu(s, {A, Y}, 1);
}

TEST(Gpu, TargetsParseAndPrintBack) {
  for (const char* t : {"cuda -arch=sm_90", "cuda -arch=sm_80", "opencl"}) EXPECT_EQ(Target::parse(t).str(), t);
  EXPECT_EQ(Target::parse("cuda").arch, "sm_80");
  EXPECT_EQ(Target::parse("cuda -arch=sm_90").key(), "cuda/sm_90");
  EXPECT_EQ(Target::parse("cuda -arch=sm_90").max_shared_memory_optin, 227 * 1024);
  EXPECT_EQ(Target::parse("opencl").max_threads_per_block, 1024);
  EXPECT_FALSE(Target::parse("llvm").is_gpu());
}

// ---- must-fail ----

struct Simple {
  Tensor A = placeholder({64, 64}, float32, "A");
  Tensor B = compute({64, 64}, [&](Var i, Var j) { return A(i, j) * 2.0f; }, "B");
};

TEST(GpuErrors, MoreThan1024ThreadsPerBlock) {
  Simple x;
  Schedule s({x.B});
  s[x.B].bind("i", "threadIdx.y");
  s[x.B].bind("j", "threadIdx.x");
  expect_error([&] { build(s, {x.A, x.B}, {.target = kOpenCL}); },
               {"4096 threads per block", "at most 1024", "split the axis"});
}

TEST(GpuErrors, TooMuchSharedMemory) {
  Tensor A = placeholder({256, 256}, float32, "A");
  IterVar k = reduce_axis(256, "k");
  Tensor S = compute({256}, [&](Var i) { return sum(A(i, k), {k}); }, "S");
  Schedule s({S});
  Tensor sh = s.cache_read(A, "shared", {S});
  auto [io, ii] = s[S].split("i", 64);
  s[S].bind(io, "blockIdx.x");
  s[S].bind(ii, "threadIdx.x");
  s[sh].compute_at(s[S], io);
  s[sh].bind("j", "threadIdx.x");
  expect_error([&] { build(s, {A, S}, {.target = kOpenCL}); }, {"65536 bytes of shared memory", "49152"});
}

TEST(GpuErrors, ReductionBoundToBlockIdx) {
  Tensor A = placeholder({64, 64}, float32, "A");
  IterVar k = reduce_axis(64, "k");
  Tensor S = compute({64}, [&](Var i) { return sum(A(i, k), {k}); }, "S");
  Schedule s({S});
  s[S].bind("k", "blockIdx.x");
  s[S].bind("i", "threadIdx.x");
  expect_error([&] { build(s, {A, S}, {.target = kOpenCL}); },
               {"reduction axis 'k'", "blockIdx.x", "threadIdx.x", "rfactor"});
}

TEST(GpuErrors, SameTagBoundTwiceInOneStage) {
  Simple x;
  Schedule s({x.B});
  s[x.B].bind("i", "threadIdx.x");
  expect_error([&] { s[x.B].bind("j", "threadIdx.x"); }, {"threadIdx.x is already bound to axis 'i'"});
}

TEST(GpuErrors, UnboundRootStage) {
  Simple x;
  Schedule s({x.B});
  expect_error([&] { build(s, {x.A, x.B}, {.target = kOpenCL}); },
               {"stage 'B'", "none of its loops is bound", "blockIdx.x"});
}

TEST(GpuErrors, UnknownScope) {
  Simple x;
  Schedule s({x.B});
  Tensor c = s.cache_read(x.A, "texture", {x.B});
  expect_error([&] { build(s, {x.A, x.B}, {.target = kOpenCL}); }, {"unknown storage scope 'texture'", "\"shared\""});
}

TEST(GpuErrors, ParallelOnGpu) {
  Simple x;
  Schedule s({x.B});
  s[x.B].bind("j", "threadIdx.x");
  s[x.B].parallel("i");
  expect_error([&] { build(s, {x.A, x.B}, {.target = kOpenCL}); }, {"axis 'i' is parallel", "bind"});
}

TEST(GpuErrors, BoundLoopOnTheCpu) {
  Simple x;
  Schedule s({x.B});
  s[x.B].bind("j", "threadIdx.x");
  expect_error([&] { build(s, {x.A, x.B}); }, {"bound to threadIdx.x", "GPU target"});
}

TEST(GpuErrors, MissingDriverSaysTheKernelCompiled) {
  if (!nvrtc_available()) GTEST_SKIP() << "NVRTC (libnvrtc.so) is not installed";
  if (!cuda_device_name().empty()) GTEST_SKIP() << "a CUDA device is present";
  Simple x;
  Schedule s = ops::default_schedule({x.B}, Target::parse("cuda"));
  Module m = build(s, {x.A, x.B}, {.target = Target::parse("cuda")});
  Buffer a({64, 64}, float32), b({64, 64}, float32);
  expect_error([&] { m(a, b); }, {"libcuda.so.1", "compiled for sm_80", "cannot run on this machine"});
}

TEST(GpuErrors, BarrierUnderAThreadDependentCondition) {
  // The fetch is bound to more threads than the consumer: the consumer, and the barrier
  // its loop needs, would run under `threadIdx.x < 4`.
  TiledGemm g(64, 64, 64);
  Schedule s({g.C});
  Tensor CL = s.cache_write(g.C, "local");
  auto [io, ii] = s[g.C].split("i", 4);
  s[g.C].bind(io, "blockIdx.x");
  s[g.C].bind(ii, "threadIdx.x");
  s[CL].compute_at(s[g.C], ii);
  auto [ko, ki] = s[CL].split("k", 8);
  Tensor sh = s.cache_read(g.B, "shared", {CL});
  s[sh].compute_at(s[CL], ko);
  auto [o, t] = s[sh].split(s[sh].fuse("i", "j"), 64);
  s[sh].bind(t, "threadIdx.x");
  expect_error([&] { build(s, {g.A, g.B, g.C}, {.target = kOpenCL}); },
               {"barrier is needed inside a condition that depends on the thread index"});
}

}  // namespace
