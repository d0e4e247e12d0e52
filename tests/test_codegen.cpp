// The LLVM back end: vector instructions, threads, IR/assembly dumps, exported libraries.
#include <dlfcn.h>

#include <cstdio>
#include <fstream>
#include <mutex>
#include <regex>
#include <set>
#include <sstream>
#include <thread>

#include "runtime/Runtime.h"

#include "reference.h"
#include "tessel/ops.h"

using namespace tessel;

namespace {
Tensor scale_add(Tensor A, Tensor B) {
  return compute(A.shape(), [&](Var i, Var j) { return A(i, j) * 3.0f + B(i, j); }, "Y");
}
}  // namespace

TEST(CodeGen, VectorizedLoopBecomesVectorInstructions) {
  Tensor A = placeholder({64, 64}, float32, "A");
  Tensor B = placeholder({64, 64}, float32, "B");
  Tensor Y = scale_add(A, B);
  Schedule s({Y});
  auto [jo, ji] = s[Y].split("j", 16);
  s[Y].vectorize(ji);
  Module m = build(s, {A, B, Y});
  std::string ir = m.llvm_ir(), as = m.assembly();
  EXPECT_NE(ir.find("<16 x float>"), std::string::npos) << ir;
  // On an AVX-512 machine 16 floats fill a zmm register; otherwise two ymm or four xmm.
  bool vector_regs = as.find("zmm") != std::string::npos || as.find("ymm") != std::string::npos ||
                     as.find("xmm") != std::string::npos;
  EXPECT_TRUE(vector_regs) << as;
  EXPECT_NE(as.find("vfmadd"), std::string::npos) << "a*b+c should contract into an FMA:\n" << as;
}

TEST(CodeGen, ScalarScheduleHasNoWideVectors) {
  Tensor A = placeholder({8, 8}, float32, "A");
  Tensor B = placeholder({8, 8}, float32, "B");
  Tensor Y = scale_add(A, B);
  Schedule s({Y});
  std::string ir = lower(s, {A, B, Y}).str();
  EXPECT_EQ(ir.find("ramp("), std::string::npos);
}

TEST(CodeGen, ParallelLoopRunsOnSeveralThreads) {
  Tensor A = placeholder({4096, 64}, float32, "A");
  Tensor B = placeholder({4096, 64}, float32, "B");
  Tensor Y = scale_add(A, B);
  Schedule s({Y});
  s[Y].parallel("i");
  EXPECT_NE(build(s, {A, B, Y}).llvm_ir().find("tessel_parallel_for"), std::string::npos);
  int before = num_threads();
  set_num_threads(2);
  EXPECT_EQ(num_threads(), 2);
  // The runtime entry the kernel calls hands chunks to distinct threads.
  struct Seen {
    std::mutex mu;
    std::set<std::thread::id> ids;
  } seen;
  auto task = [](int64_t b, int64_t e, void* p) {
    auto* s = static_cast<Seen*>(p);
    std::this_thread::sleep_for(std::chrono::milliseconds(20));  // both chunks overlap in time
    std::lock_guard<std::mutex> lk(s->mu);
    s->ids.insert(std::this_thread::get_id());
  };
  tessel_parallel_for(task, &seen, 0, 2);
  EXPECT_EQ(seen.ids.size(), 2u);
  Buffer a = ref::random(A.shape(), 1), b = ref::random(B.shape(), 2);
  Buffer y = ref::run(s, {A, B, Y}, {a, b})[0];
  for (int64_t i = 0; i < y.size(); i += 101) EXPECT_FLOAT_EQ(y.get(i), float(a.get(i) * 3 + b.get(i)));
  set_num_threads(before);
}

TEST(CodeGen, DumpIrAfterEveryPass) {
  Tensor A = placeholder({8, 8}, float32, "A");
  Tensor B = placeholder({8, 8}, float32, "B");
  Tensor Y = scale_add(A, B);
  Schedule s({Y});
  std::vector<std::string> passes;
  LowerOptions o;
  o.dump = [&](const std::string& pass, const std::string& ir) {
    passes.push_back(pass);
    EXPECT_FALSE(ir.empty());
  };
  lower(s, {A, B, Y}, "k", o);
  EXPECT_EQ(passes, (std::vector<std::string>{"make_loop_nest", "simplify", "remove_true_guards", "storage_flatten",
                                              "vectorize_loops", "inject_prefetch", "spread_parallel_parts",
                                              "unroll_loops", "simplify", "place_skippable_guards", "unswitch_loops",
                                              "storage_rewrite"}));
}

// The lines of each loop over `var` in readable IR that hold an `if`.
std::vector<std::string> ifs_inside_loops(const std::string& ir, const std::string& var, int* loops) {
  std::vector<std::string> found;
  std::istringstream in(ir);
  std::string line;
  size_t loop_indent = std::string::npos;
  *loops = 0;
  while (std::getline(in, line)) {
    size_t indent = line.find_first_not_of(' ');
    if (indent == std::string::npos) continue;
    if (loop_indent != std::string::npos && indent <= loop_indent) loop_indent = std::string::npos;
    if (line.compare(indent, 5 + var.size(), "for (" + var) == 0) loop_indent = indent, ++*loops;
    else if (loop_indent != std::string::npos && line.compare(indent, 3, "if ") == 0) found.push_back(line);
  }
  return found;
}

TEST(CodeGen, GuardsEveryIterationDecidesAlikeComeOutOfTheLoop) {
  // Blocks of 4 of 10 output channels (3, the last partial) in pairs, the pairs parallel:
  // loop partitioning cannot take the guards of the second pair's block out of its loop
  // (they depend on the pair). They decide alike in every step of the reduction, so it is
  // copied for each outcome, each copy without a branch inside. The guards of a block's
  // rows (8p + 4 + t < 10 for its rows t) decide together: the first block of a pair has
  // two (rows 2 and 3: 3 copies), the second four, and its own (2 x 5 copies, less those
  // left empty); each condition on its own would make 4 + 32.
  Tensor X = placeholder({1, 32, 8, 8}, float32, "X"), Wt = placeholder({10, 32, 1, 1}, float32, "W");
  Tensor Y = ops::conv2d_nchw(X, Wt, {});
  Schedule s({Y});
  Stage o = s[Y];
  auto axes = o.leaf_axes();  // n k y x rc ry rx
  Axis p = o.fuse({axes[2], axes[3]});
  auto [ko, ki] = o.split(axes[1], 4);
  auto [po, pi] = o.split(p, 16);
  auto [koo, koi] = o.split(ko, 2);
  o.reorder({axes[0], po, koo, koi, axes[4], axes[5], axes[6], ki, pi});
  o.parallel(o.fuse({axes[0], po, koo}));
  o.unroll(ki);
  o.vectorize(pi);
  int loops = 0;
  std::string ir = lower(s, {X, Wt, Y}).str();
  EXPECT_EQ(ifs_inside_loops(ir, "rc", &loops), std::vector<std::string>{}) << ir;
  EXPECT_LE(loops, 13) << ir;
  Buffer x = ref::random(X.shape(), 1), w = ref::random(Wt.shape(), 2);
  ref::expect_close(ref::run(s, {X, Wt, Y}, {x, w})[0], ref::conv2d_nchw(x, w, {}));
}

TEST(CodeGen, ExportSharedLibraryWithHeader) {
  Tensor A = placeholder({16, 16}, float32, "A");
  Tensor B = placeholder({16, 16}, float32, "B");
  Tensor Y = scale_add(A, B);
  Schedule s({Y});
  s[Y].parallel("i");
  s[Y].vectorize("j");
  BuildOptions o;
  o.name = "scale_add";
  Module m = build(s, {A, B, Y}, o);
  std::string dir = TESSEL_TEST_TMP;
  std::string so = dir + "/scale_add.so", h = dir + "/scale_add.h";
  m.export_library(so, h);
  std::ifstream hf(h);
  std::string header((std::istreambuf_iterator<char>(hf)), std::istreambuf_iterator<char>());
  EXPECT_NE(header.find("int32_t scale_add(void* const* args);"), std::string::npos) << header;
  EXPECT_NE(header.find("args[2]: Y float32[16, 16]"), std::string::npos) << header;
  EXPECT_NE(header.find("Compiled for the CPU " + host_cpu_name()), std::string::npos) << header;
  EXPECT_NE(header.find("TESSEL_NUM_THREADS"), std::string::npos) << header;
  // Linked with `-z text`: position-independent, or the link would have failed.
  void* lib = dlopen(so.c_str(), RTLD_NOW | RTLD_LOCAL);
  ASSERT_TRUE(lib) << dlerror();
  auto fn = reinterpret_cast<int32_t (*)(void* const*)>(dlsym(lib, "scale_add"));
  ASSERT_TRUE(fn);
  // Only the entry point is exported, not the runtime linked into it.
  EXPECT_EQ(dlsym(lib, "tessel_parallel_for"), nullptr);
  EXPECT_EQ(dlsym(lib, "tessel_alloc"), nullptr);
  Buffer a = ref::random(A.shape(), 1), b = ref::random(B.shape(), 2), y({16, 16}, float32);
  void* args[] = {a.raw(), b.raw(), y.raw()};
  EXPECT_EQ(fn(args), 0);
  for (int i = 0; i < 256; ++i) EXPECT_FLOAT_EQ(y.get(i), float(a.get(i) * 3 + b.get(i)));
  dlclose(lib);
  m.export_object(dir + "/scale_add.o");
  std::ifstream obj(dir + "/scale_add.o", std::ios::binary);
  char magic[4] = {};
  obj.read(magic, 4);
  EXPECT_EQ(std::string(magic + 1, 3), "ELF");
}

TEST(CodeGen, HostCpuIsDetected) {
  EXPECT_FALSE(host_cpu_name().empty());
  EXPECT_NE(host_cpu_name(), "generic");
  EXPECT_FALSE(host_cpu_features().empty());
}

TEST(CodeGen, TargetOverride) {
  Tensor A = placeholder({64, 64}, float32, "A");
  Tensor B = placeholder({64, 64}, float32, "B");
  Tensor Y = scale_add(A, B);
  Schedule s({Y});
  auto [jo, ji] = s[Y].split("j", 16);
  s[Y].vectorize(ji);
  BuildOptions o;
  o.target = Target::parse("llvm -mcpu=x86-64-v2");  // SSE4.2 only: no ymm/zmm registers
  std::string as = build(s, {A, B, Y}, o).assembly();
  EXPECT_EQ(as.find("zmm"), std::string::npos);
  EXPECT_EQ(as.find("ymm"), std::string::npos);
  EXPECT_NE(as.find("xmm"), std::string::npos);
}

TEST(CodeGen, LargeScratchBuffersLiveOnTheHeap) {
  Tensor A = placeholder({512, 512}, float32, "A");
  Tensor T = compute({512, 512}, [&](Var i, Var j) { return A(j, i) + 1.0f; }, "T");
  Tensor Y = compute({512, 512}, [&](Var i, Var j) { return T(j, i) * 2.0f; }, "Y");
  Schedule s({Y});
  Module m = build(s, {A, Y});
  // Its memory is fresh (noalias, as malloc's), so that LLVM may keep values of it in registers.
  EXPECT_NE(m.llvm_ir().find("declare noalias ptr @tessel_alloc"), std::string::npos) << m.llvm_ir();
  Buffer a = ref::random(A.shape(), 1), y({512, 512}, float32);
  m(a, y);
  for (int64_t i = 0; i < y.size(); i += 997) EXPECT_FLOAT_EQ(y.get(i), float((a.get(i) + 1) * 2));
}

// Kernels allocate their scratch on every call; a freed block is handed to the next call
// instead of fresh pages that would page-fault again (see Workspace.cpp).
TEST(CodeGen, ScratchBlocksAreReusedAcrossCalls) {
  const int64_t mb = int64_t(1) << 20;
  void* p = tessel_alloc(mb);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % 64, 0u);
  static_cast<char*>(p)[mb / 2] = 42;
  tessel_free(p);
  void* q = tessel_alloc(mb - 100);  // fits the freed block: the same pages, never returned to the system
  EXPECT_EQ(q, p);
  EXPECT_EQ(static_cast<char*>(q)[mb / 2], 42);
  void* r = tessel_alloc(mb);  // q is in use: another block
  EXPECT_NE(r, q);
  tessel_free(q);
  void* big = tessel_alloc(4 * mb);  // the kept 1 MiB block is too small for it
  EXPECT_NE(big, q);
  void* small = tessel_alloc(4096);  // and a 1 MiB block too wasteful for 4 KiB
  EXPECT_NE(small, q);
  for (void* b : {r, big, small}) tessel_free(b);
}

// Index arithmetic is signed and does not wrap (nsw), so LLVM widens it to 64 bits once per
// loop instead of sign-extending every address: in a parallel loop (whose bounds LLVM
// cannot see) a 3x3 conv2d spent a lea + movslq on each weight load without it.
TEST(CodeGen, IndexArithmeticIsNotSignExtendedPerAccess) {
  Tensor A = placeholder({64, 100}, float32, "A");
  Tensor B = placeholder({100, 64}, float32, "B");
  IterVar k = reduce_axis(100, "k");
  Tensor Y = compute({64, 64}, [&](Var i, Var j) { return sum(A(i, k) * B(k, j), {k}); }, "Y");
  Schedule s({Y});
  s[Y].split("k", 4);
  s[Y].reorder({"i", "k.outer", "j", "k.inner"});
  s[Y].unroll("k.inner");
  s[Y].parallel("i");
  Module m = build(s, {A, B, Y});
  std::string as = m.assembly();
  int sign_extensions = 0;
  for (size_t p = 0; (p = as.find("movslq", p)) != std::string::npos; ++p) ++sign_extensions;
  EXPECT_LE(sign_extensions, 2) << "the parallel loop's bounds may be sign-extended, not its accesses:\n" << as;
  Buffer a = ref::random(A.shape(), 1), b = ref::random(B.shape(), 2), y({64, 64}, float32);
  m(a, b, y);
  ref::expect_close(y, ref::matmul(a, b));
}

// A schedule the tuner drew (NCHW conv2d 64@56 with its padding inlined, vectorized 21
// wide): LLVM 19 gave one of its gathers the same register as destination and index, an
// encoding the CPU rejects, and the kernel died of SIGILL. Scattered lanes are now loaded
// one by one (see parse_llvm_target).
TEST(CodeGen, ScatteredLoadsAreNotGathers) {
  Tensor X = placeholder({1, 64, 56, 56}, float32, "X");
  Tensor W = placeholder({64, 64, 3, 3}, float32, "Wt");
  ops::Conv2dParams p;
  p.pad_h = p.pad_w = 1;
  Tensor Y = ops::conv2d_nchw(X, W, p);
  const char* steps = R"([["cache_write","conv","local"],
    ["split","conv.local","i",1],["split","conv.local","i.inner",1],["split","conv.local","i.inner.inner",1],
    ["split","conv.local","j",1],["split","conv.local","j.inner",1],["split","conv.local","j.inner.inner",1],
    ["split","conv.local","k",52],["split","conv.local","k.inner",13],["split","conv.local","k.inner.inner",13],
    ["split","conv.local","l",42],["split","conv.local","l.inner",21],["split","conv.local","l.inner.inner",21],
    ["split","conv.local","rc",19],["split","conv.local","ry",2],["split","conv.local","rx",1],
    ["reorder","conv.local",["i.outer","j.outer","k.outer","l.outer","i.inner.outer","j.inner.outer",
      "k.inner.outer","l.inner.outer","rc.outer","ry.outer","rx.outer","i.inner.inner.outer",
      "j.inner.inner.outer","k.inner.inner.outer","l.inner.inner.outer","rc.inner","ry.inner","rx.inner",
      "i.inner.inner.inner","k.inner.inner.inner","j.inner.inner.inner","l.inner.inner.inner"]],
    ["split","conv","i",1],["split","conv","i.inner",1],["split","conv","j",1],["split","conv","j.inner",1],
    ["split","conv","k",52],["split","conv","k.inner",13],["split","conv","l",42],["split","conv","l.inner",21],
    ["reorder","conv",["i.outer","j.outer","k.outer","l.outer","i.inner.outer","j.inner.outer","k.inner.outer",
      "l.inner.outer","i.inner.inner","j.inner.inner","k.inner.inner","l.inner.inner"]],
    ["fuse","conv",["i.outer","j.outer","k.outer"]],["parallel","conv","i.outer.j.outer.k.outer.fused"],
    ["vectorize","conv","l.inner.inner"],["compute_at","conv.local","conv","l.inner.outer"],
    ["vectorize","conv.local","l.inner.inner.inner"],["pragma","conv.local","i.outer","auto_unroll_max_step",16],
    ["unroll","conv.local","k.inner.inner.inner"],["compute_inline","conv.pad"]])";
  Module m = build(Schedule::replay({Y}, steps_from_json(steps)), {X, W, Y});
  EXPECT_EQ(m.assembly().find("gather"), std::string::npos);
  Buffer x = ref::random(X.shape(), 1), w = ref::random(W.shape(), 2), y(Y.shape(), float32);
  m(x, w, y);
  ref::expect_close(y, ref::conv2d_nchw(x, w, p));
}

TEST(CodeGen, StridedLoadsAreOneReadAndAShuffle) {
  // Every second (third, fourth) element in vector lanes: a contiguous read of the span and a
  // shuffle, not a gather; the read stops at the last lane's element, here the buffer's last.
  for (int64_t stride : {2, 3, 4}) {
    int64_t n = 8 * 5;
    Tensor A = placeholder({(n - 1) * stride + 1}, float32, "A");
    Tensor B = compute({n}, [&](Var i) { return A(i * int(stride)) * 2.0f; }, "B");
    Schedule s({B});
    auto [o, i] = s[B].split("i", 8);
    s[B].vectorize(i);
    Module m = build(s, {A, B});
    EXPECT_EQ(m.assembly().find("gather"), std::string::npos) << "stride " << stride;
    Buffer a = ref::random(A.shape(), 3), b({n}, float32);
    m(a, b);
    for (int64_t k = 0; k < n; ++k) ASSERT_FLOAT_EQ(b.get(k), float(a.get(k * stride) * 2)) << "stride " << stride;
  }
}

// The columns of a tile of L rows (J columns, R apart) copied out one column at a time, as a
// channel-blocked NCHW convolution copies out its accumulators: a transpose in registers, a
// machine vector of columns at a time, not a gather per column. More than two tiles run in a
// loop (a depthwise layer's plane packed), their rows put together from 128-bit pieces; a last
// partial tile of at least 4 columns reads its rows with masked loads (the rows end at the
// buffer's end), fewer columns stay gathers. With AVX2 and the host's vectors.
TEST(CodeGen, ColumnCopiesAreTransposedInRegisters) {
  for (const Target& t : {Target::host(), Target::parse("llvm -mcpu=haswell")}) {
    int64_t w = t.vector_bytes / 4;
    BuildOptions o;
    o.target = t;
    for (int64_t L : {3, 7, 8})
      for (int64_t J : {w, 2 * w, 3 * w + 4, w + 2, int64_t(5)}) {
        int64_t R = J;
        Tensor In = placeholder({L, R}, float32, "In");
        Tensor T = compute({J, L}, [&](Var j, Var x) { return In(x, j) * 2.0f; }, "T");
        Schedule s({T});
        s[T].vectorize(T.axis(1));
        Module m = build(s, {In, T}, o);
        std::string ir = m.llvm_ir();
        bool gathers = J % w > 0 && J % w < 4;
        EXPECT_EQ(ir.find("masked.gather") != std::string::npos, gathers) << "L " << L << ", J " << J;
        EXPECT_EQ(ir.find("masked.load") != std::string::npos, J % w >= 4) << "L " << L << ", J " << J;
        Buffer in = ref::random(In.shape(), 6), out(T.shape(), float32);
        m(in, out);
        for (int64_t j = 0; j < J; ++j)
          for (int64_t x = 0; x < L; ++x)
            ASSERT_FLOAT_EQ(out.get(j * L + x), float(in.get(x * R + j)) * 2) << "L " << L << ", J " << J << ": " << j;
      }
  }
}

// A padded copy reads X[clamp(j - 1)] where 1 <= j < 14: lanes of one vector fall on both
// sides of the border. The clamp is dropped and the read masked by the select's condition:
// one masked load, not a gather of clamped lanes; at stride 2 (the padding inlined into its
// strided reader) one masked read of the span and a shuffle.
TEST(CodeGen, PaddedReadsAreMaskedVectorLoads) {
  Tensor X = placeholder({4, 13}, float32, "X");
  Tensor P = ops::pad(X, {0, 1}, {0, 2}, 0.0, "P");  // [4, 16]
  Tensor S = compute({4, 8}, [&](Var i, Var j) { return P(i, j * 2 + 1) + P(i, j * 2); }, "S");
  Schedule s({P, S});
  s[P].vectorize("j");
  s[S].vectorize("j");
  Module m = build(s, {X, P, S});
  std::string ir = m.llvm_ir();
  EXPECT_EQ(ir.find("masked.gather"), std::string::npos) << ir;
  EXPECT_NE(ir.find("masked.load"), std::string::npos) << ir;
  Buffer x = ref::random(X.shape(), 4), p({4, 16}, float32), out({4, 8}, float32);
  m(x, p, out);
  auto padded = [&](int64_t i, int64_t j) { return j >= 1 && j < 14 ? float(x.get(i * 13 + j - 1)) : 0.0f; };
  for (int64_t i = 0; i < 4; ++i) {
    for (int64_t j = 0; j < 16; ++j) ASSERT_FLOAT_EQ(p.get(i * 16 + j), padded(i, j)) << i << "," << j;
    for (int64_t j = 0; j < 8; ++j)
      ASSERT_FLOAT_EQ(out.get(i * 8 + j), padded(i, 2 * j + 1) + padded(i, 2 * j)) << i << "," << j;
  }
}

// A padded read's select(c, X[i] if c, 0), dense or at stride 2, is the masked load alone, its
// inactive lanes read as zero (a zero-masking load): no select (a blend or an and with the mask)
// after it, one more instruction for each of a padded depthwise window's taps.
TEST(CodeGen, PaddedReadsNeedNoSelectAfterTheMaskedLoad) {
  Tensor X = placeholder({4, 13}, float32, "X");
  Tensor P = ops::pad(X, {0, 1}, {0, 2}, 0.0, "P");  // [4, 16]
  Schedule s({P});
  s[P].vectorize("j");
  Module m = build(s, {X, P});
  std::string ir = m.llvm_ir();
  EXPECT_NE(ir.find("masked.load"), std::string::npos) << ir;
  EXPECT_EQ(ir.find(" select "), std::string::npos) << ir;
  EXPECT_EQ(ir.find("shufflevector"), std::string::npos) << ir;
  Buffer x = ref::random(X.shape(), 5), p({4, 16}, float32);
  m(x, p);
  auto padded = [&](int64_t i, int64_t j) { return j >= 1 && j < 14 ? float(x.get(i * 13 + j - 1)) : 0.0f; };
  for (int64_t i = 0; i < 4; ++i)
    for (int64_t j = 0; j < 16; ++j) ASSERT_FLOAT_EQ(p.get(i * 16 + j), padded(i, j)) << i << "," << j;
  // Read at stride 2 through the inlined padding (a strided depthwise window's taps): the masked
  // read of the span alone too.
  Tensor S = compute({4, 8}, [&](Var i, Var j) { return P(i, j * 2 + 1) * 3.0f; }, "S");
  Schedule t({S});
  t[P].compute_inline();
  t[S].vectorize("j");
  Module ms = build(t, {X, S});
  ir = ms.llvm_ir();
  EXPECT_NE(ir.find("masked.load"), std::string::npos) << ir;
  EXPECT_EQ(ir.find(" select "), std::string::npos) << ir;
  EXPECT_EQ(ir.find("insertelement"), std::string::npos) << ir;  // the padding's lane, zeroed again
  Buffer out({4, 8}, float32);
  ms(x, out);
  for (int64_t i = 0; i < 4; ++i)
    for (int64_t j = 0; j < 8; ++j) ASSERT_FLOAT_EQ(out.get(i * 8 + j), padded(i, 2 * j + 1) * 3) << i << "," << j;
}

namespace {
// Vector loads of more than one element in LLVM IR: plain or masked (a masked load of one element
// is a shifted strided read's scalar).
size_t vector_loads(const std::string& ir) {
  size_t loads = 0;
  std::istringstream lines(ir);
  for (std::string l; std::getline(lines, l);)
    loads += l.find(" = load <") != std::string::npos ||
             (l.find(" call ") != std::string::npos && l.find("@llvm.masked.load.v") != std::string::npos &&
              l.find("@llvm.masked.load.v1f32") == std::string::npos);
  return loads;
}
}  // namespace

// A stride-2 window's taps 2j + 1, 2j + 2, 2j + 3 read two phases of the same elements: the
// reads of one statement share one load of a span, and only of the elements read: the row ends
// at the last tap's last element. The taps 2j + 2 and 2j + 3 read the span from 2j + 2; 2j + 1
// is the third's lanes one lane on and one element before with AVX-512
// (StridedReadOneStrideBeforeASpanShiftsIt): one vector load, not three; with AVX2 two.
TEST(CodeGen, StridedReadsOfOneSpanShareALoad) {
  int64_t w = Target::host().vector_bytes / 4, n = 2 * w + 2;  // the last tap reads element n - 1
  Tensor X = placeholder({3, n}, float32, "X");
  Tensor S = compute({3, w}, [&](Var i, Var j) {
    return X(i, j * 2 + 1) + X(i, j * 2 + 2) * 2.0f + X(i, j * 2 + 3) * 3.0f;
  }, "S");
  Schedule s({S});
  s[S].vectorize("j");
  Module m = build(s, {X, S});
  std::string ir = m.llvm_ir();
  EXPECT_EQ(vector_loads(ir), Target::host().avx512() ? 1u : 2u) << ir;
  Buffer x = ref::random(X.shape(), 8), out(S.shape(), float32);
  m(x, out);
  for (int64_t i = 0; i < 3; ++i)
    for (int64_t j = 0; j < w; ++j) {
      auto at = [&](int64_t c) { return float(x.get(i * n + c)); };
      ASSERT_FLOAT_EQ(out.get(i * w + j), at(2 * j + 1) + at(2 * j + 2) * 2 + at(2 * j + 3) * 3) << i << "," << j;
    }
}

// A stride-2 window through the padding, taps 2j - 1, 2j, 2j + 1: with AVX-512 the first tap's lanes
// but its first are the third's, one lane on, so it reads the others' span and one element more
// (masked: at row 0 that element lies before the buffer, and it is the padding at every row). One
// vector load in all, where the first tap has its own span with AVX2 (whose lane shift would cross
// the 128-bit halves that ShuffleOrder.h keeps the taps in).
TEST(CodeGen, StridedReadOneStrideBeforeASpanShiftsIt) {
  for (const char* cpu : {"haswell", "skylake-avx512"}) {
    BuildOptions o;
    o.target = Target::parse(std::string("llvm -mcpu=") + cpu);
    int64_t w = o.target.vector_bytes / 4, n = 2 * w;
    Tensor X = placeholder({3, n}, float32, "X");
    Tensor P = ops::pad(X, {0, 1}, {0, 0}, 0.0, "P");  // P(i, c) = X(i, c - 1), zero at c = 0
    Tensor S = compute({3, w}, [&](Var i, Var j) {
      return P(i, j * 2) + P(i, j * 2 + 1) * 2.0f + P(i, j * 2 + 2) * 3.0f;
    }, "S");
    Schedule s({S});
    s[P].compute_inline();
    s[S].vectorize("j");
    Module m = build(s, {X, S}, o);
    std::string ir = m.llvm_ir();
    EXPECT_EQ(vector_loads(ir), o.target.avx512() ? 1u : 2u) << cpu << "\n" << ir;
    if (o.target.avx512() && !Target::host().avx512()) continue;  // runs only where the CPU can
    Buffer x = ref::random(X.shape(), 9), out(S.shape(), float32);
    m(x, out);
    for (int64_t i = 0; i < 3; ++i)
      for (int64_t j = 0; j < w; ++j) {
        auto at = [&](int64_t c) { return c >= 0 ? float(x.get(i * n + c)) : 0.0f; };
        ASSERT_FLOAT_EQ(out.get(i * w + j), at(2 * j - 1) + at(2 * j) * 2 + at(2 * j + 1) * 3) << cpu << " " << i;
      }
  }
}

// A strided read whose whole span lies in the buffer for every iteration of the enclosing loops
// loads the span plain, its padding (a predicated read) a select after the shuffle; where the
// span of the last row would pass the buffer's end, the read stays masked to its elements.
TEST(CodeGen, StridedReadsLoadTheirWholeSpanWhereItIsInBounds) {
  int64_t w = Target::host().vector_bytes / 4, n = 2 * w - 1;  // a row's span reaches one past it
  Tensor X = placeholder({4, n}, float32, "X");
  Tensor P = ops::pad(X, {0, 1}, {0, 0}, 0.0, "P");  // P(i, c) = X(i, c - 1), zero at c = 0
  auto masked_loads = [](const Module& m) {
    std::istringstream lines(m.llvm_ir());
    size_t k = 0;
    for (std::string l; std::getline(lines, l);)
      k += l.find(" call ") != std::string::npos && l.find("@llvm.masked.load.") != std::string::npos;
    return k;
  };
  Buffer x = ref::random(X.shape(), 11);
  auto at = [&](int64_t i, int64_t c) { return c >= 0 ? float(x.get(i * n + c)) : 0.0f; };
  for (int64_t rows : {4, 3}) {
    Tensor S = compute({rows, w}, [&](Var i, Var j) { return X(i, j * 2) * 2.0f; }, "S");
    Schedule s({S});
    s[S].vectorize("j");
    Module m = build(s, {X, S});
    EXPECT_EQ(masked_loads(m) > 0, rows == 4) << rows << " rows\n" << m.llvm_ir();
    Buffer out(S.shape(), float32);
    m(x, out);
    for (int64_t i = 0; i < rows; ++i)
      for (int64_t j = 0; j < w; ++j) ASSERT_FLOAT_EQ(out.get(i * w + j), at(i, 2 * j) * 2) << i << "," << j;
  }
  // Rows 1 to 3 through the padding: the first span starts at X's element n - 1.
  Tensor T = compute({3, w}, [&](Var i, Var j) { return P(i + 1, j * 2) * 3.0f; }, "T");
  Schedule t({T});
  t[P].compute_inline();
  t[T].vectorize("j");
  Module mt = build(t, {X, T});
  EXPECT_EQ(masked_loads(mt), 0u) << mt.llvm_ir();
  Buffer out(T.shape(), float32);
  mt(x, out);
  for (int64_t i = 0; i < 3; ++i)
    for (int64_t j = 0; j < w; ++j) ASSERT_FLOAT_EQ(out.get(i * w + j), at(i + 1, 2 * j - 1) * 3) << i << "," << j;
}

// A vector of two short rows' pixels (fused) read at stride 2: its lanes lie at constant offsets
// from one address, in two runs of columns a row of the input apart. Two loads of a machine vector
// and a two-source shuffle (LLVM's shufflevector), not a gather; the last image's second run
// passes the buffer's end and is read masked. Every tap, rows 1 and 2 at columns 2x and 2x + 1.
TEST(CodeGen, ShortRowsAtAStrideAreTwoLoadsAndAShuffle) {
  int64_t w = Target::host().vector_bytes / 4, OW = w / 2 - 1, W = 2 * OW + 1;  // 7 columns of 15 (AVX-512)
  Tensor X = placeholder({3, 4, W}, float32, "X");
  Tensor Y = compute({3, 2, OW}, [&](Var c, Var y, Var x) {
    return X(c, y * 2, x * 2) * 2.0f + X(c, y * 2 + 1, x * 2 + 1);
  }, "Y");
  Schedule s({Y});
  Axis p = s[Y].fuse({"j", "k"});
  s[Y].vectorize(p);
  Module m = build(s, {X, Y});
  std::string ir = m.llvm_ir();
  EXPECT_EQ(ir.find("masked.gather"), std::string::npos) << ir;
  EXPECT_NE(ir.find("masked.load"), std::string::npos) << ir;  // the last image's second run
  Buffer x = ref::random(X.shape(), 21), out(Y.shape(), float32);
  m(x, out);
  auto at = [&](int64_t c, int64_t r, int64_t col) { return float(x.get((c * 4 + r) * W + col)); };
  for (int64_t c = 0; c < 3; ++c)
    for (int64_t y = 0; y < 2; ++y)
      for (int64_t i = 0; i < OW; ++i)
        ASSERT_FLOAT_EQ(out.get((c * 2 + y) * OW + i), at(c, 2 * y, 2 * i) * 2 + at(c, 2 * y + 1, 2 * i + 1))
            << c << "," << y << "," << i;
}

// A padded stride-2 read of a de-interleaved copy: column 2j - 1 is phase (2j - 1) % 2 at
// (2j - 1) / 2, a gather as it stands; where the padding's condition holds (j >= 1) they are
// 1 and j - 1, so the read is one masked load of consecutive elements of phase 1.
TEST(CodeGen, PaddedReadsOfADeinterleavedCopyAreDense) {
  int64_t w = Target::host().vector_bytes / 4;
  Tensor X = placeholder({3, 2 * w}, float32, "X");
  Tensor P = ops::pad(X, {0, 1}, {0, 0}, 0.0, "P");
  Tensor S = compute({3, w}, [&](Var i, Var j) { return P(i, j * 2) + P(i, j * 2 + 1) * 2.0f; }, "S");
  Schedule s({S});
  Tensor D = s.deinterleave(X, {P}, 1, 2);
  s[P].compute_inline();
  s[S].vectorize("j");
  std::string lowered = lower(s, {X, S}, "f").str();
  EXPECT_NE(lowered.find("X.deint[ramp(((i*" + std::to_string(2 * w) + ") + " + std::to_string(w - 1) + "), 1, "),
            std::string::npos) << lowered;
  EXPECT_EQ(lowered.find("%"), std::string::npos) << lowered;
  Module m = build(s, {X, S});
  Buffer x = ref::random(X.shape(), 9), out(S.shape(), float32);
  m(x, out);
  for (int64_t i = 0; i < 3; ++i)
    for (int64_t j = 0; j < w; ++j) {
      float left = j >= 1 ? float(x.get(i * 2 * w + 2 * j - 1)) : 0.0f;
      ASSERT_FLOAT_EQ(out.get(i * w + j), left + float(x.get(i * 2 * w + 2 * j)) * 2) << i << "," << j;
    }
}

// A stride-2 depthwise layer's input in four phase planes (rows and columns de-interleaved,
// the planes stored whole) read over the fused output pixels p: a padded tap's read
// ((2 (p / 7) - 1) % 2, (2 (p / 7) - 1) / 2, ...) is dense where its condition (p / 7 >= 1, a
// quotient taken as a bounded variable) holds: plane (1, 1) at p - 8, a masked load.
TEST(CodeGen, PaddedReadsOfPhasePlanesOverFusedPixelsAreDense) {
  int64_t C = 2, H = 14, lanes = Target::host().vector_bytes / 4;
  ops::Conv2dParams p{2, 2, 1, 1, 1, 1, 1};
  Tensor X = placeholder({1, C, H, H}, float32, "X"), W = placeholder({C, 1, 3, 3}, float32, "W");
  Tensor Y = ops::depthwise_conv2d_nchw(X, W, p);
  Schedule s({Y});
  Tensor P = s.tensor(Y.name() + ".pad");
  Tensor cols = s.deinterleave(X, {P}, 3, 2);
  Tensor planes = s.deinterleave(cols, {P}, 2, 2);
  s[cols].compute_inline();
  s[P].compute_inline();
  auto d = s[planes].leaf_axes();  // n, c, row phase, row, column phase, column
  s[planes].reorder_storage({d[0], d[1], d[2], d[4], d[3], d[5]});
  Stage o = s[Y];
  auto a = o.leaf_axes();  // n, c, y, x, ry, rx
  auto [po, pi] = o.split(o.fuse({a[2], a[3]}), lanes);
  o.reorder({a[0], a[1], po, a[4], a[5], pi});
  o.unroll(a[4]);
  o.unroll(a[5]);
  o.vectorize(pi);
  std::string lowered = lower(s, {X, W, Y}, "f").str();
  std::string two = "x" + std::to_string(lanes) + "(2))";  // a vector phase or position: a gather
  EXPECT_EQ(lowered.find("% " + two), std::string::npos) << lowered;
  EXPECT_EQ(lowered.find("/" + two), std::string::npos) << lowered;
  Buffer x = ref::random(X.shape(), 17), w = ref::random(W.shape(), 18);
  p.groups = int(C);
  ref::expect_close(ref::run(s, {X, W, Y}, {x, w})[0], ref::conv2d_nchw(x, w, p));
}

// A clamp the condition does not imply stays: the read is of the clamped element.
TEST(CodeGen, ClampsTheConditionDoesNotImplyStay) {
  Tensor X = placeholder({16}, float32, "X");
  Tensor Y = compute({16}, [&](Var j) { return select(j >= 2, X(max(min(j - 4, 15), 0)), 1.0f); }, "Y");
  Schedule s({Y});
  s[Y].vectorize("i");
  Buffer x = ref::random(X.shape(), 5);
  Buffer y = ref::run(s, {X, Y}, {x})[0];
  for (int64_t j = 0; j < 16; ++j) ASSERT_FLOAT_EQ(y.get(j), j >= 2 ? float(x.get(std::max<int64_t>(j - 4, 0))) : 1.0f);
}

// 7 lanes (a 7x7 image's row) are one masked access of a machine vector (8 lanes with AVX2,
// 16 with AVX-512): LLVM splits a 7-wide load into pieces. The read and the write stop at
// the 7th element, here the buffers' last.
TEST(CodeGen, OddWidthVectorsAreOneMaskedAccess) {
  Tensor A = placeholder({3, 7}, float32, "A");
  Tensor B = compute({3, 7}, [&](Var i, Var j) { return A(i, j) * 2.0f; }, "B");
  Schedule s({B});
  s[B].vectorize("j");
  Module m = build(s, {A, B});
  std::string ir = m.llvm_ir();
  EXPECT_NE(ir.find("llvm.masked.load.v"), std::string::npos) << ir;
  EXPECT_NE(ir.find("llvm.masked.store.v"), std::string::npos) << ir;
  Buffer a = ref::random(A.shape(), 6), b({3, 7}, float32);
  m(a, b);
  for (int64_t k = 0; k < 21; ++k) ASSERT_FLOAT_EQ(b.get(k), float(a.get(k) * 2));
  // Rows whose machine vector lies inside the buffer for every row read (3 of 6 rows) are read
  // whole; their stores stay masked.
  Tensor A6 = placeholder({6, 7}, float32, "A6");
  Tensor B6 = compute({3, 7}, [&](Var i, Var j) { return A6(i, j) * 2.0f; }, "B6");
  Schedule s6({B6});
  s6[B6].vectorize("j");
  Module m6 = build(s6, {A6, B6});
  ir = m6.llvm_ir();
  EXPECT_EQ(ir.find("llvm.masked.load.v"), std::string::npos) << ir;
  EXPECT_NE(ir.find("llvm.masked.store.v"), std::string::npos) << ir;
  Buffer a6 = ref::random(A6.shape(), 8);
  m6(a6, b);
  for (int64_t k = 0; k < 21; ++k) ASSERT_FLOAT_EQ(b.get(k), float(a6.get(k) * 2));
  // A sum accumulated in place is read and written in its reduction loop: its accesses stay
  // plain, for LLVM to keep the accumulator in registers across the loop.
  Tensor X = placeholder({5, 3, 7}, float32, "X");
  IterVar k = reduce_axis(3, "k");
  Tensor S = compute({5, 7}, [&](Var i, Var j) { return sum(X(i, k.var(), j), {k}); }, "S");
  Schedule s2({S});
  s2[S].vectorize("j");
  Module m2 = build(s2, {X, S});
  EXPECT_EQ(m2.llvm_ir().find("masked.store"), std::string::npos) << m2.llvm_ir();
  Buffer x = ref::random(X.shape(), 7), got({5, 7}, float32);
  m2(x, got);
  for (int64_t i = 0; i < 5; ++i)
    for (int64_t j = 0; j < 7; ++j)
      ASSERT_NEAR(got.get(i * 7 + j), x.get(i * 21 + j) + x.get(i * 21 + 7 + j) + x.get(i * 21 + 14 + j), 1e-5);
}

// Rows of 15, 14, 13 and 11 floats as one vector end in part of a machine vector, stored
// with a constant mask. Zen 3's masked store is microcode (LLVM's model: one every 12
// cycles), so for it the part is stored in plain pieces (4 + 2 + 1 lanes, ...); Haswell's
// costs about one plain store and stays.
TEST(CodeGen, ConstantMaskedStoresSplitWhereTheCpuRunsThemSlowly) {
  std::regex masked_store(R"(vmaskmovps\s+%[xy]mm\d+,\s*%[xy]mm\d+,\s*[-0-9]*\()");
  for (const char* cpu : {"znver3", "haswell"}) {
    BuildOptions o;
    o.target = Target::parse(std::string("llvm -mcpu=") + cpu);
    for (int64_t W : {15, 14, 13, 11}) {
      Tensor X = placeholder({4, W}, float32, "X");
      Tensor Y = compute({4, W}, [&](Var i, Var j) { return X(i, j) * 2.0f + 1.0f; }, "Y");
      Schedule s({Y});
      s[Y].vectorize("j");
      Module m = build(s, {X, Y}, o);
      std::string as = m.assembly();
      auto stores = std::distance(std::sregex_iterator(as.begin(), as.end(), masked_store), std::sregex_iterator());
      if (std::string(cpu) == "znver3") EXPECT_EQ(stores, 0) << cpu << " W " << W << "\n" << as;
      else EXPECT_GT(stores, 0) << cpu << " W " << W << "\n" << as;
      // Beyond the rows: a guard the kernel must not write.
      Buffer x = ref::random(X.shape(), 3), y({4 * W + 8}, float32);
      y.fill(-7.0);
      m(x, Buffer::view(y, 0, {4, W}, float32));
      for (int64_t k = 0; k < 4 * W; ++k) ASSERT_FLOAT_EQ(y.get(k), float(x.get(k)) * 2 + 1) << cpu << " W " << W;
      for (int64_t k = 4 * W; k < 4 * W + 8; ++k) ASSERT_EQ(y.get(k), -7.0) << cpu << " W " << W;
    }
  }
}

// A 3x3 window at stride 2 over rows of 8, 7, 6 and 5 columns, the columns in vector lanes:
// each tap reads every other element of a span of 16. With AVX2 that is a vshufps, which
// leaves the lanes in the order 0 1 4 5 2 3 6 7, and a lane-crossing vpermpd; the sum and the
// max of the taps are lane-wise, so they run in the vshufps order and one vpermpd restores
// the order of each result (6 to 8 lanes; a row of 5 keeps a permute per tap). The padding's
// zeros (a blend of lanes) follow the order.
TEST(CodeGen, StrideTwoTapsRunInShuffleOrderWithAvx2) {
  BuildOptions o;
  o.target = Target::parse("llvm -mcpu=haswell");
  for (int64_t W : {8, 7, 6, 5}) {
    Tensor X = placeholder({4, 2 * W}, float32, "X");
    Tensor P = ops::pad(X, {1, 1}, {1, 1}, 0.0, "P");
    auto taps = [&](Var i, Var j, bool sum) {
      Expr r;
      for (int ky = 0; ky < 3; ++ky)
        for (int kx = 0; kx < 3; ++kx) {
          Expr t = P(i + ky, j * 2 + kx);
          if (sum) t = t * float(1 + 3 * ky + kx);
          r = !r.defined() ? t : sum ? r + t : max(r, t);
        }
      return r;
    };
    Tensor S = compute({4, W}, [&](Var i, Var j) { return taps(i, j, true); }, "S");
    Tensor M = compute({4, W}, [&](Var i, Var j) { return taps(i, j, false); }, "M");
    Schedule s({S, M});
    s[P].compute_inline();
    s[S].vectorize("j");
    s[M].vectorize("j");
    Module m = build(s, {X, S, M}, o);
    std::string as = m.assembly();
    size_t permutes = ref::occurrences(as, "vpermpd") + ref::occurrences(as, "vpermps");
    size_t shuffles = ref::occurrences(as, "vshufps");
    if (W >= 6) EXPECT_LT(permutes * 3, shuffles) << "W " << W << "\n" << as;
    else EXPECT_GE(permutes, shuffles / 2) << "W " << W << "\n" << as;
    Buffer x = ref::random(X.shape(), 10), sv(S.shape(), float32), mv(M.shape(), float32);
    m(x, sv, mv);
    auto at = [&](int64_t r, int64_t c) {
      return r >= 1 && r <= 4 && c >= 1 && c <= 2 * W ? float(x.get((r - 1) * 2 * W + c - 1)) : 0.0f;
    };
    for (int64_t i = 0; i < 4; ++i)
      for (int64_t j = 0; j < W; ++j) {
        float sum = 0, most = -INFINITY;
        for (int ky = 0; ky < 3; ++ky)
          for (int kx = 0; kx < 3; ++kx) {
            sum += at(i + ky, 2 * j + kx) * float(1 + 3 * ky + kx);
            most = std::max(most, at(i + ky, 2 * j + kx));
          }
        ASSERT_NEAR(sv.get(i * W + j), sum, 1e-4) << "W " << W << ": " << i << "," << j;
        ASSERT_FLOAT_EQ(mv.get(i * W + j), most) << "W " << W << ": " << i << "," << j;
      }
  }
}
