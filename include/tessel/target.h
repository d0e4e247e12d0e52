#pragma once
// The one description of the machine a kernel is built for. It is parsed once at the edge
// (a user's build call, the `tune` command), then passed to lowering, code generation,
// default schedules, the tuner and the log lookup; nothing below asks "what machine am I
// on?" by itself.
//
//   "llvm"                       this CPU
//   "llvm -mcpu=znver3 -mattr=+avx2,-avx512f"
//   "cuda"                       an NVIDIA GPU of architecture sm_80 (Ampere) or newer
//   "cuda -arch=sm_90"           compiled for exactly that architecture (H100: sm_90)
//   "opencl"                     the local OpenCL device (PoCL on machines without a GPU),
//                                held to CUDA's limits so a schedule that runs there fits a GPU
#include <string>

namespace tessel {

struct Target {
  enum class Kind { LLVM, CUDA, OpenCL };
  Kind kind = Kind::LLVM;

  // CPU (llvm): what the tuner keys its logs by and sizes its register blocks with.
  std::string cpu;           // "znver4"
  std::string features;      // "+avx512f,..."
  int num_cores = 1;
  int vector_bytes = 32;
  int vector_registers = 16;  // 32 with AVX-512
  int cache_line_bytes = 64;

  // GPU (cuda, opencl): the architecture and the limits a kernel must fit.
  std::string arch;                          // "sm_90"
  int max_threads_per_block = 1024;
  int max_thread_x = 1024, max_thread_y = 1024, max_thread_z = 64;
  int64_t max_grid_x = 2147483647, max_grid_y = 65535, max_grid_z = 65535;
  int max_shared_memory_per_block = 48 * 1024;  // static __shared__ arrays
  int max_shared_memory_optin = 0;              // with dynamic shared memory (not used by Tessel yet)
  int max_registers_per_thread = 255;
  int warp_size = 32;
  int max_vthread = 8;
  // The device measurements were made on ("NVIDIA H100 80GB HBM3", "pthread-haswell-..."):
  // part of the log key once known; empty for a target that names only an architecture.
  std::string device;
  // The architecture's throughput, for occupancy and the static model where no GPU runs.
  int multiprocessors = 108;
  int max_threads_per_sm = 2048;
  int registers_per_sm = 65536;
  int shared_memory_per_sm = 164 * 1024;
  double peak_gflops = 19500;       // fp32 FMA throughput
  double memory_gbytes_per_s = 1555;

  // Parses one of the forms above; anything else is an Error naming the valid forms.
  static Target parse(const std::string& text);
  // This CPU, as LLVM sees it.
  static Target host();

  bool is_gpu() const { return kind != Kind::LLVM; }
  bool avx512() const { return kind == Kind::LLVM && vector_bytes >= 64; }
  const char* kind_name() const;  // "llvm", "cuda", "opencl"
  // Whether a parallel loop of `iterations` keeps every core busy to its end: a multiple of
  // the cores, or enough iterations that the last, partly idle round is a small part of it
  // (fewer iterations than cores never do).
  bool shares_evenly(int64_t iterations) const {
    return iterations % num_cores == 0 || iterations >= 8 * int64_t(num_cores);
  }
  // The key logs are keyed by: "llvm/znver4/v256" (CPU and vector bits), "cuda/sm_90" (an architecture: estimates),
  // "cuda/sm_90/NVIDIA H100 80GB HBM3" (a device), "opencl/pthread-haswell-AMD EPYC ...".
  std::string key() const;
  // A string parse() reads back to this target.
  std::string str() const;
};

}  // namespace tessel
