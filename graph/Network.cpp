// compile(): the passes, then a kernel per node (nodes of the same operator, attributes and
// input types share one), and run() calling them in order.
#include <sstream>

#include "graph/InferShapes.h"
#include "graph/Operators.h"
#include "graph/passes/Passes.h"
#include "tessel/build.h"
#include "tessel/ops.h"

namespace tessel::graph {

struct Kernel {
  Module module;
  std::vector<int> inputs, outputs;  // value ids: arguments in order (outputs may hold -1)
};

class NetworkImpl {
 public:
  Graph graph;
  std::vector<Kernel> kernels;
};

namespace {

// What a node's kernel depends on: operator, attributes, input types, and the values of the
// small constants its definition may read (shapes, axes, bounds).
std::string kernel_key(const Graph& g, const Node& n, const Target& target) {
  std::ostringstream os;
  os << target.str() << "|" << n.op << "@" << n.opset;
  for (auto& [name, a] : n.attrs) os << "|" << name << "=" << a.str();
  for (size_t k = 0; k < n.inputs.size(); ++k) {
    int id = n.inputs[k];
    if (id < 0) {
      os << "|_";
      continue;
    }
    // Which earlier input it repeats (Mul(x, x) has one argument, Mul(x, y) two).
    os << "|#" << (std::find(n.inputs.begin(), n.inputs.end(), id) - n.inputs.begin());
    const Value& v = g.values[size_t(id)];
    os << "|" << v.dtype.str() << shape_str(v.shape);
    if (v.is_constant() && v.elements() <= 64) {
      os << "=";
      for (int64_t k = 0; k < v.constant.size(); ++k) os << v.constant.get(k) << ",";
    }
  }
  for (int o : n.outputs) os << (o < 0 ? "|-" : "|+");
  return os.str();
}

}  // namespace

Network compile(const Graph& input, const CompileOptions& opts) {
  auto impl = std::make_shared<NetworkImpl>();
  impl->graph = remove_dead_nodes(fold_constants(input));
  const Graph& g = impl->graph;
  std::map<std::string, NodeKernel> built;
  for (const Node& n : g.nodes) {
    NodeCompute c = node_compute(g, n);
    std::vector<bool> constant;
    for (int id : c.input_ids) constant.push_back(g.values[size_t(id)].is_constant());
    std::string key = kernel_key(g, n, opts.target);
    auto it = built.find(key);
    if (it == built.end()) it = built.emplace(key, build_kernel(c, opts.target, constant)).first;
    else c.keep_inputs(it->second.kept);
    Kernel k;
    k.inputs = c.input_ids;
    for (size_t o = 0; o < c.outputs.size(); ++o)
      if (c.outputs[o].defined() && n.outputs[o] >= 0) k.outputs.push_back(n.outputs[o]);
    k.module = it->second.module;
    impl->kernels.push_back(std::move(k));
  }
  return Network(impl);
}

std::vector<Buffer> Network::run(const std::vector<Buffer>& inputs) const {
  const Graph& g = impl_->graph;
  if (inputs.size() != g.inputs.size())
    throw Error("the network takes " + std::to_string(g.inputs.size()) + " inputs, " + std::to_string(inputs.size()) +
                " were given");
  std::vector<Buffer> env(g.values.size());
  for (size_t k = 0; k < g.values.size(); ++k)
    if (g.values[k].is_constant()) env[k] = g.values[k].constant;
  for (size_t k = 0; k < inputs.size(); ++k) {
    const Value& v = g.values[size_t(g.inputs[k])];
    if (inputs[k].dtype() != v.dtype || inputs[k].shape() != v.shape)
      throw Error("input " + std::to_string(k) + " ('" + v.name + "') must be " + v.dtype.str() + shape_str(v.shape) +
                  ", not " + inputs[k].describe());
    env[size_t(g.inputs[k])] = inputs[k];
  }
  for (const Kernel& k : impl_->kernels) {
    std::vector<Buffer> args;
    for (int id : k.inputs) args.push_back(env[size_t(id)]);
    for (int id : k.outputs) {
      const Value& v = g.values[size_t(id)];
      env[size_t(id)] = Buffer(v.shape, v.dtype);
      args.push_back(env[size_t(id)]);
    }
    k.module(args);
  }
  std::vector<Buffer> out;
  for (int id : g.outputs) out.push_back(env[size_t(id)]);
  return out;
}

const Graph& Network::graph() const { return impl_->graph; }
int Network::num_kernels() const { return int(impl_->kernels.size()); }

}  // namespace tessel::graph
