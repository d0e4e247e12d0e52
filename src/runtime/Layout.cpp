// The copy a layout rewrite prepares: run once per weights buffer, not per call.
#include <cstring>

#include "runtime/Runtime.h"

extern "C" void tessel_rewrite_layout(const void* src, void* dst, int32_t ndim, const int64_t* shape, int32_t dim,
                                      int64_t block, int32_t elem_bytes) {
  // src is [outer][n][inner]; dst is [ceil(n / block)][outer][inner][block].
  int64_t outer = 1, inner = 1, n = shape[dim];
  for (int32_t d = 0; d < dim; ++d) outer *= shape[d];
  for (int32_t d = dim + 1; d < ndim; ++d) inner *= shape[d];
  const char* in = static_cast<const char*>(src);
  char* out = static_cast<char*>(dst);
  for (int64_t b = 0; b * block < n; ++b)
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t i = 0; i < inner; ++i)
        for (int64_t j = 0; j < block; ++j, out += elem_bytes) {
          int64_t x = b * block + j;
          if (x < n) std::memcpy(out, in + ((o * n + x) * inner + i) * elem_bytes, size_t(elem_bytes));
          else std::memset(out, 0, size_t(elem_bytes));
        }
}
