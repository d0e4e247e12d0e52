#pragma once
/** \file LLVM module -> optimised machine code in this process (ORC LLJIT), plus the
 * textual IR, assembly and object file of the same optimised module. */
#include <memory>
#include <string>

#include "codegen/CodeGenLLVM.h"

namespace tessel {

// "llvm" or "llvm -mcpu=NAME -mattr=+a,-b": the host unless overridden.
TargetInfo parse_llvm_target(const std::string& target);

class JitKernel {
 public:
  // Takes ownership of the module (and its context), optimises it at O3 and JITs it.
  JitKernel(const LoweredProgram& prog, const TargetInfo& target);
  ~JitKernel();
  using Entry = int32_t (*)(void* const*);
  Entry entry() const { return entry_; }
  const std::string& llvm_ir() const { return ir_; }
  std::string assembly() const;
  void write_object(const std::string& path) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  Entry entry_ = nullptr;
  std::string ir_;
};

}  // namespace tessel
