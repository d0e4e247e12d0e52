// tessel-compile: an ONNX model in, a compiled network out, with what was fused, which
// schedule each kernel got, its time, and the memory the plan saved.
//   tessel-compile model.onnx                                   (default schedules)
//   tessel-compile model.onnx --tune --trials 4000 --log tuning_logs/model.json
//   tessel-compile model.onnx --log tuning_logs/model.json --runs 50
#include <unistd.h>

#include <boost/program_options.hpp>
#include <chrono>
#include <cstdio>
#include <iostream>

#include "tessel/error.h"
#include "tessel/graph.h"

namespace po = boost::program_options;
using namespace tessel;

namespace {
double since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}
}  // namespace

int main(int argc, char** argv) {
  po::options_description opts("tessel-compile MODEL.onnx [options]");
  std::string model, target, log, select, layout;
  std::vector<std::string> binds, history;
  int trials = 0, runs = 0, threads = 0;
  opts.add_options()("help,h", "this help")
      ("target", po::value(&target)->default_value("llvm"), "llvm, llvm -mcpu=..., cuda, opencl")
      ("log", po::value(&log), "tuning log: kernels with records there get their tuned schedules")
      ("tune", "tune the network's kernels first (needs --log; appends to it)")
      ("trials", po::value(&trials)->default_value(1000), "with --tune: measurements for the whole network")
      ("resume", "with --tune: continue the log's earlier run (the budget is a total)")
      ("history", po::value(&history), "with --tune: another log whose records train the cost model from the start; "
                                       "repeatable")
      ("bind", po::value(&binds), "NAME=FILE.pb: a graph input fixed to a tensor (shape inputs); repeatable")
      ("select", po::value(&select)->default_value("log"),
       "log: each kernel's tuned schedule (or the default); measure: the fastest of those and a vendor kernel")
      ("layout", po::value(&layout)->default_value("model"),
       "model: the model's tensor layout; NHWC: convolution chains in NHWC; NCHWc: convolution and pool "
       "chains in blocks of one vector of channels")
      ("no-fuse", "a kernel per node")
      ("no-winograd", "with --layout NCHWc: 3x3 convolutions by the direct sum only")
      ("print-graph", "print the optimised graph")
      ("runs", po::value(&runs)->default_value(20), "runs to time the network (0: build only)")
      ("threads", po::value(&threads)->default_value(0), "threads (0: all cores)")
      ("model", po::value(&model), "the ONNX model");
  po::positional_options_description pos;
  pos.add("model", 1);
  po::variables_map vm;
  try {
    po::store(po::command_line_parser(argc, argv).options(opts).positional(pos).run(), vm);
    po::notify(vm);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "tessel-compile: %s (see --help)\n", e.what());
    return 2;
  }
  if (vm.count("help") || model.empty()) {
    std::cout << opts << "\n";
    return model.empty() && !vm.count("help") ? 2 : 0;
  }
  try {
    if (threads > 0) set_num_threads(threads);
    std::map<std::string, Buffer> bound;
    for (const std::string& b : binds) {
      size_t eq = b.find('=');
      if (eq == std::string::npos) throw Error("--bind " + b + ": expected NAME=FILE.pb");
      bound[b.substr(0, eq)] = graph::load_onnx_tensor(b.substr(eq + 1));
    }
    auto t0 = std::chrono::steady_clock::now();
    graph::Graph g = graph::load_onnx(model, bound);
    std::printf("loaded %s: %zu nodes, %zu inputs, %zu outputs (%.2f s)\n", model.c_str(), g.nodes.size(),
                g.inputs.size(), g.outputs.size(), since(t0));
    graph::CompileOptions co{.target = Target::parse(target), .fuse = !vm.count("no-fuse"), .log = log,
                             .select = select, .layout = layout, .winograd = !vm.count("no-winograd")};
    if (vm.count("tune")) {
      if (log.empty()) throw Error("--tune needs --log FILE: the log keeps every measurement");
      autotune::TuneOptions to;
      to.target = co.target, to.trials = trials, to.log = log, to.resume = vm.count("resume") > 0;
      to.history = history;
      bool tty = isatty(fileno(stderr));
      to.on_progress = [tty](const autotune::Progress& p) {
        std::fprintf(stderr, "%s[%d/%d] %s best %.1f GFLOP/s, %.2f candidates/s, errors %d%s", tty ? "\r\033[K" : "",
                     p.trials, p.budget, p.task.substr(0, 60).c_str(), p.best_gflops, p.trials_per_second, p.errors,
                     tty ? "" : "\n");
        std::fflush(stderr);
      };
      t0 = std::chrono::steady_clock::now();
      std::vector<autotune::TaskResult> results = graph::tune(g, to, co);
      if (tty) std::fprintf(stderr, "\n");
      std::printf("tuned %zu tasks in %.0f s:\n", results.size(), since(t0));
      for (const auto& r : results)
        std::printf("  %-60s %5d trials  %8.1f GFLOP/s (default %.1f)\n", r.task.substr(0, 60).c_str(), r.trials,
                    r.best_gflops, r.default_gflops);
    }
    t0 = std::chrono::steady_clock::now();
    graph::Network net = graph::compile(g, co);
    std::printf("compiled %d kernels in %.2f s\n", net.num_kernels(), since(t0));
    if (vm.count("print-graph")) std::printf("%s", net.graph().str().c_str());
    if (runs > 0) {
      std::vector<Buffer> in;
      for (int id : net.graph().inputs) {
        in.emplace_back(net.graph().values[size_t(id)].shape, net.graph().values[size_t(id)].dtype);
        in.back().fill_random(1);
      }
      net.run(in);
      std::vector<double> times;
      for (int r = 0; r < runs; ++r) {
        auto t = std::chrono::steady_clock::now();
        net.run(in);
        times.push_back(since(t));
      }
      std::sort(times.begin(), times.end());
      net.profile(in, std::max(1, runs / 4));
      std::printf("%s", net.report().c_str());
      std::printf("latency: median %.3f ms over %d runs (%s, %d threads)\n", times[times.size() / 2] * 1e3, runs,
                  co.target.key().c_str(), num_threads());
    } else {
      std::printf("%s", net.report().c_str());
    }
  } catch (const Error& e) {
    std::fprintf(stderr, "tessel-compile: %s\n", e.what());
    return 1;
  }
  return 0;
}
