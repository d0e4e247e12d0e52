#pragma once
/** \file Stride-2 reads of 8 floats computed in the order one AVX2 shuffle leaves them.
 *
 * A stride-2 read (a strided convolution's taps, a pooling window) is one read of 16
 * consecutive floats and a shuffle keeping every other one. AVX2 has no single instruction
 * for that: `vshufps` picks the elements within each 128-bit half, which leaves them in the
 * order 0 1 4 5 2 3 6 7, and a lane-crossing `vpermpd` puts them back, two shuffles per read
 * competing with the FMAs. Lane-wise arithmetic does not care about the order, so where a
 * computation's stride-2 reads meet only lane-wise operations (FMAs, adds, max, selects,
 * loop-carried accumulators) before they reach memory, the whole computation runs in the
 * `vshufps` order and one `vpermpd` restores the order where a result leaves it: a 3x3
 * stride-2 tap block pays one lane-crossing shuffle per output vector instead of nine. */
#include "codegen/LLVMHeaders.h"

namespace tessel {

// Rewrites the module's functions where that saves lane-crossing shuffles; for AVX2 targets
// without AVX-512 only.
void compute_in_shuffle_order(llvm::Module& module);

}  // namespace tessel
