// Shape inference by building each node's compute definition over placeholders of its
// inputs: the operators define shapes once, for inference and for kernels alike.
#include "graph/InferShapes.h"

#include "graph/Operators.h"
#include "tessel/ops.h"

namespace tessel::graph {

void Compute::add(const Graph& g, const Node& n) {
  std::vector<Tensor> tensors;
  std::vector<const Buffer*> constants;
  for (int id : n.inputs) {
    const Value* v = id < 0 ? nullptr : &g.values[size_t(id)];
    constants.push_back(v && v->is_constant() ? &v->constant : nullptr);
    if (!v) {
      tensors.emplace_back();
    } else if (values.count(id)) {
      tensors.push_back(values.at(id));
    } else {
      input_ids.push_back(id);
      inputs.push_back(placeholder(v->shape, v->dtype, "v" + std::to_string(id)));
      values[id] = inputs.back();
      tensors.push_back(inputs.back());
    }
  }
  OpInputs in(n, tensors, constants);
  std::vector<Tensor> out = build_node(in);
  for (size_t k = 0; k < n.outputs.size(); ++k) {
    if (n.outputs[k] < 0) continue;
    if (k >= out.size() || !out[k].defined()) in.fail("output ", k, " is not supported");
    values[n.outputs[k]] = out[k];
  }
}

std::vector<Tensor> Compute::outputs() const {
  std::vector<Tensor> out;
  for (int id : output_ids) out.push_back(values.at(id));
  return out;
}

void Compute::drop_unread_inputs() {
  std::vector<std::string> stages = Schedule(outputs()).stage_names();
  std::vector<int> ids;
  std::vector<Tensor> tensors;
  for (size_t k = 0; k < inputs.size(); ++k)
    if (std::find(stages.begin(), stages.end(), inputs[k].name()) != stages.end())
      ids.push_back(input_ids[k]), tensors.push_back(inputs[k]);
  input_ids = ids, inputs = tensors;
}

Module build_kernel(const Compute& c, const Graph& g, const BuildOptions& opts) {
  std::vector<Tensor> outs = c.outputs(), weights, args = c.inputs;
  for (size_t i = 0; i < c.inputs.size(); ++i)
    if (g.values[size_t(c.input_ids[i])].is_constant()) weights.push_back(c.inputs[i]);
  args.insert(args.end(), outs.begin(), outs.end());
  return build(ops::default_schedule(outs, opts.target, weights), args, opts);
}

namespace {
// The node's outputs, computed once from its constant inputs.
void evaluate(const Node& n, Compute c, Graph& g) {
  for (int o : n.outputs)
    if (o >= 0) c.output_ids.push_back(o);
  c.drop_unread_inputs();
  Module m = build_kernel(c, g, {.name = "fold"});
  std::vector<Buffer> bufs, result;
  for (int id : c.input_ids) bufs.push_back(g.values[size_t(id)].constant);
  for (int id : c.output_ids) {
    const Value& v = g.values[size_t(id)];
    result.emplace_back(v.shape, v.dtype);
    bufs.push_back(result.back());
  }
  m(bufs);
  for (size_t k = 0; k < c.output_ids.size(); ++k) g.values[size_t(c.output_ids[k])].constant = result[k];
}
}  // namespace

void infer_shapes(Graph& g) {
  for (const Node& n : g.nodes) {
    Compute c;
    c.add(g, n);
    bool all_empty = true;
    for (int o : n.outputs) {
      if (o < 0) continue;
      Value& v = g.values[size_t(o)];
      v.shape = c.values.at(o).shape(), v.dtype = c.values.at(o).dtype();
      if (v.elements() == 0) v.constant = Buffer(v.shape, v.dtype);
      all_empty &= v.elements() == 0;
    }
    if (all_empty) continue;
    // Shape and Size read no element of their input: known whenever its shape is.
    bool foldable = n.op == "Shape" || n.op == "Size";
    if (!foldable) {
      foldable = true;
      for (int id : c.input_ids) foldable &= g.values[size_t(id)].is_constant();
    }
    if (foldable) evaluate(n, c, g);
  }
}

}  // namespace tessel::graph
