#pragma once
// Graph passes, one per file; each takes the graph and returns it rewritten.
#include "tessel/graph.h"

namespace tessel::graph {

// Drops the nodes whose outputs are all constants (infer_shapes computed them).
Graph fold_constants(Graph g);
// Drops the nodes none of whose outputs reaches a graph output, and values nothing uses.
Graph remove_dead_nodes(Graph g);

// Rewrites the layer norm and softmax subgraphs that exporters write as single nodes.
Graph fuse_patterns(Graph g);
// Scales each convolution's weights and bias by the batch norm that follows it alone.
Graph fold_batch_norm(Graph g);
// Splits operators where that helps: a batch norm left alone becomes Mul and Add by constants.
Graph split_operators(Graph g);

// Runs convolutions and the element-wise nodes between them in NHWC (tessel.ConvNhwc), or
// those and the pools in NCHWc with blocks of one `target` vector (tessel.ConvNchwc, ...),
// with transforms only where a value enters or leaves such a chain.
enum class LayoutPlan { NHWC, NCHWc };
Graph plan_layout(Graph g, LayoutPlan layout, const Target& target);

// Runs the 3x3 stride-1 convolutions in NCHWc by Winograd's F(2x2 or 4x4, 3x3) where the
// image has enough tiles (tessel.ConvWinogradNchwc, weights transformed once).
Graph winograd(Graph g);

enum class OpKind { Elemwise, Injective, Reduce, Complex };
OpKind op_kind(const std::string& onnx_op);
// Puts nodes into groups (Node::group), each of which becomes one kernel.
Graph fuse(Graph g);

}  // namespace tessel::graph
