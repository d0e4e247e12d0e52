#pragma once
// Shapes and element types of every value, from the operators' compute definitions.
#include "tessel/build.h"
#include "tessel/graph.h"
#include "tessel/tensor.h"

namespace tessel::graph {

// A node's compute definition: a placeholder per distinct input value (in first-use order)
// and the tensor of each output (undefined for an output it leaves out).
struct NodeCompute {
  std::vector<int> input_ids;
  std::vector<Tensor> inputs, outputs;
  void keep_inputs(const std::vector<size_t>& positions);  // drops the others
};
NodeCompute node_compute(const Graph& g, const Node& n);

// The kernel of a compute: its arguments are the inputs it reads (those it does not, such as
// Shape's, are dropped from `c`; `kept` says which stayed), then its defined outputs.
// `constant` flags the inputs that stay the same between calls (weights), which the schedule
// may read in a blocked layout.
struct NodeKernel {
  Module module;
  std::vector<size_t> kept;
};
NodeKernel build_kernel(NodeCompute& c, const Target& target, const std::vector<bool>& constant = {});

// The node's outputs, computed once from constant inputs with a kernel built for them.
std::vector<Buffer> evaluate(NodeCompute c, const Graph& g);

// Sets the type of every node output, in order. A node whose inputs are all constants (or
// that reads only its inputs' shapes: Shape, Size) is evaluated, so that shapes computed in
// the graph (Shape -> Gather -> Concat -> Reshape) are known; fold_constants then drops it.
void infer_shapes(Graph& g);

}  // namespace tessel::graph
