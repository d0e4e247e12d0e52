#pragma once
/** \file The lowering pipeline: schedule -> loop nest -> passes -> flat loop program. */
#include "passes/Passes.h"
#include "tessel/build.h"

namespace tessel {

struct LoweredProgram {
  LoweredFunc func;
  std::vector<ArgBuffer> args;  // the buffer variable of each argument, in call order
  DeviceProgram device;         // GPU targets: the kernels and their launches
};

LoweredProgram lower_program(const Schedule& sch, const std::vector<Tensor>& args, const std::string& name,
                             const Target& target, const LowerOptions& opts);

}  // namespace tessel
