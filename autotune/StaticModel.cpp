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
  double warps_per_block = std::ceil(double(std::max<int64_t>(p.threads_per_block, 1)) / target.warp_size);
  // Blocks resident per multiprocessor, from what ptxas allocated (the profile's occupancy
  // was estimated from the program where no compiler ran).
  double resident = p.occupancy * target.max_threads_per_sm / (warps_per_block * target.warp_size);
  if (r.registers > 0) {
    double by_regs = std::floor(target.registers_per_sm / (double(r.registers) * warps_per_block * target.warp_size));
    double by_threads = std::floor(target.max_threads_per_sm / (warps_per_block * target.warp_size));
    double by_shared = r.shared_bytes > 0 ? std::floor(double(target.shared_memory_per_sm) / r.shared_bytes) : 32;
    resident = std::max(0.0, std::min({by_regs, by_threads, by_shared, 32.0}));
  }
  if (resident <= 0) return INFINITY;  // cannot launch
  double blocks = double(std::max<int64_t>(p.blocks, 1)), sms = target.multiprocessors;
  // Multiprocessors with work, the warps each holds, and the last wave's idle slots.
  double busy = std::min(1.0, blocks / sms);
  double warps = std::min(resident, std::ceil(blocks / sms)) * warps_per_block;
  double hide = std::clamp(warps * target.warp_size / target.max_threads_per_sm / 0.25, 0.05, 1.0);
  double waves = blocks / (resident * sms);
  double tail = waves > 1 ? waves / std::ceil(waves) : 1.0;
  // Every issue slot an FMA is the peak; the PTX's mix says how many are.
  double fma_share = mix.total > 0 && mix.fma > 0 ? double(mix.fma) / mix.total : 0.25;
  double compute = p.flops / (target.peak_gflops * 1e9 * fma_share * hide * busy * tail);
  double bandwidth = target.memory_gbytes_per_s * 1e9 * std::clamp(p.coalesced, 0.125, 1.0) * std::min(1.0, 2 * hide);
  double memory = p.global_bytes / bandwidth;
  // Shared loads per FMA as compiled (the compiler reuses a loaded value across an unrolled
  // register tile; the program's count does not).
  double shared_loads = mix.fma > 0 ? p.flops / 2 * double(mix.shared) / mix.fma : p.shared_accesses;
  double shared = shared_loads * 4 * p.conflict_ways / (kSharedBytesPerClock * sms * busy * kClockHz);
  double sync = p.barriers * kBarrierClocks / (kClockHz * sms);
  double spills = r.spill_bytes > 0 ? 1.0 + r.spill_bytes / 64.0 : 1.0;  // spills go through local memory
  return std::max({compute, memory, shared}) * spills + sync + kLaunchSeconds * double(p.kernels);
}

}  // namespace tessel::autotune
