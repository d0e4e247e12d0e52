#pragma once
// What build() hands the Module: the lowered program and the kernel built from it.
#include <memory>
#include <mutex>

#include "runtime/Kernel.h"
#include "tessel/build.h"

namespace tessel {

class ModuleImpl {
 public:
  LoweredFunc func;
  std::vector<ArgSpec> args;
  Target target;
  std::shared_ptr<Kernel> kernel;  // shared by the instances of one build (Module::instance)
  double seconds = 0;

  // Inputs the kernel reads in a rewritten layout: argument `arg`'s copy, and the caller's
  // buffer it was made from.
  struct Rewrite {
    int arg = 0;
    LayoutRewrite layout;
    Buffer copy;
    const void* from = nullptr;
  };
  std::vector<Rewrite> rewrites;
  std::mutex prepare_mutex;
  double prepare_seconds = 0;
  // The kernel's arguments for the caller's: rewritten inputs swapped for their copies,
  // made first where the caller passes a buffer they were not made from (or `force`).
  std::vector<void*> kernel_args(void* const* args, bool force = false);
};

}  // namespace tessel
