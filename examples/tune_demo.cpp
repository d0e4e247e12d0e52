// The main demo: tune an operator (an NCHW convolution by default) for this CPU with a small budget, write the tuning log,
// rebuild the best kernel from the log alone, and compare it with the default schedule. A 3x3 stride-1 convolution is
// tuned by Winograd's algorithm too, as `tune` does (winograd_companion), and the faster of the two is rebuilt.
//   example_tune_demo [trials] [log] [op] [shape]
#include <chrono>
#include <cstdio>
#include <cstdlib>

#include "tessel/autotune.h"
#include "tessel/ops.h"
#include "tessel/tessel.h"

using namespace tessel;
using namespace tessel::autotune;

static double seconds(const Module& m, const std::vector<Buffer>& args) {
  m(args);
  double best = 1e30;
  for (int r = 0; r < 20; ++r) {
    auto t0 = std::chrono::steady_clock::now();
    m(args);
    best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  return best;
}

int main(int argc, char** argv) {
  int trials = argc > 1 ? std::atoi(argv[1]) : 64;
  std::string log = argc > 2 ? argv[2] : "demo_tuning_log.json";
  std::remove(log.c_str());
  std::string op = argc > 3 ? argv[3] : "conv2d";
  std::string shape = argc > 4 ? argv[4] : "N=1,C=64,H=28,W=28,K=64,R=3,S=3,stride=1,pad=1";
  Workload w = make_workload(op, parse_shape(shape));
  std::printf("tuning %s on %s: %d trials, log %s\n", w.key().c_str(), Target::host().key().c_str(), trials, log.c_str());
  TuneOptions o;
  o.trials = trials;
  o.log = log;
  o.on_progress = [](const Progress& p) {
    std::printf("  [%3d/%d] best %.1f GFLOP/s (%.2f candidates/s, %d errors)\n", p.trials, p.budget, p.best_gflops,
                p.trials_per_second, p.errors);
    std::fflush(stdout);
  };
  std::vector<Workload> tasks{w};
  if (auto wino = winograd_companion(w)) {
    std::printf("also tuned as %s\n", wino->key().c_str());
    tasks.push_back(*wino);
  }
  std::vector<TaskResult> results = tune_tasks(tasks, std::vector<double>(tasks.size(), 1.0), o);
  TaskResult r = results[0];

  // Deploy side: only the log file and the workload.
  bool found = false;
  Module tuned = build_best(log, w, Target::host(), &found);
  Module dflt = build(autotune::default_schedule(w), w.args);
  std::vector<Buffer> args;
  for (auto& t : w.args) args.emplace_back(t.shape(), t.dtype()), args.back().fill_random(3);
  double st = seconds(tuned, args), sd = seconds(dflt, args);
  std::string how = "direct";
  for (const LayoutRewrite& rw : tuned.layout_rewrites())
    if (!rw.transform.empty()) how = rw.transform + " (its weights transformed once, not timed)";
  std::printf("\nbest direct schedule in the log, as C++:\n%s\n",
              Schedule::replay(w.outputs, r.best_steps).to_cpp().c_str());
  std::printf("rebuilt from the log: %s\n", how.c_str());
  std::printf("default schedule: %7.1f GFLOP/s\n", w.flops / sd / 1e9);
  std::printf("tuned (from log): %7.1f GFLOP/s  -> speed-up %.2fx over the default schedule (%d trials, %d errors)\n",
              w.flops / st / 1e9, sd / st, o.trials, r.errors);
  return found ? 0 : 1;
}
