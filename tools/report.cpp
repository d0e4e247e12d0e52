// tessel-report: one self-contained HTML page about tuning logs (see write_report).
//   tessel-report tuning_logs/resnet50_conv2d.json.gz -o report.html [--vendor figures.tsv]
// The vendor file has lines "WORKLOAD_KEY<TAB>LABEL<TAB>GFLOP/s" (e.g. from bench_tuned).
#include <boost/program_options.hpp>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <sstream>

#include "tessel/autotune.h"
#include "tessel/error.h"

namespace po = boost::program_options;
using namespace tessel;

int main(int argc, char** argv) {
  std::vector<std::string> logs;
  std::string out, vendor;
  po::options_description desc("tessel-report: draw tuning logs as one HTML page\n\nOptions");
  desc.add_options()("help,h", "show this help")("log", po::value(&logs)->composing(), "tuning log(s)")(
      "output,o", po::value(&out), "the HTML file to write")(
      "vendor", po::value(&vendor), "file of vendor figures: WORKLOAD_KEY<TAB>LABEL<TAB>GFLOP/s per line");
  po::positional_options_description pos;
  pos.add("log", -1);
  po::variables_map vm;
  try {
    po::store(po::command_line_parser(argc, argv).options(desc).positional(pos).run(), vm);
    po::notify(vm);
  } catch (const po::error& e) {
    std::fprintf(stderr, "tessel-report: %s (see --help)\n", e.what());
    return 2;
  }
  if (vm.count("help")) {
    std::cout << desc << "\nExample:\n  tessel-report tuning_logs/gemm_1024.json.gz -o gemm.html\n";
    return 0;
  }
  if (logs.empty() || out.empty()) {
    std::fprintf(stderr, "tessel-report: give the log(s) and -o OUTPUT.html (see --help)\n");
    return 2;
  }
  autotune::ReportOptions o;
  if (!vendor.empty()) {
    std::ifstream in(vendor);
    if (!in) {
      std::fprintf(stderr, "tessel-report: cannot read vendor figures '%s'\n", vendor.c_str());
      return 2;
    }
    std::string line;
    for (int n = 1; std::getline(in, line); ++n) {
      if (line.empty() || line[0] == '#') continue;
      std::stringstream ss(line);
      std::string key, label, value;
      std::getline(ss, key, '\t');
      std::getline(ss, label, '\t');
      std::getline(ss, value, '\t');
      char* end = nullptr;
      double g = std::strtod(value.c_str(), &end);
      if (key.empty() || label.empty() || value.empty() || *end || !(g > 0)) {
        std::fprintf(stderr, "tessel-report: %s:%d: expected WORKLOAD_KEY<TAB>LABEL<TAB>GFLOP/s (a positive number)\n",
                     vendor.c_str(), n);
        return 2;
      }
      o.vendor[key] = {label, g};
    }
  }
  try {
    autotune::write_report(logs, out, o);
  } catch (const Error& e) {
    std::fprintf(stderr, "tessel-report: %s\n", e.what());
    return 2;
  }
  std::printf("report: %s\n", out.c_str());
  return 0;
}
