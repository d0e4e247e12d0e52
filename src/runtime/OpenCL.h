#pragma once
/** \file Kernels in OpenCL C run by the local OpenCL device (PoCL on a machine without a
 * GPU: work-groups, local memory and barriers executed for real on the CPU). */
#include <memory>

#include "runtime/DevicePlan.h"
#include "runtime/Kernel.h"
#include "tessel/device_memory.h"

namespace tessel {

// Memory on the first OpenCL device.
std::shared_ptr<DeviceMemory> make_opencl_memory();
// Compiles `source` for the first OpenCL device; throws an Error with the build log.
std::unique_ptr<Kernel> make_opencl_kernel(const std::string& source, const DevicePlan& plan);
// "pthread-znver4" (PoCL on this CPU), or empty if no OpenCL device is present.
std::string opencl_device_name();

}  // namespace tessel
