#pragma once
/** \file Memory on the GPU a target names, so that kernels run one after another without
 * going through the host: a network keeps its weights, its arena and its inputs there and
 * launches each kernel on them (Module::launch). A handle is the device's own: a CUdeviceptr
 * on CUDA, a cl_mem on OpenCL. */
#include <cstdint>
#include <memory>
#include <vector>

#include "tessel/target.h"

namespace tessel {

class DeviceMemory {
 public:
  // The device of a CUDA or OpenCL target; an Error where it has none.
  static std::shared_ptr<DeviceMemory> open(const Target& target);
  virtual ~DeviceMemory() = default;  // frees everything it allocated

  // Offsets of views must be multiples of this (OpenCL's base-address alignment, CUDA's 256).
  virtual int64_t alignment() const = 0;
  virtual uint64_t alloc(int64_t bytes) = 0;
  // `bytes` of an allocation from `offset` on, as a handle of its own.
  virtual uint64_t view(uint64_t base, int64_t offset, int64_t bytes) = 0;
  // Copies, in order after the launches queued before them; download returns with the data.
  virtual void upload(uint64_t dst, const void* src, int64_t bytes) = 0;
  virtual void download(void* dst, uint64_t src, int64_t bytes) = 0;
  // Waits for everything queued.
  virtual void synchronize() = 0;
};

}  // namespace tessel
