#pragma once
// Schedules: how to compute. A Schedule holds one Stage per operation; every primitive
// called on a stage is recorded as a Step (see step.h) that names stages and axes by
// name, so a schedule can be saved, replayed on a fresh compute definition, mutated by
// the tuner and printed back as C++.
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "tessel/step.h"
#include "tessel/tensor.h"

namespace tessel {

struct ScheduleState;

// An axis of a stage, named. Built from a compute's IterVar, a string, or returned by
// split/fuse.
struct Axis {
  std::string name;
  Axis() = default;
  Axis(const IterVar& iv) : name(iv.name()) {}       // NOLINT
  Axis(std::string n) : name(std::move(n)) {}        // NOLINT
  Axis(const char* n) : name(n) {}                   // NOLINT
};

// GPU thread axes a loop can be bound to (`bind`). Lowering for GPUs comes with the
// CUDA/OpenCL back ends; the CPU back end rejects bound loops with a clear error.
inline const char* const kThreadTags[] = {"blockIdx.x",  "blockIdx.y",  "blockIdx.z", "threadIdx.x",
                                          "threadIdx.y", "threadIdx.z", "vthread"};

class Schedule;

// An input the kernel reads in another layout (Schedule::rewrite_layout): `rewritten` is a
// copy of `source` (shape `shape`) whose dimension `dim` is cut into blocks of `block`,
// the block index first and the position in the block last, a short last block zero-filled.
// A built Module makes the copy once from the caller's buffer (Module::prepare).
struct LayoutRewrite {
  std::string source, rewritten;
  int dim = 0;
  int64_t block = 1;
  std::vector<int64_t> shape;
  // Empty for a blocked copy; else what the prepared input is computed as ("winograd F(4x4, 3x3)",
  // made by Module code, not by tessel_rewrite_layout).
  std::string transform;
};

class Stage {
 public:
  Stage(Schedule* sch, std::string name) : sch_(sch), name_(std::move(name)) {}
  const std::string& name() const { return name_; }

  std::pair<Axis, Axis> split(const Axis& axis, int64_t factor);
  std::pair<Axis, Axis> split_nparts(const Axis& axis, int64_t nparts);
  Axis fuse(const std::vector<Axis>& axes);
  Axis fuse(const Axis& outer, const Axis& inner) { return fuse({outer, inner}); }
  void reorder(const std::vector<Axis>& order);
  // tile = split both axes, then reorder to (x.outer, y.outer, x.inner, y.inner).
  struct Tiled { Axis xo, yo, xi, yi; };
  Tiled tile(const Axis& x, const Axis& y, int64_t xf, int64_t yf);
  // A reduction axis may be vectorized too: its lanes' contributions are combined in a tree
  // before they meet the accumulator (floating-point sums then round in that order).
  void vectorize(const Axis& axis);
  void unroll(const Axis& axis);
  void parallel(const Axis& axis);
  void bind(const Axis& axis, const std::string& thread_tag);
  // pragma("auto_unroll_max_step", 64): unroll every loop nest under `axis` whose total
  // trip count is at most the value.
  void pragma(const Axis& axis, const std::string& key, int64_t value);
  // prefetch(B, axis, 1): while iteration `axis` = v runs, the cache lines of B that
  // iteration v + offset reads are prefetched, spread evenly over the iterations of the
  // innermost serial loop around the reads (CPU targets). Data that an iteration streams from
  // memory then arrives during the iteration before, while that one computes: BERT's GEMM
  // blocks each read a weight panel of 96-384 KB, which the first of their 16 strips of
  // rows otherwise waits for.
  void prefetch(const Tensor& t, const Axis& axis, int64_t offset = 1);
  void compute_at(const Stage& parent, const Axis& axis);
  void compute_inline();
  void compute_root();
  void storage_align(const Axis& axis, int64_t factor, int64_t offset);
  // Lays out the stage's buffer with its data axes in this order, outermost first (it is
  // row-major in the order of the compute's axes otherwise): a cache_write block that is
  // vectorized along another axis than its last one then stores whole vectors. Stages
  // inside the kernel only; outputs keep the caller's layout.
  void reorder_storage(const std::vector<Axis>& order);

  // Names of the current loop axes, outermost first.
  std::vector<std::string> leaf_axes() const;
  // An axis by name, checked to exist: s["C"]["i.inner"].
  Axis operator[](const std::string& axis) const;

 private:
  void apply(Step step);
  Schedule* sch_;
  std::string name_;
};

class Schedule {
 public:
  // A schedule for the computation that produces `outputs` (all the stages they read).
  explicit Schedule(std::vector<Tensor> outputs);
  Schedule(const Schedule&);
  Schedule& operator=(const Schedule&);
  Schedule(Schedule&&) noexcept;
  Schedule& operator=(Schedule&&) noexcept;
  ~Schedule();

  Stage operator[](const Tensor& t);
  Stage operator[](const std::string& stage_name);

  // cache_read(A, "local", {C}) makes readers C load A through a copy A.local; returns it.
  Tensor cache_read(const Tensor& t, const std::string& scope, const std::vector<Tensor>& readers);
  // pack(B, {C}, 1, 32): readers C load B[k, j] from B.pack[j / 32, k, j % 32], a copy of
  // B whose dimension `dim` is cut into blocks of `block` (the block index first, the
  // position in the block last), so that a loop nest walking one block of j reads memory
  // contiguously. A short last block is zero-filled. Returns B.pack (computed at the root
  // unless scheduled otherwise). With dims > 1, the dimensions dim .. dim + dims - 1 are
  // blocked as one, flattened row-major: pack(X, {C}, 2, 16, 2) of an NCHW X lays out
  // X.pack[(y * W + x) / 16, n, c, (y * W + x) % 16], blocks of 16 pixels that may span rows.
  Tensor pack(const Tensor& t, const std::vector<Tensor>& readers, int dim, int64_t block, int dims = 1);
  // deinterleave(X, {C}, 3, 2): readers C load X[..., x] from X.deint[..., x % 2, x / 2], a
  // copy of X whose dimension `dim` is split into `factor` phases, each phase's elements
  // next to each other. A read `factor` apart along `dim` (a stride-2 convolution's input
  // columns) then reads one phase contiguously: vector loads instead of gathers or shuffles.
  // Returns X.deint (computed at the root unless scheduled otherwise).
  Tensor deinterleave(const Tensor& t, const std::vector<Tensor>& readers, int dim, int64_t factor);
  // subsample(X, {C}, 3, 2): readers C load X[..., x] from X.sub[..., x / 2], a copy of every
  // other element of X along `dim`; each reader must read only those (x a multiple of 2: a
  // stride-2 1x1 convolution's input columns). Unlike deinterleave, the copy is as dense as
  // X, so it may be packed like any input. Returns X.sub (computed at the root unless
  // scheduled otherwise).
  Tensor subsample(const Tensor& t, const std::vector<Tensor>& readers, int dim, int64_t factor);
  // rewrite_layout(W, 0, 8): every reader of the input W reads W.layout[k / 8, ..., k % 8]
  // for W[k, ...] instead, a copy of W blocked like pack() that the built Module prepares
  // once from the caller's W (Ansor's layout rewriting, for weights that stay constant
  // between calls), so the copy costs nothing per call. Returns W.layout.
  Tensor rewrite_layout(const Tensor& t, int dim, int64_t block);
  const std::vector<LayoutRewrite>& layout_rewrites() const;
  // cache_write(C, "local") computes C into C.local and copies it out; returns C.local.
  Tensor cache_write(const Tensor& t, const std::string& scope);
  // rfactor(C, k.inner): a new stage C.rf computes partial sums with the reduce axis
  // `factor_axis` turned into its first spatial axis; C then sums over it.
  Tensor rfactor(const Tensor& t, const Axis& factor_axis);

  // Replays one step; the schedule's primitives all go through here.
  void apply(const Step& step);
  const std::vector<Step>& steps() const;
  // A fresh schedule of the same outputs with `steps` replayed (throws on a bad step).
  static Schedule replay(const std::vector<Tensor>& outputs, const std::vector<Step>& steps);
  // The schedule as C++ code calling the primitives above.
  std::string to_cpp(const std::string& schedule_var = "s") const;

  const std::vector<Tensor>& outputs() const;
  std::vector<std::string> stage_names() const;
  Tensor tensor(const std::string& stage_name) const;
  ScheduleState& state() { return *state_; }
  const ScheduleState& state() const { return *state_; }

 private:
  // Applies a step that copies `step.stage` for `readers` (cache_read, pack, deinterleave);
  // returns the copy.
  Tensor apply_copy(Step step, const std::vector<Tensor>& readers);
  std::unique_ptr<ScheduleState> state_;
};

}  // namespace tessel
