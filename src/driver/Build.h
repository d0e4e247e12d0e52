#pragma once
// The build driver's steps, for the tuner's workers: a GPU program compiled for its target
// without being loaded (the tuner process never initialises CUDA or OpenCL).
#include "passes/Lower.h"
#include "runtime/Job.h"

namespace tessel {

// CUDA: NVRTC's cubin and PTX with ptxas's resources; OpenCL: the OpenCL C source.
DeviceCode compile_device(const LoweredProgram& prog, const Target& target);

}  // namespace tessel
