// A fixed pool of worker threads for parallel loops. The calling thread works too, so a
// 2-thread run uses one worker. Workers spin briefly before sleeping:
// kernels launch parallel loops back to back and a futex wake-up per launch would cost
// more than small loop bodies.
#include <pthread.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdlib>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "runtime/Runtime.h"
#include "tessel/build.h"
#include "tessel/error.h"

namespace tessel {
namespace {

// A spin-wait's pause: the caller waits for its workers' last runs this way, as a yield (a
// system call) returns later than the short wait it stands in for.
inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#else
  std::this_thread::yield();
#endif
}

class ThreadPool {
 public:
  static ThreadPool& get() {
    static ThreadPool pool;
    return pool;
  }

  int size() const { return threads_; }

  void resize(int n) {
    TESSEL_USER_CHECK(n >= 1, "set_num_threads(", n, "): need at least one thread");
    std::lock_guard<std::mutex> run(run_mu_);
    stop_workers();
    threads_ = n;
    start_workers();
  }

  void run(void (*task)(int64_t, int64_t, void*), void* closure, int64_t begin, int64_t end) {
    int64_t n = end - begin;
    if (n <= 0) return;
    int chunks = int(std::min<int64_t>(threads_, n));
    if (chunks == 1 || in_worker_) {
      task(begin, end, closure);
      return;
    }
    std::lock_guard<std::mutex> run(run_mu_);
    task_ = task, closure_ = closure, chunks_ = chunks;
    grain_ = std::max<int64_t>(1, n / (4 * int64_t(chunks)));
    for (int c = 0; c < chunks; ++c) {
      shares_[size_t(c)].next.store(begin + n * c / chunks, std::memory_order_relaxed);
      shares_[size_t(c)].end = begin + n * (c + 1) / chunks;
    }
    pending_.store(chunks - 1, std::memory_order_relaxed);
    launch(uint64_t(chunks));
    take_runs(0, task, closure);
    while (pending_.load(std::memory_order_acquire) != 0) cpu_relax();
  }

 private:
  ThreadPool() {
    int n = int(std::thread::hardware_concurrency());
    if (const char* env = std::getenv("TESSEL_NUM_THREADS")) n = std::max(1, std::atoi(env));
    threads_ = std::max(1, n);
    start_workers();
    pthread_atfork(nullptr, nullptr, [] { get().after_fork_in_child(); });
  }

  // A forked child (the tuner's measurement worker) has only the forking thread: forget
  // the parent's workers without touching their (copied) locks, and start fresh ones.
  void after_fork_in_child() {
    for (auto& t : workers_) t.detach();
    workers_.clear();
    new (&mu_) std::mutex();
    new (&run_mu_) std::mutex();
    new (&cv_) std::condition_variable();
    pending_.store(0);
    sleepers_.store(0);
    start_workers();
  }
  ~ThreadPool() { stop_workers(); }

  // Each thread has a share of the loop, the same contiguous part of every loop of the same
  // length, and runs it in runs of grain_ iterations (about four per share); then it takes
  // runs left in the others' shares. Kernels one after another mostly find their inputs
  // in the cache of the core that wrote them (one shared counter dealt runs out in no fixed
  // order: MobileNetV2 ran 2.99-3.01 ms at 2 threads, 2.63-2.67 with shares; ResNet-50 and
  // BERT within 2%), and on a shared machine, where one core is often slowed down, the other
  // still takes over its runs instead of waiting for it (shares that are not taken over made
  // BERT's layer 5% slower).
  void take_runs(int id, void (*task)(int64_t, int64_t, void*), void* closure) {
    for (int k = 0; k < chunks_; ++k) {
      Share& sh = shares_[size_t((id + k) % chunks_)];
      for (int64_t i; (i = sh.next.fetch_add(grain_, std::memory_order_relaxed)) < sh.end;)
        task(i, std::min(i + grain_, sh.end), closure);
    }
  }

  void start_workers() {
    stopping_ = false;
    shares_ = std::make_unique<Share[]>(size_t(threads_));
    uint64_t gen = number(launch_.load());  // read before the threads exist, so no launch is missed
    for (int w = 1; w < threads_; ++w) workers_.emplace_back([this, w, gen] { worker(w, gen); });
  }
  void stop_workers() {
    stopping_ = true;
    launch(0);
    for (auto& t : workers_) t.join();
    workers_.clear();
  }

  // A launch is one word, its number and how many threads take part, so a worker that is not
  // one of them never reads the fields that the next launch may be writing. The launcher takes
  // the lock and wakes only when a worker has gone to sleep: a spinning worker sees the word.
  static uint64_t number(uint64_t word) { return word >> 16; }
  static int participants(uint64_t word) { return int(word & 0xffff); }
  void launch(uint64_t chunks) {
    launch_.store((number(launch_.load(std::memory_order_relaxed)) + 1) << 16 | chunks);
    if (sleepers_.load() > 0) {
      { std::lock_guard<std::mutex> lk(mu_); }
      cv_.notify_all();
    }
  }

  void worker(int id, uint64_t seen) {
    in_worker_ = true;
    for (;;) {
      uint64_t now = launch_.load(std::memory_order_acquire);
      for (int i = 0; i < kSpins && number(now) == seen; ++i) {
        std::this_thread::yield();
        now = launch_.load(std::memory_order_acquire);
      }
      if (number(now) == seen) {
        std::unique_lock<std::mutex> lk(mu_);
        sleepers_.fetch_add(1);
        cv_.wait(lk, [&] { return number(launch_.load()) != seen; });
        sleepers_.fetch_sub(1);
        now = launch_.load();
      }
      seen = number(now);
      if (stopping_.load()) return;
      if (id < participants(now)) {
        take_runs(id, task_, closure_);
        pending_.fetch_sub(1, std::memory_order_release);
      }
    }
  }

  int threads_ = 1;
  std::vector<std::thread> workers_;
  std::mutex mu_, run_mu_;
  std::condition_variable cv_;
  static constexpr int kSpins = 20000;  // a worker's yields before it sleeps
  // The words that one thread spins on while another writes each have a cache line of their own:
  // sharing a line with the launch's fields, the launcher's writes and the spinning reads took the
  // line from each other.
  alignas(64) std::atomic<uint64_t> launch_{0};
  alignas(64) std::atomic<int> pending_{0};
  alignas(64) std::atomic<int> sleepers_{0};
  std::atomic<bool> stopping_{false};
  void (*task_)(int64_t, int64_t, void*) = nullptr;
  void* closure_ = nullptr;
  struct alignas(64) Share {
    std::atomic<int64_t> next{0};
    int64_t end = 0;
  };
  std::unique_ptr<Share[]> shares_;
  int64_t grain_ = 1;
  int chunks_ = 1;
  static thread_local bool in_worker_;
};

thread_local bool ThreadPool::in_worker_ = false;

}  // namespace

void set_num_threads(int n) { ThreadPool::get().resize(n); }
int num_threads() { return ThreadPool::get().size(); }

void parallel_for(int64_t n, const std::function<void(int64_t, int64_t)>& body) {
  using Body = std::function<void(int64_t, int64_t)>;
  auto task = [](int64_t b, int64_t e, void* f) { (*static_cast<const Body*>(f))(b, e); };
  ThreadPool::get().run(task, const_cast<Body*>(&body), 0, n);
}

}  // namespace tessel

extern "C" void tessel_parallel_for(void (*task)(int64_t, int64_t, void*), void* closure, int64_t begin,
                                    int64_t end) {
  tessel::ThreadPool::get().run(task, closure, begin, end);
}
