#pragma once
/** \file The lowering passes, one per file, in the order Lower.cpp runs them. */
#include <map>
#include <string>
#include <vector>

#include "ir/IR.h"

namespace tessel {

struct LoopProgram;

struct ArgBuffer {
  Operation op;  // the tensor passed in
  Var buffer;    // its data pointer inside the kernel
};

// How a stage's buffer is laid out: its dimensions outermost first (empty: in order) and
// storage_align's (dimension, (factor, offset)) entries.
struct BufferLayout {
  std::vector<int> order;
  std::vector<std::pair<int, std::pair<int64_t, int64_t>>> align;
};
// Realize/TensorLoad/TensorStore -> Allocate/Load/Store on flat buffers, row-major in the
// order of `layouts` (per op name) with storage_align honoured. `args` are the kernel's
// arguments, always row-major.
Stmt storage_flatten(const Stmt& s, const std::vector<ArgBuffer>& args,
                     const std::map<std::string, BufferLayout>& layouts);
// Drops conditions that always hold within their loops and splits guarded loops so the
// bulk of their iterations runs without the guard (loop partitioning).
Stmt remove_true_guards(const Stmt& s);
// The parts of a parallel loop that remove_true_guards partitioned, `if (v < cut) main else tail`
// (`cut` set), or null where `loop` is not one.
const IfThenElse* parallel_parts_of(const For* loop, int64_t* cut);
// Vectorized loops -> Ramp/Broadcast vector code.
Stmt vectorize_loops(const Stmt& s);
// Loops marked by Stage::prefetch -> prefetches of what the iterations ahead read, spread over
// the inner loops.
Stmt inject_prefetch(const Stmt& s);
// A parallel loop of two parts, `if (v < cut) A else B`, runs B's iterations spread evenly among A's,
// so that each thread's contiguous share of the loop holds its part of both.
Stmt spread_parallel_parts(const Stmt& s);
// Unrolled loops and loops under pragma auto_unroll_max_step -> straight-line code.
Stmt unroll_loops(const Stmt& s);
// What code becomes once unroll_loops has run, for the passes that price or describe it
// before: its statements (copies counted), the iterations unrolled in it, and whether a
// loop is left in it. `max_step` is the enclosing auto_unroll_max_step (0: none).
struct UnrolledSize {
  int64_t stmts = 0, steps = 1;
  bool has_loop = false;
};
UnrolledSize unrolled_size(const Stmt& s, int64_t max_step);
// Whether unroll_loops unrolls loop f, whose body unrolls to `body`.
bool unrolls(const For* f, int64_t max_step, const UnrolledSize& body);
// Skippable guards that partitioning and unrolling left undecided: one check in front of
// a loop they guard whole, dropped elsewhere (the guarded code is harmless where they fail).
Stmt place_skippable_guards(const Stmt& s);
// Innermost serial loops copied for each outcome of the conditions that all their
// iterations decide alike, each copy without those branches.
Stmt unswitch_loops(const Stmt& s);
// Reuses scratch buffers whose lifetimes do not overlap; hoists constant-size
// allocations out of serial loops.
Stmt storage_rewrite(const Stmt& s);

// ---- GPU targets ----

struct Target;
struct ScheduleState;

// Rejects a compute definition that reads a tensor outside its shape, naming the read, the
// index and its range (CheckBounds.cpp).
void check_bounds(const ScheduleState& st);
// The checked build: wraps each index of the program's reads that lowering cannot prove
// inside its tensor in CheckIndex; `messages` gets their messages (CheckBounds.cpp).
void check_reads_when_run(LoopProgram& prog, std::vector<std::string>& messages);
// Rejects what the target cannot run, naming the stage and axis (CheckSchedule.cpp).
void check_schedule(const ScheduleState& st, const Target& target);

// One kernel launch: a root stage of the schedule.
struct DeviceKernel {
  std::string name;
  Stmt body;                   // thread loops replaced by ThreadIndex
  int64_t grid[3] = {1, 1, 1};   // blockIdx.x/y/z extents
  int64_t block[3] = {1, 1, 1};  // threadIdx.x/y/z extents
  std::vector<Var> params;     // the global buffers it touches: arguments (call order), then temporaries
};
// A root stage that is not an output lives in global memory between launches.
struct DeviceTemp {
  Var buffer;
  DType dtype;
  int64_t size;  // elements
};
struct DeviceProgram {
  std::vector<DeviceKernel> kernels;  // launched in order
  std::vector<DeviceTemp> temps;
};

// vthread loops pushed down to the statements that depend on them, one copy per virtual
// thread; buffers written per virtual thread get a slice each (InjectVirtualThread.cpp).
Stmt inject_virtual_thread(const Stmt& s);
// Each root stage becomes a kernel: bound loops become thread indices (a stage bound to a
// smaller extent than the launch's is guarded).
DeviceProgram split_host_device(const Stmt& s, const std::vector<ArgBuffer>& args, const std::string& name);
// Barriers between writes and reads of shared memory (ThreadSync.cpp).
Stmt thread_sync(const DeviceKernel& k, const Target& target);
// ThreadAllReduce -> warp shuffles (CUDA) or a shared-memory tree (LowerThreadAllreduce.cpp).
Stmt lower_thread_allreduce(const DeviceKernel& k, const Target& target);
// Whether the all-reduce of threadIdx.x extent `x` synchronises the block (ThreadSync needs to know).
bool allreduce_has_barrier(const Target& target, int64_t x);
// The target's limits: threads per block and per dimension, grid, shared memory (VerifyGPUKernel.cpp).
void verify_gpu_kernel(const DeviceKernel& k, const Target& target);
// The kernel's shared arrays: the largest allocation of each shared buffer (partitioned
// loops allocate one buffer in each part).
std::vector<const Allocate*> shared_arrays(const Stmt& kernel_body);

}  // namespace tessel
