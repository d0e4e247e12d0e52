#include "autotune/StaticModel.h"

#include <algorithm>
#include <cmath>
#include <sstream>

namespace tessel::autotune {
namespace {

constexpr double kClockHz = 1.4e9;           // a typical boost clock; the peaks carry the rest
constexpr double kSharedBytesPerClock = 128;  // per multiprocessor: 32 banks of 4 bytes
constexpr double kLaunchSeconds = 3e-6;       // per kernel launch
constexpr double kBarrierClocks = 20;         // a block waiting at a barrier

}  // namespace

PtxMix ptx_mix(const std::string& ptx) {
  PtxMix m;
  std::istringstream in(ptx);
  for (std::string line; std::getline(in, line);) {
    size_t b = line.find_first_not_of(" \t");
    if (b == std::string::npos || line[b] == '.' || line[b] == '/' || line[b] == '{' || line[b] == '}' ||
        line[b] == '$' || line.find(';') == std::string::npos)
      continue;
    if (line[b] == '@') b = line.find(' ', b) == std::string::npos ? b : line.find_first_not_of(" \t", line.find(' ', b));
    std::string op = line.substr(b, line.find_first_of(" \t;", b) - b);
    ++m.total;
    if (op.rfind("fma.", 0) == 0 || op.rfind("mad.", 0) == 0) ++m.fma;
    else if (op.rfind("ld.global", 0) == 0 || op.rfind("st.global", 0) == 0 || op.rfind("ld.param", 0) == 0) ++m.global;
    else if (op.rfind("ld.shared", 0) == 0 || op.rfind("st.shared", 0) == 0 || op.rfind("shfl", 0) == 0) ++m.shared;
    else if (op.rfind("ld.local", 0) == 0 || op.rfind("st.local", 0) == 0) ++m.local;
    else if (op.rfind("bar", 0) == 0) ++m.barrier;
    else if (op.rfind("bra", 0) == 0 || op.rfind("setp", 0) == 0 || op.rfind("ret", 0) == 0) ++m.control;
    else ++m.arith;
  }
  return m;
}

double estimate_seconds(const GpuProfile& p, const KernelResources& r, const PtxMix& mix, const Target& target) {
  // Occupancy from what ptxas allocated, where known (the profile's is estimated).
  double occupancy = p.occupancy;
  if (r.registers > 0 && p.threads_per_block > 0) {
    double warps = std::ceil(double(p.threads_per_block) / target.warp_size);
    double by_regs = std::floor(target.registers_per_sm / (double(r.registers) * warps * target.warp_size));
    double by_threads = std::floor(target.max_threads_per_sm / (warps * target.warp_size));
    double by_shared = r.shared_bytes > 0 ? std::floor(double(target.shared_memory_per_sm) / r.shared_bytes) : 32;
    double resident = std::max(0.0, std::min({by_regs, by_threads, by_shared, 32.0}));
    occupancy = resident * warps * target.warp_size / target.max_threads_per_sm;
  }
  // Latency hiding: full throughput from a quarter of the warps on, less below.
  double hide = std::clamp(occupancy / 0.25, 0.05, 1.0);
  // The share of issue slots doing FMAs bounds the arithmetic throughput.
  double issue = mix.total > 0 ? std::clamp(2.0 * mix.fma / double(mix.total), 0.05, 1.0) : 0.5;
  double compute = p.flops / (target.peak_gflops * 1e9 * hide * issue * std::max(p.wave_efficiency, 0.05));
  double bandwidth = target.memory_gbytes_per_s * 1e9 * std::clamp(p.coalesced, 0.125, 1.0) * std::min(1.0, 2 * hide);
  double memory = p.global_bytes / bandwidth;
  double shared = p.shared_accesses * 4 * p.conflict_ways / (kSharedBytesPerClock * target.multiprocessors * kClockHz);
  double sync = p.barriers * kBarrierClocks / (kClockHz * target.multiprocessors);
  double spills = r.spill_bytes > 0 ? 1.0 + r.spill_bytes / 64.0 : 1.0;  // spills go through local memory
  return std::max({compute, memory, shared}) * spills + sync + kLaunchSeconds * double(p.kernels);
}

}  // namespace tessel::autotune
