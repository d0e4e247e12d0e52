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

// A candidate as far as the CPU cost model's features need it: lowered up to unrolling.
// Unrolling and the passes after it change no loop's trip count, only how the copies are
// written, and they cost as much as the rest of lowering (features count an unrolled loop's
// copies from the loop). GPU targets are lowered whole: their features read the kernels.
LoweredProgram lower_for_features(const Schedule& sch, const std::vector<Tensor>& args, const Target& target);

}  // namespace tessel
