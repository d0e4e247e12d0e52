#pragma once
// Shapes and element types of every value, from the operators' compute definitions; and
// the compute definitions of nodes and fused groups of nodes, which become kernels.
#include <map>

#include "tessel/build.h"
#include "tessel/graph.h"
#include "tessel/tensor.h"

namespace tessel::graph {

// The compute definition of one node or of a group that fusion made: a placeholder per
// value read from outside (in first-use order) and the tensor of every value it defines.
struct Compute {
  std::vector<int> input_ids;
  std::vector<Tensor> inputs;
  std::map<int, Tensor> values;
  std::vector<int> output_ids;  // what the kernel writes, chosen by the caller
  void add(const Graph& g, const Node& n);  // builds n over the tensors defined so far
  std::vector<Tensor> outputs() const;
  void drop_unread_inputs();  // those no output reads (Shape's input)
};

// The kernel of a compute whose outputs are chosen: its arguments are its inputs, then its
// outputs. Inputs that are constants in `g` (weights) may be read in a blocked layout the
// module prepares once.
Module build_kernel(const Compute& c, const Graph& g, const BuildOptions& opts);

// Sets the type of every node output, in order. A node whose inputs are all constants (or
// that reads only its inputs' shapes: Shape, Size) is evaluated, so that shapes computed in
// the graph (Shape -> Gather -> Concat -> Reshape) are known; fold_constants then drops it.
void infer_shapes(Graph& g);

}  // namespace tessel::graph
