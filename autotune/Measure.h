#pragma once
/** \file Measuring candidates. Each candidate runs in a forked worker process: it replays
 * its steps, builds, checks its output against the default schedule's on the same random
 * inputs, and times itself. A batch is built in parallel, then run one at a time. A
 * worker that fails, crashes, runs out of memory, or hangs (builds, or makes no progress
 * while running: a batch of runs of the kernel, at least one call each, takes longer than
 * the timeout) becomes an error result; the tuner goes on. A slow kernel that is not hung
 * is measured however long its repeats take together. */
#include <functional>
#include <string>
#include <vector>

#include "autotune/Records.h"
#include "tessel/autotune.h"
#include "tessel/error.h"

namespace tessel::autotune {

struct MeasureResult {
  ErrorCode error = ErrorCode::None;
  std::string message;
  std::vector<double> costs;
  double build_seconds = 0;
};

class Measurer {
 public:
  // Builds the default schedule and computes the reference outputs (in this process). The
  // default is timed like any candidate, in a worker: see the tuner.
  Measurer(const Workload& w, const TuneOptions& opts);
  // `indices` number the candidates within the run (for the planted-fault test hooks).
  // A candidate whose first run is over 3x slower than `best_known` seconds is timed by
  // that run alone: a precise time of a hopeless program is not worth seconds of budget.
  std::vector<MeasureResult> measure(const std::vector<std::vector<Step>>& candidates,
                                     const std::vector<int>& indices, double best_known = 0);

 private:
  const Workload& w_;
  TuneOptions opts_;
  std::vector<Buffer> inputs_, reference_;
};

// Times a built module: warm-up, then `repeat` means of `number` runs (number grows until
// one repeat lasts min_repeat_ms when 0). `after_batch` is called, outside the timed
// regions, after each batch of runs (the worker reports progress with it). `warm_run`:
// seconds of a call just made (0: none); one of min_repeat_ms or more stands for the
// warm-up and fixes number at 1.
std::vector<double> time_module(const Module& m, const std::vector<Buffer>& args, int repeat, int number,
                                double min_repeat_ms, const std::function<void()>& after_batch = {},
                                double warm_run = 0);

}  // namespace tessel::autotune
