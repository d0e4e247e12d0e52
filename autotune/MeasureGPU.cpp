// Measuring GPU candidates. Each is built in a forked worker (lowered, checked against the
// target's limits, compiled by NVRTC or printed as OpenCL C, checked again with ptxas's
// registers and spills), then run by a runner process (RunnerPool.h) where one has a
// device, or else estimated by the static model, every fourth one checked for its answer
// as OpenCL on the local device.
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <fstream>
#include <thread>

#include "autotune/Measure.h"
#include "autotune/Pipes.h"
#include "autotune/RunnerPool.h"
#include "autotune/StaticModel.h"
#include "driver/Build.h"

namespace tessel::autotune {
namespace {

constexpr int kCheckEvery = 4;  // estimated candidates checked on the local OpenCL device

struct BuildRequest {
  int64_t id = 0;
  std::string mode = "time";  // the runner's: time, check, crash, hang
  bool estimate = false, check = false, hang = false;
};

// Child side. Writes "B <seconds>", then "S <estimate>" (estimates only), "J <n>" with the
// runner's job, "C <n>" with the OpenCL check's job; or "E <code> <message>".
[[noreturn]] void builder(const Workload& w, const std::vector<Step>& steps, const TuneOptions& opts,
                          const BuildRequest& req, const RunnerJob& base, int fd) {
  auto fail = [&](ErrorCode code, const std::string& msg) {
    write_all(fd, "E " + std::to_string(int(code)) + " " + one_line(msg) + "\n");
    _exit(0);
  };
  auto t0 = Clock::now();
  const Target& target = opts.target;
  Schedule s(w.outputs);
  try {
    s = Schedule::replay(w.outputs, steps);
  } catch (const std::exception& e) {
    fail(ErrorCode::Instantiation, e.what());
  }
  LoweredProgram prog;
  try {
    prog = lower_program(s, w.args, w.op, target, {});
  } catch (const std::exception& e) {
    fail(ErrorCode::Invalid, std::string("not valid on ") + target.str() + ": " + e.what());
  }
  RunnerJob job = base;
  try {
    job.code = compile_device(prog, target);
  } catch (const std::exception& e) {
    fail(ErrorCode::CompileHost, e.what());
  }
  const KernelResources& r = job.code.binary.resources;
  if (r.spill_bytes > 0)
    fail(ErrorCode::Invalid, "ptxas spills " + std::to_string(r.spill_bytes) + " bytes per thread to local memory (" +
                                 std::to_string(r.registers) + " registers): a smaller register tile fits");
  if (r.registers > target.max_registers_per_thread)
    fail(ErrorCode::Invalid, std::to_string(r.registers) + " registers per thread; " + target.arch + " allows " +
                                 std::to_string(target.max_registers_per_thread));
  if (req.hang)
    for (;;) std::this_thread::sleep_for(std::chrono::seconds(1));
  std::string out = "B " + std::to_string(seconds_since(t0)) + "\n";
  if (req.estimate) {
    char est[64];
    std::snprintf(est, sizeof est, "S %.9g\n", estimate_seconds(gpu_profile(prog, target), r, ptx_mix(job.code.binary.ptx), target));
    out += est;
  }
  std::string msg = job_message(job);
  out += "J " + std::to_string(msg.size()) + "\n" + msg;
  if (req.check) {
    try {  // the same schedule as OpenCL C, for its answer only
      Target cl = Target::parse("opencl");
      RunnerJob check = base;
      check.mode = "check";
      check.code = compile_device(lower_program(s, w.args, w.op, cl, {}), cl);
      std::string cm = job_message(check);
      out += "C " + std::to_string(cm.size()) + "\n" + cm;
    } catch (const std::exception&) {
      // Not valid under OpenCL's limits (they are sm_80's): unchecked, as the others.
    }
  }
  write_all(fd, out);
  _exit(0);
}

}  // namespace

struct BuiltCandidate {
  pid_t pid = -1;
  int fd = -1;
  std::string buf;
  bool eof = false;
  MeasureResult result;
  double estimate = -1;
  std::string job, check;
  bool ok = false;
};

namespace {

// Parses a finished builder's output.
void parse(BuiltCandidate& b) {
  size_t pos = 0;
  auto line = [&](std::string* l) {
    size_t nl = b.buf.find('\n', pos);
    if (nl == std::string::npos) return false;
    *l = b.buf.substr(pos, nl - pos);
    pos = nl + 1;
    return true;
  };
  for (std::string l; line(&l);) {
    if (l.rfind("B ", 0) == 0) {
      b.result.build_seconds = std::atof(l.c_str() + 2);
    } else if (l.rfind("S ", 0) == 0) {
      b.estimate = std::atof(l.c_str() + 2);
    } else if (l.rfind("J ", 0) == 0 || l.rfind("C ", 0) == 0) {
      size_t n = size_t(std::atoll(l.c_str() + 2));
      (l[0] == 'J' ? b.job : b.check) = b.buf.substr(pos, n);
      pos += n;
      b.ok = l[0] == 'J' || b.ok;
    } else if (l.rfind("E ", 0) == 0) {
      char* end;
      b.result.error = ErrorCode(std::strtol(l.c_str() + 2, &end, 10));
      b.result.message = *end ? end + 1 : "";
    }
  }
}

// Reads a builder until it exits or the timeout passes.
void collect(BuiltCandidate& b, double timeout) {
  auto t0 = Clock::now();
  while (!b.eof) {
    pollfd p{b.fd, POLLIN, 0};
    double left = timeout - seconds_since(t0);
    if (left <= 0) {
      kill(b.pid, SIGKILL);
      b.result.error = ErrorCode::BuildTimeout;
      char secs[32];
      std::snprintf(secs, sizeof secs, "%g", timeout);
      b.result.message = std::string("building took longer than the timeout of ") + secs + " s (--timeout)";
      break;
    }
    if (poll(&p, 1, int(std::min(left, 0.5) * 1000) + 1) > 0) {
      char tmp[65536];
      ssize_t n = ::read(b.fd, tmp, sizeof tmp);
      if (n > 0) b.buf.append(tmp, size_t(n));
      else b.eof = true;
    }
  }
  int status = 0;
  waitpid(b.pid, &status, 0);
  ::close(b.fd);
  if (b.result.error == ErrorCode::BuildTimeout) return;
  parse(b);
  if (!b.ok && b.result.error == ErrorCode::None) {
    b.result.error = ErrorCode::CompileHost;
    b.result.message = WIFSIGNALED(status) ? std::string("the build worker was killed by signal ") +
                                                 strsignal(WTERMSIG(status))
                                           : "the build worker ended without a result";
  }
}

// A job message back into a job (to export it under another id).
RunnerJob job_of(const std::string& msg) {
  std::FILE* f = fmemopen(const_cast<char*>(msg.data()), msg.size(), "r");
  JobReader reader(f);
  int64_t wid;
  std::vector<RunnerArg> args;
  RunnerJob job;
  reader.next(&wid, &args, &job);
  std::fclose(f);
  return job;
}

}  // namespace

// Appends the built candidates to the export directory: the runner's input (the workload
// once) and each job's estimate, under ids that go on across runs.
void Measurer::export_jobs(const std::vector<BuiltCandidate>& built) {
  std::string dir = opts_.export_jobs;
  TESSEL_USER_CHECK(std::system(("mkdir -p '" + dir + "'").c_str()) == 0, "--export-jobs: cannot create '", dir, "'");
  std::string est_path = dir + "/estimates.tsv";
  if (exported_ < 0) {  // ids continue after the jobs already there
    exported_ = 0;
    std::ifstream in(est_path);
    for (std::string l; std::getline(in, l);) ++exported_;
  }
  std::ofstream jobs(dir + "/jobs.txt", std::ios::app | std::ios::binary), est(est_path, std::ios::app);
  TESSEL_USER_CHECK(jobs && est, "--export-jobs: cannot write to '", dir, "'");
  if (!workload_exported_) jobs << workload_message_, workload_exported_ = true;
  for (auto& b : built) {
    if (!b.ok) continue;
    RunnerJob j = job_of(b.job);
    j.id = exported_++;
    j.mode = "time";
    j.best_known = 0;
    jobs << job_message(j);
    char line[64];
    std::snprintf(line, sizeof line, "%lld\t%.9g\t", (long long)j.id, b.estimate);
    est << line << w_.key() << "\n";
  }
}

bool Measurer::estimates() const {
  return opts_.target.is_gpu() && (!runners_ || runners_->device().empty());
}

std::vector<MeasureResult> Measurer::measure_gpu(const std::vector<std::vector<Step>>& cands,
                                                 const std::vector<int>& indices, double best_known) {
  bool estimate = estimates();
  auto t_build = Clock::now();
  std::vector<BuiltCandidate> built(cands.size());
  int parallel = opts_.build_workers > 0 ? opts_.build_workers : int(std::max(1u, std::thread::hardware_concurrency()));
  size_t next = 0, first_running = 0;
  while (first_running < cands.size()) {
    while (next < cands.size() && int(next - first_running) < parallel) {
      BuildRequest req;
      req.id = int64_t(next);
      int index = indices[next];
      req.mode = index >= 0 && index == opts_.plant_crash_at ? "crash"
                 : index >= 0 && index == opts_.plant_hang_at ? "hang"
                                                               : "time";
      req.hang = index >= 0 && index == opts_.plant_build_hang_at;
      req.estimate = estimate || !opts_.export_jobs.empty();
      req.check = estimate && checker_ && built_++ % kCheckEvery == 0;
      RunnerJob base;
      base.id = req.id, base.workload = workload_id_, base.repeat = opts_.repeat;
      base.min_repeat_ms = opts_.min_repeat_ms, base.best_known = best_known, base.mode = req.mode;
      int fds[2];
      if (pipe(fds) != 0) throw Error("measure: cannot create pipes");
      std::fflush(nullptr);
      pid_t pid = fork();
      if (pid < 0) throw Error("measure: fork failed");
      if (pid == 0) {
        ::close(fds[0]);
        builder(w_, cands[next], opts_, req, base, fds[1]);
      }
      ::close(fds[1]);
      built[next].pid = pid, built[next].fd = fds[0];
      ++next;
    }
    collect(built[first_running], opts_.timeout);
    ++first_running;
  }
  build_wall_ += seconds_since(t_build);
  auto t_run = Clock::now();
  if (!opts_.export_jobs.empty()) export_jobs(built);
  std::vector<MeasureResult> out(cands.size());
  // The builders wrote each job with the candidate's index as its id.
  std::vector<SentJob> jobs, checks;
  std::vector<size_t> job_of_cand, check_of_cand;
  for (size_t i = 0; i < cands.size(); ++i) {
    out[i] = built[i].result;
    if (!built[i].ok) continue;
    if (estimate) {
      out[i].costs = {built[i].estimate};
      out[i].estimate = true;
      if (!built[i].check.empty()) checks.push_back({int64_t(i), built[i].check}), check_of_cand.push_back(i);
    } else {
      jobs.push_back({int64_t(i), built[i].job}), job_of_cand.push_back(i);
    }
  }
  if (!jobs.empty()) {
    std::vector<MeasureResult> res = runners_->run(jobs, workload_message_);
    for (size_t k = 0; k < jobs.size(); ++k) {
      MeasureResult& m = out[job_of_cand[k]];
      double b = m.build_seconds;
      m = res[k];
      m.build_seconds = b;
    }
  }
  if (!checks.empty()) {
    std::vector<MeasureResult> res = checker_->run(checks, workload_message_);
    for (size_t k = 0; k < checks.size(); ++k) {
      // A check that outlasted the timeout says how slow the CPU is, not that the kernel is wrong.
      if (res[k].error == ErrorCode::None || res[k].error == ErrorCode::RunTimeout) continue;
      MeasureResult& m = out[check_of_cand[k]];
      m.error = res[k].error;
      m.costs.clear();
      m.estimate = false;
      m.message = "its OpenCL twin on the local device failed the check: " + res[k].message;
    }
  }
  run_wall_ += seconds_since(t_run);
  return out;
}

}  // namespace tessel::autotune
