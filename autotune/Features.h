#pragma once
/** \file Features of a lowered candidate for the cost model.
 *
 * Version 1. One row of kStoreFeatures per store statement of the final loop program
 * (after vectorization and unrolling, so an unrolled body shows as several stores):
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

#include "ir/IR.h"

namespace tessel::autotune {

constexpr int kFeatureVersion = 1;
constexpr int kStoreFeatures = 40;
constexpr int kProgramFeatures = 3 * kStoreFeatures + 3;

std::vector<std::vector<float>> store_features(const Stmt& program);
std::vector<float> program_features(const Stmt& program);

}  // namespace tessel::autotune
