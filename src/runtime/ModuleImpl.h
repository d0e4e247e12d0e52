#pragma once
// What build() hands the Module: the lowered program and the kernel built from it.
#include <memory>

#include "runtime/Kernel.h"
#include "tessel/build.h"

namespace tessel {

class ModuleImpl {
 public:
  LoweredFunc func;
  std::vector<ArgSpec> args;
  Target target;
  std::unique_ptr<Kernel> kernel;
  double seconds = 0;
};

}  // namespace tessel
