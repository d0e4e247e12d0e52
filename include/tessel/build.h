#pragma once
// Lowering and building: a Schedule plus its argument list becomes a loop program
// (lower) and then a callable kernel for this CPU (build, through LLVM and ORC JIT).
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "tessel/buffer.h"
#include "tessel/resources.h"
#include "tessel/schedule.h"
#include "tessel/target.h"

namespace tessel {

struct LowerOptions {
  // Print the IR after every pass to stderr (or to `dump` if set).
  bool dump_passes = false;
  std::function<void(const std::string& pass, const std::string& ir)> dump;
  // Tests only: leave out barrier insertion, to show that the barrier tests can fail.
  bool skip_thread_sync = false;
  // A checked build (CPU targets): every read that lowering cannot prove inside its tensor
  // (reads that it proves outside are always an error) is checked when the kernel runs; one
  // outside prints the same message and stops the program (abort). Slower: for debugging.
  bool check_bounds = false;
};

// A lowered loop program: its arguments (inputs and outputs, in call order) and body.
struct LoweredFunc {
  std::string name;
  std::vector<Tensor> args;
  Stmt body;
  std::vector<std::string> index_errors;  // check_bounds: the message of each CheckIndex, by id
  std::string str() const;  // readable loops
};

// For this CPU, or for `target`. On a GPU target the program's root stages are its kernels
// and its bound loops their threads (Module::source() prints the kernels).
LoweredFunc lower(const Schedule& sch, const std::vector<Tensor>& args,
                  const std::string& name = "kernel", const LowerOptions& opts = {});
LoweredFunc lower(const Schedule& sch, const std::vector<Tensor>& args, const Target& target,
                  const std::string& name = "kernel", const LowerOptions& opts = {});

struct BuildOptions {
  std::string name = "kernel";
  Target target = Target::host();  // or Target::parse("cuda -arch=sm_90"), "opencl", "llvm -mcpu=..."
  // CPU: exp, log, tanh, erf and sigmoid of float32 through libm, lane by lane, instead of
  // Tessel's vector code (1-3 ulp from libm; see src/codegen/VectorMath.h).
  bool libm_math = false;
  LowerOptions lower;
};

struct ArgSpec {
  std::string name;
  std::vector<int64_t> shape;
  DType dtype;
};

class ModuleImpl;

// A built kernel. Call it with one Buffer per argument, in the order given to build().
class Module {
 public:
  Module() = default;
  explicit Module(std::shared_ptr<ModuleImpl> impl) : impl_(std::move(impl)) {}

  void operator()(const std::vector<Buffer>& args) const;
  template <typename... B>
  void operator()(const Buffer& first, const B&... rest) const {
    (*this)(std::vector<Buffer>{first, rest...});
  }
  // Call without checks, for timing loops: one data pointer per argument.
  void call_raw(void* const* args) const;
  // GPU targets: queues the kernel on device buffers (DeviceMemory handles), one per argument
  // in build() order, and returns without waiting: a chain of kernels runs without the host.
  void launch(const std::vector<uint64_t>& device_args) const;

  // Inputs whose layout the schedule rewrote (Schedule::rewrite_layout), weights that stay
  // constant between calls. Calls take them in the caller's layout: the first call with a
  // buffer copies it into the kernel's layout, later calls with that buffer reuse the copy,
  // a call with another buffer copies again. After changing one in place, call prepare().
  std::vector<LayoutRewrite> layout_rewrites() const;
  void prepare(const std::vector<Buffer>& args) const;
  double prepare_seconds() const;
  // The buffers the compiled kernel itself reads for these arguments: each rewritten input as
  // its prepared copy (made first if needed), the others as given. What a saved network stores.
  std::vector<Buffer> kernel_buffers(const std::vector<Buffer>& args) const;
  // Another Module running the same compiled kernel with copies of its own: for one kernel
  // called with several constant inputs (a network's layers of one shape), each keeping its
  // prepared weights.
  Module instance() const;  // the last copy's time; time() leaves it out, as oneDNN's reorder is

  const std::string& name() const;
  const std::vector<ArgSpec>& args() const;
  const LoweredFunc& lowered() const;
  const Target& target() const;
  std::string source() const;     // what was compiled: optimised LLVM IR, CUDA C or OpenCL C
  std::string llvm_ir() const;    // optimised LLVM IR (llvm targets)
  std::string assembly() const;   // host assembly, or PTX
  KernelResources resources() const;
  std::string device() const;     // where it runs: "cpu znver4", "opencl pthread-znver4", ...
  // Mean seconds of one call over `number` runs, timed where it runs (device events on a
  // GPU: the copies to and from the host are not counted), after a warm-up run.
  double time(const std::vector<Buffer>& args, int number = 10) const;
  // Writes an object file, or a shared library, plus a C header declaring the entry
  // point `int32_t <name>(void* const* args)`, so deploy binaries need no JIT (llvm targets).
  // The entry point takes rewritten inputs in the kernel's layout; the header says which,
  // and declares tessel_rewrite_layout (in the library) that makes them.
  void export_object(const std::string& path) const;
  void export_library(const std::string& so_path, const std::string& header_path) const;
  double compile_seconds() const;  // lowering + LLVM optimisation + JIT, or + NVRTC / the OpenCL compiler

 private:
  friend Module with_transformed_input(const Module&, int, const ArgSpec&, const std::string&,
                                       std::function<void(const void*, Buffer&)>);
  std::shared_ptr<ModuleImpl> impl_;
};

Module build(const Schedule& sch, const std::vector<Tensor>& args, const BuildOptions& opts = {});

// Threads used by parallel loops (default: all cores, or TESSEL_NUM_THREADS).
void set_num_threads(int n);
int num_threads();
// Evicts a kernel's weights from the CPU caches before a timed call, as a network does
// between two calls of one kernel: it reads and writes `bytes` line by line (what the rest
// of the network reads in between; 0, or more than twice the last-level cache: twice that
// cache), then reads `warm` back in. The kernel timed next then reads everything else (its
// weights) from memory where the network's other data would have evicted them, and its
// inputs from the caches, where the kernel before left them. The buffer lives as long as
// the flusher.
class CacheFlusher {
 public:
  explicit CacheFlusher(int64_t bytes = 0);
  void operator()(const std::vector<Buffer>& warm) const;
  int64_t bytes() const { return int64_t(evict_.size()); }

 private:
  mutable std::vector<char> evict_;
};
// Runs body(begin, end) over runs of [0, n) on those threads: a vendor library called between
// Tessel's kernels (graph::compile's oneDNN candidates) works on them rather than on threads of
// its own, which would spin, unyielding, while Tessel's next kernel runs.
void parallel_for(int64_t n, const std::function<void(int64_t, int64_t)>& body);

// What LLVM says about this machine: "znver4 +avx512f ...".
std::string host_cpu_name();
std::vector<std::string> host_cpu_features();

}  // namespace tessel
