// The runner built where no OpenCL loader is installed: CUDA only.
#include "runtime/OpenCL.h"

#include "tessel/error.h"

namespace tessel {

std::unique_ptr<Kernel> make_opencl_kernel(const std::string&, const DevicePlan&) {
  throw Error("this tessel-runner was built without OpenCL (no OpenCL loader was found at build time)");
}

std::string opencl_device_name() { return ""; }

}  // namespace tessel
