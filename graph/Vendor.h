#pragma once
// Vendor kernels as candidates for a part: OpenBLAS's SGEMM for a part whose first node is a
// MatMul or Gemm, with the rest of the part (bias, activation, residual) as a Tessel kernel
// over its result.
#include <memory>

#include "graph/NetworkImpl.h"
#include "graph/Partition.h"

namespace tessel::graph {

// Null where no vendor kernel computes the part.
std::shared_ptr<VendorKernel> vendor_kernel(const Graph& g, const Part& p, const Target& target);

}  // namespace tessel::graph
