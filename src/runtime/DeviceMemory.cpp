#include "tessel/device_memory.h"

#include "runtime/CUDA.h"
#include "runtime/OpenCL.h"
#include "tessel/error.h"

namespace tessel {

std::shared_ptr<DeviceMemory> DeviceMemory::open(const Target& target) {
  TESSEL_USER_CHECK(target.is_gpu(), "DeviceMemory::open: ", target.str(), " is no GPU target (cuda or opencl)");
  return target.kind == Target::Kind::CUDA ? make_cuda_memory() : make_opencl_memory();
}

}  // namespace tessel
