#pragma once
/** \file Lowered loop program -> LLVM IR for the host CPU.
 *
 * The entry point is `i32 name(ptr args)` where args[i] is the data pointer of argument
 * i. It calls `name_impl` whose buffer parameters are noalias, so LLVM may keep
 * accumulators in registers. Each parallel loop is outlined into a function
 * `void(i64 begin, i64 end, ptr closure)` run by tessel_parallel_for on the thread pool. */
#include <memory>
#include <string>

#include "passes/Lower.h"
#include "tessel/target.h"

namespace llvm {
class LLVMContext;
class Module;
}  // namespace llvm

namespace tessel {

// libm_math: float32 exp, log, tanh, erf and sigmoid call libm per lane (VectorMath.h otherwise).
std::unique_ptr<llvm::Module> codegen_llvm(const LoweredProgram& prog, llvm::LLVMContext& ctx, const Target& target,
                                           bool libm_math = false);

}  // namespace tessel
