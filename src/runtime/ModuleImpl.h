#pragma once
// What build() hands the Module: the lowered program and the kernel built from it.
#include <functional>
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
    // Makes `copy` from the caller's data where layout.transform is set.
    std::function<void(const void*, Buffer&)> transform;
  };
  std::vector<Rewrite> rewrites;
  std::mutex prepare_mutex;
  double prepare_seconds = 0;
  // The kernel's arguments for the caller's: rewritten inputs swapped for their copies,
  // made first where the caller passes a buffer they were not made from (or `force`).
  std::vector<void*> kernel_args(void* const* args, bool force = false);
};

// `kernel` taking, as argument `arg`, the caller's `caller` instead, from which `transform`
// computes the kernel's (`what` names it) once per buffer, as a layout rewrite is prepared.
Module with_transformed_input(const Module& kernel, int arg, const ArgSpec& caller, const std::string& what,
                              std::function<void(const void*, Buffer&)> transform);

}  // namespace tessel
