#pragma once
/** \file Functions generated kernels call. Their addresses are given to the JIT, and a
 * deploy library links them from libtessel_runtime. */
#include <cstdint>

extern "C" {
// Runs task(b, e, closure) over [begin, end) split into one contiguous chunk per thread.
void tessel_parallel_for(void (*task)(int64_t, int64_t, void*), void* closure, int64_t begin, int64_t end);
void* tessel_alloc(int64_t bytes);  // 64-byte aligned
void tessel_free(void* p);
// Copies `src` (`ndim` dimensions of `shape`, elements of `elem_bytes`) into `dst` with
// dimension `dim` cut into blocks of `block`: the block index first, the position in the
// block last, a short last block zero-filled (the layout of Schedule::rewrite_layout).
// A checked build's read outside its tensor: prints the message and stops the program.
[[noreturn]] void tessel_index_error(const char* message);
void tessel_rewrite_layout(const void* src, void* dst, int32_t ndim, const int64_t* shape, int32_t dim,
                           int64_t block, int32_t elem_bytes);
}
