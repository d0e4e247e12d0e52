#pragma once
/** \file Seconds a compiled GPU kernel would take, estimated without a GPU (as Tuna ranks
 * GPU schedules by static analysis): the program's dynamic work (flops, global traffic,
 * shared accesses and their bank conflicts, barriers; Features.h's GpuProfile), occupancy
 * from its registers and shared memory as ptxas reports them, waves over the
 * multiprocessors, and the instruction mix of its PTX, against the architecture's peak
 * numbers (Target). An estimate ranks candidates; it is never a measurement, and records
 * made with it say so. */
#include <string>

#include "autotune/Features.h"
#include "tessel/resources.h"

namespace tessel::autotune {

// Counts of PTX instructions (static, in the text) by what they do.
struct PtxMix {
  int fma = 0, arith = 0, global = 0, shared = 0, local = 0, barrier = 0, control = 0, total = 0;
};
PtxMix ptx_mix(const std::string& ptx);

double estimate_seconds(const GpuProfile& p, const KernelResources& r, const PtxMix& mix, const Target& target);

}  // namespace tessel::autotune
