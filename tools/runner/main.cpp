// tessel-runner: runs GPU kernels that the tuner built elsewhere. It reads jobs (see
// src/runtime/Job.h) from standard input, runs each on this machine's GPU (CUDA through the
// driver, loaded with dlopen, or the local OpenCL device), checks its output against the
// expected answer the tuner computed, times it with device events and writes one result
// line per job. It needs a C++ compiler and the driver: no LLVM, no XGBoost.
//
//   tessel-runner [cuda|opencl] < jobs > results
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <map>
#include <thread>

#include "runtime/Compare.h"
#include "runtime/Job.h"
#include "runtime/OpenCL.h"
#include "tessel/error.h"

using namespace tessel;

namespace {

constexpr double kHopeless = 3;  // a first run this many times the best known is timed alone

void say(const std::string& line) {
  std::string l = line;
  for (auto& c : l)
    if (c == '\n') c = ' ';
  std::fputs((l + "\n").c_str(), stdout);
  std::fflush(stdout);
}

std::string num(double v) {
  char b[32];
  std::snprintf(b, sizeof b, "%.9g", v);
  return b;
}

// Runs one job; returns false when the device is no longer usable (a kernel fault).
bool run(const RunnerJob& job, const std::vector<RunnerArg>& args) {
  std::string id = std::to_string(job.id);
  if (job.mode == "crash") {  // as a kernel fault that takes the process down (PoCL handles SIGSEGV itself)
    signal(SIGSEGV, SIG_DFL);
    raise(SIGSEGV);
  }
  if (job.mode == "hang")
    for (;;) std::this_thread::sleep_for(std::chrono::seconds(1));
  std::unique_ptr<Kernel> k;
  try {
    k = make_device_kernel(job.code);
  } catch (const std::exception& e) {
    say("result " + id + " error compile " + e.what());
    return true;
  }
  try {
    std::vector<std::string> host;
    for (auto& a : args) host.push_back(a.output ? std::string(size_t(a.bytes), '\0') : a.data);
    std::vector<void*> ptr;
    for (auto& h : host) ptr.push_back(h.data());
    k->call(ptr.data());
    say("progress " + id);
    for (size_t i = 0; i < args.size(); ++i) {
      if (!args[i].output || args[i].data.empty()) continue;
      auto got = reinterpret_cast<const float*>(host[i].data());
      auto want = reinterpret_cast<const float*>(args[i].data.data());
      double err = max_scaled_difference(int64_t(host[i].size() / 4), [&](int64_t e) { return double(got[e]); },
                                         [&](int64_t e) { return double(want[e]); });
      if (!(err <= 1e-3)) {
        say("result " + id + " error wrong_answer output " + std::to_string(i) + " differs from the expected answer by " +
            num(err) + " (relative to its largest value)");
        return true;
      }
    }
    if (job.mode == "check") {
      say("result " + id + " ok");
      return true;
    }
    double first = k->time(ptr.data(), 1);
    say("progress " + id);
    std::string costs;
    if (job.best_known > 0 && first > kHopeless * job.best_known) {
      costs = " " + num(first);
    } else {
      int number = 1;
      for (double t = first; t * number * 1e3 < job.min_repeat_ms && number < (1 << 20);)
        number = std::max(number + 1, int(number * std::min(8.0, 1.2 * job.min_repeat_ms / std::max(1e-9, t * number * 1e3))));
      for (int r = 0; r < std::max(1, job.repeat); ++r) {
        costs += " " + num(k->time(ptr.data(), number));
        say("progress " + id);
      }
    }
    say("result " + id + " ok" + costs);
    return true;
  } catch (const std::exception& e) {
    say("result " + id + " error runtime " + e.what());
    return job.code.kind != "cuda";  // a CUDA fault leaves the context unusable
  }
}

}  // namespace

int main(int argc, char** argv) {
  std::string kind = argc > 1 ? argv[1] : "cuda";
  if (kind == "--help" || kind == "-h" || (kind != "cuda" && kind != "opencl")) {
    std::fprintf(stderr, "usage: tessel-runner [cuda|opencl] < jobs > results  (jobs from the tuner, or from "
                         "`tune --target cuda --export-jobs DIR`)\n");
    return kind == "--help" || kind == "-h" ? 0 : 2;
  }
  std::string device = kind == "cuda" ? cuda_device_name() : opencl_device_name();
  if (device.empty()) {
    say("hello " + kind + " - " +
        (kind == "cuda" ? cuda_unavailable_reason() : std::string("no OpenCL device on this machine")));
    return 3;
  }
  say("hello " + kind + " " + device);
  std::map<int64_t, std::vector<RunnerArg>> workloads;
  JobReader reader(stdin);
  try {
    for (;;) {
      int64_t wid = 0;
      std::vector<RunnerArg> args;
      RunnerJob job;
      std::string what = reader.next(&wid, &args, &job);
      if (what.empty()) return 0;
      if (what == "workload") {
        workloads[wid] = std::move(args);
        continue;
      }
      auto it = workloads.find(job.workload);
      if (it == workloads.end()) {
        say("result " + std::to_string(job.id) + " error runtime unknown workload " + std::to_string(job.workload));
        continue;
      }
      if (!run(job, it->second)) return 1;
    }
  } catch (const Error& e) {
    std::fprintf(stderr, "tessel-runner: %s\n", e.what());
    return 2;
  }
}
