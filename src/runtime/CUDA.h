#pragma once
/** \file Compiled CUDA kernels run through the driver API, loaded with dlopen at the first
 * call (libcuda.so.1): Tessel builds, and compiles CUDA kernels, on machines without a
 * driver, and a process that only builds kernels never initialises CUDA (which does not
 * survive fork). */
#include <memory>

#include "runtime/DevicePlan.h"
#include "runtime/Kernel.h"
#include "tessel/device_memory.h"

namespace tessel {

struct CudaBinary {
  std::string arch;    // "sm_90"
  std::string cubin;   // for exactly that architecture
  std::string ptx;     // for newer ones (the driver compiles it)
  std::string source;  // CUDA C
  KernelResources resources;
};

std::shared_ptr<DeviceMemory> make_cuda_memory();
std::unique_ptr<Kernel> make_cuda_kernel(CudaBinary binary, const DevicePlan& plan);
// "NVIDIA H100 80GB HBM3 (sm_90)", or empty when no driver or device is present.
std::string cuda_device_name();
// Why there is none ("no CUDA driver: libcuda.so.1 could not be loaded (...)"), or empty.
std::string cuda_unavailable_reason();

}  // namespace tessel
