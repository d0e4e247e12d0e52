// tune: tune an operator (or a list of them) for this CPU or a GPU and write a tuning log.
//   tune --op conv2d --shape N=1,C=64,H=56,W=56,K=64,R=3,S=3,stride=1,pad=1 --trials 1000 \
//        --log tuning_logs/conv2d.json
//   tune --op conv2d --shape ... --target "cuda -arch=sm_90" [--runner "ssh gpu1 tessel-runner cuda"]
#include <unistd.h>

#include <boost/program_options.hpp>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <sstream>

#include "tessel/autotune.h"
#include "tessel/error.h"

namespace po = boost::program_options;
using namespace tessel;
using namespace tessel::autotune;

namespace {

[[noreturn]] void usage_error(const std::string& why) {
  std::fprintf(stderr, "tune: %s (see tune --help)\n", why.c_str());
  std::exit(2);
}

std::vector<std::pair<Workload, double>> read_workloads(const std::string& path, DType dtype) {
  std::ifstream in(path);
  if (!in) usage_error("cannot read workload file '" + path + "'");
  std::vector<std::pair<Workload, double>> out;
  std::string line;
  for (int n = 1; std::getline(in, line); ++n) {
    if (line.empty() || line[0] == '#') continue;
    std::stringstream ss(line);
    std::string op, shape;
    double weight = 1;
    ss >> op >> shape;
    if (!(ss >> weight)) weight = 1;
    try {
      out.emplace_back(make_workload(op, parse_shape(shape), dtype), weight);
    } catch (const Error& e) {
      usage_error(path + ":" + std::to_string(n) + ": " + e.what());
    }
  }
  if (out.empty()) usage_error("workload file '" + path + "' lists no workloads (lines: OP SHAPE [WEIGHT])");
  return out;
}

std::string fmt_time(double s) {
  char b[32];
  long t = std::lround(s);  // whole seconds first, or 119.6 s read 1m60s
  if (t < 60) std::snprintf(b, sizeof b, "%lds", t);
  else if (t < 3600) std::snprintf(b, sizeof b, "%ldm%02lds", t / 60, t % 60);
  else std::snprintf(b, sizeof b, "%ldh%02ldm", (t + 30) / 3600, (t + 30) / 60 % 60);
  return b;
}

std::vector<std::string> split_commas(const std::string& list) {
  std::vector<std::string> out;
  std::stringstream ss(list);
  for (std::string s; std::getline(ss, s, ',');)
    if (!s.empty()) out.push_back(s);
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  po::options_description desc("tune: search schedules for tensor operators on this CPU or a GPU and log every measurement\n\nOptions");
  std::string op, shape, log, cost_model, workloads, target_text = "llvm", dtype_name = "float32", merge,
              keep_best_in, history, report;
  std::vector<std::string> runners;
  TuneOptions o;
  desc.add_options()
      ("help,h", "show this help")
      ("list-ops", "list the operators and their shape parameters")
      ("op", po::value(&op), "operator to tune (see --list-ops)")
      ("shape", po::value(&shape), "its parameters, e.g. M=1024,N=1024,K=1024")
      ("dtype", po::value(&dtype_name)->default_value("float32"), "element type")
      ("workloads", po::value(&workloads), "file of workloads to tune together, one per line: OP SHAPE [WEIGHT]")
      ("target", po::value(&target_text)->default_value("llvm"), "llvm (this CPU), \"llvm -mcpu=NAME\", cuda, \"cuda -arch=sm_90\" or opencl (the local OpenCL device)")
      ("runner", po::value(&runners)->composing(), "GPU targets: a command that starts a tessel-runner on the machine with the GPU, e.g. \"ssh gpu1 /opt/tessel/bin/tessel-runner cuda\"; give it once per GPU (default: the local runner; with no GPU anywhere, cuda times are estimated)")
      ("export-jobs", po::value(&o.export_jobs), "GPU targets: also write every built candidate as a runner job to this directory (for scripts/gpu_check.sh)")
      ("trials", po::value(&o.trials)->default_value(200), "measurement budget (all workloads together, counting records already in a resumed log)")
      ("per-round", po::value(&o.per_round)->default_value(16), "candidates measured per round")
      ("log", po::value(&log), "tuning log to append to (JSON lines)")
      ("resume", po::bool_switch(&o.resume), "reload --log, retrain from it, never re-measure its candidates")
      ("timeout", po::value(&o.timeout)->default_value(10), "seconds a candidate may take to build, or one batch of its runs (a timing repeat) to finish")
      ("repeat", po::value(&o.repeat)->default_value(3), "timing repeats per candidate")
      ("number", po::value(&o.number)->default_value(0), "runs per repeat (0: enough for --min-repeat-ms)")
      ("min-repeat-ms", po::value(&o.min_repeat_ms)->default_value(40), "minimum duration of one repeat")
      ("finals", po::value(&o.remeasure_top)->default_value(3), "the best N programs of each workload (with all measurements of a resumed log) are measured again side by side at the end, and the fastest wins; 0 skips this")
      ("seed", po::value(&o.seed)->default_value(1), "random seed")
      ("threads", po::value(&o.threads)->default_value(0), "threads the kernels run with (0: all cores)")
      ("cost-model", po::value(&cost_model), "XGBoost model file: warm-start from it if it exists, save to it at the end")
      ("history", po::value(&history), "comma-separated logs of other workloads on this CPU: their records train the cost model from the first round on")
      ("random-search", "measure random candidates of the same space instead of model-guided ones")
      ("merge", po::value(&merge), "comma-separated logs to merge into --log, then exit")
      ("keep-best", po::value(&keep_best_in), "write only the best record per workload and target of this log to --log, then exit")
      ("report", po::value(&report), "at the end, write an HTML report of --log to this file (tessel-report draws one of any log)")
      ("print-best", "print the best record of --op/--shape in --log as C++ schedule code, then exit");
  po::variables_map vm;
  try {
    po::store(po::parse_command_line(argc, argv, desc), vm);
    po::notify(vm);
  } catch (const po::error& e) {
    usage_error(e.what());
  }
  if (vm.count("help")) {
    std::cout << desc << "\nExample:\n  tune --op matmul --shape M=1024,N=1024,K=1024 --trials 200 --log tuning_logs/gemm.json\n";
    return 0;
  }
  if (vm.count("list-ops")) {
    for (auto& [name, params] : list_ops()) std::printf("%-18s %s\n", name.c_str(), params.c_str());
    return 0;
  }
  try {
    o.target = Target::parse(target_text);
    o.runners = runners;
    if (!runners.empty() && !o.target.is_gpu()) usage_error("--runner runs GPU kernels; give --target cuda or opencl");
    if (!merge.empty() || !keep_best_in.empty()) {
      if (log.empty()) usage_error("--merge and --keep-best write to --log; give it");
      int n;
      if (!merge.empty()) {
        n = merge_logs(split_commas(merge), log);
      } else {
        n = keep_best(keep_best_in, log);
      }
      std::printf("wrote %d records to %s\n", n, log.c_str());
      return 0;
    }
    DType dtype = DType::parse(dtype_name);
    std::vector<std::pair<Workload, double>> tasks;
    if (!workloads.empty()) {
      if (!op.empty()) usage_error("give either --op/--shape or --workloads, not both");
      tasks = read_workloads(workloads, dtype);
    } else {
      if (op.empty()) usage_error("missing --op (or --workloads); see --list-ops");
      if (shape.empty()) usage_error("missing --shape for --op " + op);
      tasks.emplace_back(make_workload(op, parse_shape(shape), dtype), 1.0);
    }
    // A 3x3 stride-1 convolution is also tuned by Winograd's algorithm; the deploy lookup
    // builds whichever ran faster.
    for (size_t i = 0, n = tasks.size(); i < n; ++i)
      if (auto wino = winograd_companion(tasks[i].first, o.target)) {
        std::fprintf(stderr, "tune: %s is also tuned as %s\n", tasks[i].first.key().c_str(), wino->key().c_str());
        tasks.emplace_back(*wino, tasks[i].second);
      }
    if (vm.count("print-best")) {
      if (log.empty()) usage_error("--print-best reads --log; give it");
      for (auto& [w, wt] : tasks) {
        auto best = best_schedule(log, w, o.target, /*stand_in=*/true);
        if (!best) {
          std::printf("// no record for %s on %s in %s\n", w.key().c_str(), o.target.key().c_str(), log.c_str());
          continue;
        }
        if (best->target_key != o.target.key() && best->target_key.rfind(o.target.key() + "/", 0) != 0)
          std::printf("// no record for %s on %s in %s: the best of %s, a target of the same kind\n",
                      w.key().c_str(), o.target.key().c_str(), log.c_str(), best->target_key.c_str());
        std::printf("// %s: %.3f ms (%.1f GFLOP/s) %s on %s\n%s", w.key().c_str(), best->seconds * 1e3,
                    w.flops / best->seconds / 1e9, best->estimate ? "ESTIMATED (not measured)" : "measured",
                    best->target_key.c_str(), Schedule::replay(w.outputs, best->steps).to_cpp().c_str());
      }
      return 0;
    }
    if (o.trials <= 0) usage_error("--trials must be positive");
    if (o.per_round <= 0) usage_error("--per-round must be positive");
    if (o.timeout <= 0) usage_error("--timeout must be positive");
    if (o.repeat <= 0) usage_error("--repeat must be positive");
    if (o.remeasure_top < 0) usage_error("--finals must be 0 (no finals) or more");
    if (o.resume && log.empty()) usage_error("--resume needs --log");
    if (!report.empty() && log.empty()) usage_error("--report draws the records of --log; give it");
    o.log = log;
    o.use_cost_model = !vm.count("random-search");
    if (!history.empty()) o.history = split_commas(history);
    if (!cost_model.empty()) {
      if (std::ifstream(cost_model).good()) o.cost_model_in = cost_model;
      o.cost_model_out = cost_model;
    }
    bool tty = isatty(fileno(stderr));
    o.on_progress = [&](const Progress& p) {
      std::fprintf(stderr, "%s[%d/%d] %s best %.1f GFLOP/s%s, %.2f candidates/s, errors %d, ETA %s%s",
                   tty ? "\r\033[K" : "", p.trials, p.budget, p.task.c_str(), p.best_gflops,
                   p.estimated ? " (ESTIMATED)" : "", p.trials_per_second, p.errors,
                   fmt_time(p.eta_seconds).c_str(), tty ? "" : "\n");
      std::fflush(stderr);
    };
    std::vector<Workload> ws;
    std::vector<double> weights;
    for (auto& [w, wt] : tasks) ws.push_back(w), weights.push_back(wt);
    std::vector<TaskResult> res = tune_tasks(ws, weights, o);
    if (tty) std::fprintf(stderr, "\n");
    bool estimated = false;
    for (auto& r : res) estimated |= r.estimated;
    if (!res.empty() && !res[0].device.empty()) {
      bool cpu = o.target.kind == Target::Kind::OpenCL &&
                 (res[0].device.find("pthread") != std::string::npos || res[0].device.find("cpu") != std::string::npos);
      std::printf("device: %s%s\n", res[0].device.c_str(),
                  cpu ? " (an OpenCL implementation on this CPU: CPU figures, not a GPU's)" : "");
    }
    if (estimated)
      std::printf("NOTHING WAS MEASURED: no GPU ran these kernels; the GFLOP/s below are the static model's "
                  "ESTIMATES for %s (run `tune ... --resume` where the GPU is, or give --runner)\n",
                  o.target.arch.c_str());
    std::printf("%-10s %-58s %12s %12s %9s %7s %7s %8s\n", "task", "shape", estimated ? "est. GF/s" : "best GF/s",
                estimated ? "est. default" : "default GF/s", "speed-up", "trials", "errors", "rejected");
    for (size_t i = 0; i < res.size(); ++i) {
      const TaskResult& r = res[i];
      std::string sh;
      for (auto& [k, v] : ws[i].shape) sh += (sh.empty() ? "" : ",") + k + "=" + std::to_string(v);
      double speedup = r.best_seconds > 0 ? r.default_seconds / r.best_seconds : 0;
      std::printf("%-10s %-58s %12.1f %12.1f %8.2fx %7d %7d %8d\n", ws[i].op.c_str(), sh.c_str(), r.best_gflops,
                  r.default_gflops, speedup, r.trials, r.errors, r.rejected);
    }
    TimeSpent all;
    for (auto& r : res)
      all.build += r.time.build, all.run += r.time.run, all.search += r.time.search, all.model += r.time.model,
          all.total += r.time.total;
    if (all.total > 0) {
      double other = std::max(0.0, all.total - all.build - all.run - all.search - all.model);
      auto pct = [&](double s) { return 100 * s / all.total; };
      std::printf("time: %s in all; build %.0f%%, run %.0f%%, search %.0f%%, model %.0f%%, other %.0f%%\n",
                  fmt_time(all.total).c_str(), pct(all.build), pct(all.run), pct(all.search), pct(all.model),
                  pct(other));
    }
    if (!log.empty()) std::printf("log: %s\n", log.c_str());
    if (!report.empty()) {
      write_report({log}, report);
      std::printf("report: %s\n", report.c_str());
    }
  } catch (const Error& e) {
    std::fprintf(stderr, "tune: %s\n", e.what());
    return 2;
  }
  return 0;
}
