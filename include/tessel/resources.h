#pragma once
// What a compiled GPU kernel uses; shared by the library and the standalone GPU runner.

namespace tessel {

// What a GPU kernel uses, from the compiler (ptxas): the largest figures over the
// program's kernels. Zero on the CPU.
struct KernelResources {
  int registers = 0;       // per thread
  int spill_bytes = 0;     // spill stores + loads, per thread
  int shared_bytes = 0;    // static shared memory per block
  int local_bytes = 0;     // local (stack) memory per thread
  int kernels = 0;         // launches per call
};

}  // namespace tessel
