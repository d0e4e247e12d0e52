#pragma once
/** \file The processes that run GPU candidates: `tessel-runner`, started through a command
 * (the local one, or e.g. "ssh gpu1 /opt/tessel/bin/tessel-runner cuda"), one per GPU. Jobs
 * go to whichever runner is free. A runner that dies (a kernel fault, a kill) or makes no
 * progress within the timeout gets its job recorded as an error, and is started again for
 * the next one. The tuner never initialises CUDA or OpenCL itself. */
#include <string>
#include <vector>

#include "autotune/Measure.h"
#include "runtime/Job.h"

namespace tessel::autotune {

// A job as the runner reads it (Job.h's message), with the id its result line names.
struct SentJob {
  int64_t id = 0;
  std::string message;
};

class RunnerPool {
 public:
  RunnerPool(std::vector<std::string> commands, double timeout);
  ~RunnerPool();
  RunnerPool(const RunnerPool&) = delete;
  RunnerPool& operator=(const RunnerPool&) = delete;

  // Starts the runners; the device the first of them runs on ("" when none has one: see
  // unavailable()).
  const std::string& device();
  // Why no runner has a device (its hello, or why it did not start).
  const std::string& unavailable() const { return why_; }
  // Runs the jobs of one workload (`workload` is its message; sent once to each runner).
  std::vector<MeasureResult> run(const std::vector<SentJob>& jobs, const std::string& workload);
  // Runner processes started so far, restarts included.
  int starts() const { return starts_; }

 private:
  struct Runner;
  bool start(Runner& r);
  void stop(Runner& r, bool kill);
  std::vector<std::string> commands_;
  std::vector<Runner*> runners_;
  double timeout_;
  bool started_ = false;
  std::string device_, why_;
  int starts_ = 0;
};

// The local runner for a target: "<tessel-runner> cuda" or "... opencl", the runner built
// beside this Tessel (TESSEL_RUNNER overrides).
std::string local_runner_command(const Target& target);

}  // namespace tessel::autotune
