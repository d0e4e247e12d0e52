#include "passes/Lower.h"

#include <chrono>
#include <iostream>
#include <set>

#include "ir/IRPrinter.h"
#include "ir/Simplify.h"
#include "schedule/ScheduleState.h"
#include "schedule/StageNest.h"
#include "tessel/target.h"

namespace tessel {
namespace {

// An input whose layout the schedule rewrote is passed in its rewritten layout.
std::vector<ArgBuffer> bind_args(const ScheduleState& st, const std::vector<Tensor>& args) {
  std::vector<ArgBuffer> out;
  std::set<std::string> names;
  for (auto& t : args) {
    TESSEL_USER_CHECK(t.defined(), "build/lower: an argument tensor is undefined");
    TESSEL_USER_CHECK(names.insert(t.name()).second, "build/lower: tensor '", t.name(), "' is listed twice in the arguments");
    std::string name = t.name();
    for (auto& r : st.rewrites)
      if (r.source == name) name = r.rewritten, names.insert(name);
    int i = st.find_stage(name);
    TESSEL_USER_CHECK(i >= 0, "build/lower: argument '", t.name(), "' is not part of this computation; its tensors are ",
                      st.stage_list());
    // The schedule may have rebuilt the op (cache_read/cache_write rewrite readers), so
    // bind by name to the schedule's current op.
    out.push_back(ArgBuffer{st.stages[i].op, Var(t.name(), handle)});
  }
  for (auto& o : st.outputs)
    TESSEL_USER_CHECK(names.count(o.name()), "build/lower: output '", o.name(),
                      "' must be in the argument list, or its result would be lost");
  for (auto& s : st.stages)
    if (s.is_placeholder())
      TESSEL_USER_CHECK(names.count(s.name) || st.readers(s.name).empty(), "build/lower: input '", s.name,
                        "' is read by the computation but is not in the argument list");
  return out;
}

LoweredFunc make_func(const std::string& name, const std::vector<ArgBuffer>& args, const Stmt& body) {
  LoweredFunc f{name, {}, body};
  for (auto& a : args) f.args.push_back(Tensor(a.op));
  return f;
}

// The pipeline up to unrolling: loop nest, guards, flat buffers, vector code.
Stmt lower_loops(const ScheduleState& st, const std::vector<ArgBuffer>& args, const Target& target,
                 const std::function<void(const std::string&, const Stmt&)>& log,
                 std::vector<std::string>* index_errors = nullptr) {
  TESSEL_USER_CHECK(!index_errors || !target.is_gpu(), "check_bounds: a checked build is for CPU targets; this one is ",
                    target.str());
  check_bounds(st);
  check_schedule(st, target);
  LoopProgram prog = infer_bounds(st);
  if (index_errors) check_reads_when_run(prog, *index_errors);
  Stmt s = make_loop_nest(st, prog);
  log("make_loop_nest", s);
  s = simplify(s);
  log("simplify", s);
  s = remove_true_guards(s);
  log("remove_true_guards", s);
  std::map<std::string, BufferLayout> layouts;
  for (auto& stage : st.stages)
    if (!stage.align.empty() || !stage.storage_order.empty())
      layouts[stage.name] = BufferLayout{stage.storage_order, stage.align};
  s = storage_flatten(s, args, layouts);
  log("storage_flatten", s);
  s = vectorize_loops(s);
  log("vectorize_loops", s);
  if (target.is_gpu()) {
    s = inject_virtual_thread(s);
    log("inject_virtual_thread", s);
  }
  return s;
}

}  // namespace

LoweredProgram lower_program(const Schedule& sch, const std::vector<Tensor>& args, const std::string& name,
                             const Target& target, const LowerOptions& opts) {
  const ScheduleState& st = sch.state();
  LoweredProgram out;
  out.args = bind_args(st, args);
  auto log = [&](const std::string& pass, const Stmt& s) {
    if (opts.dump) opts.dump(pass, to_string(s));
    else if (opts.dump_passes) std::cerr << "// ---- after " << pass << " ----\n" << to_string(s);
  };
  std::vector<std::string> index_errors;
  Stmt s = lower_loops(st, out.args, target, log, opts.check_bounds ? &index_errors : nullptr);
  s = inject_prefetch(s);
  log("inject_prefetch", s);
  s = spread_parallel_parts(s);
  log("spread_parallel_parts", s);
  s = unroll_loops(s);
  log("unroll_loops", s);
  s = simplify(s);
  log("simplify", s);
  s = place_skippable_guards(s);
  log("place_skippable_guards", s);
  // Not on GPUs: there such a branch is uniform across a warp and cheap, and the copies would
  // only lengthen the kernel and its compile.
  if (!target.is_gpu()) {
    s = unswitch_loops(s);
    log("unswitch_loops", s);
  }
  s = storage_rewrite(s);
  log("storage_rewrite", s);

  if (target.is_gpu()) {
    out.device = split_host_device(s, out.args, name);
    for (auto& k : out.device.kernels) {
      log("split_host_device: " + k.name, k.body);
      if (!opts.skip_thread_sync) k.body = thread_sync(k, target);
      log("thread_sync: " + k.name, k.body);
      k.body = simplify(lower_thread_allreduce(k, target));
      log("lower_thread_allreduce: " + k.name, k.body);
      verify_gpu_kernel(k, target);
    }
  }

  out.func = make_func(name, out.args, s);
  out.func.index_errors = std::move(index_errors);
  return out;
}

LoweredProgram lower_for_features(const Schedule& sch, const std::vector<Tensor>& args, const Target& target) {
  if (target.is_gpu()) return lower_program(sch, args, "k", target, {});
  LoweredProgram out;
  out.args = bind_args(sch.state(), args);
  Stmt body = lower_loops(sch.state(), out.args, target, [](const std::string&, const Stmt&) {});
  out.func = make_func("k", out.args, body);
  return out;
}

LoweredFunc lower(const Schedule& sch, const std::vector<Tensor>& args, const std::string& name,
                  const LowerOptions& opts) {
  return lower_program(sch, args, name, Target::host(), opts).func;
}

LoweredFunc lower(const Schedule& sch, const std::vector<Tensor>& args, const Target& target, const std::string& name,
                  const LowerOptions& opts) {
  return lower_program(sch, args, name, target, opts).func;
}

std::string LoweredFunc::str() const {
  std::string s = "func " + name + "(";
  for (size_t i = 0; i < args.size(); ++i) {
    s += (i ? ", " : "") + args[i].name() + ": " + args[i].dtype().str() + "[";
    for (size_t d = 0; d < args[i].shape().size(); ++d) s += (d ? ", " : "") + std::to_string(args[i].shape()[d]);
    s += "]";
  }
  s += ") {\n";
  std::string body = to_string(this->body);
  size_t pos = 0;
  while (pos < body.size()) {
    size_t nl = body.find('\n', pos);
    s += "  " + body.substr(pos, nl - pos + 1);
    pos = nl == std::string::npos ? body.size() : nl + 1;
  }
  return s + "}\n";
}

}  // namespace tessel
