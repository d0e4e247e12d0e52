#pragma once
/** \file LLVM module -> optimised machine code in this process (ORC LLJIT), plus the
 * textual IR, assembly and object file of the same optimised module: the CPU Kernel. */
#include <memory>
#include <string>

#include "codegen/CodeGenLLVM.h"
#include "runtime/Kernel.h"

namespace tessel {

// Every feature LLVM knows of this CPU, "+avx2,-avx512f,...": the disabled ones too, so that
// a virtual machine that hides AVX-512 from a znver4 CPU does not get AVX-512 code.
std::string host_cpu_feature_flags();

class JitKernel : public Kernel {
 public:
  // Generates the module, optimises it at O3 and JITs it (libm_math: see BuildOptions).
  JitKernel(const LoweredProgram& prog, const Target& target, bool libm_math = false);
  ~JitKernel() override;
  void call(void* const* args) override { entry_(args); }
  double time(void* const* args, int number) override;
  std::string source() const override;  // printed when asked: a tuning build never is
  std::string assembly() const override;
  std::string device() const override { return "cpu " + cpu_; }
  void write_object(const std::string& path) const override;

 private:
  using Entry = int32_t (*)(void* const*);
  struct Impl;
  std::unique_ptr<Impl> impl_;
  Entry entry_ = nullptr;
  std::string cpu_;
};

}  // namespace tessel
