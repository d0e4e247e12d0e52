#pragma once
// The kernels of a fused graph: each group's nodes, its compute definition and the key that
// says which groups are the same computation (and so share code, and one tuning task).
#include <string>
#include <vector>

#include "graph/InferShapes.h"
#include "tessel/autotune.h"

namespace tessel::graph {

struct Part {
  std::vector<int> nodes;  // in order
  Compute compute;         // inputs read from outside; output_ids: what others read
  std::string key;         // operators, attributes, types and wiring (no value names)
  std::string ops;         // "Conv+Add+Relu"
  double flops = 0;
};

// The groups of `g` (Node::group) in a topological order of what they read.
std::vector<Part> partition(const Graph& g);

// The tuning workload of a part: its compute definition, its constant inputs as constants
// (the search may store them blocked), keyed by its structure. Its stages are named after the
// graph's value ids, so a record replays onto the kernels of the graph it was tuned on (and
// of any graph the same model gives); compile() builds the default where one does not.
autotune::Workload workload_of(const Graph& g, const Part& p);
// Whether tuning can gain anything: parts with a reduction (convolutions, matmuls, pools,
// normalisations); element-wise and shape kernels keep their default schedules, as in TVM.
bool worth_tuning(const Graph& g, const Part& p);

}  // namespace tessel::graph
