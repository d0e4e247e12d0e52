#pragma once
// What a compiled network holds (Network.cpp builds and runs it, SaveNetwork.cpp writes it).
#include "graph/MemoryPlan.h"
#include "tessel/build.h"
#include "tessel/device_memory.h"
#include "tessel/graph.h"

namespace tessel::graph {

// A kernel that is not Tessel's (Vendor.cpp): called with a step's arguments, as a Module is.
struct VendorKernel {
  std::string name;  // "openblas"
  std::function<void(const std::vector<Buffer>&)> run;
};

struct Step {
  Module module;
  std::shared_ptr<VendorKernel> vendor;  // runs instead of `module` when set
  int code = 0;                      // which distinct compiled kernel (entry "tessel_k<code>")
  std::vector<int> inputs, outputs;  // value ids: the kernel's arguments in order
  std::vector<int> nodes;            // what it computes
  std::string ops, schedule;         // "Conv+Relu"; "tuned", "default" or the vendor's name
  double seconds = 0;                // median time, after profile()
};

// Calls a step's kernel.
void call(const Step& s, const std::vector<Buffer>& args);

class NetworkImpl {
 public:
  Graph graph;
  Target target;
  std::vector<Step> steps;
  std::vector<Buffer> values;  // per value: constants, arena views, output buffers; inputs per run
  std::vector<int> arena_offset;  // per value: its byte offset in the arena, or -1
  MemoryPlan plan;
  // GPU targets: the tensors the kernels read and write live on the device (weights uploaded
  // at the first run, the arena, inputs and outputs); each run uploads the inputs, launches
  // every kernel without waiting and downloads the outputs.
  std::shared_ptr<DeviceMemory> device;
  std::vector<uint64_t> device_values;  // per value: its device buffer, or 0
  bool profiled = false;
};

}  // namespace tessel::graph
