#include "autotune/Measure.h"

#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <optional>
#include <thread>

#include "runtime/Compare.h"
#include "runtime/Job.h"
#include "autotune/Pipes.h"
#include "tessel/ops.h"

namespace tessel::autotune {
namespace {

// A candidate whose first run is this many times slower than the best known is timed by
// that run alone: it will never win, and its label for the cost model (best / cost) is
// already near zero; repeats of a multi-second kernel would cost most of the budget.
constexpr double kHopeless = 3;
// A candidate whose first timing repeat is this many times slower than the best known gets
// no more repeats: it will not win either, and one repeat labels it within the noise. With
// the hopeless cut judged on warm runs, repeats of such candidates were a third of a conv2d
// run's measuring time.
constexpr double kOneRepeat = 1.5;

// Seconds in full: std::to_string's six decimals made every kernel under half a
// microsecond cost 0 and quantized a 0.5 ms one to 0.2%.
std::string seconds_text(double s) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.9g", s);
  return buf;
}

// Child side: a line "B <build seconds>" when built, then after the go byte a line "P" after
// each completed batch of runs (the parent's run timeout counts from the last one), then
// "R <cost> <cost> ..." or "E <code> <message>".
[[noreturn]] void worker(const Workload& w, const std::vector<Step>& steps, const TuneOptions& opts,
                         const std::vector<Buffer>& inputs, const std::vector<Buffer>& reference, int index,
                         double best_known, int out_fd, int in_fd) {
  auto fail = [&](ErrorCode code, const std::string& msg) {
    write_all(out_fd, "E " + std::to_string(int(code)) + " " + one_line(msg) + "\n");
    _exit(0);
  };
  Module m;
  auto t0 = Clock::now();
  try {
    Schedule s = Schedule::replay(w.outputs, steps);
    try {
      m = build(s, w.args, {.target = opts.target});
    } catch (const std::exception& e) {
      fail(ErrorCode::CompileHost, e.what());
    }
  } catch (const std::exception& e) {
    fail(ErrorCode::Instantiation, e.what());
  }
  if (index >= 0 && index == opts.plant_build_hang_at)
    for (;;) std::this_thread::sleep_for(std::chrono::seconds(1));
  write_all(out_fd, "B " + seconds_text(seconds_since(t0)) + "\n");
  char go;
  if (::read(in_fd, &go, 1) != 1) _exit(0);
  try {
    if (opts.threads > 0) set_num_threads(opts.threads);
    if (index >= 0 && index == opts.plant_crash_at) raise(SIGSEGV);
    if (index >= 0 && index == opts.plant_hang_at)
      for (;;) std::this_thread::sleep_for(std::chrono::seconds(1));
    std::vector<Buffer> args = inputs, outs;
    for (size_t i = inputs.size(); i < w.args.size(); ++i) {
      outs.emplace_back(w.args[i].shape(), w.args[i].dtype());
      args.push_back(outs.back());
    }
    // A planted slow candidate: its measurement as a whole outlasts the timeout, but no run
    // does (a pause of 0.6 x timeout before the first run and after each batch).
    bool slow = index >= 0 && index == opts.plant_slow_at;
    auto progress = [&] {
      if (slow) std::this_thread::sleep_for(std::chrono::duration<double>(0.6 * opts.timeout));
      write_all(out_fd, "P\n");
    };
    if (slow) progress();
    auto t_first = Clock::now();
    m(args);
    double first = seconds_since(t_first);
    progress();
    for (size_t i = 0; i < outs.size(); ++i) {
      const Buffer &got = outs[i], &want = reference[i];
      double err = max_scaled_difference(got.size(), [&](int64_t e) { return got.get(e); },
                                         [&](int64_t e) { return want.get(e); });
      if (!(err <= 1e-3))
        fail(ErrorCode::WrongAnswer, "output '" + w.args[inputs.size() + i].name() + "' differs from the default "
             "schedule's by " + std::to_string(err) + " (relative to its largest value)");
    }
    // With flush_caches, each timed call follows a flush that reads the inputs other than the
    // weights back in.
    std::vector<Buffer> warm;
    std::optional<CacheFlusher> flusher;
    std::function<void()> flush;
    if (opts.flush_caches) {
      for (size_t i = 0; i < inputs.size(); ++i)
        if (std::find(w.constants.begin(), w.constants.end(), w.args[i].name()) == w.constants.end())
          warm.push_back(inputs[i]);
      flusher.emplace(opts.flush_bytes);
      flush = [&] { (*flusher)(warm); };
    }
    // Hopeless or not is judged on a warm run: the first, in a freshly forked worker, can be
    // many times slower than the next (a Winograd kernel of 1 ms took 27 ms). Judged on it,
    // 96 of a conv2d run's 109 Winograd candidates fell under the cut; judged warm, 39.
    double warm_run = first;
    if (best_known > 0 && first > kHopeless * best_known) {
      auto t_warm = Clock::now();
      m(args);
      warm_run = seconds_since(t_warm);
      progress();
    }
    std::vector<double> costs = best_known > 0 && warm_run > kHopeless * best_known
                                    ? std::vector<double>{warm_run}
                                    : time_module(m, args, opts.repeat, opts.number, opts.min_repeat_ms, progress,
                                                  warm_run, flush, kOneRepeat * best_known);
    std::string line = "R";
    for (double c : costs) line += ' ' + seconds_text(c);
    write_all(out_fd, line + "\n");
  } catch (const std::bad_alloc&) {
    fail(ErrorCode::Unknown, "out of memory");
  } catch (const std::exception& e) {
    fail(ErrorCode::Runtime, e.what());
  }
  _exit(0);
}

struct Worker {
  pid_t pid = -1;
  int out_fd = -1, in_fd = -1;
  std::string buf;
  bool built = false, done = false;
  MeasureResult result;
  Clock::time_point started;
};

// Reads what is available; returns false on EOF.
bool drain(Worker& wk) {
  char tmp[4096];
  ssize_t n = ::read(wk.out_fd, tmp, sizeof tmp);
  if (n > 0) {
    wk.buf.append(tmp, size_t(n));
    return true;
  }
  return false;
}

// Parses complete lines in the buffer.
void parse(Worker& wk) {
  size_t nl;
  while ((nl = wk.buf.find('\n')) != std::string::npos) {
    std::string line = wk.buf.substr(0, nl);
    wk.buf.erase(0, nl + 1);
    if (line.rfind("B ", 0) == 0) {
      wk.built = true;
      wk.result.build_seconds = std::atof(line.c_str() + 2);
    } else if (line == "P") {
      wk.started = Clock::now();  // a batch of runs finished: the run timeout starts again
    } else if (line.rfind("R", 0) == 0) {
      char* p = line.data() + 1;
      while (*p) {
        char* end;
        double v = std::strtod(p, &end);
        if (end == p) break;
        wk.result.costs.push_back(v);
        p = end;
      }
      wk.done = true;
    } else if (line.rfind("E ", 0) == 0) {
      char* end;
      wk.result.error = ErrorCode(std::strtol(line.c_str() + 2, &end, 10));
      wk.result.message = *end ? end + 1 : "";
      wk.done = true;
    }
  }
}

std::string describe_exit(int status) {
  if (WIFSIGNALED(status))
    return std::string("worker killed by signal ") + std::to_string(WTERMSIG(status)) + " (" + strsignal(WTERMSIG(status)) + ")";
  return "worker exited with status " + std::to_string(WEXITSTATUS(status)) + " without a result";
}

void finish(Worker& wk, ErrorCode timeout_code, const char* phase, double timeout) {
  // Collect whatever arrives until the worker exits or the deadline passes.
  for (;;) {
    if (wk.done) break;
    pollfd p{wk.out_fd, POLLIN, 0};
    double left = timeout - seconds_since(wk.started);
    // What the worker has already sent counts after its deadline too: a candidate built
    // beside a slow one waits its turn here with its "built" line unread, and was once
    // killed as a build timeout the moment the slow one's was over.
    int r = poll(&p, 1, left > 0 ? int(std::min(left, 0.5) * 1000) + 1 : 0);
    if (r <= 0 && left <= 0) {
      kill(wk.pid, SIGKILL);
      wk.result.error = timeout_code;
      char secs[32];
      std::snprintf(secs, sizeof secs, "%g", timeout);
      wk.result.message = std::string(phase) + " took longer than the timeout of " + secs + " s (--timeout)";
      wk.done = true;
      break;
    }
    if (r > 0) {
      if (!drain(wk)) {  // EOF: the worker is gone
        parse(wk);
        if (!wk.done && !(std::string(phase) == "building" && wk.built)) {
          int status = 0;
          waitpid(wk.pid, &status, 0);
          wk.pid = -1;
          wk.result.error = ErrorCode::Runtime;
          wk.result.message = describe_exit(status);
          wk.done = true;
        }
        break;
      }
      parse(wk);
      if (std::string(phase) == "building" && (wk.built || wk.done)) break;
    }
  }
}

}  // namespace

std::vector<double> time_module(const Module& m, const std::vector<Buffer>& args, int repeat, int number,
                                double min_repeat_ms, const std::function<void()>& after_batch, double warm_run,
                                const std::function<void()>& flush, double enough_above) {
  std::vector<void*> ptrs;
  for (auto& b : args) ptrs.push_back(b.raw());
  auto done = [&] {
    if (after_batch) after_batch();
  };
  std::vector<double> costs;
  auto more = [&] {
    bool enough = enough_above > 0 && !costs.empty() && costs.back() > enough_above;
    return int(costs.size()) < std::max(1, repeat) && !enough;
  };
  if (flush) {
    while (more()) {
      double s = 0;
      for (int i = 0; i < 3; ++i) {
        flush();
        auto t = Clock::now();
        m.call_raw(ptrs.data());
        s += seconds_since(t);
      }
      costs.push_back(s / 3);
      done();
    }
    return costs;
  }
  auto batch = [&](int n) {
    auto t = Clock::now();
    for (int i = 0; i < n; ++i) m.call_raw(ptrs.data());
    double s = seconds_since(t);
    done();
    return s;
  };
  int n = std::max(1, number);
  if (number <= 0) {
    // A call just made warmed the caches. Its time sizes the first batch (it ran cold, so
    // the batch errs short, and grows), and a batch that lasts a whole repeat counts as the
    // first repeat: sizing by doubling from one run cost a 2 ms kernel ~70 ms of discarded
    // runs, a third of its measurement.
    double s = warm_run > 0 ? warm_run : batch(1);  // a cold run: never a repeat
    bool sized = false;
    while (s * 1e3 < min_repeat_ms && n < (1 << 20)) {
      n = s <= 0 ? n * 8 : std::max(n + 1, int(n * std::min(8.0, 1.2 * min_repeat_ms / (s * 1e3))));
      s = batch(n);
      sized = true;
    }
    if (sized) costs.push_back(s / n);
  } else if (!(warm_run > 0)) {
    batch(1);  // warm-up
  }
  while (more()) costs.push_back(batch(n) / n);
  return costs;
}

Measurer::Measurer(const Workload& w, const TuneOptions& opts, RunnerPool* runners, RunnerPool* checker)
    : w_(w), opts_(opts), runners_(runners), checker_(checker) {
  if (opts_.threads > 0) set_num_threads(opts_.threads);
  size_t n_in = w.args.size() - w.outputs.size();
  for (size_t i = 0; i < n_in; ++i) {
    Buffer b(w.args[i].shape(), w.args[i].dtype());
    b.fill_random(1000 + i, w.args[i].dtype().is_float() ? -1 : 0, w.args[i].dtype().is_float() ? 1 : 8);
    inputs_.push_back(b);
  }
  Module ref = build(ops::default_schedule(w.outputs), w.args);
  std::vector<Buffer> args = inputs_;
  for (size_t i = n_in; i < w.args.size(); ++i) {
    reference_.emplace_back(w.args[i].shape(), w.args[i].dtype());
    args.push_back(reference_.back());
  }
  ref(args);
  if (opts_.target.is_gpu()) {
    std::vector<RunnerArg> ra;
    for (auto& b : inputs_) ra.push_back({std::string(static_cast<const char*>(b.raw()), size_t(b.bytes())), false, b.bytes()});
    for (auto& b : reference_) {
      bool checked = b.dtype() == float32;  // the runner compares float32 outputs
      ra.push_back({checked ? std::string(static_cast<const char*>(b.raw()), size_t(b.bytes())) : "", true, b.bytes()});
    }
    workload_id_ = int64_t(std::hash<std::string>()(w.key()) & 0x7fffffffffffll);
    workload_message_ = workload_message(workload_id_, ra);
  }
}

std::vector<MeasureResult> Measurer::measure(const std::vector<std::vector<Step>>& cands,
                                             const std::vector<int>& indices, double best_known) {
  if (opts_.target.is_gpu()) return measure_gpu(cands, indices, best_known);
  std::vector<Worker> workers(cands.size());
  int parallel = opts_.build_workers > 0 ? opts_.build_workers : int(std::max(1u, std::thread::hardware_concurrency()));
  // Phase 1: build in parallel (each worker stops after building, waiting for "go").
  auto t_build = Clock::now();
  size_t next = 0;
  std::vector<size_t> building;
  auto spawn = [&](size_t i) {
    int out[2], in[2];
    if (pipe(out) != 0 || pipe(in) != 0) throw Error("measure: cannot create pipes");
    std::fflush(nullptr);
    pid_t pid = fork();
    if (pid < 0) throw Error("measure: fork failed");
    if (pid == 0) {
      ::close(out[0]);
      ::close(in[1]);
      worker(w_, cands[i], opts_, inputs_, reference_, indices[i], best_known, out[1], in[0]);
    }
    ::close(out[1]);
    ::close(in[0]);
    workers[i].pid = pid;
    workers[i].out_fd = out[0];
    workers[i].in_fd = in[1];
    workers[i].started = Clock::now();
  };
  // A build slot is refilled as soon as any of its builds ends: waiting for them in order
  // left a core idle behind each slow build (build wall time was 1.45x the builds' CPU time
  // over two workers on a 256-trial conv2d run).
  while (next < cands.size() || !building.empty()) {
    while (next < cands.size() && int(building.size()) < parallel) spawn(next), building.push_back(next++);
    std::vector<pollfd> fds;
    double left = opts_.timeout;
    for (size_t i : building) {
      fds.push_back({workers[i].out_fd, POLLIN, 0});
      left = std::min(left, opts_.timeout - seconds_since(workers[i].started));
    }
    poll(fds.data(), fds.size(), left > 0 ? int(std::min(left, 0.5) * 1000) + 1 : 0);
    std::vector<size_t> still;
    for (size_t k = 0; k < building.size(); ++k) {
      Worker& wk = workers[building[k]];
      if (fds[k].revents || seconds_since(wk.started) >= opts_.timeout)
        finish(wk, ErrorCode::BuildTimeout, "building", opts_.timeout);
      else
        still.push_back(building[k]);
    }
    building = std::move(still);
  }
  build_wall_ += seconds_since(t_build);
  // Phase 2: run one at a time.
  auto t_run = Clock::now();
  for (auto& wk : workers) {
    if (!wk.done && wk.built) {
      char go = 'g';
      if (::write(wk.in_fd, &go, 1) == 1) {
        wk.started = Clock::now();
        finish(wk, ErrorCode::RunTimeout, "one run (or timing repeat)", opts_.timeout);
      }
    }
    if (!wk.done) {
      wk.result.error = ErrorCode::Unknown;
      wk.result.message = "worker ended without a result";
    }
    if (wk.pid > 0) {
      kill(wk.pid, SIGKILL);
      waitpid(wk.pid, nullptr, 0);
    }
    ::close(wk.out_fd);
    ::close(wk.in_fd);
  }
  run_wall_ += seconds_since(t_run);
  std::vector<MeasureResult> out;
  for (auto& wk : workers) out.push_back(wk.result);
  return out;
}

}  // namespace tessel::autotune
