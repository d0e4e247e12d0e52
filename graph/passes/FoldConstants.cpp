// Constant folding: infer_shapes has already computed every node whose inputs are constants
// (shape arithmetic, weight preprocessing); their outputs are now values, not work.
#include "graph/passes/Passes.h"

namespace tessel::graph {

Graph fold_constants(Graph g) {
  std::vector<Node> kept;
  for (Node& n : g.nodes) {
    bool all = true;
    for (int o : n.outputs) all &= o < 0 || g.values[size_t(o)].is_constant();
    if (all) {
      for (int o : n.outputs)
        if (o >= 0) g.values[size_t(o)].producer = -1;
    } else {
      kept.push_back(std::move(n));
    }
  }
  g.nodes = std::move(kept);
  g.index_producers();
  return g;
}

}  // namespace tessel::graph
