#pragma once
// Vendor kernels as candidates for a part: OpenBLAS's SGEMM for a part whose first node is a
// MatMul or Gemm, with the rest of the part (bias, activation, residual) as a Tessel kernel
// over its result (Vendor.cpp); oneDNN's convolution for a convolution in NCHWc, with the
// rest of the part as its post-ops (VendorOnednn.cpp).
#include <memory>

#include "graph/NetworkImpl.h"
#include "graph/Partition.h"

namespace tessel::graph {

// Null where no vendor kernel computes the part.
std::shared_ptr<VendorKernel> vendor_kernel(const Graph& g, const Part& p, const Target& target);
std::shared_ptr<VendorKernel> onednn_conv(const Graph& g, const Part& p);
// Where `value` is among a step's arguments (the part's inputs, then its outputs), or -1.
int step_argument(const Part& p, int value);

}  // namespace tessel::graph
