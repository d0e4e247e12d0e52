#pragma once
/** \file Masked stores with constant masks as plain stores, on CPUs where a masked store is slow.
 *
 * The last vector of a row that ends in part of a machine vector (the 6 columns of a 14-wide
 * row after one vector of 8) is stored with a constant mask: one instruction where the pieces
 * take two or three. On most CPUs that is the better trade, but AMD's Zen 3 and Zen 4 run an
 * AVX `vmaskmovps` store as microcode (LLVM's scheduling model: 42 micro-ops, one every 12
 * cycles), and depthwise convolutions that store such a vector per output row ran 1.4-1.8x
 * slower for it. The pass asks LLVM's scheduling model of the target CPU, so the choice
 * follows the CPU rather than a list of names. */
#include "codegen/LLVMHeaders.h"

namespace tessel {

// True where a 32-byte masked store costs the target CPU more than the three plain stores of
// its widest split (4 + 2 + 1 lanes); false with AVX-512, whose masked stores are k-masked moves.
bool masked_stores_are_slow(const llvm::TargetMachine& tm, bool avx512);

// Replaces every masked store whose mask is a constant by plain stores of its runs of active
// lanes, in power-of-two pieces, the widest first (7 lanes: 4 + 2 + 1).
void split_constant_masked_stores(llvm::Module& module);

}  // namespace tessel
