#pragma once
/** \file Functions generated kernels call. Their addresses are given to the JIT, and a
 * deploy library links them from libtessel_runtime. */
#include <cstdint>

extern "C" {
// Runs task(b, e, closure) over [begin, end) split into one contiguous chunk per thread.
void tessel_parallel_for(void (*task)(int64_t, int64_t, void*), void* closure, int64_t begin, int64_t end);
void* tessel_alloc(int64_t bytes);  // 64-byte aligned
void tessel_free(void* p);
}
