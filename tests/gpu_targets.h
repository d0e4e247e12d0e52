#pragma once
// Where GPU tests run their kernels.
#include <string>
#include <vector>

#include "runtime/CUDA.h"
#include "runtime/OpenCL.h"
#include "tessel/target.h"

namespace ref {

// The GPU targets a schedule runs on here: the local OpenCL device (PoCL in CI) and, where a
// CUDA device exists, CUDA for its architecture. A CUDA machine without an OpenCL device
// runs CUDA alone; without either, OpenCL stays, so the tests fail rather than pass empty.
inline std::vector<tessel::Target> gpu_run_targets() {
  std::vector<tessel::Target> t;
  std::string name = tessel::cuda_device_name();  // "NVIDIA H100 80GB HBM3 (sm_90)"
  size_t sm = name.rfind("(sm_");
  if (sm == std::string::npos || !tessel::opencl_device_name().empty()) t.push_back(tessel::Target::parse("opencl"));
  if (sm != std::string::npos)
    t.push_back(tessel::Target::parse("cuda -arch=" + name.substr(sm + 1, name.size() - sm - 2)));
  return t;
}

}  // namespace ref
