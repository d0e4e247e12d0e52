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
  bool estimate = false;  // costs from the static model (no GPU ran it)
};

class RunnerPool;
struct BuiltCandidate;

class Measurer {
 public:
  // Builds the default schedule and computes the reference outputs (in this process). The
  // default is timed like any candidate, in a worker: see the tuner.
  // GPU targets: candidates run on `runners` when they have a device; otherwise their
  // seconds are estimated (StaticModel.h) and a sample of them is checked as OpenCL by
  // `checker` (the local OpenCL runner; null: none).
  Measurer(const Workload& w, const TuneOptions& opts, RunnerPool* runners = nullptr, RunnerPool* checker = nullptr);
  // Whether GPU candidates get estimates instead of measurements.
  bool estimates() const;
  // Wall seconds spent so far building candidates, and running (or estimating) them.
  double build_seconds() const { return build_wall_; }
  double run_seconds() const { return run_wall_; }
  // `indices` number the candidates within the run (for the planted-fault test hooks).
  // A candidate whose first run is over 3x slower than `best_known` seconds is timed by
  // that run alone: a precise time of a hopeless program is not worth seconds of budget.
  std::vector<MeasureResult> measure(const std::vector<std::vector<Step>>& candidates,
                                     const std::vector<int>& indices, double best_known = 0);

 private:
  std::vector<MeasureResult> measure_gpu(const std::vector<std::vector<Step>>& candidates,
                                         const std::vector<int>& indices, double best_known);
  void export_jobs(const std::vector<BuiltCandidate>& built);
  const Workload& w_;
  TuneOptions opts_;
  std::vector<Buffer> inputs_, reference_;
  RunnerPool* runners_ = nullptr;
  RunnerPool* checker_ = nullptr;
  int64_t workload_id_ = 0;
  std::string workload_message_;  // the inputs and expected outputs, for the runners
  int built_ = 0;                 // GPU candidates built so far (every fourth estimate is checked)
  double build_wall_ = 0, run_wall_ = 0;
  int64_t exported_ = -1;         // --export-jobs: the next job id (-1: not counted yet)
  bool workload_exported_ = false;
};

// Times a built module: warm-up, then `repeat` means of `number` runs (when 0, number
// grows until one repeat lasts min_repeat_ms, and the batch that gets there is the first
// repeat). `after_batch` is called, outside the timed regions, after each batch of runs
// (the worker reports progress with it). `warm_run`: seconds of a call just made (0:
// none): it stands for the warm-up and sizes the first batch. With `flush`, each call is
// timed alone after flush() and a repeat is the mean of 3. A repeat slower than
// `enough_above` seconds (0: none) is the last.
std::vector<double> time_module(const Module& m, const std::vector<Buffer>& args, int repeat, int number,
                                double min_repeat_ms, const std::function<void()>& after_batch = {},
                                double warm_run = 0, const std::function<void()>& flush = {},
                                double enough_above = 0);

}  // namespace tessel::autotune
