#pragma once
/** \file The GPU runner's protocol: what the tuner (or `tune --export-jobs`) sends to
 * `tessel-runner` and what comes back. Text lines with length-prefixed binary blobs, so it
 * passes through pipes, ssh and files alike, and needs nothing but the C++ library on the
 * machine with the GPU.
 *
 * To the runner, any number of:
 *   workload <wid> <nargs>            then per argument "arg <n> in|out <buffer bytes>" and n
 *                                     an input's data, or an output's expected data (0
 *                                     bytes: not checked)
 *   job <id> <wid> <repeat> <min_repeat_ms> <best_known_s> <mode>
 *                                     then "code <cuda|opencl> <arch>", blobs "blob <name>
 *                                     <bytes>" (cubin, ptx, source), "plan <args> <temps>
 *                                     <launches>" with a line per argument "a <bytes>
 *                                     <written>", per temporary "t <bytes>", per launch "l
 *                                     <name> <grid xyz> <block xyz> <n> <buffer indices>",
 *                                     then "end"
 * From the runner: "hello <kind> <device>" first ("hello <kind> - <why not>" when it has
 * none, and then it exits), then per job "progress <id>" after each batch of runs and one
 * "result <id> ok <seconds>..." or "result <id> error <kind> <message>". After a kernel
 * fault the runner reports it and exits: the device context is lost. */
#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "runtime/CUDA.h"
#include "runtime/DevicePlan.h"

namespace tessel {

// What a GPU runner needs of a built program: its compiled code and how to launch it.
struct DeviceCode {
  std::string kind;   // "cuda" or "opencl"
  CudaBinary binary;  // cuda: arch, cubin, ptx; both: the source and the resources
  DevicePlan plan;
};

struct RunnerJob {
  int64_t id = 0, workload = 0;
  int repeat = 3;
  double min_repeat_ms = 40;
  double best_known = 0;  // a first run over 3x this is timed alone (0: unknown)
  // "time": check the answer, then time it; "check": the answer only; test hooks: "crash"
  // and "hang" make the runner do so.
  std::string mode = "time";
  DeviceCode code;
};

struct RunnerArg {
  std::string data;  // an input's bytes, or an output's expected bytes (empty: unchecked)
  bool output = false;
  int64_t bytes = 0;
};

std::string workload_message(int64_t id, const std::vector<RunnerArg>& args);
std::string job_message(const RunnerJob& job);

// Reads the runner's input stream.
class JobReader {
 public:
  explicit JobReader(std::FILE* in) : in_(in) {}
  // The next message: "workload" (fills id and args), "job" (fills job), or "" at the end.
  std::string next(int64_t* workload_id, std::vector<RunnerArg>* args, RunnerJob* job);

 private:
  std::string line();
  std::string bytes(size_t n);
  std::FILE* in_;
};

// The kernel a runner runs: CUDA through the driver, OpenCL through the local device.
std::unique_ptr<Kernel> make_device_kernel(const DeviceCode& code);

}  // namespace tessel
