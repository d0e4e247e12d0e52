// Default x86 schedules for the operator library, chosen by each stage's tag.
#include <algorithm>
#include <functional>
#include <numeric>
#include <map>
#include <set>

#include "ir/IRMutator.h"
#include "ir/IRVisitor.h"
#include "ir/Simplify.h"
#include "schedule/ScheduleState.h"
#include "schedules/Common.h"

namespace tessel::ops {

const OperationNode* op_of(Schedule& s, const std::string& name) { return s.state().stage(name).op.get(); }

namespace {

int vector_lanes(DType t) { return t.bits == 64 ? 8 : 16; }

// Whether an input stays constant between calls (the weights, at inference).
using IsConstant = std::function<bool(const OperationNode*)>;

// Largest divisor of n that is <= cap (at least 1).
int64_t divisor_at_most(int64_t n, int64_t cap) {
  for (int64_t f = std::min(n, cap); f > 1; --f)
    if (n % f == 0) return f;
  return 1;
}

// Steps of op's reduction from its axis `from` on (from 1: a convolution's window, the taps
// per input channel).
int64_t reduction_steps(const OperationNode* op, size_t from = 0) {
  int64_t n = 1;
  for (size_t i = from; i < op->reduce_axis.size(); ++i) n *= op->reduce_axis[i].extent();
  return n;
}

// Element-wise stage `out` over the same iteration space as `acc`: a fusable epilogue.
bool is_epilogue(Schedule& s, const std::string& out, const std::string& acc) {
  const OperationNode* o = op_of(s, out);
  return o->tag == "elemwise" || o->tag == "broadcast" ? o->shape == op_of(s, acc)->shape : false;
}

// The output that all the stages reading `acc` lead to, directly or through one another, where
// every one of them is an epilogue of it (a graph's fused conv + bias + Clip, or matmul + bias
// + the GELU of Erf that reads the biased product twice): computed on the accumulator's
// block, the stages between inlined into it. Left out, such a chain runs as a pass of its own
// over a temporary of the whole product.
std::string epilogue_output(Schedule& s, const std::string& acc) {
  std::string out;
  std::vector<std::string> todo = s.state().readers(acc);
  std::set<std::string> seen;
  while (!todo.empty()) {
    std::string r = todo.back();
    todo.pop_back();
    if (!seen.insert(r).second) continue;
    std::vector<std::string> next = s.state().readers(r);
    if (!is_epilogue(s, r, acc)) return "";
    if (s.state().is_output(r)) {
      if (!out.empty() || !next.empty()) return "";
      out = r;
    }
    todo.insert(todo.end(), next.begin(), next.end());
  }
  return out;
}

// Runs the leading `axes` (of `extents` iterations) in parallel, fused only until there are
// enough iterations to share: each fused axis costs a division per iteration, which the
// innermost loop pays per element where it is short (NCHWc's block of one channel).
void parallel_prefix(Stage& st, const std::vector<Axis>& axes, const std::vector<int64_t>& extents) {
  std::vector<Axis> outer{axes[0]};
  int64_t iterations = extents[0];
  for (size_t d = 1; d < axes.size() && iterations < 256; ++d) outer.push_back(axes[d]), iterations *= extents[d];
  st.parallel(outer.size() > 1 ? st.fuse(outer) : outer[0]);
}

// A last axis of `extent` as vectors: split by `lanes`, or whole where it is shorter but
// still a vector (NCHW8c's block of 8 on AVX2).
bool whole_vector(int64_t extent, int lanes) { return extent < lanes && extent >= 4; }

// A loop of several vectors' worth of `axis` as vectors of `lanes`, unrolled, each its own: as one
// vector of 3 x 16 lanes (or any width not a power of two of the machine's) LLVM splits it lane by lane.
void vectorize_by_vector(Stage& st, const Axis& axis, int lanes) {
  auto [o, i] = st.split(axis, lanes);
  st.unroll(o);
  st.vectorize(i);
}

// Root element-wise/injective stage: vector inner, parallel outer.
void schedule_injective(Schedule& s, const std::string& name) {
  Stage st = s[name];
  auto axes = st.leaf_axes();
  if (axes.empty()) return;  // a scalar
  const OperationNode* op = op_of(s, name);
  int lanes = vector_lanes(op->dtype);
  int64_t last = op->shape.back();
  if (axes.size() > 1)
    parallel_prefix(st, {axes.begin(), axes.end() - 1}, {op->shape.begin(), op->shape.end() - 1});
  if (last >= lanes) {
    auto [o, i] = st.split(axes.back(), lanes);
    st.vectorize(i);
    if (axes.size() == 1) st.parallel(o);
  } else if (axes.size() == 1) {
    st.parallel(axes.back());
  } else if (whole_vector(last, lanes)) {
    st.vectorize(axes.back());
  }
}

// Root reduction without a specialised template: parallel over the outer spatial axes,
// reductions outside a vectorized block of the last spatial axis.
void schedule_reduction(Schedule& s, const std::string& name) {
  Stage st = s[name];
  const OperationNode* op = op_of(s, name);
  std::vector<std::string> sp, red;
  for (auto& iv : op->axis) sp.push_back(iv.name());
  for (auto& iv : op->reduce_axis) red.push_back(iv.name());
  if (sp.empty()) return;  // a reduction to a scalar runs as one loop nest
  int lanes = vector_lanes(op->dtype);
  std::vector<Axis> order;
  std::vector<Axis> outer(sp.begin(), sp.end() - 1);
  std::vector<int64_t> extents(op->shape.begin(), op->shape.end() - 1);
  Axis vec;
  int64_t last = op->shape.back();
  bool vectorize = last >= lanes || whole_vector(last, lanes);
  if (last >= lanes) {
    auto [o, i] = st.split(sp.back(), lanes);
    outer.push_back(o), extents.push_back((last + lanes - 1) / lanes);
    vec = i;
  } else if (vectorize) {
    vec = sp.back();
  } else {
    outer.push_back(sp.back()), extents.push_back(last);
  }
  for (auto& a : outer) order.push_back(a);
  for (auto& r : red) order.push_back(r);
  if (vectorize) order.push_back(vec);
  st.reorder(order);
  if (!outer.empty()) parallel_prefix(st, outer, extents);
  if (vectorize) st.vectorize(vec);
}

// Whether the k rows of a panel, `stride` bytes apart, evict each other from L2. Rows whose
// stride is a multiple of a large power of two fall into few cache sets: with an L2 of 16
// ways of 128 KB (2 MB, this Xeon), gcd(stride, 128 KB) bytes apart they keep 16 x 128 KB /
// gcd rows, and the panel of one block is read again for every strip of rows. Half of that
// leaves room for the other operand. Where the rows do not alias, packing costs more than it
// saves (a pass over the operand).
bool rows_alias(int64_t stride, int64_t rows) {
  int64_t span = 128 << 10;
  return rows > 8 * span / std::gcd(stride, span);
}

// The operand read along the output's columns j, B[k, j] or B[j, k] (dense weights), read
// in panels [j / bn, k, j % bn] so that the vector loop over j reads one contiguous row of
// a panel (B[j, k] unblocked gathers a column). A constant operand (the weights, at
// inference) is rewritten once; one that is not is packed on each call, a pass over it,
// where it is transposed or its rows alias (rows_alias). Returns the rewritten operand, if any.
Tensor block_column_operand(Schedule& s, const std::string& acc, int64_t bn, const IsConstant& constant) {
  const OperationNode* op = op_of(s, acc);
  size_t nd = op->axis.size();
  Tensor rewritten;
  if (op->reduce_axis.size() != 1 || nd < 2) return rewritten;
  const ExprNode* j = op->axis[nd - 1].var().get();
  const ExprNode* k = op->reduce_axis[0].var().get();
  for (auto& in : op->inputs()) {
    int dim = -1;
    bool transposed = true, plain = true;
    visit_exprs(op->body, [&](const Expr& e) {
      const TensorLoad* l = e.as<TensorLoad>();
      if (!l || l->op.get() != in.get()) return;
      transposed &= l->indices.back().get() == k;
      plain &= l->indices.back().get() == j;
      for (size_t d = 0; d < l->indices.size(); ++d)
        if (l->indices[d].get() == j) dim = int(d);
    });
    if (dim < 0 || in->shape[size_t(dim)] < bn || !(transposed || plain)) continue;
    if (constant(in.get())) {
      s.rewrite_layout(Tensor(in), dim, bn);
      rewritten = Tensor(in);
    } else if (transposed || rows_alias(in->shape.back() * in->dtype.bytes(), op->reduce_axis[0].extent())) {
      Stage p = s[s.pack(Tensor(in), {s.tensor(acc)}, dim, bn)];
      auto axes = p.leaf_axes();
      p.parallel(axes.front());
      p.vectorize(axes.back());
    }
  }
  return rewritten;
}

// Rows of a GEMM block: as many as keep the block's rows of A, over the whole reduction,
// within 2 MB (this Xeon's L2), at least 64. Each block reads its column panel of B, so B
// comes from memory once per block of rows: BERT's 128x768x3072 feed-forward GEMM, its 9 MB
// of weights read twice in blocks of 64 rows, ran 5.3 -> 4.1 ms at one thread in one block of
// 128 (caches flushed). Halved while there are fewer than 4 blocks a core.
int64_t gemm_block_rows(int64_t M, int64_t N, int64_t K, int64_t bn, int64_t mr, int bytes, const Target& target) {
  int64_t bm = std::min(M, std::max<int64_t>(64, (2 << 20) / (K * bytes) / mr * mr));
  while (bm > 64 && (M + bm - 1) / bm * ((N + bn - 1) / bn) < 4 * target.num_cores) bm = (bm / 2 + mr - 1) / mr * mr;
  return bm;
}

// GEMM: `out` (the stored result) tiled in bm x bn blocks run in parallel; the product is
// accumulated in a register-sized local block `acc` computed at each mr-row strip. Each block
// prefetches the next block's panel of rewritten weights while its strips compute: at
// inference the weights come from memory, and the first strip would otherwise wait for the
// whole panel (BERT's 128x768x3072 GEMM with caches flushed, one thread: 4.05 -> 3.23 ms).
void schedule_gemm(Schedule& s, const std::string& out, const std::string& acc, const IsConstant& constant,
                   const Target& target) {
  const OperationNode* op = op_of(s, out);
  int nd = int(op->shape.size());
  int64_t M = op->shape[nd - 2], N = op->shape[nd - 1];
  int lanes = vector_lanes(op->dtype);
  int64_t bn = N >= 2 * lanes ? 2 * lanes : std::max<int64_t>(1, std::min<int64_t>(N, lanes));
  int64_t mr = std::min<int64_t>(8, M);
  int64_t bm = gemm_block_rows(M, N, op_of(s, acc)->reduce_axis[0].extent(), bn, mr, op->dtype.bytes(), target);
  Tensor weights = block_column_operand(s, acc, bn, constant);
  Stage o = s[out];
  auto axes = o.leaf_axes();
  std::string i = axes[nd - 2], j = axes[nd - 1];
  auto t = o.tile(i, j, bm, bn);
  auto [iio, iii] = o.split(t.xi, mr);
  std::vector<Axis> par(axes.begin(), axes.end() - 2);
  par.push_back(t.xo);
  par.push_back(t.yo);
  Axis f = o.fuse(par);
  o.parallel(f);
  if (weights.defined()) o.prefetch(weights, f);
  if (bn % lanes == 0) {
    auto [jo, ji] = o.split(t.yi, lanes);
    o.vectorize(ji);
  }
  Stage a = s[acc];
  a.compute_at(o, iio);
  const OperationNode* aop = op_of(s, acc);
  auto aaxes = a.leaf_axes();
  std::string ai = aop->axis[nd - 2].name(), aj = aop->axis[nd - 1].name(), ak = aop->reduce_axis[0].name();
  auto [aio, aii] = a.split(ai, mr);
  auto [ajo, aji] = a.split(aj, bn);
  std::vector<Axis> order;
  for (int d = 0; d < nd - 2; ++d) order.push_back(aop->axis[d].name());
  order.push_back(aio);
  order.push_back(ajo);
  if (bn % lanes == 0) {
    auto [ajio, ajii] = a.split(aji, lanes);
    auto [ako, aki] = a.split(ak, 4);
    order.insert(order.end(), {ako, aki, aii, ajio, ajii});
    a.reorder(order);
    a.unroll(aki);
    a.unroll(aii);
    a.unroll(ajio);
    a.vectorize(ajii);
  } else {
    order.insert(order.end(), {Axis(ak), aii, aji});
    a.reorder(order);
    a.unroll(aii);
  }
}

// Vector registers a register block may hold as accumulators: 3/4 of them (12 of AVX2's 16,
// 24 of AVX-512's 32); the rest hold the weights, a broadcast and addresses (with 28, NCHW's
// 256@14 3x3 ran 390 -> 280 GFLOP/s).
int64_t accumulators(const Target& target) { return target.vector_registers * 3 / 4; }

// Blocks of output channels (of one vector each) that share each broadcast input in a
// register block: two with AVX-512's 32 registers, where KO blocks pair up; one with AVX2's 16
// (pairs leave 6 columns at most, fewer FMAs per weight load than one block of 14).
int64_t channel_blocks(int64_t KO, const Target& target) {
  return KO % 2 == 0 && target.vector_registers >= 32 ? 2 : 1;
}

// Output columns per register block of a convolution whose channels are the vector (kb of
// them), at most accumulators() vectors. Each step of a block costs about its broadcasts
// plus its weight loads, so the blocks of a row cost ceil(OW / reg) x (reg + kb / lanes): on
// ResNet-50's 512@7 layer (AVX2) 4 columns (4 + 3) ran 1.6x faster than 6 (6 + 1), on
// 256@14 5 columns ran 1.1x faster than 6 (5 + 4 against 6 + 6 + 2). The block of a 1x1 or a
// strided convolution may take all registers but four (`all_but_four`): a row of 14 columns x 2
// vectors in one block (NCHW, AVX-512, 2 threads, alternating runs: 1024->512 at 14x14 338 -> 365
// GFLOP/s, 256->1024 301 -> 316, MobileNetV2's 384->64 322 -> 355; 3x3 stride 2 256@28 355 -> 376,
// 128@56 320 -> 343). Not a 3x3 stride-1 one's: 256@14 ran 372 -> 216, 128@28 352 -> 252.
int64_t columns_per_block(int64_t OW, int64_t kb, int lanes, const Target& target, bool all_but_four = false) {
  int64_t reg = 1, cost = 0;
  int64_t most = all_but_four ? target.vector_registers - 4 : accumulators(target);
  for (int64_t r = 1; r <= std::min<int64_t>(OW, most * lanes / kb); ++r) {
    int64_t c = (OW + r - 1) / r * (r + kb / lanes);
    if (cost == 0 || c <= cost) reg = r, cost = c;
  }
  return reg;
}

// The elements of a tensor.
int64_t elements(const Operation& t) {
  int64_t n = 1;
  for (int64_t e : t->shape) n *= e;
  return n;
}

// Whether a convolution's weights take more memory than its input: the blocks of output
// channels then run outermost, each block's weights staying in cache while every row of the
// image passes over them; otherwise the rows do, each row's input staying in cache while all
// the weights pass. Both are sizes that outgrow L2 on ResNet-50's layers: rows inside
// channel blocks, NHWC 2048->512 at 7x7 ran 120 -> 310 GFLOP/s (AVX-512, 2 threads); rows
// outside, NCHW 256->512 1x1 stride 2 at 56x56 ran 180 -> 277.
bool weights_larger(Schedule& s, const std::string& acc) {
  const OperationNode* op = op_of(s, acc);
  return elements(op->inputs()[1]) > elements(op->inputs()[0]);
}

// Steps of a convolution's outermost reduction axis whose weights of `channels` output channels fit in 16 KB of L1.
int64_t chunk_steps(const OperationNode* op, int64_t channels) {
  int64_t bytes = channels * op->dtype.bytes() * reduction_steps(op, 1);
  return divisor_at_most(op->reduce_axis[0].extent(), std::max<int64_t>(1, 16384 / bytes));
}

// Steps per chunk (chunk_steps) for the reduction run in chunks outside the image's rows (see
// schedule_conv_nchwc); 0 (no chunks) where the weights are the smaller operand or, unless
// `small_images`, the output is under 14x14, where each block's weights come from L2 for only a
// few rows (NCHWc's 2048->512 at 7x7 ran 0.39 -> 0.42 ms chunked).
int64_t reduction_chunk(Schedule& s, const std::string& acc, int64_t channels, bool small_images = false) {
  const OperationNode* op = op_of(s, acc);
  if (!weights_larger(s, acc) || (op->shape[2] * op->shape[3] < 196 && !small_images)) return 0;
  return chunk_steps(op, channels);
}

// Convolution in NCHW[x]c: the output block of kb channels is the vector; reg_n output
// columns are accumulated in registers while the input channels and window run outside.
// Up to 14 columns where each is one vector register; a block wider than the vector (16
// channels with AVX2) takes the column count of the channel-blocked NCHW path, or the
// accumulators spill. With AVX-512's 32 registers, two blocks of channels share each
// broadcast input, which halves the broadcasts per FMA: 2 x up to 12 columns, a divisor of
// the row (a guarded tail block of columns costs more than a narrower block; channel_blocks).
// Rows run outermost where the input is larger than the weights (weights_larger). Otherwise,
// on images of 14x14 or more, the input channels run in chunks whose weights fit in 16 KB of
// L1 outside the image's rows, the pair's whole output accumulated in a buffer: each weight
// is then read from memory once and used for every pixel at once, where row by row the first
// row waits for the pair's weights from memory and the others read them from L2. In ResNet-50
// at 2 threads (AVX-512): 1024->256 1x1 at 14x14 0.38 -> 0.33 ms, 1024->512 0.76 -> 0.62; at
// 7x7, 2048->512 ran 0.39 -> 0.42, so not there.
void schedule_conv_nchwc(Schedule& s, const std::string& out, const std::string& acc, int lanes,
                         const Target& target) {
  const OperationNode* op = op_of(s, out);
  int64_t KO = op->shape[1], OW = op->shape[3], kb = op->shape[4];
  int64_t pair = kb == lanes ? channel_blocks(KO, target) : 1;
  int64_t reg_n = kb > lanes ? columns_per_block(OW, kb, lanes, target)
                 : divisor_at_most(OW, pair > 1 ? accumulators(target) / pair : 14);
  if (reg_n < 4 && kb <= lanes) reg_n = std::min<int64_t>(OW, 8);
  bool rows_first = !weights_larger(s, acc);
  int64_t chunk = reduction_chunk(s, acc, pair * kb);  // input channel blocks per chunk (0 where rows_first)
  Stage o = s[out];
  auto axes = o.leaf_axes();  // n, ko, oh, ow, ki
  auto [koo, koi] = o.split(axes[1], pair);
  auto [owo, owi] = o.split(axes[3], reg_n);
  Axis a1 = rows_first ? axes[2] : koo, a2 = rows_first ? koo : axes[2];
  o.reorder({axes[0], a1, a2, owo, koi, owi, axes[4]});
  Axis f = chunk ? o.fuse({axes[0], a1}) : o.fuse({axes[0], a1, a2});
  o.parallel(f);
  o.vectorize(axes[4]);
  Stage a = s[acc];
  a.compute_at(o, chunk ? f : owo);
  const OperationNode* aop = op_of(s, acc);
  std::vector<std::string> sp, red;
  for (auto& iv : aop->axis) sp.push_back(iv.name());
  for (auto& iv : aop->reduce_axis) red.push_back(iv.name());  // ico, ry, rx, ici
  auto [akoo, akoi] = a.split(sp[1], pair);
  auto [aowo, aowi] = a.split(sp[3], reg_n);
  if (chunk) {
    auto [rco, rci] = a.split(red[0], chunk);
    a.reorder({sp[0], akoo, rco, sp[2], aowo, rci, red[1], red[2], red[3], akoi, aowi, sp[4]});
  } else {
    a.reorder({sp[0], akoo, sp[2], aowo, red[0], red[1], red[2], red[3], akoi, aowi, sp[4]});
  }
  a.unroll(akoi);
  a.unroll(aowi);
  a.vectorize(sp[4]);
}

// A row reduction (max, sum over the last axis) computed inside its consumer's row loop:
// lanes partial results over the row in vector registers (rfactor), then those combined in a
// tree (a vectorized reduction): one after the other, the 16 lanes of softmax's max and sum
// took 128 cycles of latency a row, as long as its 8 vectors of exp.
void schedule_row_reduction(Schedule& s, const std::string& name, const std::string& consumer, const Axis& row) {
  const OperationNode* op = op_of(s, name);
  int lanes = vector_lanes(op->dtype);
  std::string k = op->reduce_axis[0].name();
  if (op->reduce_axis.size() == 1 && op->reduce_axis[0].extent() >= 2 * lanes) {
    auto [ko, ki] = s[name].split(k, lanes);
    Tensor rf = s.rfactor(s.tensor(name), ki);
    s[name].compute_at(s[consumer], row);
    s[rf.name()].compute_at(s[name], s[name].leaf_axes().front());
    s[rf.name()].reorder({Axis(k + ".outer"), rf.axis(0)});
    s[rf.name()].vectorize(rf.axis(0));
    s[name].vectorize(s[name].leaf_axes().back());
  } else {
    s[name].compute_at(s[consumer], row);
  }
}

// Softmax, layer norm and the like: an element-wise output over rows that reads statistics
// of each row (reductions over its last axis). One parallel loop over rows computes a row's
// statistics, its element-wise intermediates (once, into a row buffer) and its output,
// all in vector lanes, so the row is read from memory once and stays in L1 after.
// Returns false when `out` is not of this form.
bool schedule_rowwise(Schedule& s, const std::string& out) {
  const OperationNode* op = op_of(s, out);
  if (op->reduction() || op->shape.size() < 2) return false;
  std::vector<int64_t> rows(op->shape.begin(), op->shape.end() - 1);
  // The stages it reads, transitively, that are not inputs: row statistics, or element-wise
  // stages of the output's shape.
  std::vector<std::string> inner;  // producers, consumers first
  std::vector<std::string> todo{out};
  bool has_stat = false;
  while (!todo.empty()) {
    std::string cur = todo.back();
    todo.pop_back();
    for (auto& in : op_of(s, cur)->inputs()) {
      const StageState& st = s.state().stage(in->name);
      if (st.is_placeholder() || std::find(inner.begin(), inner.end(), in->name) != inner.end()) continue;
      bool stat = in->reduction() && in->shape == rows && in->reduce_axis.size() == 1;
      bool same = !in->reduction() && in->shape == op->shape;
      if (!stat && !same) return false;
      has_stat |= stat;
      inner.push_back(in->name);
      todo.push_back(in->name);
    }
  }
  if (!has_stat) return false;
  int lanes = vector_lanes(op->dtype);
  auto row_loop = [&](const std::string& name) {  // rows fused (parallel for the output), last axis in lanes
    Stage st = s[name];
    std::vector<std::string> axes = st.leaf_axes();
    Axis r = axes.size() > 2 ? st.fuse(std::vector<Axis>(axes.begin(), axes.end() - 1)) : Axis(axes[0]);
    if (op->shape.back() >= lanes) {
      auto [o, i] = st.split(axes.back(), lanes);
      st.vectorize(i);
    }
    return r;
  };
  Axis row = row_loop(out);
  s[out].parallel(row);
  // Producers in the order they run (the last found first), each inside the row loop.
  for (auto it = inner.rbegin(); it != inner.rend(); ++it) {
    const OperationNode* p = op_of(s, *it);
    if (p->reduction()) {
      schedule_row_reduction(s, *it, out, row);
    } else {
      s[*it].compute_at(s[out], row);
      row_loop(*it);
    }
  }
  return true;
}

// The layout of a 4-D convolution stage, from how it reads its weights: W(k, ...) with k
// its second axis is NCHW (weights KCRS), W(..., k) with k its last axis is NHWC (HWIO).
std::string conv_layout(const OperationNode* op) {
  bool dw = op->tag == "depthwise_conv2d";
  if ((op->tag != "conv2d" && !dw) || op->shape.size() != 4 || op->inputs().size() != 2) return "";
  const OperationNode* w = op->inputs()[1].get();
  std::string layout;
  visit_exprs(op->body, [&](const Expr& e) {
    const TensorLoad* l = e.as<TensorLoad>();
    if (!l || l->op.get() != w || l->indices.size() != 4) return;
    if (l->indices[0].same_as(op->axis[1].var())) layout = "NCHW";
    else if (l->indices[dw ? 2 : 3].same_as(op->axis[3].var())) layout = "NHWC";
  });
  return layout;
}

// The accumulator of a convolution template, computed at its output's block: the `outer`
// spatial axes, the whole reduction, then the `unrolled` axes (one register per value) and
// the `vector` axis. The local block is `block` wide along the vector axis, in vectors of `width`
// (splitting by it makes the vector loop's extent known to the schedule), several of them unrolled.
void schedule_register_block(Schedule& s, const std::string& acc, const std::vector<int>& outer,
                             const std::vector<int>& unrolled, int vector, int64_t width, int64_t block) {
  Stage a = s[acc];
  const OperationNode* op = op_of(s, acc);
  std::vector<Axis> order;
  for (int d : outer) order.push_back(op->axis[size_t(d)].name());
  for (auto& r : op->reduce_axis) order.push_back(r.name());
  for (int d : unrolled) order.push_back(op->axis[size_t(d)].name());
  auto [vo, vi] = a.split(op->axis[size_t(vector)].name(), width);
  order.push_back(vo);
  order.push_back(vi);
  a.reorder(order);
  for (int d : unrolled) a.unroll(op->axis[size_t(d)].name());
  if (block > width) a.unroll(vo);
  a.vectorize(vi);
}

// The stride at which a convolution reads its input's columns: the constant its last index
// multiplies the output column by (1 where it does not), its axes of one iteration at 0 (a 1x1
// layer's (2x + rx) / 2 in its subsampled copy is x).
int64_t column_stride(const OperationNode* op) {
  const Expr& x = op->axis.back().var();
  VarMap unit = one_iteration_axes(op, false);
  int64_t stride = 1;
  visit_exprs(op->body, [&](const Expr& e) {
    const TensorLoad* l = e.as<TensorLoad>();
    if (!l || l->op.get() != op->inputs()[0].get()) return;
    visit_exprs(simplify(substitute(l->indices.back(), unit)), [&](const Expr& i) {
      const Mul* m = i.as<Mul>();
      if (!m) return;
      const IntImm* k = (m->a.same_as(x) ? m->b : m->b.same_as(x) ? m->a : Expr()).as<IntImm>();
      if (k) stride = std::max(stride, k->value);
    });
  });
  return stride;
}

// A convolution with a short reduction (C x R x S of at most 64) over wide rows (32 columns
// or more): each block of the channel-blocked path then does too little work to pay for its
// copy out to NCHW rows, and the columns make better vectors (MobileNetV2's 24->144 1x1 at
// 56x56: 51 GFLOP/s blocked, 120 with the columns; 96->576 at 14x14: 126 blocked, 100).
bool short_and_wide(const OperationNode* op, int lanes) {
  return reduction_steps(op) <= 64 && op->shape[3] >= 4 * lanes;
}

// The output of an NCHW convolution in blocks of kb channels x yb rows x xb columns, parallel
// over (image, channel block, rows) or (image, rows, channel block), the columns in vector
// lanes; the accumulator is computed at each block. The channel blocks run first where the
// weights are larger (weights_larger) or a row is narrower than a cache line: the cores'
// shares of rows met inside a line of every channel, which both wrote (AVX-512, 2 threads,
// alternating runs: 1x1 192->64 at 14x14 303 -> 360 GFLOP/s, 384->64 323 -> 358, 384->96
// 321 -> 351; at 1 thread the same; 3x3 64@56 and 128@56 stride 2, rows of 56 and 28
// columns, the same and 305 -> 285 with the channels first).
void block_nchw_output(Schedule& s, const std::string& out, const std::string& acc, int64_t kb, int64_t xb,
                       const Target& target, int64_t yb = 1) {
  const OperationNode* op = op_of(s, out);
  bool channels_first = weights_larger(s, acc) || op->shape[3] * op->dtype.bytes() < target.cache_line_bytes;
  Stage o = s[out];
  auto axes = o.leaf_axes();  // n, k, y, x
  auto [ko, ki] = o.split(axes[1], kb);
  auto [xo, xi] = o.split(axes[3], xb);
  Axis y = axes[2];
  std::vector<Axis> inner = {ki, xi};
  if (yb > 1) {
    auto [yo, yi] = o.split(axes[2], yb);
    y = yo, inner = {ki, yi, xi};
  }
  Axis a = channels_first ? ko : y, b = channels_first ? y : ko;
  std::vector<Axis> order = {axes[0], a, b, xo};
  order.insert(order.end(), inner.begin(), inner.end());
  o.reorder(order);
  o.parallel(o.fuse({axes[0], a, b}));
  o.vectorize(xi);
  s[acc].compute_at(o, xo);
}

// Readers of a convolution's weights W (its second input) read them blocked by kb output
// channels, [K/kb][C][R][S][kb]: rewritten once when they are constant, else packed on each call
// (one pass over them, against 2 x OH x OW FMAs per weight).
void block_weights(Schedule& s, const std::string& acc, int64_t kb, bool constant) {
  Tensor W(op_of(s, acc)->inputs()[1]);
  if (constant) {
    s.rewrite_layout(W, 0, kb);
  } else {
    Stage p = s[s.pack(W, {s.tensor(acc)}, 0, kb)];
    p.parallel(p.leaf_axes()[0]);
  }
}

// Whether a 1x1 NCHW convolution runs its input rows through the weights
// (schedule_conv_nchw_input_rows, measured with AVX-512): where its whole input outgrows L1
// (48 KB) but one input row of all channels (C x OW) fits in two thirds of it, each core's share
// of the blocks of output channels is at least 8 blocks (shared evenly) and its weights fit in
// half of L2 (1 MB).
bool streams_weights_past_input_rows(const OperationNode* op, int64_t kb, const Target& target) {
  int64_t C = op->reduce_axis[0].extent(), H = op->shape[2], W = op->shape[3], bytes = op->dtype.bytes();
  int64_t blocks = (op->shape[1] + kb - 1) / kb;
  return C * H * W * bytes > 48 * 1024 && C * W * bytes <= 32 * 1024 && blocks % target.num_cores == 0 &&
         blocks / target.num_cores >= 8 && C * op->shape[1] * bytes / target.num_cores <= (1 << 20);
}

// A 1x1 convolution in NCHW, channel-blocked as schedule_conv_nchw, in another order: each
// core takes its share of the blocks of output channels and runs every row of the image over
// them; each input row is first copied into a dense [C][OW] block in L1 that all the share's
// blocks read, while their weights stream from L2 in order. Channel blocks outermost, each
// block reads the rows from the image's planes again (C lines a row, a plane apart). AVX-512,
// alternating runs, 1 / 2 threads: 256->1024 at 14x14 155 -> 179 / 307 -> 374 GFLOP/s, 320->1280
// at 7x7 147 -> 164 / 318 -> 334, 512->1024 at 14x14 (rows of 28 KB) 156 -> 161 / 319 -> 350.
// Where the whole input fits in L1 (160->960 at 7x7) it ran 3% slower, where a core's weights
// filled L2 (512->2048 at 7x7) 27% slower, with rows of 56 KB (1024->256 at 14x14) 2-11% slower.
void schedule_conv_nchw_input_rows(Schedule& s, const std::string& out, const std::string& acc, int64_t kb,
                                   int64_t reg, const Target& target) {
  const OperationNode* op = op_of(s, out);
  Stage o = s[out];
  auto axes = o.leaf_axes();  // n, k, y, x
  auto [ko, ki] = o.split(axes[1], kb);
  auto [xo, xi] = o.split(axes[3], reg);
  auto [share, kin] = o.split(ko, (op->shape[1] + kb - 1) / kb / target.num_cores);
  o.reorder({axes[0], share, axes[2], kin, xo, ki, xi});
  o.parallel(o.fuse({axes[0], share}));
  o.vectorize(xi);
  s[acc].compute_at(o, xo);
  schedule_register_block(s, acc, {0, 2}, {3}, 1, kb, kb);
  // A strided layer's subsampled input (subsample_input) is not copied at the root: each row's copy takes the
  // image's strided row. The root copy was a pass and a barrier of its own, parallel by channels and read whole
  // by both cores. AVX-512, 512->1024 stride 2 at 28x28, 2 threads: 0.89x -> 0.97x oneDNN in interleaved runs
  // (alternating runs of the two: +6-9% once, 0-3% another time); at one thread the same.
  Operation input = op_of(s, acc)->inputs()[0];
  if (input->tag == "subsample") s[input->name].compute_inline();
  Stage row = s[s.cache_read(Tensor(input), "local", {s.tensor(acc)})];
  row.compute_at(o, axes[2]);
  row.vectorize(row.leaf_axes().back());
}

// Convolution in NCHW, blocked: the output channels are the vector, as in NHWC and NCHWc.
// The weights are read blocked by kb channels (block_weights). A block of `reg` output
// columns x kb channels accumulates in registers, stored channels innermost; each input value
// is one broadcast, whatever the stride. The block is then copied out to the caller's NCHW
// rows. Channel counts that are not a multiple of the vector keep the columns as the vector
// (schedule_conv_nchw_columns).
void schedule_conv_nchw(Schedule& s, const std::string& out, const std::string& acc, int lanes, bool constant,
                       const Target& target) {
  const OperationNode* op = op_of(s, out);
  int64_t K = op->shape[1], OW = op->shape[3];
  int64_t kb = K % (2 * lanes) == 0 ? 2 * lanes : lanes;
  const OperationNode* aop = op_of(s, acc);
  int64_t stride = column_stride(aop);
  int64_t taps = reduction_steps(aop, 1);  // the window's
  bool wide_window = aop->reduce_axis.back().extent() > 3;
  bool all_but_four = taps == 1 || stride > 1;
  int64_t reg = columns_per_block(OW, kb, lanes, target, all_but_four);
  int64_t block_bytes = reduction_steps(aop) * kb * op->dtype.bytes();
  bool even = target.shares_evenly(op->shape[0] * ((K + kb - 1) / kb));
  bool input_rows = taps == 1 && stride == 1 && target.vector_registers >= 32 &&  // AVX2: fused pixels (below)
                    streams_weights_past_input_rows(aop, kb, target);
  // With AVX2's 16 registers a row of 7 or 14 columns leaves blocks of 8 and 6 or 10 and 8
  // accumulators, too few to cover the FMAs' latency (2 pipes x 4 cycles). Where the input is
  // read at stride 1 (a subsampled copy's, for a strided 1x1 layer) the pixels run in blocks of 6
  // consecutive pixels x 2 vectors across the ends of rows, each pixel's input a broadcast
  // wherever the row ends, and the reduction in chunks whose weights and input planes share 16 KB
  // of L1 (at least 64 channels: 64->384 at 14x14 ran 5% slower in chunks of 16). Zen 3, 2
  // threads, alternating runs: 1x1 at 7x7 73-94 -> 99-139 GFLOP/s (960->320 82 -> 145; fused
  // pixels alone 105, chunks alone 111), 1024->2048 stride 2 84 -> 137, at 14x14 93-112 ->
  // 112-122, 64->384 136 -> 134; 3x3 512@7 107 -> 120, 256@14 134 -> 146, 128@28 128 -> 131,
  // 64@56 138 -> 144. Not at a stride, where each pixel's padded taps are conditions that only
  // rows partition away (256@28 3x3 stride 2: 110 -> 53).
  bool pixels = target.vector_registers < 32 && stride == 1 && even;
  int64_t chunk;
  if (pixels) {
    int64_t plane = op->shape[2] * op->shape[3];  // about the input's, at stride 1 or subsampled
    int64_t per_step = (kb * taps + plane) * op->dtype.bytes();
    chunk = divisor_at_most(aop->reduce_axis[0].extent(), std::max<int64_t>(64, 16384 / per_step));
    reg = accumulators(target) / (kb / lanes);
  } else {
    // Under 14x14 too where one block's weights outgrow L1 (48 KB) and the blocks share evenly
    // among the cores: row by row, each row read them from L2 again. AVX-512, 2 threads, best of
    // 4-6 alternating runs: 960->320 at 7x7 382 -> 409 GFLOP/s, 2048->512 354 -> 386, 512->2048
    // 358 -> 366, 512@7 3x3 401 -> 446, 512@14 3x3 stride 2 334 -> 356; 320->1280, whose block's
    // weights fit, 377 -> 355; 576->160, 5 blocks on 2 cores, 359 -> 326.
    // Only where the blocks share evenly: the chunked reduction's parallel loop is the blocks alone
    // (5x5 32->96 at 28x28, 3 blocks on 2 cores: 278 -> 350 GFLOP/s row by row at 2 threads, 198 ->
    // 190 at one).
    // A window's block whose accumulators over the whole image fit in 256 KB is chunked too, whichever operand is
    // larger: row by row, each row read the block's weights from L2 again, where in chunks they stay in L1 while
    // the rows pass. AVX-512, alternating runs, 2 / 1 threads: 3x3 128@56 stride 2 +9-15% / +12%, 64->128 and
    // 128->64 at stride 2 +10%, 64@28 +24% / +15%, 64@32 +10%, 64@44 +21%; past 256 KB mixed (64@48 +9%, 64@56
    // -4%, 64@112 stride 2 -6%). AVX2 code on this CPU: 128@56 stride 2 +29%. Not 1x1 layers (at 14x14 and 7x7
    // -5% .. +2%).
    bool small_sums = taps > 1 && op->shape[2] * op->shape[3] * kb * op->dtype.bytes() <= (256 << 10);
    chunk = !even ? 0 : small_sums ? chunk_steps(aop, kb) : reduction_chunk(s, acc, kb, block_bytes > 48 * 1024);
    // The chunks' window taps are unrolled (below): a strided window's block then keeps the
    // stride-1 layers' three quarters of the registers, where all but four spilled. AVX-512, 2
    // threads, alternating runs: 3x3 256@28 stride 2 (14 columns x 2 vectors -> 7) 312 -> 434
    // GFLOP/s (its taps in loops instead, 14 columns: 365); 512@14 stride 2 (7 columns) the same.
    if (chunk && taps > 1 && taps <= 49) reg = columns_per_block(OW, kb, lanes, target);
  }
  // Where those weights are not chunked (the blocks do not share evenly), a block of two rows
  // of a narrow image (2 x 7 columns x 2 vectors: all registers but four) passes over them half
  // as often: 576->160 at 7x7 296 -> 324 GFLOP/s, 960->160 259 -> 292 (2 threads, alternating);
  // where they fit in L1 no faster (320->1280 308 -> 301) or slower (160->960 346 -> 279).
  int64_t rows = 1;
  if (!chunk && block_bytes > 48 * 1024 && all_but_four && reg == OW &&
      2 * reg * kb / lanes <= target.vector_registers - 4 && op->shape[2] > 1)
    rows = 2;
  block_weights(s, acc, kb, constant);
  auto a = s[acc].leaf_axes();  // n, k, y, x, then the reduction
  s[acc].reorder_storage({a[0], a[2], a[3], a[1]});
  if (input_rows) {
    schedule_conv_nchw_input_rows(s, out, acc, kb, reg, target);
    return;
  }
  if (!chunk) {
    block_nchw_output(s, out, acc, kb, reg, target, rows);
    if (rows > 1) schedule_register_block(s, acc, {0}, {2, 3}, 1, kb, kb);
    else schedule_register_block(s, acc, {0, 2}, {3}, 1, kb, kb);
    // A window wider than 3 unrolled (as the chunks' below): its taps are then constant offsets of
    // one row's loads. AVX-512, alternating runs, 2 / 1 threads, a row's taps unrolled: 5x5 16->32 at
    // 28x28 +11% / +18%, 32->96 +17% / +19%; the rows too: +4% / the same more. Not 3x3 windows: 64@56
    // -15%, 128@56 stride 2 -41% (2 threads).
    if (wide_window && taps <= 49)
      for (size_t r = 5; r < a.size(); ++r) s[acc].unroll(a[r]);
    return;
  }
  // The reduction in chunks (reduction_chunk, or the fused pixels' above): the block of kb
  // channels accumulated over the whole image, then copied out a row (or vector of pixels) at a
  // time.
  Stage o = s[out];
  auto axes = o.leaf_axes();  // n, k, y, x
  auto [ko, ki] = o.split(axes[1], kb);
  o.reorder({axes[0], ko, ki, axes[2], axes[3]});
  Axis f = o.fuse({axes[0], ko});
  o.parallel(f);
  if (pixels || target.vector_registers >= 32) {
    // Copied out over the fused pixels, a vector of pixels x the kb channels at a time: each
    // is a tile of the accumulators that the back end transposes in registers, where rows of 7
    // or 14 columns were read a column at a time (a gather a row). Zen 3, 1 thread, alternating
    // runs: 96->576 at 14x14 68 -> 83 GFLOP/s, 1024->256 74 -> 83, 160->960 at 7x7 65 -> 78,
    // 512->2048 76 -> 80; not the 3x3 layers' copy (256@14, 128@28: as fast, 256@28 stride 2
    // 84 -> 80), a small part of their time. With AVX-512 every chunked layer's rows too, whole
    // planes stored a vector at a time instead of rows in masked parts: alternating runs, 2 / 1
    // threads, 512->2048 at 7x7 +6% / +2%, 960->320 +2% / +3%, 1024->256 at 14x14 +5% / +4%,
    // 1024->512 +4% / +3%; 3x3 128@28 +5% / +6%, 256@14 +2% / +3%, 256@28 stride 2 +1%, 512@7 0 /
    // +3%; 5x5 96->256 at 27x27 +2%; 2048->512 at 7x7 and 3x3 512@14 stride 2 the same.
    auto [po, pi] = o.split(o.fuse({axes[2], axes[3]}), lanes);
    o.reorder({f, po, ki, pi});
    o.vectorize(pi);
  } else {
    o.vectorize(axes[3]);
  }
  Stage acc_st = s[acc];
  acc_st.compute_at(o, f);
  auto [xo, xi] = acc_st.split(pixels ? acc_st.fuse({a[2], a[3]}) : a[3], reg);
  auto [kvo, kvi] = acc_st.split(a[1], kb);
  auto [rco, rci] = acc_st.split(a[4], chunk);
  std::vector<Axis> order = {a[0], kvo, rco};
  if (!pixels) order.push_back(a[2]);
  order.insert(order.end(), {xo, rci});
  for (size_t r = 5; r < a.size(); ++r) order.push_back(a[r]);
  order.push_back(xi);
  order.push_back(kvi);
  acc_st.reorder(order);
  // The window's taps unrolled (up to 7x7): each tap is then a constant offset, and LLVM keeps the
  // block's accumulators in registers across the window, where a 5-tap loop it did not unroll
  // loaded and stored them on every tap. Zen 3, 2 threads, alternating runs against oneDNN in the
  // same process: 5x5 96->256 at 27x27 0.44x -> 0.98x, 32->96 at 28x28 0.48x -> 1.10x, 16->32
  // 0.42x -> 0.93x; 3x3 256@14 1.09x -> 1.24x, 128@28 0.82x -> 0.90x, 64@56 0.88x -> 0.96x.
  if (taps <= 49)
    for (size_t r = 5; r < a.size(); ++r) acc_st.unroll(a[r]);
  acc_st.unroll(xi);
  acc_st.vectorize(kvi);
}

// Vectors of pixels in a register block of schedule_conv_nchw_pixels: blocks of 6 output
// channels x 2 vectors with AVX2 (12 accumulators of 16 registers), x 4 with AVX-512 (24 of
// 32). Of the AVX-512 blocks of 24, 6 x 4 ran ResNet-50's 56x56 1x1 layers at 340-400 GFLOP/s
// (2 threads), 8 x 2 at 325-370 and 12 x 2 at 240-350.
constexpr int64_t kPixelChannels = 6;  // output channels in a register block of schedule_conv_nchw_pixels
int64_t pixel_vectors(const Target& target) { return std::max<int64_t>(1, accumulators(target) / kPixelChannels); }

// Whether the pixels of `op` (a GEMM over them) end in a partial vector after fewer blocks of
// kPixelChannels x pixel_vectors than two a core (14x14: 3 blocks of 64 pixels, then 4 pixels). That
// last block's reduction is a few FMAs of a narrow vector a step, bound by their latency, and every
// block of output channels computes one: the same layer over 192 pixels ran 15% faster.
bool few_blocks_and_a_tail(const OperationNode* op, int lanes, const Target& target) {
  int64_t pixels = op->shape[2] * op->shape[3];
  return pixels % lanes != 0 && op->shape[0] * (pixels / (pixel_vectors(target) * lanes)) < 2 * target.num_cores;
}

// The register block of schedule_conv_nchw_pixels for `op`: {output channels, vectors of pixels}. Output
// channels that 8 divide but 6 do not (32, 64, 128, ...) take blocks of 8 x 3 vectors with AVX-512 where the
// pixels are whole vectors: no block then computes a tail of channels at a whole block's cost. Alternating
// runs, 2 / 1 threads: 192->32 at 28x28 +7%, 144->32 +6%, 32->16 at 112x112 +4%, 256->64 at 56x56 +1% / +3%,
// 256->512 at stride 2 +2%; 512->256 at 28x28, 64->64 and 64->256 at 56x56 the same. At least 120 that 8
// divides take them too where a few blocks end in a tail of pixels (few_blocks_and_a_tail): a quarter fewer
// blocks of channels, each with its tail. Alternating runs, 2 / 1 threads: MobileNetV2's 96->576 at 14x14
// +2-3% / +2-4%, 64->384 +2-4% / +1-4%; 64->32, 4 blocks of 8 channels, -6-8% / +3%.
std::pair<int64_t, int64_t> pixel_block(const OperationNode* op, int lanes, const Target& target) {
  int64_t K = op->shape[1], pixels = op->shape[2] * op->shape[3];
  bool whole_channels = K % kPixelChannels != 0 && pixels % lanes == 0;
  bool fewer_tails = K >= 20 * kPixelChannels && few_blocks_and_a_tail(op, lanes, target);
  if (K % 8 == 0 && accumulators(target) % 8 == 0 && (whole_channels || fewer_tails))
    return {8, accumulators(target) / 8};
  return {kPixelChannels, pixel_vectors(target)};
}

// Whether schedule_conv_nchw_pixels fetches the next block of pixels' input panel ahead: where
// the input outgrows a core's L2 (2 MB), so that each block's panel first comes from L3 or
// memory, a row segment per channel plane that no hardware prefetcher follows, and at most 16
// blocks of output channels read it (with more, the first block's wait is a small part of them).
bool prefetches_next_panel(const OperationNode* op, int64_t channel_blocks, const Target& target) {
  Operation x = op->inputs()[0];  // inputs() is a fresh vector
  return target.vector_registers >= 32 && elements(x) * x->dtype.bytes() > (2 << 20) && channel_blocks <= 16;
}

// A 1x1 convolution in NCHW whose pixels fuse into one axis (image_axes_fuse) as a GEMM,
// accumulated in place: blocks of output channels x vectors of pixels (pixel_block) in
// registers, the whole reduction inside, each weight one broadcast and each input row
// segment one vector load. The blocks of pixels run outermost, so a block's input stays
// in cache while all the weights pass over it. ResNet-50's 1x1 layers at 28x28 and 56x56
// ran 159-171 GFLOP/s at 2 threads this way on AVX2, the channel-blocked path 133-141.
// With `pack`, each block of pixels first copies its input panel (every channel's segment)
// into one contiguous block, and the parallel loop runs over the blocks of pixels alone.
// In place the panel's segments lie a channel's plane apart (3136 bytes at 28x28), each
// block of channels reading them again from L2, and at 14x14 a segment straddles two lines.
// ResNet-50's 1x1 layers at 2 threads (AVX2): 28x28 3-5% faster packed, 14x14 (then no
// longer channel-blocked) 4-8%, 56x56 the same.
void schedule_conv_nchw_pixels(Schedule& s, const std::string& out, int lanes, bool pack, const Target& target) {
  const OperationNode* op = op_of(s, out);
  Stage o = s[out];
  auto axes = o.leaf_axes();  // n, k, y, x, then the reduction
  auto [kb, nv] = pixel_block(op, lanes, target);
  int64_t blocks = op->shape[0] * (op->shape[2] * op->shape[3] / (nv * lanes));  // whole blocks of pixels
  int64_t KO = (op->shape[1] + kb - 1) / kb;  // blocks of output channels
  Axis p = o.fuse({axes[2], axes[3]});
  auto [ko, ki] = o.split(axes[1], kb);
  auto [po, pi] = o.split(p, nv * lanes);
  auto reorder = [&](std::vector<Axis> order) {
    for (size_t r = 4; r < axes.size(); ++r) order.push_back(axes[r]);
    order.push_back(ki);
    order.push_back(pi);
    o.reorder(order);
  };
  if (pack) {
    reorder({axes[0], po, ko});
    Axis whole = o.fuse({axes[0], po});
    o.parallel(whole);
    Stage panel = s[s.pack(Tensor(op->inputs()[0]), {s.tensor(out)}, 2, nv * lanes, 2)];
    panel.compute_at(o, whole);
    panel.vectorize(panel.leaf_axes().back());
  } else if (blocks < 2 * target.num_cores || few_blocks_and_a_tail(op, lanes, target)) {
    // Few blocks of pixels (14x14: 3 of 64, and 4 pixels): each core takes its share of the blocks
    // of channels and runs all the pixels of each. Shared by blocks of pixels, the cores' shares met
    // in the middle of every output row, at a cache line both wrote (and the 4-pixel tails, spread
    // among the full blocks, added more). AVX-512, alternating runs: 64->384 at 14x14 275 -> 341
    // GFLOP/s at 2 threads, 96->576 300 -> 355; at 1 thread the same. At 56x56 and 28x28, where each
    // block of pixels stays in L1 while all the blocks of channels read it, the input was then read
    // from L2 or beyond once per block of channels: 256->64 at 56x56 321 -> 253, 144->32 at 28x28
    // 353 -> 338.
    auto [share, kin] = o.split(ko, (KO + target.num_cores - 1) / target.num_cores);
    reorder({axes[0], share, po, kin});
    o.parallel(o.fuse({axes[0], share}));
  } else if (prefetches_next_panel(op, KO, target)) {
    // Each block of pixels in two halves of its blocks of channels (so the cores still share
    // evenly), and while a half runs, the next block's panel is fetched into the cache,
    // spread over the half's iterations. AVX-512, alternating runs, 1 / 2 threads: 256->64
    // at 56x56 186 -> 200 / 372 -> 395 GFLOP/s, 384->64 at 56x56 +8% (2 threads), 96->24 at
    // 112x112 +14%; 256->96 at 56x56 (16 blocks) +4%, 256->128 (22 blocks) -5%; 144->24 at
    // 56x56 (1.8 MB of input) -5%. The whole block's blocks as one loop with the next panel
    // spread over them gained 4% at one thread, and nothing at two (25 and 24 blocks a core).
    auto [half, kin] = o.split(ko, (KO + 1) / 2);
    reorder({axes[0], po, half, kin});
    Axis whole = o.fuse({axes[0], po, half});
    o.parallel(whole);
    o.prefetch(Tensor(op->inputs()[0]), whole, 2);
  } else {
    reorder({axes[0], po, ko});
    o.parallel(o.fuse({axes[0], po, ko}));
  }
  o.unroll(ki);
  vectorize_by_vector(o, pi, lanes);
}

// Whether schedule_conv_nchw_pixels packs the input panels of `op`, a 1x1 NCHW convolution
// whose pixels fuse (a strided one's in its subsampled copy): where a panel fills half of L1
// or more (16 KB: 256 input channels of 16 pixels) and at least 20 blocks of output channels
// read it, and the whole blocks of pixels share the cores evenly. A block's panel is packed
// once for all its channels, so the blocks of pixels are the only parallel loop (ResNet-50's
// 7x7 layers, 3 blocks of 16 pixels on 2 cores, ran much slower). MobileNetV2's narrower
// layers (up to 576 channels in, 96 out) ran 3-25% slower packed, most at 14x14, where the
// last, partial block of pixels runs alone. ResNet-50's stride-2 layers ran 512->1024 15%
// and 256->512 6% faster packed than in place (AVX2, 2 threads).
bool packs_pixel_panels(const OperationNode* op, int lanes, const Target& target) {
  int64_t block = pixel_block(op, lanes, target).second * lanes;
  int64_t blocks = op->shape[0] * (op->shape[2] * op->shape[3] / block);
  int64_t panel_bytes = reduction_steps(op) * block * op->dtype.bytes();
  return panel_bytes >= (16 << 10) && op->shape[1] >= 20 * kPixelChannels && blocks >= target.num_cores &&
         target.shares_evenly(blocks) && !few_blocks_and_a_tail(op, lanes, target);
}

// Convolution in NCHW with the columns as the vector: each thread of the parallel loop
// over (n, k block, output row) accumulates kb output channels x one vector of output
// columns in registers; the input row segment is one contiguous vector load reused by the
// kb channels, each weight one broadcast reused by the vector.
void schedule_conv_nchw_columns(Schedule& s, const std::string& out, const std::string& acc, int lanes,
                                const Target& target) {
  const OperationNode* op = op_of(s, out);
  int64_t K = op->shape[1], OW = op->shape[3];
  // kb channels x nv vectors of accumulators, kb dividing K and the vector dividing OW: a
  // guarded partial block (of channels, or masked lanes) costs more than a smaller block. Where
  // kb is small (33 channels: 3) the block takes as many vectors of the row as the accumulators
  // allow, a power of two of them (LLVM splits other widths lane by lane): AVX2, 2 threads,
  // alternating runs against oneDNN, 17->33 3x3 at 32x32 0.90x -> 1.63x (3 x 4 vectors).
  int64_t kb = divisor_at_most(K, 8), vw = divisor_at_most(OW, lanes), nv = 1;
  while (2 * nv * kb <= accumulators(target) && (OW / vw) % (2 * nv) == 0) nv *= 2;
  // With 32 registers a block of at most half of them takes two rows: each weight's broadcast then
  // feeds twice the FMAs, and twice the accumulators cover the FMAs' latency. AVX-512, alternating
  // runs, 2 / 1 threads: 5x5 72->40 stride 2 at 28x28 (8 channels x 1 vector of 14) +21% / +17%, 3x3
  // 17->33 at 32x32 (3 channels x 2 vectors) +14%; blocks of 4 rows (24 accumulators) were slower,
  // as were 2 rows of 24->40 at 56x56 (32).
  int64_t yb = 2 * kb * nv <= target.vector_registers / 2 && op->shape[2] % 2 == 0 ? 2 : 1;
  block_nchw_output(s, out, acc, kb, nv * vw, target, yb);
  if (yb > 1) schedule_register_block(s, acc, {0}, {1, 2}, 3, vw, nv * vw);
  else schedule_register_block(s, acc, {0, 2}, {1}, 3, vw, nv * vw);
  // At a stride the window's taps are unrolled, so that a row's taps share the spans their strided
  // reads load (as the stem's do; schedule_conv_nchw_strided). AVX-512, 2 threads, alternating runs:
  // 72->40 5x5 stride 2 at 28x28 147 -> 199 GFLOP/s; at stride 1 no faster (24->40 3x3 at 56x56,
  // 17->33 3x3 at 32x32), so left in loops there.
  const OperationNode* aop = op_of(s, acc);
  if (column_stride(aop) > 1)
    for (size_t r = 1; r < aop->reduce_axis.size(); ++r) s[acc].unroll(aop->reduce_axis[r].name());
}

// A strided convolution of fewer input channels than a vector (the 3-channel stem), its
// output columns the vector. A block of kb output channels x nv vectors of columns
// accumulates in registers, each weight one broadcast (the weights blocked by kb channels),
// and is stored to the caller's rows as it is. In the channel-blocked path the short
// reduction (3 x 7 x 7) left each block's copy out to NCHW rows, a gather per channel, a
// large part of its time. Half the vector registers hold accumulators: the taps' loops carry
// them. ResNet-50's stem at 2 threads (AVX-512): 245 GFLOP/s channel-blocked, 372 this way (8 x 2
// vectors), 213 with 8 x 3 as one vector of 48 lanes (which LLVM splits lane by lane). With its
// copy out unrolled (below) and each vector its own, the de-interleaved block of a wide window takes
// 3/4 of AVX-512's registers, 8 channels x 3 vectors: alternating runs, ResNet-50's stem 319 -> 334
// GFLOP/s at 2 threads, 158 -> 167 at one (16 x 2 spilled: 168; 4 x 7 199); MobileNetV2's 3x3
// stem, not de-interleaved, ran 10% slower as 8 x 2 or 8 x 3 than as 16 x 1.
// Where the window is wider than 3, the input is de-interleaved by the stride in one pass
// (the padding inlined into it), so that each tap's columns are one contiguous load: a
// stride-2 tap is a shuffle of a span it shares with the next, and the shuffles compete
// with the FMAs for their ports. A 3-wide window's taps are two spans and three shuffles:
// without the copy MobileNetV2's stem (3x3) ran 234 -> 248-275 GFLOP/s, ResNet-50's (7x7)
// 345 -> 270. With 32 registers a 3-wide window's block is 16 channels x 1 vector, so that each
// of a row's shuffles feeds twice the FMAs: MobileNetV2's stem 327 -> 340 GFLOP/s at 2 threads,
// 159 -> 163 at one (alternating runs); ResNet-50's (de-interleaved, no shuffles) ran 5% slower so.
// The block's copy out to the rows is unrolled, as NHWC's is (a register block of whole vectors):
// in a loop the copy indexes the block by its variable, so LLVM keeps the block in memory, each
// accumulator zeroed there, stored after the reduction and loaded again (48 stores a block of 16
// vectors where 16 would do), a large part of a short reduction's time. AVX-512, alternating runs,
// 2 threads: MobileNetV2's stem (27 taps a value) 261 -> 301 GFLOP/s (1 thread 142 -> 160); NHWC
// depthwise 32@112 192 -> 216, 192@28 184 -> 220, 960@7 154 -> 180, 144@56 stride 2 +6%; NHWC 16->96
// 1x1 at 112x112 230 -> 261; longer reductions the same (0-2%). Not NCHW's blocks of 14-lane
// vectors, which spilled in registers (24->40 at 56x56: 273 -> 8 GFLOP/s).
void schedule_conv_nchw_strided(Schedule& s, const std::string& out, const std::string& acc, int lanes, bool constant,
                                const Target& target) {
  const OperationNode* op = op_of(s, out);
  const OperationNode* aop = op_of(s, acc);
  int64_t K = op->shape[1], OW = op->shape[3];
  bool wide = aop->reduce_axis.back().extent() > 3;
  int64_t row_vectors = (OW + lanes - 1) / lanes;
  int64_t nv = std::min<int64_t>(row_vectors, wide || target.vector_registers < 32 ? 2 : 1);
  int64_t kb = divisor_at_most(K, target.vector_registers / 2 / nv);
  if (wide && target.vector_registers >= 32) nv = std::min<int64_t>(row_vectors, accumulators(target) / kb);
  if (wide)
    schedule_injective(s, s.deinterleave(Tensor(aop->inputs()[0]), {s.tensor(acc)}, 3, column_stride(aop)).name());
  block_weights(s, acc, kb, constant);
  Stage o = s[out];
  auto axes = o.leaf_axes();  // n, k, y, x
  auto [ko, ki] = o.split(axes[1], kb);
  auto [xo, xi] = o.split(axes[3], nv * lanes);
  o.reorder({axes[0], axes[2], ko, xo, ki, xi});
  o.parallel(o.fuse({axes[0], axes[2], ko}));
  o.unroll(ki);
  vectorize_by_vector(o, xi, lanes);
  Stage a = s[acc];
  a.compute_at(o, xo);
  auto aa = a.leaf_axes();  // n, k, y, x, then the reduction
  auto [vo, vi] = a.split(aa[3], lanes);
  std::vector<Axis> order = {aa[0], aa[2]};
  order.insert(order.end(), aa.begin() + 4, aa.end());
  order.insert(order.end(), {aa[1], vo, vi});
  a.reorder(order);
  // A row of taps unrolled: read in place, a stride-2 row's three taps share their spans (two
  // loads and three shuffles for a vector), where a loop over them read each alone; a 7-tap row
  // of the copy runs without its loop. A 3x3 window's rows are unrolled too (9 taps; the 7x7's
  // 49 were no faster).
  a.unroll(aa.back());
  if (!wide) a.unroll(aa[aa.size() - 2]);
  a.unroll(aa[1]);
  a.unroll(vo);
  a.vectorize(vi);
}

// Convolution in NHWC: the channels are the vector. A block of `reg` output columns x two
// vectors of channels accumulates in registers (the NCHWc micro-kernel, in the user's
// layout); each input value is one broadcast reused by the two vectors. Constant weights
// (HWIO) are rewritten once into blocks of the vectors' channels, [K/kv][R][S][C][kv]: read
// in place, consecutive input channels are a row of K apart: each load on a new cache line,
// and on the weight-heavy layers (14x14 and 7x7) every other one on a new page.
void schedule_conv_nhwc(Schedule& s, const std::string& out, const std::string& acc, int lanes, bool constant,
                        const Target& target) {
  // Read before rewrite_layout, which replaces the stage's op.
  const OperationNode* op = op_of(s, out);
  int64_t rows = op->shape[0] * op->shape[1], OW = op->shape[2], K = op->shape[3];
  bool conv2d = op_of(s, acc)->tag == "conv2d";
  // Channels that make no pairs of vectors but triples (24 with AVX2) take blocks of three, each
  // vector its own (LLVM splits a 24-lane vector lane by lane): with one vector, each FMA needed
  // its own broadcast. AVX2, 2 threads, alternating runs against oneDNN: MobileNetV2's 144->24 at
  // 56x56 0.61x -> 0.87x, 96->24 0.66x -> 0.93x, 96->24 at 14x14 0.79x -> 1.05x, 40->120 0.65x ->
  // 0.98x.
  int64_t kv = K % (2 * lanes) == 0 ? 2 * lanes : K % (3 * lanes) == 0 ? 3 * lanes : std::min<int64_t>(K, lanes);
  // Rows of up to 28 columns take whole blocks of 14 with all registers but four (AVX-512, 2 threads,
  // alternating runs: 1024->256 at 14x14 368 -> 403 GFLOP/s, 256@14 3x3 420 -> 458, 128@56 3x3 stride 2
  // 389 -> 432); wider rows gained nothing, and the stem's 3-channel blocks lost 7%.
  int64_t reg = columns_per_block(OW, kv, lanes, target, OW <= 28);  // a last partial block of columns is guarded
  // A depthwise layer has no reduction over channels to reuse a broadcast: one vector of channels x
  // up to 8 columns, a divisor of the row, with the window unrolled, so that the columns' taps share
  // their loads of the input row and no block is guarded. Blocks of two vectors x a guarded tail of
  // columns, the window a loop, ran 5x5 layers far behind oneDNN at 7x7 (1152: 0.39x). AVX2, 2
  // threads, alternating runs against oneDNN: 5x5 1152@7 0.39x -> 1.53x, 672@14 stride 2 0.70x ->
  // 1.04x, 240@28 0.74x -> 1.14-1.29x, 144@56 stride 2 0.90x -> 0.98-1.03x; 3x3 960@7 1.07x -> 1.68x,
  // 384@14 1.34x -> 1.65x, 192@28 0.99x -> 1.18x, 144@56 0.87-0.90x -> 1.08-1.11x, 32@112 1.13-1.50x
  // -> 1.36-1.65x. Not at a stride over rows wider than 64 (96@112 stride 2 0.94-0.98x -> 0.83-0.86x:
  // half a cache line of each pixel a block).
  int64_t in_w = op_of(s, acc)->inputs()[0]->shape[2];
  bool depthwise_rows = !conv2d && K % lanes == 0 && !(in_w > 64 && in_w >= 2 * OW);
  if (depthwise_rows) kv = lanes, reg = divisor_at_most(OW, 8);
  int64_t width = kv == 3 * lanes ? lanes : kv;  // the vector
  int64_t blocks = op->shape[0] * ((K + kv - 1) / kv);
  bool weights_first = weights_larger(s, acc);
  Stage o = s[out];
  auto axes = o.leaf_axes();  // n, y, x, k
  auto [xo, xi] = o.split(axes[2], reg);
  auto [ko, ki] = o.split(axes[3], kv);
  if (constant && conv2d) s.rewrite_layout(Tensor(op_of(s, acc)->inputs()[1]), 3, kv);
  // Channel blocks, rows, column blocks (weights_larger), or rows, column blocks, channel
  // blocks; the second joins the first in the parallel loop where the first does not share
  // evenly (7 rows on 2 cores); the accumulator is computed at the third.
  std::vector<Axis> outer = weights_first ? std::vector<Axis>{ko, axes[1], xo} : std::vector<Axis>{axes[1], xo, ko};
  o.reorder({axes[0], outer[0], outer[1], outer[2], xi, ki});
  std::vector<Axis> par = {axes[0], outer[0]};
  if (!target.shares_evenly(weights_first ? blocks : rows)) par.push_back(outer[1]);
  o.parallel(o.fuse(par));
  if (kv % lanes == 0) o.unroll(xi);  // the block's copy out, of whole vectors (see schedule_conv_nchw_strided)
  if (width < kv) {
    auto [kio, kii] = o.split(ki, width);
    o.vectorize(kii);
  } else {
    o.vectorize(ki);
  }
  s[acc].compute_at(o, outer[2]);
  schedule_register_block(s, acc, {0, 1}, {2}, 3, width, kv);
  if (depthwise_rows)
    for (auto& r : op_of(s, acc)->reduce_axis) s[acc].unroll(r);
}

// Depthwise convolution in NCHW at stride 1 whose rows fill at most half a vector (7 columns
// of 16 lanes), or less than one where the rows do not block (see schedule_depthwise): each
// channel's pixels are one loop, in vectors that run on across the ends of rows, its window
// unrolled; the padding's taps are masked loads of consecutive pixels
// (vectorize_loops unclamps them). The channel's accumulators are then copied out whole.
// MobileNetV2's 960@7 (AVX-512, 2 threads): 13.7 us a row at a time (7 of 16 lanes), 8.2 us
// this way. At 14x14 (12.25 vectors against 14 rows of 14 lanes) it was slower: 23 -> 29 us.
void schedule_depthwise_pixels(Schedule& s, const std::string& out, const std::string& acc, int64_t width) {
  Stage o = s[out];
  auto axes = o.leaf_axes();  // n, c, y, x
  Axis par = o.fuse({axes[0], axes[1]});
  o.parallel(par);
  auto [po, pi] = o.split(o.fuse({axes[2], axes[3]}), width);
  o.vectorize(pi);
  Stage a = s[acc];
  a.compute_at(o, par);
  auto aa = a.leaf_axes();  // n, c, y, x, then the window
  auto [apo, api] = a.split(a.fuse({aa[2], aa[3]}), width);
  std::vector<Axis> order = {aa[0], aa[1], apo};
  order.insert(order.end(), aa.begin() + 4, aa.end());
  order.push_back(api);
  a.reorder(order);
  for (size_t r = 4; r < aa.size(); ++r) a.unroll(aa[r]);
  a.vectorize(api);
}

// Depthwise convolution in NCHW: a parallel loop over (image, channel); each output row a
// vector of columns at a time, its window unrolled into FMAs on one accumulator register.
// Whole vectors, the row's last columns a narrower one: a divisor of the row (7 of 14 or 28
// columns) made every load of 7 lanes four instructions (576@14: 25 GFLOP/s, 32 in 8s).
// At stride 1 a block of rows (a divisor of the rows) is computed together, its taps unrolled:
// an input row's three loads serve the three output rows that read it, where one row at a
// time loaded each input row three times. Each row of the block holds an accumulator and about
// two loads in registers beside the window's weights, so the block has at most a third of the
// registers the weights leave: 7 rows with AVX-512 (2 threads: 576@14 22 -> 16 us, 144@56 62
// -> 49, 32@112 45 -> 35), 2 with AVX2, where blocks of 4 spilled (2 threads, against oneDNN
// in the same process: 192@28 0.86 -> 0.97x, 144@56 1.02 -> 1.24x, 32@112 1.58 -> 1.94x). At
// stride 2 (consecutive output rows share one input row of three) blocks of rows too (below).
void schedule_depthwise(Schedule& s, const std::string& out, const std::string& acc, int lanes, const Target& target) {
  const OperationNode* op = op_of(s, out);
  const OperationNode* aop = op_of(s, acc);
  int64_t OH = op->shape[2], OW = op->shape[3];
  bool unit = column_stride(aop) == 1;
  int64_t taps = reduction_steps(aop), block = std::max<int64_t>(1, (target.vector_registers - taps) / 3);
  // At a stride, with AVX-512's registers, blocks of up to 4 rows, 8 vectors of accumulators: the
  // rows share the input rows between them (their loads and shuffles) and each is a chain of
  // dependent FMAs that the others overlap. AVX-512, alternating runs, 1 / 2 threads, 2 rows against
  // 1: 3x3 stride 2 144@56 +10% / +16%, 192@28 +23% / +21%, 96@112 the same; 5x5 stride 2 144@56
  // +32% / +36%; 576@14 +17% / +14%, 5x5 672@14 +14% / +21%. 4 rows against 2 (with the back end's
  // shifted reads): 576@14 +12% / +10%, 160@14 +12% / +7%, 192@28 +4% / +4%, 5x5 144@56 +10% / +12%;
  // 7 rows 0.60-1.00x. With AVX2 blocks of rows were no faster.
  int64_t vw = std::min<int64_t>(OW, lanes), row_vectors = (OW + vw - 1) / vw;
  int64_t yb = unit                             ? divisor_at_most(OH, block)
               : target.vector_registers >= 32 ? std::min<int64_t>(OH, std::clamp<int64_t>(8 / row_vectors, 1, 4))
                                               : 1;
  // A window of more taps than registers (5x5 with AVX2) holds none of its weights: each is a
  // broadcast from L1 shared by the block's rows, and a row alone would be one chain of 25
  // dependent FMAs. Blocks of 2 rows, at any stride; of up to half the registers' rows where a
  // row is one vector. AVX2, 2 threads, alternating runs against oneDNN in the same process (5x5
  // stride 1 unless named): 240@28 0.48x -> 0.65x, 480@14 0.48x -> 0.70x, 1152@7 0.43x -> 0.91x,
  // 144@56 stride 2 0.55x -> 0.60x, 672@14 stride 2 (7x7 out) 0.44x -> 0.66x; 480@14 in 7 rows
  // 0.74x, 144@56 stride 2 in 7 rows 0.36x.
  if (taps > target.vector_registers) yb = divisor_at_most(OH, OW <= lanes ? target.vector_registers / 2 : 2);
  // Rows narrower than a vector whose rows do not block (7 rows, with AVX2's 16 registers a block
  // of 2 at most) run over the pixels too: one row alone is one chain of 9 dependent FMAs. AVX2,
  // 2 threads, alternating runs: 960@7 21 -> 40 GFLOP/s; with rows in blocks (14x14) the rows are
  // faster (576@14 36 against 28).
  if (unit && (2 * OW <= lanes || (OW < lanes && yb == 1)))
    return schedule_depthwise_pixels(s, out, acc, lanes);
  Stage o = s[out];
  auto axes = o.leaf_axes();  // n, c, y, x
  auto [yo, yi] = o.split(axes[2], yb);
  auto [xo, xi] = o.split(axes[3], vw);
  o.reorder({axes[0], axes[1], yo, xo, yi, xi});
  o.parallel(o.fuse({axes[0], axes[1]}));
  o.vectorize(xi);
  // The block's rows are stored out unrolled: LLVM then keeps the accumulators in registers and
  // stores each row to the output once (a masked store where it ends in part of a vector), where
  // a loop over the rows read them back from a stack buffer, stored there in pieces (14 lanes: 8 +
  // 4 + 2). AVX-512, alternating runs, 1 / 2 threads: 576@14 +70% / +48%, 384@14 +53% / +47%,
  // 192@28 +23% / +22%, 144@56 +2% / +12%, 32@112 +5% / +9%.
  o.unroll(yi);
  Stage a = s[acc];
  a.compute_at(o, xo);
  auto [vo, vi] = a.split(aop->axis[3].name(), vw);
  std::vector<Axis> order;
  for (int d : {0, 1}) order.push_back(aop->axis[d].name());
  order.push_back(vo);
  for (auto& r : aop->reduce_axis) order.push_back(r.name());
  order.insert(order.end(), {aop->axis[2].name(), vi});
  a.reorder(order);
  for (auto& r : aop->reduce_axis) a.unroll(r.name());
  a.unroll(aop->axis[2].name());
  a.vectorize(vi);
}

// Whether a depthwise NCHW layer runs channel-blocked (schedule_depthwise_blocked), with AVX-512,
// multiplier 1 and whole blocks of channels: windows wider than 3x3. Each input value then feeds
// R x S / stride^2 FMAs against its share of the in-register transposes (a tile's 64 shuffles, in
// and out), where in the planes' own layout a 7-column row's taps are vectors of 7 lanes, at a
// stride a shuffle each too. Alternating runs, 2 / 1 threads: 5x5 672@14 stride 2 79 -> 158 / 43 ->
// 91 GFLOP/s, 1152@7 141 -> 267 / 73 -> 151, 240@28 165 -> 214 / 89 -> 114, 480@14 +3% / +16%,
// 7x7 384@14 +36% / +6%, 96@56 +84% / +75%. Not 3x3 layers, whose 9 FMAs a value pay less than the
// transposes: 960@7 the same, 384@14 and, at stride 2, 192@28 and 144@56 half as fast. Nor strided
// layers whose output rows fill a vector, which run in blocks of 4 rows (schedule_depthwise): 5x5
// 144@56 stride 2 +30% / +15% in the planes' layout.
bool depthwise_blocks_channels(const OperationNode* op, int lanes, const Target& target) {
  const OperationNode* w = op->inputs()[1].get();
  return op->shape[1] % lanes == 0 && w->shape[0] == op->inputs()[0]->shape[1] && w->shape[2] * w->shape[3] > 9 &&
         target.vector_registers >= 32 && (column_stride(op) == 1 || op->shape[3] < lanes);
}

// Depthwise convolution in NCHW, channel-blocked inside the kernel: per block of `lanes` channels
// (the parallel loop) the input's planes are packed into [pixel][channel], a tile of a vector of
// pixels x the block's channels transposed in registers (the back end's transposed_copy); each
// output pixel is then a vector of the block's channels, every tap a dense load at any stride with
// its weights a register, a row's block of columns (up to 8) its accumulators, the window unrolled
// (the border taps skipped by loop partitioning); the accumulators are copied out over the fused
// pixels, transposed again. The weights are blocked like the channels, [C/lanes][1][R][S][lanes].
// The padding, if any, is the caller's to inline: the pack is of the input it pads.
void schedule_depthwise_blocked(Schedule& s, const std::string& out, const std::string& acc, int lanes,
                                bool constant) {
  int64_t OW = op_of(s, out)->shape[3];
  Tensor reader(op_of(s, acc)->inputs()[0]), input = reader;  // the padding reads the input
  if (reader.op()->tag == "pad") input = Tensor(reader.op()->inputs()[0]);
  else reader = s.tensor(acc);
  block_weights(s, acc, lanes, constant);
  Stage o = s[out];
  auto axes = o.leaf_axes();  // n, k, y, x
  auto [ko, ki] = o.split(axes[1], lanes);
  Axis f = o.fuse({axes[0], ko});
  o.parallel(f);
  auto [po, pi] = o.split(o.fuse({axes[2], axes[3]}), lanes);
  o.reorder({f, po, ki, pi});
  o.vectorize(pi);
  Stage p = s[s.pack(input, {reader}, 1, lanes)];
  p.compute_at(o, f);
  auto pa = p.leaf_axes();  // channel block, n, y, x, channel
  p.fuse({pa[2], pa[3]});
  p.vectorize(pa[4]);
  Stage a = s[acc];
  a.compute_at(o, f);
  auto aa = a.leaf_axes();  // n, k, y, x, ry, rx
  a.reorder_storage({aa[0], aa[2], aa[3], aa[1]});
  auto [xo, xi] = a.split(aa[3], divisor_at_most(OW, 8));
  auto [kvo, kvi] = a.split(aa[1], lanes);
  a.reorder({aa[0], kvo, aa[2], xo, aa[4], aa[5], xi, kvi});
  a.unroll(aa[4]);
  a.unroll(aa[5]);
  a.unroll(xi);
  a.vectorize(kvi);
}

// Winograd convolution (Winograd.cpp), its stages found from the product `mm`:
// - the input transform, parallel over channel blocks and tiles, a tile's row transform in
//   L1 and its points unrolled, the channels in vector lanes;
// - the products as NCHWc's 1x1 convolution over the tiles: channel_blocks() blocks of output
//   channels by a divisor of the tiles in registers;
// - the output transform with the epilogue (bias, residual, activation), per output tile, its
//   column transform at the tile.
void schedule_winograd(Schedule& s, const std::string& mm, const Target& target, std::set<std::string>& done) {
  const OperationNode* mop = op_of(s, mm);
  std::string input = mop->inputs()[0]->name, rows = op_of(s, input)->inputs()[0]->name;
  std::string padded = op_of(s, rows)->inputs()[0]->name;
  std::string columns = s.state().readers(mm).at(0), conv = s.state().readers(columns).at(0);
  std::string out = epilogue_output(s, conv);
  if (out.empty()) out = conv;
  // The stages between conv and out are inlined as any element-wise stage is.
  for (const std::string& n : {mm, input, rows, columns, conv, out}) done.insert(n);
  if (op_of(s, padded)->tag == "pad") s[padded].compute_inline(), done.insert(padded);

  Stage v = s[input];
  auto va = v.leaf_axes();  // e, nu, n, co, t, ci
  v.reorder({va[2], va[3], va[4], va[0], va[1], va[5]});
  v.parallel(v.fuse({va[2], va[3], va[4]}));
  v.unroll(va[0]), v.unroll(va[1]), v.vectorize(va[5]);
  Stage r = s[rows];
  r.compute_at(v, v.leaf_axes()[0]);
  auto ra = r.leaf_axes();  // n, co, t, r, nu, ci
  r.unroll(ra[3]), r.unroll(ra[4]), r.vectorize(ra[5]);

  int64_t KO = mop->shape[3], T = mop->shape[4];
  int64_t pair = channel_blocks(KO, target);
  int64_t reg = divisor_at_most(T, accumulators(target) / pair);
  if (reg < 4) reg = std::min<int64_t>(T, accumulators(target) / pair);
  std::string acc = s.cache_write(s.tensor(mm), "local").name();
  Stage m = s[mm];
  auto ma = m.leaf_axes();  // e, nu, n, ko, t, ki
  auto [koo, koi] = m.split(ma[3], pair);
  auto [to, ti] = m.split(ma[4], reg);
  m.reorder({ma[0], ma[1], ma[2], koo, to, koi, ti, ma[5]});
  m.parallel(m.fuse({ma[0], ma[1], ma[2], koo}));
  m.vectorize(ma[5]);
  Stage a = s[acc];
  a.compute_at(m, to);
  const OperationNode* aop = op_of(s, acc);
  std::vector<std::string> sp;
  for (auto& iv : aop->axis) sp.push_back(iv.name());
  auto [akoo, akoi] = a.split(sp[3], pair);
  auto [ato, ati] = a.split(sp[4], reg);
  a.reorder({sp[0], sp[1], sp[2], akoo, ato, aop->reduce_axis[0].name(), aop->reduce_axis[1].name(), akoi, ati,
             sp[5]});
  a.unroll(akoi), a.unroll(ati), a.vectorize(sp[5]);

  if (out != conv) s[conv].compute_inline();
  Stage o = s[out];
  auto oa = o.leaf_axes();  // n, ko, h, w, ki
  int64_t tile = op_of(s, columns)->shape[4];
  auto [ho, hi] = o.split(oa[2], tile);
  auto [wo, wi] = o.split(oa[3], tile);
  o.reorder({oa[0], oa[1], ho, wo, hi, wi, oa[4]});
  o.parallel(o.fuse({oa[0], oa[1], ho}));
  o.unroll(hi), o.unroll(wi), o.vectorize(oa[4]);
  Stage c = s[columns];
  c.compute_at(o, wo);
  auto ca = c.leaf_axes();  // n, ko, t, e, wi, ki
  c.unroll(ca[3]), c.unroll(ca[4]), c.vectorize(ca[5]);
}

}  // namespace

Schedule default_schedule(const std::vector<Tensor>& outputs, const Target& target,
                          const std::vector<Tensor>& constants) {
  if (target.is_gpu()) return gpu_default_schedule(outputs, target);
  auto constant = [&](const OperationNode* input) {
    for (auto& c : constants)
      if (c.name() == input->name && input->kind == OperationNode::Placeholder) return true;
    return false;
  };
  Schedule s(outputs);
  std::vector<std::string> names = s.stage_names();
  // Consumers first, so a producer knows whether it was fused into its consumer.
  std::set<std::string> done;
  // Output epilogues (bias, activation) of GEMMs and convolutions are scheduled with them.
  std::map<std::string, std::string> epilogue_of;
  for (auto& name : names) {
    const StageState& st = s.state().stage(name);
    if (st.is_placeholder() || s.state().is_output(name)) continue;
    if (st.op->tag != "matmul" && !(st.op->tag == "conv2d" && st.op->shape.size() == 5) &&
        st.op->tag != "depthwise_conv2d" && conv_layout(st.op.get()).empty())
      continue;
    std::string r = epilogue_output(s, name);
    if (!r.empty()) epilogue_of[name] = r, done.insert(r);
  }
  for (auto& name : names)
    if (!s.state().stage(name).is_placeholder() && op_of(s, name)->tag == "winograd_product")
      schedule_winograd(s, name, target, done);
  // Row-wise layers (softmax, layer norm): one pass over each row.
  for (auto& t : outputs) {
    if (!schedule_rowwise(s, t.name())) continue;
    done.insert(t.name());
    for (auto& name : names)
      if (s.state().stage(name).attach == StageState::At) done.insert(name);
  }
  for (auto it = names.rbegin(); it != names.rend(); ++it) {
    const std::string& name = *it;
    if (done.count(name)) continue;
    const StageState& st = s.state().stage(name);
    if (st.is_placeholder()) continue;
    Operation keep = st.op;  // subsample_input replaces the stage's op; keep this one alive
    const OperationNode* op = keep.get();
    bool output = s.state().is_output(name);
    bool reduce = op->reduction() != nullptr;

    std::string layout = conv_layout(op);
    // In NHWC (multiplier 1) a depthwise convolution is scheduled as a convolution with no
    // channel reduction: the channels are the vector either way.
    bool depthwise = op->tag == "depthwise_conv2d" && op->shape.size() == 4 && layout != "NHWC";
    if (op->tag == "matmul" || (op->tag == "conv2d" && op->shape.size() == 5) || !layout.empty() || depthwise) {
      bool nchwc = op->tag == "conv2d" && layout.empty();
      int lanes = std::max(4, target.vector_bytes / op->dtype.bytes());
      // A strided 1x1 convolution reads a subsampled copy of its input: each reduction step
      // then reads dense rows, and its pixels fuse like a stride-1 layer's (see
      // subsample_input).
      int64_t stride = layout == "NCHW" && !depthwise ? pixel_stride(op) : 0;
      Tensor sub = stride > 1 ? subsample_input(s, name, stride) : Tensor();
      // A pass of its own, unless the convolution's schedule made it part of its loops.
      auto schedule_subsample = [&] {
        if (sub.defined() && s.state().stage(sub.name()).attach != StageState::Inline)
          schedule_injective(s, sub.name());
      };
      // Over a short reduction (at most 8 vectors' worth of steps) the pixels may end in a
      // narrower vector: the channel-blocked path's copy out to NCHW rows (a transpose) costs
      // much against so few FMAs per output. AVX-512, 2 threads, 14x14: 64->384 208 -> 300
      // GFLOP/s, 96->576 251 -> 334, 128->512 265 -> 311, 32->192 156 -> 180; at 192 input
      // channels no faster (192->64 320 -> 273, 192->576 equal).
      bool pixels_fuse = image_axes_fuse(op) || stride > 1;
      bool pack = pixels_fuse && packs_pixel_panels(op, lanes, target);
      if (layout == "NCHW" && !depthwise && !epilogue_of.count(name) && pixels_fuse &&
          (pack || whole_pixel_vectors(op->shape[2] * op->shape[3], pixel_vectors(target) * lanes, lanes,
                                       reduction_steps(op) <= 8 * lanes))) {
        schedule_conv_nchw_pixels(s, name, lanes, pack, target);
        schedule_subsample();
        done.insert(name);
        continue;
      }
      std::string out = name, acc;
      if (epilogue_of.count(name)) {
        out = epilogue_of[name];
        acc = name;
      } else {
        acc = s.cache_write(s.tensor(name), "local").name();
      }
      const OperationNode* input = op->inputs()[0].get();
      // Whether the padded input is read in place (the border taps skipped by loop
      // partitioning) rather than copied at the root: where the copy costs much against the
      // convolution and partitioning leaves enough columns unguarded.
      bool pad_in_place = false;
      if (depthwise && depthwise_blocks_channels(op, lanes, target)) {
        schedule_depthwise_blocked(s, out, acc, lanes, constant(op->inputs()[1].get()));
        pad_in_place = true;  // each tap's padding a condition, its border taps skipped
      } else if (depthwise) {
        schedule_depthwise(s, out, acc, lanes, target);
        // 9 FMAs per output, 9 / stride^2 per input: the copy costs as much as the
        // convolution. The border taps are masked loads (vectorize_loops drops the clamps that
        // the padding's select makes redundant): 384@14 ran 32 -> 15 us in place (AVX-512 and
        // AVX2 code alike), 960@7 17 -> 10 us (AVX-512; AVX2 the same).
        pad_in_place = true;
      } else if (layout == "NCHW" && column_stride(op) > 1 && input->shape[1] < lanes && op->shape[3] >= lanes) {
        schedule_conv_nchw_strided(s, out, acc, lanes, constant(op->inputs()[1].get()), target);
        pad_in_place = true;  // inlined into the de-interleaved copy
      } else if (layout == "NCHW" && op->shape[1] % lanes == 0 && !short_and_wide(op, lanes)) {
        schedule_conv_nchw(s, out, acc, lanes, constant(op->inputs()[1].get()), target);
        // At a stride the copy is a pass over an input 4x the output's area: ResNet-50's
        // 128@56 3x3 stride 2 ran 136 -> 162 GFLOP/s; not the 3-channel stem (145 -> 141). At stride
        // 1 a 3x3 window's padding too, from 14 rows up with AVX-512: the copy's rows, parallel by
        // input channel, are read by both cores (see the columns path below). Alternating runs, 2 / 1
        // threads: 256@14 +8-10% / +3%, 128@28 +2-5% / +1%, 64@56 +2% / 0; 512@7 -2% / -3% and 5x5
        // 96->256 at 27x27 -4% / -4%, copied still, as with AVX2 (whose fused pixels' padded taps are
        // conditions per pixel: 0.70x in place).
        bool window3 = op->reduce_axis.back().extent() <= 3 && op->shape[2] >= 14 && target.vector_registers >= 32;
        pad_in_place = input->shape[1] >= lanes && (column_stride(op) > 1 || window3);
      } else if (layout == "NCHW") {
        schedule_conv_nchw_columns(s, out, acc, lanes, target);
        // At stride 1 a 3-wide window's border taps are masked loads of the row, where the copy is a
        // pass of its own: AVX-512, alternating runs, 2 / 1 threads, 24->40 at 56x56 +10% / +8%,
        // 17->33 at 32x32 +17% / -3%. At a stride too: the copy's rows, parallel by input channel,
        // are each written by one core and read by both, as every block of output channels reads all
        // input channels, so at 2 threads half its reads come from the other core's cache: 5x5 72->40
        // stride 2 +18% / -3%.
        pad_in_place = (column_stride(op) > 1 || op->reduce_axis.back().extent() <= 3) && target.vector_registers >= 32;
      } else if (layout == "NHWC") {
        schedule_conv_nhwc(s, out, acc, lanes, constant(op->inputs()[1].get()), target);
        // The channels are the vector, so a tap's padding is one condition per pixel that
        // partitioning mostly removes, where a copy at the root is a pass over the whole input.
        // Not for a convolution's window wider than 3: its guarded taps cost more than the copy
        // (AVX2, 2 threads, alternating runs against oneDNN: 5x5 16->32 at 28x28 0.70x -> 1.01x,
        // 72->40 stride 2 0.84x -> 1.22x; 96->256 and 32->96 the same, the 7x7 stem 0.89x -> 0.92x),
        // nor a depthwise one's, whose copy costs as much as its FMAs (5x5 240@28 0.95x -> 0.70x).
        pad_in_place = op->tag == "depthwise_conv2d" || op->reduce_axis[1].extent() <= 3;
      } else if (nchwc) {
        schedule_conv_nchwc(s, out, acc, lanes, target);
        // Each tap is one broadcast, its padding a branch that partitioning mostly removes:
        // in place, 3x3 stride 1 ran 2-6% faster (AVX-512 and AVX2 code), stride 2 15-35%
        // (128@56: 256 -> 344 GFLOP/s). Not for blocks of fewer channels (the stem's 3).
        pad_in_place = input->shape.back() >= 8;
      } else {
        schedule_gemm(s, out, acc, constant, target);
      }
      if (pad_in_place && input->tag == "pad") s[input->name].compute_inline(), done.insert(input->name);
      schedule_subsample();
      done.insert(name);
      continue;
    }
    if (reduce) {
      if (!output && op->tag != "conv2d" && op->tag != "depthwise_conv2d") {
        // Row statistics (softmax, layer norm, pooling sums): parallel over rows.
        Stage stg = s[name];
        auto axes = stg.leaf_axes();
        size_t nsp = op->axis.size();
        if (nsp > 1) stg.parallel(stg.fuse(std::vector<Axis>(axes.begin(), axes.begin() + nsp)));
        else stg.parallel(axes[0]);
      } else {
        schedule_reduction(s, name);
        // A pool reads its input in place, the padding a condition per tap, not from a padded
        // copy made first: the copy is a pass over the whole input for a few operations a tap.
        const OperationNode* input = op->inputs()[0].get();
        if (op->tag == "pool" && input->tag == "pad") s[input->name].compute_inline(), done.insert(input->name);
      }
      continue;
    }
    if (!output && op->tag != "layout" && op->tag != "pad") {
      s[name].compute_inline();
      continue;
    }
    schedule_injective(s, name);
  }
  return s;
}

}  // namespace tessel::ops
