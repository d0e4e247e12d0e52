#include "tessel/target.h"

#include <algorithm>
#include <sstream>
#include <thread>
#include <vector>

#include "codegen/LLVMJit.h"
#include "tessel/build.h"
#include "tessel/error.h"

namespace tessel {
namespace {

const char* const kForms =
    "the valid forms are \"llvm\", \"llvm -mcpu=NAME -mattr=+a,-b\", \"cuda\", \"cuda -arch=sm_XY\" "
    "(XY one of 75, 80, 86, 87, 89, 90, 100, 120) and \"opencl\"";

// Shared memory a block may opt into with dynamic shared memory, per architecture (CUDA
// programming guide, compute capabilities table).
int shared_optin_bytes(int sm) {
  if (sm >= 90) return 227 * 1024;
  if (sm == 80 || sm == 87) return 163 * 1024;
  if (sm >= 86) return 99 * 1024;
  return 64 * 1024;
}

// Per architecture, a typical part's figures (datasheets): multiprocessors, threads and
// shared memory per multiprocessor, fp32 GFLOP/s and memory GB/s.
struct ArchFigures {
  int sm, multiprocessors, threads_per_sm, shared_per_sm_kib;
  double gflops, gbytes_per_s;
};
constexpr ArchFigures kArchFigures[] = {
    {75, 40, 1024, 64, 8100, 320},       // T4
    {80, 108, 2048, 164, 19500, 1555},   // A100
    {86, 82, 1536, 100, 35600, 936},     // RTX 3090
    {87, 16, 1536, 164, 5300, 204},      // Jetson AGX Orin
    {89, 128, 1536, 100, 82600, 1008},   // RTX 4090
    {90, 132, 2048, 228, 67000, 3350},   // H100 SXM
    {100, 148, 2048, 228, 80000, 8000},  // B200
    {120, 170, 1536, 100, 104800, 1792}, // RTX 5090
};

void set_cpu_limits(Target& t) {
  bool avx512 = t.features.find("+avx512f") != std::string::npos ||
                (t.features.empty() && (t.cpu.find("znver4") != std::string::npos ||
                                        t.cpu.find("znver5") != std::string::npos ||
                                        t.cpu.find("skylake-avx512") != std::string::npos ||
                                        t.cpu.find("sapphirerapids") != std::string::npos));
  t.vector_bytes = avx512 ? 64 : 32;
  t.vector_registers = avx512 ? 32 : 16;
}

}  // namespace

Target Target::host() {
  Target t;
  t.cpu = host_cpu_name();
  t.features = host_cpu_feature_flags();
  t.num_cores = int(std::max(1u, std::thread::hardware_concurrency()));
  set_cpu_limits(t);
  return t;
}

Target Target::parse(const std::string& text) {
  std::stringstream ss(text);
  std::string kind;
  ss >> kind;
  std::vector<std::string> opts;
  for (std::string o; ss >> o;) opts.push_back(o);
  if (kind == "llvm") {
    Target t = host();
    for (auto& opt : opts) {
      if (opt.rfind("-mcpu=", 0) == 0) {
        t.cpu = opt.substr(6);
        t.features.clear();  // the named CPU's own features
      } else if (opt.rfind("-mattr=", 0) == 0) {
        t.features += (t.features.empty() ? "" : ",") + opt.substr(7);
      } else {
        throw Error("target '" + text + "': unknown option '" + opt + "' for llvm; known: -mcpu=NAME, -mattr=+a,-b");
      }
    }
    set_cpu_limits(t);
    return t;
  }
  if (kind == "cuda" || kind == "opencl") {
    Target t;
    t.kind = kind == "cuda" ? Kind::CUDA : Kind::OpenCL;
    t.num_cores = 0;
    t.vector_bytes = 16;  // float4
    // OpenCL kernels are held to CUDA's limits (sm_80): PoCL would accept 4096 work-items
    // and a megabyte of local memory, which no GPU runs.
    t.arch = "sm_80";
    for (auto& opt : opts) {
      TESSEL_USER_CHECK(t.kind == Kind::CUDA && opt.rfind("-arch=", 0) == 0, "target '", text,
                        "': unknown option '", opt, "'; ", kForms);
      t.arch = opt.substr(6);
    }
    static const int known[] = {75, 80, 86, 87, 89, 90, 100, 120};
    int sm = 0;
    if (t.arch.rfind("sm_", 0) == 0) sm = std::atoi(t.arch.c_str() + 3);
    TESSEL_USER_CHECK(std::find(std::begin(known), std::end(known), sm) != std::end(known) &&
                          t.arch == "sm_" + std::to_string(sm),
                      "target '", text, "': unknown architecture '", t.arch, "'; ", kForms);
    t.max_shared_memory_optin = shared_optin_bytes(sm);
    for (const ArchFigures& f : kArchFigures)
      if (f.sm == sm) {
        t.multiprocessors = f.multiprocessors;
        t.max_threads_per_sm = f.threads_per_sm;
        t.shared_memory_per_sm = f.shared_per_sm_kib * 1024;
        t.peak_gflops = f.gflops;
        t.memory_gbytes_per_s = f.gbytes_per_s;
      }
    t.max_threads_per_block = 1024;
    t.warp_size = 32;
    t.max_vthread = t.warp_size / 4;
    return t;
  }
  throw Error("unknown target '" + text + "'; " + kForms);
}

const char* Target::kind_name() const {
  switch (kind) {
    case Kind::LLVM: return "llvm";
    case Kind::CUDA: return "cuda";
    case Kind::OpenCL: return "opencl";
  }
  return "?";
}

std::string Target::key() const {
  // One CPU name covers machines with and without AVX-512 (a cloud VM may hide it), and a
  // schedule's register blocks are sized by the vector width: the width is part of the key.
  if (kind == Kind::LLVM) return "llvm/" + cpu + "/v" + std::to_string(vector_bytes * 8);
  if (kind == Kind::OpenCL) return "opencl/" + (device.empty() ? arch : device);
  return "cuda/" + arch + (device.empty() ? "" : "/" + device);
}

std::string Target::str() const {
  if (kind == Kind::LLVM) return "llvm -mcpu=" + cpu + (features.empty() ? "" : " -mattr=" + features);
  if (kind == Kind::CUDA) return "cuda -arch=" + arch;
  return "opencl";
}

}  // namespace tessel
