// Groups into kernels: their order, compute definitions, keys and tuning workloads.
#include "graph/Partition.h"

#include <map>
#include <set>
#include <sstream>

#include "graph/Operators.h"
#include "graph/passes/Passes.h"

namespace tessel::graph {

namespace {

// What a node's code depends on: operator, attributes, input types and where each input
// comes from within the part, and the values of the small constants its definition may read.
std::string node_key(const Graph& g, const Node& n, const std::map<int, std::string>& local) {
  std::ostringstream os;
  os << n.op << "@" << n.opset;
  for (auto& [name, a] : n.attrs) os << "|" << name << "=" << a.str();
  for (int id : n.inputs) {
    if (id < 0) {
      os << "|_";
      continue;
    }
    const Value& v = g.values[size_t(id)];
    os << "|" << local.at(id) << ":" << v.dtype.str() << shape_str(v.shape) << (v.is_constant() ? "$" : "");
    if (v.is_constant() && v.elements() <= 64) {
      os << "=";
      for (int64_t k = 0; k < v.constant.size(); ++k) os << v.constant.get(k) << ",";
    }
  }
  for (int o : n.outputs) os << (o < 0 ? "|-" : "|+");
  return os.str();
}

double node_flops(const Graph& g, const Node& n) {
  auto shape = [&](size_t i) { return g.values[size_t(n.inputs[i])].shape; };
  const Value& out = g.values[size_t(n.outputs[0])];
  if (n.op == "Conv" || n.op == "tessel.ConvNhwc" || n.op == "tessel.ConvNchwc" || n.op == "tessel.ConvWinogradNchwc") {
    // each output: a multiply-add per weight of its group (a Winograd convolution's: those of the direct one)
    std::vector<int64_t> w = shape(1);
    if (n.op == "tessel.ConvWinogradNchwc") return 2.0 * double(out.elements()) * double(w[3] * w[4] * 9);
    int64_t per = n.op == "Conv"               ? product(w, 1)
                  : n.op == "tessel.ConvNchwc" ? product(w, 1, 5)
                                               : w[0] * w[1] * (n.attr_int("group", 1) > 1 ? 1 : w[2]);
    return 2.0 * double(out.elements()) * double(per);
  }
  if (n.op == "MatMul" || n.op == "Gemm") {
    std::vector<int64_t> a = shape(0);
    bool ta = n.op == "Gemm" && n.attr_int("transA", 0);
    return 2.0 * double(out.elements()) * double(ta ? a[0] : a.back());
  }
  int64_t in = n.inputs.empty() || n.inputs[0] < 0 ? 0 : g.values[size_t(n.inputs[0])].elements();
  return double(std::max(out.elements(), in));  // one operation per element read or written
}

}  // namespace

std::vector<Part> partition(const Graph& g) {
  std::map<int, std::vector<int>> members;
  std::map<int, std::set<int>> after;  // group -> groups that read it
  std::map<int, int> waiting;          // group -> groups it still waits for
  for (size_t k = 0; k < g.nodes.size(); ++k) members[g.nodes[k].group].push_back(int(k));
  for (const Node& n : g.nodes)
    for (int i : n.inputs) {
      int p = i < 0 ? -1 : g.values[size_t(i)].producer;
      if (p >= 0 && g.nodes[size_t(p)].group != n.group && after[g.nodes[size_t(p)].group].insert(n.group).second)
        ++waiting[n.group];
    }
  std::set<std::pair<int, int>> ready;  // (first node, group): the earliest node's group first
  for (auto& [grp, nodes] : members)
    if (!waiting[grp]) ready.insert({nodes.front(), grp});
  std::vector<int> order;
  while (!ready.empty()) {
    int grp = ready.begin()->second;
    ready.erase(ready.begin());
    order.push_back(grp);
    for (int next : after[grp])
      if (--waiting[next] == 0) ready.insert({members[next].front(), next});
  }
  TESSEL_INTERNAL_CHECK(order.size() == members.size(), "fusion made kernels that wait for each other");

  std::vector<int> readers(g.values.size(), 0);  // per value: reads from other groups
  for (const Node& n : g.nodes)
    for (int i : n.inputs) {
      int p = i < 0 ? -1 : g.values[size_t(i)].producer;
      if (i >= 0 && (p < 0 || g.nodes[size_t(p)].group != n.group)) ++readers[size_t(i)];
    }
  for (int o : g.outputs) ++readers[size_t(o)];

  std::vector<Part> parts;
  for (int grp : order) {
    Part p;
    p.nodes = members[grp];
    std::map<int, std::string> local;  // value -> its name inside the key
    for (int k : p.nodes) {
      const Node& n = g.nodes[size_t(k)];
      for (int i : n.inputs)
        if (i >= 0 && !local.count(i)) local[i] = "in" + std::to_string(local.size());
      p.key += node_key(g, n, local) + "\n";
      p.ops += (p.ops.empty() ? "" : "+") + n.op;
      p.flops += node_flops(g, n);
      for (int o : n.outputs)
        if (o >= 0) local[o] = "v" + std::to_string(local.size());
      p.compute.add(g, n);
    }
    for (int k : p.nodes)
      for (int o : g.nodes[size_t(k)].outputs)
        if (o >= 0 && readers[size_t(o)] > 0) p.compute.output_ids.push_back(o), p.key += "out:" + local[o] + "\n";
    p.compute.drop_unread_inputs();
    parts.push_back(std::move(p));
  }
  return parts;
}

autotune::Workload workload_of(const Graph& g, const Part& p) {
  uint64_t h = 1469598103934665603ull;  // FNV-1a of the structure
  for (char c : p.key) h = (h ^ uint8_t(c)) * 1099511628211ull;
  // Arguments by position, so that the key does not depend on the model's value names.
  std::map<std::string, int64_t> shape{{"struct", int64_t(h >> 16)}};
  std::vector<Tensor> outs = p.compute.outputs();
  for (size_t i = 0; i < p.compute.inputs.size(); ++i)
    for (size_t d = 0; d < p.compute.inputs[i].shape().size(); ++d)
      shape["in" + std::to_string(i) + "." + std::to_string(d)] = p.compute.inputs[i].shape()[d];
  autotune::Workload w = autotune::custom_workload("graph." + p.ops, p.compute.inputs, outs, p.flops, shape);
  for (size_t i = 0; i < p.compute.inputs.size(); ++i)
    if (g.values[size_t(p.compute.input_ids[i])].is_constant()) w.constants.push_back(p.compute.inputs[i].name());
  return w;
}

bool worth_tuning(const Graph& g, const Part& p) {
  for (int k : p.nodes) {
    OpKind kind = op_kind(g.nodes[size_t(k)].op);
    if (kind == OpKind::Complex || kind == OpKind::Reduce) return true;
  }
  return false;
}

}  // namespace tessel::graph
