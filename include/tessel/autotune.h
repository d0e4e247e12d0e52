#pragma once
// The autotuner: derives a search space from a compute definition alone (sketches),
// explores it with evolutionary search ranked by an XGBoost cost model, measures
// candidates in isolated worker processes, and appends every measurement to a JSON-lines
// tuning log that deploy code reads back to rebuild the best kernel without tuning.
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "tessel/build.h"
#include "tessel/schedule.h"
#include "tessel/target.h"
#include "tessel/tensor.h"

namespace tessel::autotune {

// A computation to tune: its argument tensors (inputs then outputs), a readable key
// (operator, shapes, dtype, layout) and the work it does.
struct Workload {
  std::string op;                        // "matmul", "conv2d", ... or a custom name
  std::map<std::string, int64_t> shape;  // the op's parameters, e.g. M, N, K
  DType dtype = float32;
  std::string layout;                    // "NCHW16c" for blocked convolutions, else ""
  std::vector<Tensor> args;              // inputs, then outputs
  std::vector<Tensor> outputs;
  // Inputs that stay constant between calls (the weights, at inference): the CPU search
  // may store them in a blocked layout that the built Module prepares once (rewrite_layout).
  std::vector<std::string> constants;
  double flops = 0;
  std::string key() const;               // "conv2d[C=64,H=56,...]float32/NCHW16c"
  std::string hash() const;              // 16 hex digits of the key
};

// Library operators by name; `shape` names their parameters (tune --list-ops prints them).
// The weights of conv2d, depthwise_conv2d and dense are constants; the right-hand side of
// matmul and batch_matmul is one with const_b=1.
Workload make_workload(const std::string& op, const std::map<std::string, int64_t>& shape, DType dtype = float32);
// Operators make_workload knows, with their parameters and defaults.
std::vector<std::pair<std::string, std::string>> list_ops();
// The same convolution (conv2d or conv2d_nhwc) by Winograd's F(m x m, 3x3) ("conv2d_winograd" or
// "conv2d_winograd_nhwc", its weights transformed), where it applies on `target`: 3x3, stride 1,
// channels in whole vectors, images of 14x14 and larger. `tune` tunes it beside the convolution;
// build_best builds it where its record is faster, as a Module that takes the caller's weights
// and transforms them once.
std::optional<Workload> winograd_companion(const Workload& w, const Target& target = Target::host());
// A user's own computation; flops is used for GFLOP/s reporting (0 = report time only).
Workload custom_workload(const std::string& name, const std::vector<Tensor>& inputs,
                         const std::vector<Tensor>& outputs, double flops = 0,
                         const std::map<std::string, int64_t>& shape = {});
// The default schedule of a workload (ops::default_schedule, its constants rewritten).
Schedule default_schedule(const Workload& w, const Target& target = Target::host());
// Parses "M=1024,N=1024,K=1024"; throws tessel::Error naming the bad item.
std::map<std::string, int64_t> parse_shape(const std::string& text);

// The machine a measurement is valid for (its key names the CPU or GPU architecture).
using tessel::Target;

struct Progress {
  std::string task;
  int trials = 0, budget = 0, errors = 0;
  double best_gflops = 0, best_seconds = 0;
  double trials_per_second = 0, eta_seconds = 0;
  bool estimated = false;  // best_gflops is the static GPU model's estimate
};

struct TuneOptions {
  Target target = Target::host();  // what candidates are built for and the log is keyed by
  int trials = 200;               // measurement budget (all tasks together)
  int per_round = 16;             // candidates measured per round
  std::string log;                // tuning log (JSON lines); appended record by record
  bool resume = false;            // reload `log`: retrain, never re-measure recorded candidates
  double timeout = 10;            // seconds a candidate may take to build, or one batch of its runs
                                  // (correctness run, warm-up, a timing repeat) to finish
  int repeat = 3;                 // timing repeats (each the mean of `number` runs)
  int number = 0;                 // runs per repeat; 0 = as many as min_repeat_ms needs
  double min_repeat_ms = 40;
  // Each timed call after a CacheFlusher of flush_bytes (what the rest of the network reads;
  // 0: twice the last-level cache): the weights evicted as in a network (graph::tune sets
  // both); a repeat is then the mean of 3 calls.
  bool flush_caches = false;
  int64_t flush_bytes = 0;
  uint64_t seed = 1;
  int threads = 0;                // threads kernels run with; 0 = all cores
  int build_workers = 0;          // candidates compiled at once; 0 = cores
  std::string cost_model_in;      // warm-start the cost model from this file
  std::string cost_model_out;     // save the trained model here at the end
  bool use_cost_model = true;     // false: random search (same space, same budget)
  // Logs of other workloads on this target: their records train the cost model from the
  // first round on (transfer). Records of the workloads being tuned are skipped (see resume).
  std::vector<std::string> history;
  int population = 256;           // evolutionary search population
  int generations = 4;
  double eps_greedy = 0.1;        // share of each round drawn at random
  int remeasure_top = 3;          // the finals: the best few (and the default) measured again
  std::function<void(const Progress&)> on_progress;
  // Test hooks: a candidate (by index in the run) that crashes or hangs in its worker, or
  // hangs while it builds. A slow one pauses 0.6 x timeout before its first run and after
  // each batch of runs: long in all, never hung.
  int plant_crash_at = -1, plant_hang_at = -1, plant_slow_at = -1, plant_build_hang_at = -1;
  // GPU targets: commands that start a tessel-runner each (one per GPU), e.g. "ssh gpu1
  // /opt/tessel/bin/tessel-runner cuda"; empty: the local runner. With no device anywhere,
  // a CUDA tuning estimates (see TaskResult::estimated).
  std::vector<std::string> runners;
  // GPU targets: also write every built candidate as a runner job to this directory
  // (jobs.txt, the runner's input; estimates.tsv, the static model's seconds per job).
  std::string export_jobs;
};

// Where a task's share of the run's wall time went, in seconds: building candidates (in
// parallel workers), running them (correctness run and timing), the search (lowering
// candidates for their features, evolution), training the cost model; `total` includes the
// rest (logging, bookkeeping).
struct TimeSpent {
  double build = 0, run = 0, search = 0, model = 0, total = 0;
};

struct TaskResult {
  std::string task, key;
  TimeSpent time;
  int trials = 0, errors = 0;
  // Candidates not valid on the target, or unrolling past 2,048 statements: never run, never a trial.
  int rejected = 0;
  bool estimated = false;  // GPU without a device: every cost is the static model's estimate
  std::string device;      // where the candidates ran (GPU targets)
  double best_seconds = 0, best_gflops = 0;
  double default_seconds = 0, default_gflops = 0;
  std::vector<Step> best_steps;
  // After each round: (trials of the search so far, best GFLOP/s it found); the default
  // schedule's measurement is left out of both.
  std::vector<std::pair<int, double>> curve;
  // The programs behind the curve: (trials, steps) at the end of each round that improved
  // the search's best, so a benchmark can time them again side by side.
  std::vector<std::pair<int, std::vector<Step>>> improvements;
};

TaskResult tune(const Workload& w, const TuneOptions& opts);
// Many tasks under one budget, trials going where they cut the weighted total latency
// most (gradient-based task scheduler); one shared cost model.
std::vector<TaskResult> tune_tasks(const std::vector<Workload>& tasks, const std::vector<double>& weights,
                                   const TuneOptions& opts);

// ---- deploy time ----

struct Record;
// The best valid record for this workload and target in a log (none: nullopt). The tuner
// ends with finals: its best few and the default schedule measured again in rounds; the
// finalist with the best median (over the rounds, of each round's fastest repeat) wins, so
// the result is never (reliably) slower than the default. A log without finals counts each
// program at its slowest measurement.
struct BestSchedule {
  std::vector<Step> steps;
  double seconds = 0;      // as measured on the CPU it was tuned on
  std::string target;      // that CPU's full target string
  std::string target_key;  // and its key, "llvm/znver3/v256"
  bool estimate = false;   // the static GPU model's estimate: nothing of this workload was measured
};
// With `stand_in`, a log without records of this target answers with those of the CPU that
// stands in for it best: the same kind of target and vector width, the most CPU features in
// common, then the same core count (a log tuned on one x86 server, deployed on another).
std::optional<BestSchedule> best_schedule(const std::string& log_path, const Workload& w,
                                          const Target& target = Target::host(), bool stand_in = false);
// A tuning log read once, for looking up many workloads (a network's kernels).
class TuningLog {
 public:
  explicit TuningLog(const std::string& path);
  // As best_schedule() above, with stand-ins unless `stand_in` is false (as build_best).
  std::optional<BestSchedule> best(const Workload& w, const Target& target = Target::host(),
                                   bool stand_in = true) const;

 private:
  std::shared_ptr<const std::vector<Record>> records_;
};
// Builds the best kernel from the log. Without a record of this target it says so on stderr
// (naming the workload, the target and the log) and builds the best schedule of a stand-in
// CPU (see best_schedule; `found` is true), or else the default schedule (`found` is false).
// A best record whose steps no longer build this workload also gives the default schedule,
// with a warning naming the error (`found` is false).
Module build_best(const std::string& log_path, const Workload& w, const Target& target = Target::host(),
                  bool* found = nullptr);

// ---- reports ----

struct ReportOptions {
  // A vendor library's speed per workload key, drawn as a line: key -> (label, GFLOP/s).
  std::map<std::string, std::pair<std::string, double>> vendor;
};
// One self-contained HTML page (inline SVG, nothing fetched) about the logs: per workload
// the best speed against trials and against tuning time with every measured candidate, the
// default schedule (and vendor) as lines, errors by kind, the cost model's predicted against
// measured rank in each round; a table of the tasks and their share of the trials.
void write_report(const std::vector<std::string>& logs, const std::string& html_path,
                  const ReportOptions& opts = {});

// Log maintenance: merge several logs into one; keep only the best record per
// (workload, target). Return the number of records written.
int merge_logs(const std::vector<std::string>& inputs, const std::string& output);
int keep_best(const std::string& input, const std::string& output);

}  // namespace tessel::autotune
