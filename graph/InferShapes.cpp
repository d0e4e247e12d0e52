// Shape inference by building each node's compute definition over placeholders of its
// inputs: the operators define shapes once, for inference and for kernels alike.
#include "graph/InferShapes.h"

#include "graph/Operators.h"
#include "tessel/build.h"
#include "tessel/ops.h"

namespace tessel::graph {

NodeCompute node_compute(const Graph& g, const Node& n) {
  NodeCompute c;
  std::vector<Tensor> tensors;
  std::vector<const Buffer*> constants;
  for (int id : n.inputs) {
    if (id < 0) {
      tensors.emplace_back(), constants.push_back(nullptr);
      continue;
    }
    const Value& v = g.values[size_t(id)];
    auto at = std::find(c.input_ids.begin(), c.input_ids.end(), id);
    if (at == c.input_ids.end()) {
      c.input_ids.push_back(id);
      c.inputs.push_back(placeholder(v.shape, v.dtype, "v" + std::to_string(id)));
      at = c.input_ids.end() - 1;
    }
    tensors.push_back(c.inputs[size_t(at - c.input_ids.begin())]);
    constants.push_back(v.is_constant() ? &v.constant : nullptr);
  }
  OpInputs in(n, tensors, constants);
  c.outputs = build_node(in);
  if (c.outputs.size() > n.outputs.size()) c.outputs.resize(n.outputs.size());
  for (size_t k = 0; k < n.outputs.size(); ++k)
    if (n.outputs[k] >= 0 && (k >= c.outputs.size() || !c.outputs[k].defined()))
      in.fail("output ", k, " is not supported");
  return c;
}

void NodeCompute::keep_inputs(const std::vector<size_t>& positions) {
  NodeCompute used;
  for (size_t k : positions) used.inputs.push_back(inputs.at(k)), used.input_ids.push_back(input_ids.at(k));
  inputs = used.inputs, input_ids = used.input_ids;
}

NodeKernel build_kernel(NodeCompute& c, const Target& target, const std::vector<bool>& constant) {
  std::vector<Tensor> outs;
  for (const Tensor& t : c.outputs)
    if (t.defined()) outs.push_back(t);
  std::vector<std::string> stages = Schedule(outs).stage_names();
  NodeKernel k;
  std::vector<Tensor> weights;
  for (size_t i = 0; i < c.inputs.size(); ++i) {
    if (std::find(stages.begin(), stages.end(), c.inputs[i].name()) == stages.end()) continue;
    k.kept.push_back(i);
    if (i < constant.size() && constant[i]) weights.push_back(c.inputs[i]);
  }
  c.keep_inputs(k.kept);
  std::vector<Tensor> args = c.inputs;
  args.insert(args.end(), outs.begin(), outs.end());
  k.module = build(ops::default_schedule(outs, target, weights), args, {.name = "node", .target = target});
  return k;
}

std::vector<Buffer> evaluate(NodeCompute c, const Graph& g) {
  Module m = build_kernel(c, Target::host()).module;
  std::vector<Buffer> bufs, result;
  for (int id : c.input_ids) bufs.push_back(g.values[size_t(id)].constant);
  for (const Tensor& t : c.outputs) {
    result.push_back(t.defined() ? Buffer(t.shape(), t.dtype()) : Buffer());
    if (t.defined()) bufs.push_back(result.back());
  }
  m(bufs);
  return result;
}

void infer_shapes(Graph& g) {
  for (const Node& n : g.nodes) {
    NodeCompute c = node_compute(g, n);
    for (size_t k = 0; k < n.outputs.size(); ++k) {
      if (n.outputs[k] < 0) continue;
      Value& v = g.values[size_t(n.outputs[k])];
      v.shape = c.outputs[k].shape(), v.dtype = c.outputs[k].dtype();
      if (v.elements() == 0) v.constant = Buffer(v.shape, v.dtype);
    }
    bool all_empty = true;
    for (int o : n.outputs) all_empty &= o < 0 || g.values[size_t(o)].elements() == 0;
    if (all_empty) continue;
    // Shape and Size read no element of their input: known whenever its shape is.
    bool foldable = n.op == "Shape" || n.op == "Size";
    if (!foldable) {
      foldable = true;
      for (int id : c.input_ids) foldable &= g.values[size_t(id)].is_constant();
    }
    if (!foldable) continue;
    std::vector<Buffer> out = evaluate(c, g);
    for (size_t k = 0; k < n.outputs.size(); ++k)
      if (n.outputs[k] >= 0) g.values[size_t(n.outputs[k])].constant = out[k];
  }
}

}  // namespace tessel::graph
