#pragma once
/** \file The lowering passes, one per file, in the order Lower.cpp runs them. */
#include <map>
#include <string>
#include <vector>

#include "ir/IR.h"

namespace tessel {

struct ArgBuffer {
  Operation op;  // the tensor passed in
  Var buffer;    // its data pointer inside the kernel
};

// Realize/TensorLoad/TensorStore -> Allocate/Load/Store on flat buffers, row-major, with
// storage_align honoured. `args` are the kernel's arguments; `align` per op name lists
// (dimension, factor, offset).
Stmt storage_flatten(const Stmt& s, const std::vector<ArgBuffer>& args,
                     const std::map<std::string, std::vector<std::pair<int, std::pair<int64_t, int64_t>>>>& align);
// Drops conditions that always hold within their loops and splits guarded loops so the
// bulk of their iterations runs without the guard (loop partitioning).
Stmt remove_true_guards(const Stmt& s);
// Vectorized loops -> Ramp/Broadcast vector code.
Stmt vectorize_loops(const Stmt& s);
// Unrolled loops and loops under pragma auto_unroll_max_step -> straight-line code.
Stmt unroll_loops(const Stmt& s);
// Skippable guards that partitioning and unrolling left undecided: one check in front of
// a loop they guard whole, dropped elsewhere (the guarded code is harmless where they fail).
Stmt place_skippable_guards(const Stmt& s);
// Reuses scratch buffers whose lifetimes do not overlap; hoists constant-size
// allocations out of serial loops.
Stmt storage_rewrite(const Stmt& s);

}  // namespace tessel
