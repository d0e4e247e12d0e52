#pragma once
/** \file A built kernel behind one small interface, whatever back end made it: the LLVM JIT
 * for CPUs, CUDA (NVRTC + the driver API) and OpenCL for GPUs. The Module holds one. */
#include <cstdint>
#include <memory>
#include <string>

#include "tessel/error.h"
#include "tessel/resources.h"

namespace tessel {

class Kernel {
 public:
  virtual ~Kernel() = default;
  // Runs on host memory: args[i] is the data of argument i (a GPU back end uploads the
  // inputs, launches every kernel of the program in order and downloads the outputs).
  virtual void call(void* const* args) = 0;
  // GPU back ends: queues every launch of the program on device buffers, one DeviceMemory
  // handle per argument, its temporaries in buffers of its own (made at the first launch and
  // kept); returns without waiting.
  virtual void launch(const uint64_t* /*args*/) {
    throw Error("Module::launch runs kernels built for a GPU target on device buffers; this one runs on " + device());
  }
  // Mean seconds of one run of the kernels over `number` runs, timed on the device (with
  // device events on a GPU, the copies excluded), after one warm-up run.
  virtual double time(void* const* args, int number) = 0;
  // Source of what was compiled: LLVM IR, CUDA C or OpenCL C.
  virtual std::string source() const = 0;
  // Host assembly, or PTX.
  virtual std::string assembly() const = 0;
  virtual KernelResources resources() const { return {}; }
  // Where the kernel runs: "cpu znver4", "cuda sm_90 NVIDIA H100 ...", "opencl pthread-...".
  virtual std::string device() const = 0;
  // An object file of the kernel, for deploy libraries (the LLVM back end only).
  virtual void write_object(const std::string&) const {
    throw Error("export_object/export_library: only kernels built for the llvm target can be exported; this one "
                "runs on " + device());
  }
};

}  // namespace tessel
