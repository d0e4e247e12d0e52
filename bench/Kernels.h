#pragma once
// Running Tessel kernels in the benchmarks: random arguments for a workload, and a kernel
// call on them as a function the timing harness can run.
#include <functional>
#include <vector>

#include "tessel/autotune.h"
#include "tessel/tessel.h"

namespace bench {

inline std::vector<tessel::Buffer> make_args(const tessel::autotune::Workload& w) {
  std::vector<tessel::Buffer> args;
  for (size_t i = 0; i < w.args.size(); ++i) {
    args.emplace_back(w.args[i].shape(), w.args[i].dtype());
    args.back().fill_random(i + 1);
  }
  return args;
}

// The module and the arguments must outlive the returned function.
inline std::function<void()> runner(const tessel::Module& m, const std::vector<tessel::Buffer>& args) {
  std::vector<void*> p;
  for (auto& b : args) p.push_back(b.raw());
  return [&m, p]() mutable { m.call_raw(p.data()); };
}

}  // namespace bench
