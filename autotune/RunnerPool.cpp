#include "autotune/RunnerPool.h"

#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <set>
#include <sstream>

#include "autotune/Pipes.h"
#include "driver/Paths.h"

namespace tessel::autotune {
namespace {

constexpr double kHelloSeconds = 60;  // a runner behind ssh may take a while to start

ErrorCode code_of(const std::string& kind) {
  if (kind == "wrong_answer") return ErrorCode::WrongAnswer;
  if (kind == "compile") return ErrorCode::CompileHost;
  return ErrorCode::Runtime;
}

}  // namespace

struct RunnerPool::Runner {
  std::string command;
  pid_t pid = -1;
  int in = -1, out = -1;
  std::string buf;
  bool alive = false, usable = true;
  std::set<std::string> workloads;  // messages already sent
  int job = -1;                     // index of the job it runs
  Clock::time_point last;           // of its last sign of progress
  // A complete line from the buffer, if any.
  bool line(std::string* l) {
    size_t nl = buf.find('\n');
    if (nl == std::string::npos) return false;
    *l = buf.substr(0, nl);
    buf.erase(0, nl + 1);
    return true;
  }
  // Reads what is there; false at EOF.
  bool read() {
    char tmp[4096];
    ssize_t n = ::read(out, tmp, sizeof tmp);
    if (n <= 0) return false;
    buf.append(tmp, size_t(n));
    return true;
  }
};

std::string local_runner_command(const Target& target) {
  return "'" + runner_program() + "' " + (target.kind == Target::Kind::CUDA ? "cuda" : "opencl");
}

RunnerPool::RunnerPool(std::vector<std::string> commands, double timeout)
    : commands_(std::move(commands)), timeout_(timeout) {
  TESSEL_USER_CHECK(!commands_.empty(), "tune: no runner command");
  for (auto& c : commands_) {
    runners_.push_back(new Runner);
    runners_.back()->command = c;
  }
}

RunnerPool::~RunnerPool() {
  for (auto* r : runners_) {
    stop(*r, false);
    delete r;
  }
}

bool RunnerPool::start(Runner& r) {
  int to[2], from[2];
  if (pipe(to) != 0 || pipe(from) != 0) throw Error("tune: cannot create pipes for the runner");
  std::fflush(nullptr);
  pid_t pid = fork();
  if (pid < 0) throw Error("tune: fork failed starting the runner");
  if (pid == 0) {
    setpgid(0, 0);  // its own group: a kill takes the shell, ssh and the runner together
    dup2(to[0], 0), dup2(from[1], 1);
    ::close(to[0]), ::close(to[1]), ::close(from[0]), ::close(from[1]);
    execl("/bin/sh", "sh", "-c", ("exec " + r.command).c_str(), (char*)nullptr);
    _exit(127);
  }
  ::close(to[0]), ::close(from[1]);
  signal(SIGPIPE, SIG_IGN);  // a runner that died mid-write is noticed at its EOF instead
  r.pid = pid, r.in = to[1], r.out = from[0], r.buf.clear(), r.workloads.clear(), r.job = -1, r.alive = true;
  ++starts_;
  // Its first line says what it runs on.
  auto t0 = Clock::now();
  std::string hello;
  while (!r.line(&hello)) {
    pollfd p{r.out, POLLIN, 0};
    if (seconds_since(t0) > kHelloSeconds || (poll(&p, 1, 500) > 0 && !r.read())) {
      why_ = "the runner `" + r.command + "` did not start (no hello line" +
             (r.buf.empty() ? std::string(")") : ": " + r.buf + ")");
      stop(r, true);
      r.usable = false;
      return false;
    }
  }
  std::istringstream h(hello);
  std::string word, kind, device;
  h >> word >> kind >> device;
  std::string rest;
  std::getline(h, rest);
  if (word != "hello" || device == "-") {
    why_ = word == "hello" ? "the runner `" + r.command + "` has no " + kind + " device:" + rest
                           : "the runner `" + r.command + "` said '" + hello + "' instead of hello";
    stop(r, true);
    r.usable = false;
    return false;
  }
  if (device_.empty()) device_ = device + rest;
  return true;
}

void RunnerPool::stop(Runner& r, bool kill_it) {
  if (!r.alive) return;
  ::close(r.in);
  if (kill_it) kill(-r.pid, SIGKILL);
  int status;
  if (!kill_it) {  // closing its input ends it; a stuck one is killed after a while
    for (int i = 0; i < 50 && waitpid(r.pid, &status, WNOHANG) == 0; ++i) usleep(20000);
    kill(-r.pid, SIGKILL);
  }
  waitpid(r.pid, &status, 0);
  ::close(r.out);
  r.alive = false;
}

const std::string& RunnerPool::device() {
  if (!started_) {
    started_ = true;
    for (auto* r : runners_) start(*r);
  }
  return device_;
}

std::vector<MeasureResult> RunnerPool::run(const std::vector<SentJob>& jobs, const std::string& workload) {
  device();
  std::vector<MeasureResult> res(jobs.size());
  std::vector<bool> done(jobs.size(), false);
  size_t next = 0, finished = 0;
  auto fail = [&](Runner& r, ErrorCode code, const std::string& msg) {
    res[size_t(r.job)].error = code;
    res[size_t(r.job)].message = msg;
    done[size_t(r.job)] = true, ++finished;
    r.job = -1;
  };
  while (finished < jobs.size()) {
    // Give each free runner the next job (starting it again if it stopped).
    bool any = false;
    for (auto* r : runners_) {
      if (!r->usable) continue;
      any = true;
      if (r->job >= 0 || next >= jobs.size()) continue;
      if (!r->alive && !start(*r)) continue;
      std::string msg = r->workloads.count(workload) ? "" : workload;
      r->workloads.insert(workload);
      r->job = int(next++);
      r->last = Clock::now();
      write_all(r->in, msg + jobs[size_t(r->job)].message);  // a runner that died is seen at its EOF
    }
    if (!any) {  // no runner can run anything: the rest are errors
      for (size_t i = 0; i < jobs.size(); ++i)
        if (!done[i]) res[i].error = ErrorCode::Runtime, res[i].message = "no runner: " + why_, done[i] = true;
      break;
    }
    std::vector<pollfd> fds;
    std::vector<Runner*> busy;
    for (auto* r : runners_)
      if (r->alive && r->job >= 0) fds.push_back({r->out, POLLIN, 0}), busy.push_back(r);
    if (fds.empty()) continue;
    poll(fds.data(), fds.size(), 200);
    for (size_t i = 0; i < busy.size(); ++i) {
      Runner& r = *busy[i];
      bool eof = (fds[i].revents & (POLLIN | POLLHUP)) && !r.read();
      for (std::string l; r.job >= 0 && r.line(&l);) {
        std::istringstream in(l);
        std::string word, status;
        int64_t id = -1;
        in >> word >> id;
        if (word == "progress") {
          r.last = Clock::now();
        } else if (word == "result" && id == jobs[size_t(r.job)].id) {
          in >> status;
          MeasureResult& m = res[size_t(r.job)];
          if (status == "ok") {
            for (double c; in >> c;) m.costs.push_back(c);
          } else {
            std::string kind;
            in >> kind;
            std::getline(in, m.message);
            if (!m.message.empty() && m.message[0] == ' ') m.message.erase(0, 1);
            m.error = code_of(kind);
          }
          done[size_t(r.job)] = true, ++finished;
          r.job = -1;
        }
      }
      if (eof) {
        int status = 0;
        ::close(r.in);
        waitpid(r.pid, &status, 0);
        ::close(r.out);
        r.alive = false;
        if (r.job >= 0) {
          std::string how = WIFSIGNALED(status) ? std::string("killed by signal ") + std::to_string(WTERMSIG(status)) +
                                                      " (" + strsignal(WTERMSIG(status)) + ")"
                                                : "exited with status " + std::to_string(WEXITSTATUS(status));
          fail(r, ErrorCode::Runtime, "the runner stopped while running this candidate (" + how +
                                          "); it was started again for the next one");
        }
      } else if (r.job >= 0 && seconds_since(r.last) > timeout_) {
        stop(r, true);
        char secs[32];
        std::snprintf(secs, sizeof secs, "%g", timeout_);
        fail(r, ErrorCode::RunTimeout, std::string("one run (or timing repeat) on the runner took longer than the "
                                                   "timeout of ") + secs + " s (--timeout); the runner was restarted");
      }
    }
  }
  return res;
}

}  // namespace tessel::autotune
