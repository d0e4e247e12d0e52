// What a checked build's kernel calls when a read leaves its tensor.
#include <cstdio>
#include <cstdlib>

#include "runtime/Runtime.h"

extern "C" void tessel_index_error(const char* message) {
  std::fprintf(stderr, "tessel: checked kernel stopped: %s\n", message);
  std::fflush(stderr);
  std::abort();
}
