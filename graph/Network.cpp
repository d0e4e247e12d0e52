// compile(): the passes, a kernel per part (parts of the same structure share compiled code),
// tuned schedules from a log, the memory plan; run(): the kernels in order over the arena.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <set>
#include <sstream>

#include "graph/NetworkImpl.h"
#include "graph/Operators.h"
#include "graph/Partition.h"
#include "graph/Vendor.h"
#include "graph/passes/Passes.h"
#include "tessel/ops.h"

namespace tessel::graph {

Graph optimize(const Graph& input, const CompileOptions& opts) {
  Graph g = remove_dead_nodes(fold_constants(input));
  if (opts.rewrite) g = split_operators(fold_batch_norm(fuse_patterns(g)));
  TESSEL_USER_CHECK(opts.layout == "model" || opts.layout == "NHWC" || opts.layout == "NCHWc",
                    "CompileOptions::layout is '", opts.layout, "'; it is \"model\", \"NHWC\" or \"NCHWc\"");
  if (opts.layout != "model")
    g = plan_layout(g, opts.layout == "NHWC" ? LayoutPlan::NHWC : LayoutPlan::NCHWc, opts.target);
  if (opts.layout == "NCHWc" && opts.winograd) g = winograd(g);
  if (opts.fuse) return fuse(g);
  for (size_t k = 0; k < g.nodes.size(); ++k) g.nodes[k].group = int(k);
  return g;
}

// Arena offsets on GPUs: a multiple of every device's base-address alignment (OpenCL's
// sub-buffers need it; NVIDIA's is 512 bytes).
constexpr int64_t kDeviceAlignment = 4096;

void call(const Step& s, const std::vector<Buffer>& args) {
  if (s.vendor) s.vendor->run(args);
  else s.module(args);
}

namespace {
// Bytes a network reads between two calls of one kernel: every tensor its kernels read or
// write, the weights included. A flush of that size (CacheFlusher) leaves a kernel's weights
// where the network would have: in the caches when the whole network fits there.
int64_t network_bytes(const Graph& g, const std::vector<Part>& parts) {
  std::set<int> ids;
  for (const Part& p : parts) {
    ids.insert(p.compute.input_ids.begin(), p.compute.input_ids.end());
    ids.insert(p.compute.output_ids.begin(), p.compute.output_ids.end());
  }
  int64_t bytes = 0;
  for (int id : ids) bytes += g.values[size_t(id)].elements() * g.values[size_t(id)].dtype.bytes();
  return bytes;
}

// Seconds of the fastest of `calls` calls of a step as a network runs it (CacheFlusher): its
// weights from where the network leaves them, its other arguments (`warm`) from the caches.
double time_in_network(const Step& s, const std::vector<Buffer>& args, const std::vector<Buffer>& warm,
                       const CacheFlusher& flush, int calls) {
  if (s.module.target().is_gpu()) return s.module.time(args, calls);  // device events: the copies left out
  call(s, args);  // prepares rewritten weights
  double best = 1e30;
  for (int c = 0; c < calls; ++c) {
    flush(warm);
    auto t = std::chrono::steady_clock::now();
    call(s, args);
    best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count());
  }
  return best;
}

// `select = "measure"`: the step's kernel (tuned or default), the other of the two, and a
// vendor kernel, timed on the part's real weights as the network runs them; the fastest stays.
void choose(const Graph& g, const Part& p, Step& step, const CompileOptions& opts, const CacheFlusher& flush) {
  std::vector<Buffer> args, warm;
  for (int id : p.compute.input_ids) {
    const Value& v = g.values[size_t(id)];
    args.push_back(v.is_constant() ? v.constant : Buffer(v.shape, v.dtype));
    if (v.is_constant()) continue;
    if (v.dtype.is_float()) args.back().fill_random(1);  // integers stay 0: valid indices
    warm.push_back(args.back());
  }
  for (int id : p.compute.output_ids) {
    args.emplace_back(g.values[size_t(id)].shape, g.values[size_t(id)].dtype);
    warm.push_back(args.back());
  }
  std::vector<Step> candidates{step};
  if (step.schedule == "tuned") {
    Step dflt = step;
    dflt.module = build_kernel(p.compute, g, {.name = step.module.name(), .target = opts.target});
    dflt.schedule = "default";
    candidates.push_back(dflt);
  }
  if (auto vendor = vendor_kernel(g, p, opts.target)) {
    Step v = step;
    v.vendor = vendor, v.schedule = vendor->name;
    candidates.push_back(v);
  }
  // The best of three rounds, the candidates taking turns: a slow moment of a shared machine
  // then spoils one round, not one candidate.
  std::vector<double> best(candidates.size(), 1e30);
  for (int round = 0; round < 3; ++round)
    for (size_t c = 0; c < candidates.size(); ++c)
      best[c] = std::min(best[c], time_in_network(candidates[c], args, warm, flush, 3));
  step = candidates[size_t(std::min_element(best.begin(), best.end()) - best.begin())];
  // A vendor kernel runs instead of the module: the module goes, with the weight copies it
  // prepared while it was timed (ResNet-50 with oneDNN everywhere: 40 MB).
  if (step.vendor) step.module = Module();
}
}  // namespace

Network compile(const Graph& input, const CompileOptions& opts) {
  auto impl = std::make_shared<NetworkImpl>();
  impl->target = opts.target;
  Graph g = optimize(input, opts);
  TESSEL_USER_CHECK(opts.select == "log" || opts.select == "measure", "CompileOptions::select is '", opts.select,
                    "'; it is \"log\" or \"measure\"");
  std::map<std::string, size_t> built;  // by part key: the first step with that code
  std::optional<autotune::TuningLog> log;
  if (!opts.log.empty()) log.emplace(opts.log);
  std::vector<Part> parts = partition(g);
  std::optional<CacheFlusher> flush;  // released when the kernels are chosen
  if (opts.select == "measure") flush.emplace(network_bytes(g, parts));
  for (Part& p : parts) {
    Step step;
    step.inputs = p.compute.input_ids, step.outputs = p.compute.output_ids, step.nodes = p.nodes, step.ops = p.ops;
    auto it = built.find(p.key);
    if (it != built.end()) {
      // The same code; its own copies of weights it reads in a rewritten layout (a vendor
      // kernel of its own: oneDNN's hold their weights reordered).
      const Step& first = impl->steps[size_t(it->second)];
      bool own_weights = !first.vendor && !first.module.layout_rewrites().empty();
      step.module = own_weights ? first.module.instance() : first.module;
      step.vendor = first.vendor ? vendor_kernel(g, p, opts.target) : nullptr;
      step.code = first.code, step.schedule = first.schedule;
    } else {
      std::optional<autotune::BestSchedule> best;
      if (log && worth_tuning(g, p)) best = log->best(workload_of(g, p), opts.target);
      step.schedule = best ? "tuned" : "default";
      step.code = int(built.size());
      BuildOptions bo{.name = "tessel_k" + std::to_string(step.code), .target = opts.target};
      if (best) {
        // A record made for another graph may name stages this one lacks: the default then.
        autotune::Workload w = workload_of(g, p);
        try {
          step.module = build(Schedule::replay(w.outputs, best->steps), w.args, bo);
        } catch (const Error& e) {
          std::fprintf(stderr, "tessel: WARNING: the log's record for kernel %s (%s) does not build here (%s); "
                       "building its DEFAULT schedule\n", p.ops.c_str(), g.nodes[size_t(p.nodes[0])].name.c_str(),
                       e.what());
          best.reset();
          step.schedule = "default";
        }
      }
      if (!best) step.module = build_kernel(p.compute, g, bo);
      if (flush) choose(g, p, step, opts, *flush);
      built.emplace(p.key, impl->steps.size());
    }
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
      uses.push_back({v.elements() * v.dtype.bytes(), int(s), int(s)});
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
  impl->plan = plan_memory(uses, opts.target.is_gpu() ? kDeviceAlignment : 64);
  Buffer arena({std::max<int64_t>(impl->plan.arena_bytes, 1)}, uint8);
  impl->arena_offset.assign(g.values.size(), -1);
  for (auto& [id, u] : use_of) {
    impl->arena_offset[size_t(id)] = int(impl->plan.offsets[u]);
    const Value& v = g.values[size_t(id)];
    impl->values[size_t(id)] = Buffer::view(arena, impl->plan.offsets[u], v.shape, v.dtype);
  }
  impl->graph = std::move(g);
  return Network(impl);
}

std::vector<autotune::TaskResult> tune(const Graph& input, const autotune::TuneOptions& tuning,
                                       const CompileOptions& opts) {
  Graph g = optimize(input, opts);
  std::vector<autotune::Workload> tasks;
  std::vector<double> weights;
  std::map<std::string, size_t> index;  // part key -> task
  std::vector<Part> parts = partition(g);
  for (const Part& p : parts) {
    if (!worth_tuning(g, p)) continue;
    auto [it, fresh] = index.emplace(p.key, tasks.size());
    if (fresh) tasks.push_back(workload_of(g, p)), weights.push_back(0);
    weights[it->second] += 1;
  }
  TESSEL_USER_CHECK(!tasks.empty(), "the network has no kernel worth tuning (no convolution, matmul, pooling or "
                    "normalisation)");
  // Timed with their weights where the network leaves them.
  autotune::TuneOptions in_network = tuning;
  in_network.flush_caches = true;
  in_network.flush_bytes = network_bytes(g, parts);
  return autotune::tune_tasks(tasks, weights, in_network);
}

std::vector<Buffer> Network::run(const std::vector<Buffer>& inputs) const { return run(inputs, nullptr); }

namespace {
using EachOutput = std::function<void(const std::string&, const Buffer&)>;

// The kernels in order over the host buffers; `seconds`, if given, gets each one's time as it
// ran.
void call_steps(NetworkImpl& impl, const EachOutput& each, std::vector<double>* seconds) {
  const Graph& g = impl.graph;
  std::vector<Buffer>& env = impl.values;
  std::vector<Buffer> args;
  for (size_t k = 0; k < impl.steps.size(); ++k) {
    const Step& s = impl.steps[k];
    args.clear();
    for (int id : s.inputs) args.push_back(env[size_t(id)]);
    for (int id : s.outputs) args.push_back(env[size_t(id)]);
    auto t = std::chrono::steady_clock::now();
    call(s, args);
    if (seconds) (*seconds)[k] = std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
    if (each)
      for (int id : s.outputs) each(g.values[size_t(id)].name, env[size_t(id)]);
  }
}

// GPU targets, at the first run: a device buffer for each tensor a kernel reads or writes,
// the arena's as views of one allocation, the weights uploaded.
void place_on_device(NetworkImpl& impl) {
  const Graph& g = impl.graph;
  auto device = DeviceMemory::open(impl.target);
  TESSEL_INTERNAL_CHECK(kDeviceAlignment % device->alignment() == 0, "the device needs offsets aligned to ",
                        device->alignment(), " bytes");
  uint64_t arena = device->alloc(impl.plan.arena_bytes);
  impl.device_values.assign(g.values.size(), 0);
  auto place = [&](int id) {
    uint64_t& h = impl.device_values[size_t(id)];
    if (h) return;
    const Buffer& host = impl.values[size_t(id)];
    const Value& v = g.values[size_t(id)];
    int64_t bytes = v.elements() * v.dtype.bytes();
    int offset = impl.arena_offset[size_t(id)];
    h = offset >= 0 ? device->view(arena, offset, bytes) : device->alloc(bytes);
    if (v.is_constant()) device->upload(h, host.raw(), bytes);
  };
  for (int id : g.inputs) place(id);
  for (const Step& s : impl.steps) {
    for (int id : s.inputs) place(id);
    for (int id : s.outputs) place(id);
  }
  impl.device = std::move(device);
}

// The kernels in order over the device's buffers: inputs uploaded, every kernel queued, the
// outputs downloaded into their host buffers. With `each` or `seconds`, each kernel is waited
// for (and its outputs downloaded for `each`).
void launch_steps(NetworkImpl& impl, const EachOutput& each, std::vector<double>* seconds) {
  const Graph& g = impl.graph;
  if (!impl.device) place_on_device(impl);
  DeviceMemory& d = *impl.device;
  std::vector<Buffer>& env = impl.values;
  auto handle = [&](int id) { return impl.device_values[size_t(id)]; };
  for (int id : g.inputs)
    if (handle(id)) d.upload(handle(id), env[size_t(id)].raw(), env[size_t(id)].bytes());
  std::vector<uint64_t> args;
  for (size_t k = 0; k < impl.steps.size(); ++k) {
    const Step& s = impl.steps[k];
    args.clear();
    for (int id : s.inputs) args.push_back(handle(id));
    for (int id : s.outputs) args.push_back(handle(id));
    auto t = std::chrono::steady_clock::now();
    s.module.launch(args);
    if (!seconds && !each) continue;
    d.synchronize();
    if (seconds) (*seconds)[k] = std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
    if (each)
      for (int id : s.outputs) {
        d.download(env[size_t(id)].raw(), handle(id), env[size_t(id)].bytes());
        each(g.values[size_t(id)].name, env[size_t(id)]);
      }
  }
  for (int id : g.outputs)
    if (handle(id) && !g.values[size_t(id)].is_constant())
      d.download(env[size_t(id)].raw(), handle(id), env[size_t(id)].bytes());
}

std::vector<Buffer> run_steps(NetworkImpl& impl, const std::vector<Buffer>& inputs, const EachOutput& each,
                              std::vector<double>* seconds) {
  const Graph& g = impl.graph;
  TESSEL_USER_CHECK(inputs.size() == g.inputs.size(), "the network takes ", g.inputs.size(), " inputs, ",
                    inputs.size(), " were given");
  std::vector<Buffer>& env = impl.values;
  for (size_t k = 0; k < inputs.size(); ++k) {
    const Value& v = g.values[size_t(g.inputs[k])];
    TESSEL_USER_CHECK(inputs[k].dtype() == v.dtype && inputs[k].shape() == v.shape, "input ", k, " ('", v.name,
                      "') must be ", v.dtype.str(), shape_str(v.shape), ", not ", inputs[k].describe());
    env[size_t(g.inputs[k])] = inputs[k];
  }
  if (impl.target.is_gpu()) launch_steps(impl, each, seconds);
  else call_steps(impl, each, seconds);
  std::vector<Buffer> out;
  for (int id : g.outputs) out.push_back(env[size_t(id)]);
  for (size_t k = 0; k < inputs.size(); ++k) env[size_t(g.inputs[k])] = Buffer();  // not kept alive
  return out;
}
}  // namespace

std::vector<Buffer> Network::run(const std::vector<Buffer>& inputs, const EachOutput& each) const {
  TESSEL_USER_CHECK(impl_, "running an empty Network; compile() one first");
  return run_steps(*impl_, inputs, each, nullptr);
}

void Network::profile(const std::vector<Buffer>& inputs, int runs) const {
  TESSEL_USER_CHECK(impl_, "profiling an empty Network; compile() one first");
  run(inputs);  // prepares rewritten weights
  std::vector<std::vector<double>> times(impl_->steps.size(), std::vector<double>(size_t(std::max(1, runs))));
  std::vector<double> once(impl_->steps.size());
  for (int r = 0; r < std::max(1, runs); ++r) {
    run_steps(*impl_, inputs, nullptr, &once);
    for (size_t k = 0; k < once.size(); ++k) times[k][size_t(r)] = once[k];
  }
  for (size_t k = 0; k < times.size(); ++k) {
    std::nth_element(times[k].begin(), times[k].begin() + int64_t(times[k].size() / 2), times[k].end());
    impl_->steps[k].seconds = times[k][times[k].size() / 2];
  }
  impl_->profiled = true;
}

const Graph& Network::graph() const { return impl_->graph; }
int Network::num_kernels() const { return int(impl_->steps.size()); }
int Network::num_tuned() const {
  auto tuned = [](const Step& s) { return s.schedule == "tuned"; };
  return int(std::count_if(impl_->steps.begin(), impl_->steps.end(), tuned));
}
int64_t Network::arena_bytes() const { return impl_->plan.arena_bytes; }
int64_t Network::separate_bytes() const { return impl_->plan.separate_bytes; }

std::string Network::report() const {
  const Graph& g = impl_->graph;
  std::ostringstream os;
  int tuned = 0;
  double total = 0;
  for (const Step& s : impl_->steps) tuned += s.schedule == "tuned", total += s.seconds;
  os << impl_->steps.size() << " kernels for " << g.nodes.size() << " nodes, " << tuned << " tuned from the log\n";
  for (size_t s = 0; s < impl_->steps.size(); ++s) {
    const Step& st = impl_->steps[s];
    char line[512];
    std::snprintf(line, sizeof line, "  %3zu %-40s %-8s", s, st.ops.substr(0, 40).c_str(), st.schedule.c_str());
    os << line;
    if (impl_->profiled) {
      double share = 100 * st.seconds / std::max(total, 1e-12);
      std::snprintf(line, sizeof line, " %8.3f ms %5.1f%%", st.seconds * 1e3, share);
      os << line;
    }
    os << "  " << g.nodes[size_t(st.nodes.front())].name << "\n";
  }
  os << "memory: arena " << impl_->plan.arena_bytes << " bytes for intermediate tensors of "
     << impl_->plan.separate_bytes << " bytes in all";
  if (impl_->plan.separate_bytes)
    os << " (" << int(100.0 * double(impl_->plan.arena_bytes) / double(impl_->plan.separate_bytes) + 0.5) << "%)";
  os << "\n";
  return os.str();
}

}  // namespace tessel::graph
