#pragma once
/** \file CUDA C -> cubin and PTX through NVRTC, loaded with dlopen (libnvrtc.so.13 or
 * older), so that Tessel builds and runs its CPU path without the CUDA toolkit. NVRTC needs
 * no GPU: CUDA kernels are compiled and checked on any machine that has the toolkit. */
#include "runtime/CUDA.h"

namespace tessel {

// Compiles for `arch` ("sm_90"), with registers, spills and shared memory from ptxas.
// Throws an Error with NVRTC's log when compilation fails or NVRTC is missing.
CudaBinary nvrtc_compile(const std::string& source, const std::string& arch);
bool nvrtc_available();

}  // namespace tessel
