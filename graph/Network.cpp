// compile(): the passes, a kernel per group of fused nodes (groups of the same operators,
// attributes and input types share compiled code), the memory plan; run(): the kernels in
// order over the arena.
#include <set>
#include <sstream>

#include "graph/InferShapes.h"
#include "graph/MemoryPlan.h"
#include "graph/Operators.h"
#include "graph/passes/Passes.h"

namespace tessel::graph {

namespace {

struct Step {
  Module module;
  std::vector<int> inputs, outputs;  // value ids: the kernel's arguments in order
  std::vector<int> nodes;            // what it computes
};

}  // namespace

class NetworkImpl {
 public:
  Graph graph;
  std::vector<Step> steps;
  std::vector<Buffer> values;  // per value: constants, arena views, output buffers; inputs per run
  MemoryPlan plan;
};

namespace {

// What a node's code depends on: operator, attributes, input types and which earlier input
// each repeats, and the values of the small constants its definition may read (shapes, axes).
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
    os << "|" << (local.count(id) ? local.at(id) : "?") << ":" << v.dtype.str() << shape_str(v.shape);
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
  Graph g = remove_dead_nodes(fold_constants(input));
  if (opts.rewrite) g = split_operators(fold_batch_norm(g));
  if (opts.fuse) {
    g = fuse(g);
  } else {
    for (size_t k = 0; k < g.nodes.size(); ++k) g.nodes[k].group = int(k);
  }
  // Groups in a topological order of what they read (fusion keeps that graph acyclic), the
  // group of the earliest node first among those ready.
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
  std::set<std::pair<int, int>> ready;  // (first node, group)
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
  std::vector<int> readers(g.values.size(), 0);  // per value: groups other than its own that read it
  for (const Node& n : g.nodes)
    for (int i : n.inputs)
      if (i >= 0 && (g.values[size_t(i)].producer < 0 || g.nodes[size_t(g.values[size_t(i)].producer)].group != n.group))
        ++readers[size_t(i)];
  for (int o : g.outputs) ++readers[size_t(o)];

  std::map<std::string, Kernel> built;
  for (int grp : order) {
    Compute c;
    std::string key = opts.target.str();
    std::map<int, std::string> local;  // value -> its name inside the group's key
    for (int k : members[grp]) {
      const Node& n = g.nodes[size_t(k)];
      for (int i : n.inputs)
        if (i >= 0 && !local.count(i)) local[i] = "in" + std::to_string(local.size());
      key += "\n" + node_key(g, n, local);
      for (int o : n.outputs)
        if (o >= 0) local[o] = "v" + std::to_string(local.size());
      c.add(g, n);
    }
    for (int k : members[grp])
      for (int o : g.nodes[size_t(k)].outputs)
        if (o >= 0 && readers[size_t(o)] > 0) c.output_ids.push_back(o), key += "|out:" + local[o];
    auto it = built.find(key);
    Step step;
    if (it == built.end()) {
      it = built.emplace(key, build_kernel(c, g, opts.target)).first;
      step.module = it->second.module;
    } else {
      keep_inputs(c, it->second.kept);
      // The same code; its own copies of weights it reads in a rewritten layout.
      step.module = it->second.module.layout_rewrites().empty() ? it->second.module : it->second.module.instance();
    }
    step.inputs = c.input_ids, step.outputs = c.output_ids, step.nodes = members[grp];
    impl->steps.push_back(std::move(step));
  }

  // Memory: graph outputs in buffers of their own, the other kernel outputs in the arena. An
  // element-wise kernel writes in place over an input of its size that dies with it.
  impl->values.resize(g.values.size());
  for (size_t k = 0; k < g.values.size(); ++k)
    if (g.values[k].is_constant()) impl->values[k] = g.values[k].constant;
  std::vector<bool> is_output(g.values.size(), false);
  for (int o : g.outputs) is_output[size_t(o)] = true;
  std::vector<TensorLifetime> uses;
  std::map<int, size_t> use_of;  // value -> its lifetime
  for (size_t s = 0; s < impl->steps.size(); ++s) {
    const Step& st = impl->steps[s];
    for (int i : st.inputs)
      if (use_of.count(i)) uses[use_of[i]].last = int(s);
    for (int o : st.outputs) {
      const Value& v = g.values[size_t(o)];
      if (is_output[size_t(o)] || !opts.plan_memory) {
        impl->values[size_t(o)] = Buffer(v.shape, v.dtype);
        continue;
      }
      use_of[o] = uses.size();
      uses.push_back({v.shape.empty() ? v.dtype.bytes() : v.elements() * v.dtype.bytes(), int(s), int(s)});
    }
  }
  for (size_t s = 0; s < impl->steps.size(); ++s) {
    const Step& st = impl->steps[s];
    if (op_kind(g.nodes[size_t(st.nodes.front())].op) != OpKind::Elemwise || st.outputs.size() != 1 ||
        !use_of.count(st.outputs[0]))
      continue;
    TensorLifetime& out = uses[use_of[st.outputs[0]]];
    for (int i : st.inputs) {
      if (!use_of.count(i) || g.values[size_t(i)].shape != g.values[size_t(st.outputs[0])].shape) continue;
      TensorLifetime& in = uses[use_of[i]];
      if (in.last == int(s) && in.bytes == out.bytes && in.alias < 0) {
        out.alias = int(use_of[i]);
        break;
      }
    }
  }
  // An alias chain must not fork: only one output may take over each input.
  std::vector<int> taken(uses.size(), 0);
  for (TensorLifetime& u : uses)
    if (u.alias >= 0 && taken[size_t(u.alias)]++) u.alias = -1;
  impl->plan = plan_memory(uses);
  Buffer arena({std::max<int64_t>(impl->plan.arena_bytes, 1)}, uint8);
  for (auto& [id, u] : use_of) {
    const Value& v = g.values[size_t(id)];
    impl->values[size_t(id)] = Buffer::view(arena, impl->plan.offsets[u], v.shape, v.dtype);
  }
  impl->graph = std::move(g);
  return Network(impl);
}

std::vector<Buffer> Network::run(const std::vector<Buffer>& inputs) const { return run(inputs, nullptr); }

std::vector<Buffer> Network::run(const std::vector<Buffer>& inputs,
                                 const std::function<void(const std::string&, const Buffer&)>& each) const {
  TESSEL_USER_CHECK(impl_, "running an empty Network; compile() one first");
  const Graph& g = impl_->graph;
  TESSEL_USER_CHECK(inputs.size() == g.inputs.size(), "the network takes ", g.inputs.size(), " inputs, ",
                    inputs.size(), " were given");
  std::vector<Buffer>& env = impl_->values;
  for (size_t k = 0; k < inputs.size(); ++k) {
    const Value& v = g.values[size_t(g.inputs[k])];
    TESSEL_USER_CHECK(inputs[k].dtype() == v.dtype && inputs[k].shape() == v.shape, "input ", k, " ('", v.name,
                      "') must be ", v.dtype.str(), shape_str(v.shape), ", not ", inputs[k].describe());
    env[size_t(g.inputs[k])] = inputs[k];
  }
  std::vector<Buffer> args;
  for (const Step& s : impl_->steps) {
    args.clear();
    for (int id : s.inputs) args.push_back(env[size_t(id)]);
    for (int id : s.outputs) args.push_back(env[size_t(id)]);
    s.module(args);
    if (each)
      for (int id : s.outputs) each(g.values[size_t(id)].name, env[size_t(id)]);
  }
  std::vector<Buffer> out;
  for (int id : g.outputs) out.push_back(env[size_t(id)]);
  for (size_t k = 0; k < inputs.size(); ++k) env[size_t(g.inputs[k])] = Buffer();  // not kept alive
  return out;
}

const Graph& Network::graph() const { return impl_->graph; }
int Network::num_kernels() const { return int(impl_->steps.size()); }
int64_t Network::arena_bytes() const { return impl_->plan.arena_bytes; }
int64_t Network::separate_bytes() const { return impl_->plan.separate_bytes; }

std::string Network::report() const {
  const Graph& g = impl_->graph;
  std::ostringstream os;
  os << impl_->steps.size() << " kernels for " << g.nodes.size() << " nodes\n";
  for (size_t s = 0; s < impl_->steps.size(); ++s) {
    const Step& st = impl_->steps[s];
    os << "  kernel " << s << ":";
    for (int k : st.nodes) os << " " << g.nodes[size_t(k)].op;
    os << "  (" << g.nodes[size_t(st.nodes.front())].name << (st.nodes.size() > 1 ? ", ..." : "") << ")\n";
  }
  os << "memory: arena " << impl_->plan.arena_bytes << " bytes for intermediate tensors of "
     << impl_->plan.separate_bytes << " bytes in all";
  if (impl_->plan.separate_bytes)
    os << " (" << int(100.0 * double(impl_->plan.arena_bytes) / double(impl_->plan.separate_bytes) + 0.5) << "%)";
  os << "\n";
  return os.str();
}

}  // namespace tessel::graph
