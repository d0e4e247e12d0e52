#pragma once
/** \file How a GPU program runs, without its IR: the buffers it needs and the launches in
 * order. The CUDA and OpenCL kernels (and a runner on another machine) need only this and
 * the compiled code. */
#include <cstdint>
#include <string>
#include <vector>

namespace tessel {

struct LaunchSpec {
  std::string name;              // the kernel function
  int64_t grid[3] = {1, 1, 1};   // blocks
  int64_t block[3] = {1, 1, 1};  // threads per block
  std::vector<int> params;       // buffer indices: arguments first (call order), then temporaries
};

struct DevicePlan {
  std::vector<int64_t> arg_bytes;
  std::vector<bool> arg_written;  // copied back to the host after a call
  std::vector<int64_t> temp_bytes;
  std::vector<LaunchSpec> launches;
  int64_t buffers() const { return int64_t(arg_bytes.size() + temp_bytes.size()); }
  int64_t bytes(int i) const { return i < int(arg_bytes.size()) ? arg_bytes[i] : temp_bytes[i - arg_bytes.size()]; }
};

}  // namespace tessel
