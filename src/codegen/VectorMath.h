#pragma once
/** \file float32 math as straight-line LLVM IR, so a vectorized loop that calls exp, log,
 * tanh, erf or sigmoid stays a vector loop (a libm call per lane does not). The same code
 * serves scalars, so a loop's vector body and its scalar tail agree. Range reduction and
 * polynomials follow Cephes (exp, log, tanh) and Numerical Recipes' erfc. Accuracy against
 * double-precision libm, over 4 million float bit patterns spread across the whole range
 * plus the special values (tests/test_vector_math.cpp), worst case in ulps (the bound the
 * test holds it to): exp 0.96 (1), log 0.76 (1), tanh 1.30 (2), erf 2.93 (3), sigmoid 2.07
 * (2.5). NaN, +-inf, 0, denormal inputs and results, overflow: as libm. */
#include "codegen/LLVMHeaders.h"

namespace tessel {

// x is a float or a vector of floats.
llvm::Value* emit_exp(llvm::IRBuilder<>& b, llvm::Value* x);
llvm::Value* emit_log(llvm::IRBuilder<>& b, llvm::Value* x);
llvm::Value* emit_tanh(llvm::IRBuilder<>& b, llvm::Value* x);
llvm::Value* emit_erf(llvm::IRBuilder<>& b, llvm::Value* x);
llvm::Value* emit_sigmoid(llvm::IRBuilder<>& b, llvm::Value* x);

}  // namespace tessel
