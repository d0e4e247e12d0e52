#pragma once
/** \file Features of a lowered candidate for the cost model.
 *
 * Version 3. One row of kStoreFeatures per store statement of the final loop program
 * (after vectorization and unrolling, so an unrolled body shows as several stores). The
 * program may be lowered only up to unrolling (lower_for_features): a loop that unrolling
 * would unroll is then read as its copies, and the rows describe the unrolled code.
 *   0 float add/sub   1 float mul   2 mul feeding an add (FMA)   3 float div   4 math calls
 *   5 compare/select  6 integer ops   7 vector lanes   8 masked (predicated)   9 loads
 *  10 trip count (product of enclosing loop extents)   11 enclosing loops   12 innermost extent
 *  13 parallel extent   14 stores in the same innermost body (unrolling)   15 outermost extent
 *  16..36  for the three buffers touched most (by bytes), 7 each: bytes per execution,
 *          total bytes, footprint bytes, stride of the innermost loop, reuse
 *          (trip / footprint), written?, scratch (allocated in the kernel)?
 *  37 arithmetic intensity (flops / bytes)   38 scratch bytes allocated above the store
 *  39 flops per execution
 * Counts are per execution of the store times its lanes. A program's vector is the sum,
 * the trip-weighted mean and the maximum of its rows, each through log2(1+x), followed by
 * 3 program totals (stores, parallel loops, total flops): 3*40+3 = 123 floats. */
#include <vector>

#include "passes/Lower.h"

namespace tessel::autotune {

constexpr int kFeatureVersion = 3;
constexpr int kStoreFeatures = 40;
constexpr int kProgramFeatures = 3 * kStoreFeatures + 3;

/* GPU targets (version 2): the program features above of the kernel doing the most work (per
 * thread; thread indices count as integers), then kGpuFeatures of that kernel:
 *   0 threads per block   1 blocks   2 warps per block   3 shared bytes per block
 *   4 local bytes per thread   5 estimated registers per thread (32-bit locals + 24)
 *   6 barriers per thread (executions)   7 global bytes per thread
 *   8 share of global accesses coalesced (stride 0 or 1 element along threadIdx.x)
 *   9 mean global stride along threadIdx.x (elements)   10 mean shared-memory bank conflict
 *  (ways, 1 = none)   11 arithmetic intensity (flops / global bytes)   12 occupancy (resident
 *  warps / the multiprocessor's, from threads, shared bytes and estimated registers)
 *  13 waves (blocks / resident blocks over all multiprocessors)   14 kernels   15 vector
 *  width of global accesses. Counts through log2(1+x) except 8, 10 and 12.
 * Registers and spills from compilation are not features: the search ranks thousands of
 * candidates a round that are never compiled. They are checked on every compiled one. */
constexpr int kGpuFeatures = 16;

std::vector<std::vector<float>> store_features(const Stmt& program);
std::vector<float> program_features(const Stmt& program);
std::vector<float> gpu_features(const LoweredProgram& prog, const Target& target);

// The dynamic work of a GPU program, over all its kernels: what gpu_features sees, as
// totals, for the static model.
struct GpuProfile {
  double flops = 0, global_bytes = 0, shared_accesses = 0, conflict_ways = 1, barriers = 0;
  double occupancy = 0, coalesced = 1;  // estimated occupancy; share of coalesced global accesses
  int64_t kernels = 0, blocks = 0, threads_per_block = 0;
};
GpuProfile gpu_profile(const LoweredProgram& prog, const Target& target);
// A lowered candidate's features for the target's cost model: program_features on a CPU,
// gpu_features on a GPU.
std::vector<float> candidate_features(const LoweredProgram& prog, const Target& target);

}  // namespace tessel::autotune
