// build(): lower for the target, then hand the program to its back end. The choice of
// back end is made here and nowhere else.
#include <chrono>
#include <set>

#include "driver/Build.h"

#include "codegen/CodeGenC.h"
#include "codegen/LLVMJit.h"
#include "codegen/NVRTC.h"
#include "ir/IRVisitor.h"
#include "runtime/ModuleImpl.h"

namespace tessel {
namespace {

DevicePlan device_plan(const LoweredProgram& prog) {
  DevicePlan plan;
  std::set<const ExprNode*> stored;
  for (auto& k : prog.device.kernels)
    visit_stmts(k.body, [&](const Stmt& s) {
      if (const Store* st = s.as<Store>()) stored.insert(st->buffer.get());
    });
  std::vector<Var> buffers;
  for (auto& a : prog.args) {
    int64_t n = 1;
    for (int64_t e : a.op->shape) n *= e;
    plan.arg_bytes.push_back(n * a.op->dtype.bytes());
    plan.arg_written.push_back(stored.count(a.buffer.get()) > 0);
    buffers.push_back(a.buffer);
  }
  for (auto& t : prog.device.temps) {
    plan.temp_bytes.push_back(t.size * t.dtype.bytes());
    buffers.push_back(t.buffer);
  }
  for (auto& k : prog.device.kernels) {
    LaunchSpec l;
    l.name = k.name;
    for (int d = 0; d < 3; ++d) l.grid[d] = k.grid[d], l.block[d] = k.block[d];
    for (auto& p : k.params)
      for (size_t i = 0; i < buffers.size(); ++i)
        if (buffers[i].same_as(p)) l.params.push_back(int(i));
    plan.launches.push_back(l);
  }
  return plan;
}

std::unique_ptr<Kernel> make_kernel(const LoweredProgram& prog, const BuildOptions& opts) {
  if (opts.target.kind == Target::Kind::LLVM) return std::make_unique<JitKernel>(prog, opts.target, opts.libm_math);
  return make_device_kernel(compile_device(prog, opts.target));
}

}  // namespace

DeviceCode compile_device(const LoweredProgram& prog, const Target& target) {
  TESSEL_INTERNAL_CHECK(target.is_gpu(), "compile_device for ", target.str());
  DeviceCode code;
  code.kind = target.kind_name();
  code.plan = device_plan(prog);
  std::string source = codegen_c(prog, target);
  if (target.kind == Target::Kind::CUDA) {
    code.binary = nvrtc_compile(source, target.arch);
  } else {
    code.binary.source = source;
    code.binary.resources.kernels = int(code.plan.launches.size());
  }
  return code;
}

Module build(const Schedule& sch, const std::vector<Tensor>& args, const BuildOptions& opts) {
  auto t0 = std::chrono::steady_clock::now();
  LoweredProgram prog = lower_program(sch, args, opts.name, opts.target, opts.lower);
  auto impl = std::make_shared<ModuleImpl>();
  impl->func = prog.func;
  impl->target = opts.target;
  for (auto& t : args) impl->args.push_back(ArgSpec{t.name(), t.shape(), t.dtype()});
  for (auto& r : sch.layout_rewrites()) {
    TESSEL_USER_CHECK(!opts.target.is_gpu(), "build: the schedule rewrites the layout of '", r.source,
                      "', which only CPU targets support so far; build for llvm, or block it with pack");
    for (size_t i = 0; i < args.size(); ++i)
      if (args[i].name() == r.source)
        impl->rewrites.push_back({int(i), r, Buffer(prog.args[i].op->shape, prog.args[i].op->dtype), nullptr});
  }
  impl->kernel = make_kernel(prog, opts);
  impl->seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return Module(impl);
}

}  // namespace tessel
