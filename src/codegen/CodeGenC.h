#pragma once
/** \file GPU kernels as C source: CUDA C (compiled by NVRTC) and OpenCL C (compiled by the
 * OpenCL driver, PoCL here) printed from the same lowered kernels. The two dialects
 * differ only in qualifiers, thread indices, barriers, math names and vector syntax.
 *
 * Vector statements are printed lane by lane, except dense float32 accesses of 2 or 4
 * lanes whose index is provably a multiple of the lanes: those become float2/float4
 * loads and stores (buffers are at least 16-byte aligned). */
#include <string>

#include "passes/Lower.h"
#include "tessel/target.h"

namespace tessel {

// One translation unit with every kernel of the program, each `extern "C"` (CUDA) or
// `__kernel` (OpenCL) and named as in DeviceKernel::name.
std::string codegen_c(const LoweredProgram& prog, const Target& target);

}  // namespace tessel
