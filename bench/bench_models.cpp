// Whole networks against onnxruntime: ResNet-50, MobileNetV2 and a BERT-base encoder layer
// (sequence 128), generated here as ONNX files with random weights, run by Tessel with its
// default schedules and with the tuned ones of a committed log, and by onnxruntime (through
// bench/ort_run.py in the bench script's venv) at 1 and 2 threads in the same run: median
// latency, the outputs' agreement, and peak memory. Each engine runs in a process of its own
// so that peak RSS is its alone; Tessel's includes the compiler (LLVM), which a deployed
// network does not load, so its arena is printed too.
//   bench_models OUT_DIR ORT_PYTHON [RUNS [PASSES [NETWORK]]]   (bench/bench_models.sh sets it all up;
//   NETWORK: resnet50, mobilenetv2 or bert_layer alone)
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "tessel/graph.h"
#include "tessel/graph_models.h"

using namespace tessel;
namespace fs = std::filesystem;

namespace {

struct Result {
  double ms = 0, peak_mb = 0, arena_mb = 0;
  int tuned = 0, kernels = 0;
};

Buffer read_raw(const std::string& path, const std::vector<int64_t>& shape) {
  Buffer b(shape, float32);
  std::ifstream f(path, std::ios::binary);
  f.read(static_cast<char*>(b.raw()), b.bytes());
  return b;
}

// Compiles and times the model (in the process `bench_models --tessel ...` starts, so that
// its peak RSS is its own alone); the outputs go to `out_path`.
Result tessel_here(const std::string& model, const std::string& in_path, const std::string& out_path,
                   const graph::CompileOptions& opts, int threads, int runs) {
  Result r;
  set_num_threads(threads);
  graph::Graph g = graph::load_onnx(model);
  graph::Network net = graph::compile(g, opts);
  const graph::Value& x = g.values[size_t(g.inputs[0])];
  Buffer in = read_raw(in_path, x.shape);
  std::vector<Buffer> out = net.run({in});
  for (int k = 0; k < 3; ++k) net.run({in});
  std::vector<double> times;
  for (int k = 0; k < runs; ++k) {
    auto t = std::chrono::steady_clock::now();
    net.run({in});
    times.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count());
  }
  std::sort(times.begin(), times.end());
  std::ofstream(out_path, std::ios::binary).write(static_cast<const char*>(out[0].raw()), out[0].bytes());
  struct rusage u;
  getrusage(RUSAGE_SELF, &u);
  r.ms = times[times.size() / 2] * 1e3, r.peak_mb = double(u.ru_maxrss) / 1024;
  r.arena_mb = double(net.arena_bytes()) / (1 << 20), r.kernels = net.num_kernels(), r.tuned = net.num_tuned();
  return r;
}

Result run_tessel(const std::string& model, const std::string& in_path, const std::string& out_path,
                  const graph::CompileOptions& opts, int threads, int runs) {
  std::string cmd = "/proc/" + std::to_string(getpid()) + "/exe --tessel " + model + " " + in_path + " " + out_path +
                    " '" + opts.log + "' " + opts.select + " " + opts.layout + " " + std::to_string(threads) + " " +
                    std::to_string(runs);
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) throw std::runtime_error("cannot run " + cmd);
  Result r;
  size_t got = fread(&r, sizeof r, 1, p);
  if (pclose(p) != 0 || got != 1) throw std::runtime_error("the Tessel run of " + model + " failed");
  return r;
}

Result run_ort(const std::string& python, const std::string& script, const std::string& model,
               const std::string& in_path, const std::string& out_path, int threads, int runs) {
  std::string cmd = python + " " + script + " " + model + " " + in_path + " " + out_path + " " +
                    std::to_string(threads) + " " + std::to_string(runs);
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) throw std::runtime_error("cannot run " + cmd);
  char line[4096] = {0};
  std::string all;
  while (fgets(line, sizeof line, p)) all += line;
  if (pclose(p) != 0) throw std::runtime_error("onnxruntime failed: " + cmd + "\n" + all);
  Result r;
  auto field = [&](const std::string& name) {
    size_t at = all.find("\"" + name + "\": ");
    return at == std::string::npos ? 0.0 : std::stod(all.substr(at + name.size() + 4));
  };
  r.ms = field("ms"), r.peak_mb = field("peak_rss_mb");
  return r;
}

double max_difference(const std::string& a, const std::string& b, const std::vector<int64_t>& shape) {
  return max_relative_error(read_raw(a, shape), read_raw(b, shape));
}

}  // namespace

int main(int argc, char** argv) {
  if (argc == 10 && std::string(argv[1]) == "--tessel") {  // one Tessel run, its Result on stdout
    graph::CompileOptions co{.log = argv[5], .select = argv[6], .layout = argv[7]};
    Result r = tessel_here(argv[2], argv[3], argv[4], co, std::atoi(argv[8]), std::atoi(argv[9]));
    return std::fwrite(&r, sizeof r, 1, stdout) == 1 ? 0 : 1;
  }
  if (argc < 3) {
    std::fprintf(stderr, "usage: bench_models OUT_DIR ORT_PYTHON [RUNS [PASSES [NETWORK]]]\n");
    return 2;
  }
  fs::path dir = argv[1];
  std::string python = argv[2];
  int runs = argc > 3 ? std::atoi(argv[3]) : 20, passes = argc > 4 ? std::atoi(argv[4]) : 3;
  std::string only = argc > 5 ? argv[5] : "";  // one network by name
  fs::create_directories(dir);
  std::string script = std::string(TESSEL_SOURCE_DIR) + "/bench/ort_run.py";
  // Each network in the layout its convolutions are fastest in here (ResNet-50: NCHW8c, where
  // oneDNN's convolutions are candidates too; MobileNetV2's depthwise layers: channels last),
  // with the log tuned in that layout.
  struct Model {
    std::string name, log, layout;
    std::string (*make)();
  };
  std::vector<Model> list = {
      {"resnet50", "resnet50_nchwc_graph", "NCHWc", [] { return graph::models::resnet(50); }},
      {"mobilenetv2", "mobilenetv2_nhwc_graph", "NHWC", [] { return graph::models::mobilenet_v2(); }},
      {"bert_layer", "bert_layer_graph", "model", [] { return graph::models::bert_layer(); }},
  };
  // Every engine once per pass, the passes one after another; each row is its engine's best
  // pass: this VM's host slows a 2-thread run by up to a third for minutes at a time.
  struct Row {
    Result r;
    std::string notes;
    double diff = 0;
    bool have = false;
  };
  std::map<std::string, Row> best;  // "model|threads|engine"
  std::vector<std::string> order;
  auto keep = [&](const std::string& key, const Result& r, double diff, const std::string& notes) {
    Row& row = best[key];
    if (!row.have) order.push_back(key);
    if (!row.have || r.ms < row.r.ms) row = {r, notes, diff, true};
  };
  for (int pass = 0; pass < passes; ++pass)
    for (const Model& m : list) {
      if (!only.empty() && m.name != only) continue;
      std::string model = (dir / (m.name + ".onnx")).string();
      std::string bytes = m.make();
      std::ofstream(model, std::ios::binary) << bytes;
      graph::Graph g = graph::load_onnx_bytes(bytes);
      const graph::Value& x = g.values[size_t(g.inputs[0])];
      Buffer in(x.shape, float32);
      in.fill_random(11);
      std::string in_path = (dir / (m.name + ".in.bin")).string();
      std::ofstream(in_path, std::ios::binary).write(static_cast<const char*>(in.raw()), in.bytes());
      std::vector<int64_t> out_shape = g.values[size_t(g.outputs[0])].shape;
      std::string log = std::string(TESSEL_SOURCE_DIR) + "/tuning_logs/" + m.log + ".json.gz";
      for (int threads : {1, 2}) {
        std::string prefix = m.name + "|" + std::to_string(threads) + "|";
        std::string ort_out = (dir / (m.name + ".ort.bin")).string();
        keep(prefix + "onnxruntime", run_ort(python, script, model, in_path, ort_out, threads, runs), 0, "");
        // Default schedules; the log's tuned ones; and those against OpenBLAS and oneDNN, measured per kernel.
        for (std::string how : {"default", "tuned", "tuned+select"}) {
          bool tuned = how != "default";
          if (tuned && !fs::exists(log)) continue;
          std::string out = (dir / (m.name + ".tessel.bin")).string();
          graph::CompileOptions co{.log = tuned ? log : "", .select = how == "tuned+select" ? "measure" : "log",
                                   .layout = m.layout};
          Result r = run_tessel(model, in_path, out, co, threads, runs);
          char notes[256];
          std::snprintf(notes, sizeof notes, "%d kernels (%d tuned), arena %.1f MB, layout %s", r.kernels, r.tuned,
                        r.arena_mb, m.layout.c_str());
          keep(prefix + "tessel-" + how, r, max_difference(out, ort_out, out_shape), notes);
        }
      }
      std::fprintf(stderr, "pass %d: %s done\n", pass + 1, m.name.c_str());
    }
  std::printf("%-12s %3s  %-19s %9s %8s %10s %10s  %s\n", "model", "thr", "engine", "ms", "vs ort", "peak MB",
              "max diff", "notes");
  for (const std::string& key : order) {
    size_t a = key.find('|'), b = key.find('|', a + 1);
    std::string model = key.substr(0, a), threads = key.substr(a + 1, b - a - 1), engine = key.substr(b + 1);
    const Row& row = best[key];
    double ort = best[model + "|" + threads + "|onnxruntime"].r.ms;
    char diff[32] = "";
    if (engine != "onnxruntime") std::snprintf(diff, sizeof diff, "%.1e", row.diff);
    std::printf("%-12s %3s  %-19s %9.2f %7.2fx %10.0f %10s  %s\n", model.c_str(), threads.c_str(), engine.c_str(),
                row.r.ms, ort / row.r.ms, row.r.peak_mb, diff, row.notes.c_str());
  }
  std::printf("vs ort: onnxruntime's latency / Tessel's (above 1: Tessel is faster); max diff: largest relative "
              "difference of the outputs\n");
  return 0;
}
