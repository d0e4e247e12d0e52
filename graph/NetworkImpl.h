#pragma once
// What a compiled network holds (Network.cpp builds and runs it, SaveNetwork.cpp writes it).
#include "graph/MemoryPlan.h"
#include "tessel/build.h"
#include "tessel/graph.h"

namespace tessel::graph {

struct Step {
  Module module;
  int code = 0;                      // which distinct compiled kernel (entry "tessel_k<code>")
  std::vector<int> inputs, outputs;  // value ids: the kernel's arguments in order
  std::vector<int> nodes;            // what it computes
  std::string ops, schedule;         // "Conv+Relu"; "tuned" or "default"
  double seconds = 0;                // median time, after profile()
};

class NetworkImpl {
 public:
  Graph graph;
  Target target;
  std::vector<Step> steps;
  std::vector<Buffer> values;  // per value: constants, arena views, output buffers; inputs per run
  std::vector<int> arena_offset;  // per value: its byte offset in the arena, or -1
  MemoryPlan plan;
  bool profiled = false;
};

}  // namespace tessel::graph
