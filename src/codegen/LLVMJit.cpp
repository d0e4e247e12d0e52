#include "codegen/LLVMJit.h"
#include "codegen/MaskedStores.h"
#include "codegen/ShuffleOrder.h"

#include <chrono>
#include <mutex>
#include <sstream>

#include "codegen/LLVMHeaders.h"
#include "runtime/Runtime.h"
#include "tessel/build.h"

namespace tessel {
namespace {

void init_llvm() {
  static std::once_flag once;
  std::call_once(once, [] {
    llvm::InitializeNativeTarget();
    llvm::InitializeNativeTargetAsmPrinter();
    llvm::InitializeNativeTargetAsmParser();
  });
}

template <typename T>
T check(llvm::Expected<T> v, const char* what) {
  if (!v) throw InternalError(std::string(what) + ": " + llvm::toString(v.takeError()));
  return std::move(*v);
}

llvm::orc::JITTargetMachineBuilder machine_builder(const Target& t) {
  auto jtmb = check(llvm::orc::JITTargetMachineBuilder::detectHost(), "detecting the host");
  jtmb.setCPU(t.cpu);
  llvm::SubtargetFeatures f;
  std::stringstream ss(t.features);
  for (std::string item; std::getline(ss, item, ',');)
    if (!item.empty()) f.AddFeature(item);
  jtmb.getFeatures() = f;
  jtmb.setCodeGenOptLevel(llvm::CodeGenOptLevel::Aggressive);
  return jtmb;
}

}  // namespace

std::string host_cpu_name() { return llvm::sys::getHostCPUName().str(); }

std::string host_cpu_feature_flags() {
  std::vector<std::string> flags;
  for (auto& kv : llvm::sys::getHostCPUFeatures()) flags.push_back((kv.second ? "+" : "-") + kv.first().str());
  std::sort(flags.begin(), flags.end());
  std::string out;
  for (auto& f : flags) out += (out.empty() ? "" : ",") + f;
  return out;
}

std::vector<std::string> host_cpu_features() {
  std::vector<std::string> out;
  for (auto& kv : llvm::sys::getHostCPUFeatures())
    if (kv.second) out.push_back(kv.first().str());
  std::sort(out.begin(), out.end());
  return out;
}

struct JitKernel::Impl {
  std::unique_ptr<llvm::orc::LLJIT> jit;
  std::unique_ptr<llvm::TargetMachine> tm;
  llvm::orc::ThreadSafeContext ctx;    // shared with the JIT; outlives `copy`
  std::unique_ptr<llvm::Module> copy;  // the optimised module, kept for asm/object output
  Target target;
};

JitKernel::JitKernel(const LoweredProgram& prog, const Target& target, bool libm_math)
    : impl_(std::make_unique<Impl>()), cpu_(target.cpu) {
  init_llvm();
  impl_->target = target;
  auto jtmb = machine_builder(target);
  impl_->tm = check(jtmb.createTargetMachine(), "creating the target machine");
  impl_->ctx = llvm::orc::ThreadSafeContext(std::make_unique<llvm::LLVMContext>());
  std::unique_ptr<llvm::Module> mod = codegen_llvm(prog, *impl_->ctx.getContext(), target, libm_math);
  mod->setDataLayout(impl_->tm->createDataLayout());
  mod->setTargetTriple(impl_->tm->getTargetTriple().str());

  {
    llvm::LoopAnalysisManager lam;
    llvm::FunctionAnalysisManager fam;
    llvm::CGSCCAnalysisManager cgam;
    llvm::ModuleAnalysisManager mam;
    // The schedule already decided vectorization and unrolling; LLVM's own loop
    // vectorizer and unroller would second-guess it, bloat the code and cost compile
    // time (as in Halide, which disables them too).
    llvm::PipelineTuningOptions pto;
    pto.LoopUnrolling = false;
    pto.LoopVectorization = false;
    pto.SLPVectorization = false;
    pto.LoopInterleaving = false;
    llvm::PassBuilder pb(impl_->tm.get(), pto);
    pb.registerModuleAnalyses(mam);
    pb.registerCGSCCAnalyses(cgam);
    pb.registerFunctionAnalyses(fam);
    pb.registerLoopAnalyses(lam);
    pb.crossRegisterProxies(lam, fam, cgam, mam);
    llvm::ModulePassManager mpm = pb.buildPerModuleDefaultPipeline(llvm::OptimizationLevel::O3);
    mpm.run(*mod, mam);
  }
  // With AVX2 only: AVX-512 reads every other element in one instruction (vpermt2ps), SSE's
  // 16-byte halves take one shufps each in order.
  if (!target.avx512() && impl_->tm->getMCSubtargetInfo()->checkFeatures("+avx2")) compute_in_shuffle_order(*mod);
  if (masked_stores_are_slow(*impl_->tm, target.avx512())) split_constant_masked_stores(*mod);
  impl_->copy = llvm::CloneModule(*mod);

  impl_->jit = check(llvm::orc::LLJITBuilder().setJITTargetMachineBuilder(jtmb).create(), "creating the JIT");
  auto& jd = impl_->jit->getMainJITDylib();
  auto& es = impl_->jit->getExecutionSession();
  llvm::orc::SymbolMap rt;
  auto add = [&](const char* name, void* fn) {
    rt[es.intern(name)] = {llvm::orc::ExecutorAddr::fromPtr(fn), llvm::JITSymbolFlags::Exported};
  };
  add("tessel_parallel_for", reinterpret_cast<void*>(&tessel_parallel_for));
  add("tessel_alloc", reinterpret_cast<void*>(&tessel_alloc));
  add("tessel_free", reinterpret_cast<void*>(&tessel_free));
  add("tessel_index_error", reinterpret_cast<void*>(&tessel_index_error));
  if (auto err = jd.define(llvm::orc::absoluteSymbols(rt))) throw InternalError(llvm::toString(std::move(err)));
  // libm (expf, tanhf, erff, ...) from this process.
  jd.addGenerator(check(llvm::orc::DynamicLibrarySearchGenerator::GetForCurrentProcess(
                            impl_->jit->getDataLayout().getGlobalPrefix()),
                        "adding process symbols"));
  std::string name = prog.func.name;
  if (auto err = impl_->jit->addIRModule(llvm::orc::ThreadSafeModule(std::move(mod), impl_->ctx)))
    throw InternalError(llvm::toString(std::move(err)));
  auto addr = check(impl_->jit->lookup(name), "looking up the kernel");
  entry_ = addr.toPtr<Entry>();
}

JitKernel::~JitKernel() = default;

double JitKernel::time(void* const* args, int number) {
  entry_(args);
  auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < number; ++i) entry_(args);
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / number;
}

namespace {
std::string emit_file(llvm::TargetMachine& tm, llvm::Module& mod, llvm::CodeGenFileType type) {
  llvm::SmallVector<char, 0> buf;
  llvm::raw_svector_ostream os(buf);
  llvm::legacy::PassManager pm;
  if (tm.addPassesToEmitFile(pm, os, nullptr, type)) throw InternalError("LLVM cannot emit this file type");
  pm.run(mod);
  return std::string(buf.begin(), buf.end());
}
}  // namespace

std::string JitKernel::source() const {
  std::string ir;
  llvm::raw_string_ostream os(ir);
  impl_->copy->print(os, nullptr);
  return ir;
}

std::string JitKernel::assembly() const {
  auto m = llvm::CloneModule(*impl_->copy);
  return emit_file(*impl_->tm, *m, llvm::CodeGenFileType::AssemblyFile);
}

void JitKernel::write_object(const std::string& path) const {
  // For a shared library: position-independent, so it loads without text relocations.
  auto jtmb = machine_builder(impl_->target);
  jtmb.setRelocationModel(llvm::Reloc::PIC_);
  auto tm = check(jtmb.createTargetMachine(), "creating the target machine");
  auto m = llvm::CloneModule(*impl_->copy);
  std::string obj = emit_file(*tm, *m, llvm::CodeGenFileType::ObjectFile);
  std::error_code ec;
  llvm::raw_fd_ostream out(path, ec);
  TESSEL_USER_CHECK(!ec, "cannot write object file '", path, "': ", ec.message());
  out << obj;
}

}  // namespace tessel
