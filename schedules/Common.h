#pragma once
// Helpers shared by the operator definitions.
#include <string>
#include <vector>

#include "tessel/error.h"
#include "tessel/ops.h"

namespace tessel::ops {

inline std::string shape_str(const std::vector<int64_t>& s) {
  std::string r = "[";
  for (size_t i = 0; i < s.size(); ++i) r += (i ? ", " : "") + std::to_string(s[i]);
  return r + "]";
}

inline void check_rank(const char* op, const char* arg, const Tensor& t, size_t rank) {
  TESSEL_USER_CHECK(t.defined(), op, ": argument ", arg, " is undefined");
  TESSEL_USER_CHECK(t.shape().size() == rank, op, ": ", arg, " must have ", rank, " dimensions, got ",
                    shape_str(t.shape()));
}

Expr apply_activation(Expr v, Activation act);
// The operation a stage of the schedule computes now (the schedule may have rebuilt it).
const OperationNode* op_of(Schedule& s, const std::string& name);
// The stride at which `op` reads an image's rows and columns (its last two spatial axes)
// as its inputs' last two dimensions, or 0 (see Conv.cpp).
int64_t pixel_stride(const OperationNode* op);
// Whether the last two spatial axes of `op` (an image's rows and columns) can run as one
// loop of consecutive pixels (see Conv.cpp).
bool image_axes_fuse(const OperationNode* op);
// A copy of the first input of `stage` holding just the pixels it reads at `stride`.
Tensor subsample_input(Schedule& s, const std::string& stage, int64_t stride);
// Whether fused pixels fill whole vectors in blocks of `block`, the last a power of two of them.
bool whole_pixel_vectors(int64_t pixels, int64_t block, int64_t lanes, bool narrower_last = false);
Schedule gpu_default_schedule(const std::vector<Tensor>& outputs, const Target& target);

}  // namespace tessel::ops
