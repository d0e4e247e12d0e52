#pragma once
// Where each intermediate tensor of a network lives: offsets in one arena.
#include <cstdint>
#include <vector>

namespace tessel::graph {

struct TensorLifetime {
  int64_t bytes;
  int first, last;  // the kernels (in execution order) that write it first and read it last
  int alias = -1;   // another use whose memory it takes over (an in-place kernel), or -1
};

struct MemoryPlan {
  std::vector<int64_t> offsets;  // per use
  int64_t arena_bytes = 0;       // the peak
  int64_t separate_bytes = 0;    // one buffer per tensor, for comparison
};

// Greedy by size (Pisarchyk & Lee 2020; TFLite's GPU planner): the largest tensors are
// placed first, each in the smallest gap between tensors alive at the same time that fits it,
// else after them. Offsets are `alignment`-aligned. An alias shares its target's offset and
// extends its lifetime.
MemoryPlan plan_memory(std::vector<TensorLifetime> uses, int64_t alignment = 64);

}  // namespace tessel::graph
