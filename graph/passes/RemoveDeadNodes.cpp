// Dead-node removal: what no graph output depends on is not computed.
#include "graph/passes/Passes.h"

namespace tessel::graph {

Graph remove_dead_nodes(Graph g) {
  std::vector<bool> live(g.values.size(), false);
  for (int o : g.outputs) live[size_t(o)] = true;
  std::vector<bool> keep(g.nodes.size(), false);
  for (size_t k = g.nodes.size(); k-- > 0;) {
    const Node& n = g.nodes[k];
    for (int o : n.outputs) keep[k] = keep[k] || (o >= 0 && live[size_t(o)]);
    if (keep[k])
      for (int i : n.inputs)
        if (i >= 0) live[size_t(i)] = true;
  }
  std::vector<Node> kept;
  for (size_t k = 0; k < g.nodes.size(); ++k)
    if (keep[k]) kept.push_back(std::move(g.nodes[k]));
  g.nodes = std::move(kept);
  // An output nothing reads stays in its node (the kernel writes it) but is not kept.
  for (Node& n : g.nodes)
    for (int& o : n.outputs)
      if (o >= 0 && !live[size_t(o)]) o = -1;
  g.index_producers();
  return g;
}

}  // namespace tessel::graph
