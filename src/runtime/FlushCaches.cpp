// Evicts a kernel's weights before a timed call, so that it reads them from wherever they
// are in a network, where each kernel's weights were last read a whole network ago (TVM's
// enable_cpu_cache_flush). Timed warm, a kernel that reads its weights many times looks
// faster than it runs in the network; flushed with a buffer larger than the network, it
// looks slower, and the buffer takes memory the network needs (a VM may report a last-level
// cache of hundreds of MB).
#include <algorithm>
#include <cstdio>
#include <vector>

#include "tessel/build.h"

namespace tessel {

namespace {
int64_t last_level_cache_bytes() {
  int64_t bytes = 32 << 20;
  for (const char* level : {"index3", "index2"}) {
    std::string path = std::string("/sys/devices/system/cpu/cpu0/cache/") + level + "/size";
    if (std::FILE* f = std::fopen(path.c_str(), "r")) {
      long kb = 0;
      bool read = std::fscanf(f, "%ldK", &kb) == 1 && kb > 0;
      std::fclose(f);
      if (read) return int64_t(kb) << 10;
    }
  }
  return bytes;
}
}  // namespace

CacheFlusher::CacheFlusher(int64_t bytes) {
  int64_t most = 2 * last_level_cache_bytes();
  evict_.resize(size_t(bytes > 0 ? std::min(bytes, most) : most));
}

void CacheFlusher::operator()(const std::vector<Buffer>& warm) const {
  // Read and written line by line: a large memset streams past the caches.
  for (size_t i = 0; i < evict_.size(); i += 64) evict_[i] = char(evict_[i] + 1);
  float sum = 0;
  for (const Buffer& b : warm) {
    const char* p = static_cast<const char*>(b.raw());
    for (int64_t i = 0; i < b.bytes(); i += 64) sum += float(p[i]);
  }
  volatile float keep = sum;
  (void)keep;
}

}  // namespace tessel
