#pragma once
// Timing and reporting shared by the benchmarks: median of repeated runs after a warm-up,
// interleaved rounds across implementations, one JSON object per line, and ratios between
// implementations of the same case.
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <map>
#include <string>
#include <vector>

namespace bench {

// OPENBLAS_CORETYPE / OPENBLAS_L2_SIZE pin OpenBLAS to slower kernels on these machines,
// and OpenBLAS reads them when it is loaded: re-run this binary without them.
inline void unset_openblas_overrides(char** argv) {
  const char* core = std::getenv("OPENBLAS_CORETYPE");
  const char* l2 = std::getenv("OPENBLAS_L2_SIZE");
  if (!core && !l2) return;
  std::fprintf(stderr, "# unsetting OPENBLAS_CORETYPE=%s OPENBLAS_L2_SIZE=%s and restarting\n", core ? core : "",
               l2 ? l2 : "");
  unsetenv("OPENBLAS_CORETYPE");
  unsetenv("OPENBLAS_L2_SIZE");
  execv("/proc/self/exe", argv);
  std::perror("execv");
  std::exit(1);
}

// Median seconds of fn over at least `min_runs` runs and `min_seconds` of runs.
inline double time_median(const std::function<void()>& fn, int min_runs = 5, double min_seconds = 0.3) {
  fn();  // warm-up: caches, page faults, JIT-ed code
  std::vector<double> t;
  double total = 0;
  while (int(t.size()) < min_runs || total < min_seconds) {
    auto a = std::chrono::steady_clock::now();
    fn();
    double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - a).count();
    t.push_back(s);
    total += s;
    if (t.size() >= 200) break;
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

// Seconds of each of several implementations of one case, timed in interleaved rounds
// (a b c, a b c, ...), each keeping its best round median: a slow spell of a shared
// machine then costs every implementation a round instead of biasing whichever ran in it.
using Impls = std::vector<std::pair<std::string, std::function<void()>>>;
inline std::map<std::string, double> time_interleaved(const Impls& impls, int rounds = 3) {
  std::map<std::string, double> best;
  for (int r = 0; r < rounds; ++r)
    for (auto& [name, fn] : impls) {
      double s = time_median(fn, 5, 0.1);
      if (!best.count(name) || s < best[name]) best[name] = s;
    }
  return best;
}

// Results of one benchmark. A benchmark may run its cases several times over (passes,
// minutes apart): each line printed is one pass's figure, and ratios and geomeans use each
// implementation's best pass, so that a slow spell of a shared machine during one pass
// does not decide the comparison.
class Report {
 public:
  explicit Report(std::string bench, int planned_passes = 1)
      : bench_(std::move(bench)), planned_passes_(planned_passes), passes_(1) {}
  void next_pass() { passes_.emplace_back(); }
  const std::string& name() const { return bench_; }
  void add(const std::string& shape, const std::string& impl, int threads, double gflops,
           const std::string& extra = "") {
    std::string pass = planned_passes_ > 1 ? ", \"pass\": " + std::to_string(passes_.size()) : "";
    std::printf("{\"bench\": \"%s\", \"shape\": \"%s\", \"impl\": \"%s\", \"threads\": %d, \"gflops\": %.1f%s%s}\n",
                bench_.c_str(), shape.c_str(), impl.c_str(), threads, gflops, pass.c_str(), extra.c_str());
    std::fflush(stdout);
    passes_.back()[{shape, threads}][impl] = gflops;
  }
  // {"bench": ..., "shape": ..., "threads": ..., "ratio": "a/b", "value": x}
  void ratio(const std::string& a, const std::string& b) {
    for (auto& [key, impls] : best())
      if (impls.count(a) && impls.count(b) && impls[b] > 0)
        std::printf("{\"bench\": \"%s\", \"shape\": \"%s\", \"threads\": %d, \"ratio\": \"%s/%s\", \"value\": %.3f}\n",
                    bench_.c_str(), key.first.c_str(), key.second, a.c_str(), b.c_str(), impls[a] / impls[b]);
    std::fflush(stdout);
  }
  // Geometric mean of a/b over all shapes at `threads`, of the best passes or of pass
  // `pass` (1-based).
  double geomean(const std::string& a, const std::string& b, int threads, int pass = 0) {
    double logsum = 0;
    int n = 0;
    for (auto& [key, impls] : pass ? passes_[pass - 1] : best())
      if (key.second == threads && impls.count(a) && impls.count(b)) logsum += std::log(impls[a] / impls[b]), ++n;
    return n ? std::exp(logsum / n) : 0;
  }

 private:
  using Results = std::map<std::pair<std::string, int>, std::map<std::string, double>>;
  Results best() const {
    Results r;
    for (auto& pass : passes_)
      for (auto& [key, impls] : pass)
        for (auto& [impl, gflops] : impls) r[key][impl] = std::max(r[key][impl], gflops);
    return r;
  }
  std::string bench_;
  int planned_passes_;
  std::vector<Results> passes_;
};

}  // namespace bench
