// Scratch memory of generated kernels (tessel_alloc/tessel_free), kept for reuse.
//
// A kernel allocates its intermediate buffers (a padded input, a packed operand) on every
// call and frees them on return. Large blocks come from fresh mmap pages, so every call
// would page-fault its way through them again: for a ResNet-50 3x3 convolution that costs
// a fifth of the run time. Freed blocks are kept here instead and handed to the next call
// that asks for at most their size (as TVM's workspace pool does), up to a bounded total.
#include <pthread.h>

#include <cstdlib>
#include <list>
#include <mutex>
#include <new>
#include <unordered_map>

#include "runtime/Runtime.h"

namespace {

constexpr size_t kAlign = 64;
constexpr size_t kMaxKeptBytes = size_t(512) << 20;  // freed blocks kept for reuse, at most

class Workspace {
 public:
  static Workspace& get() {
    static Workspace w;
    return w;
  }

  void* alloc(size_t bytes) {
    size_t n = (bytes + kAlign - 1) / kAlign * kAlign;
    {
      std::lock_guard<std::mutex> lk(mu_);
      // The smallest kept block that fits and wastes at most half of itself.
      auto best = free_.end();
      for (auto it = free_.begin(); it != free_.end(); ++it)
        if (it->second >= n && it->second <= 2 * n && (best == free_.end() || it->second < best->second)) best = it;
      if (best != free_.end()) {
        void* p = best->first;
        size_t size = best->second;
        kept_ -= size;
        free_.erase(best);
        live_[p] = size;
        return p;
      }
    }
    void* p = std::aligned_alloc(kAlign, n);
    if (!p) std::abort();  // the kernel has no way to report it; out of memory is fatal
    std::lock_guard<std::mutex> lk(mu_);
    live_[p] = n;
    return p;
  }

  void release(void* p) {
    if (!p) return;
    std::lock_guard<std::mutex> lk(mu_);
    auto it = live_.find(p);
    if (it == live_.end()) return std::free(p);
    free_.emplace_front(p, it->second);  // most recently used first: still warm in cache
    kept_ += it->second;
    live_.erase(it);
    while (kept_ > kMaxKeptBytes) {
      kept_ -= free_.back().second;
      std::free(free_.back().first);
      free_.pop_back();
    }
  }

 private:
  Workspace() {
    // A forked child (the tuner's measurement worker) may have been forked while another
    // thread held the lock: give the child a fresh one.
    pthread_atfork(nullptr, nullptr, [] { new (&get().mu_) std::mutex(); });
  }
  // The kept blocks go with the process; freeing them at exit is what tells a leak checker
  // they were kept, not lost (LeakSanitizer reported them).
  ~Workspace() {
    for (auto& [p, n] : free_) std::free(p);
  }

  std::mutex mu_;
  std::list<std::pair<void*, size_t>> free_;  // kept blocks, most recently freed first
  std::unordered_map<void*, size_t> live_;   // blocks handed out, with their sizes
  size_t kept_ = 0;
};

}  // namespace

extern "C" void* tessel_alloc(int64_t bytes) { return Workspace::get().alloc(size_t(bytes > 0 ? bytes : 1)); }

extern "C" void tessel_free(void* p) { Workspace::get().release(p); }
