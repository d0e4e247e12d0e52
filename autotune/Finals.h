#pragma once
/** \file The rule that picks a workload's best program, used by the tuner's finals and by
 * every lookup of a log. When the tuner finished, its finalists have "re-measured" records
 * and only they compete, each at the median over those records of its fastest repeat
 * (Record::min_cost): the search's single timings rank candidates, the finals choose. A
 * run writes a workload's finals as one uninterrupted block, so the last block is the
 * latest verdict and supersedes older ones (measured, say, before the compiler or the
 * runtime changed). A log without finals (an interrupted run) counts each program at its
 * slowest measurement, not its luckiest. Measured records always beat estimated ones
 * (Record::estimate): an estimate wins only where nothing of the workload was measured.
 * The previous block's winner, where it is measured in the latest block too, stays the
 * winner unless another finalist's median is kKeepMargin faster: re-running the finals on a
 * noisy machine (`tune --resume --trials 1 --finals 8`) should not trade a program for one
 * that is only as fast. Two runs' finals with nothing measured between them are told apart by
 * their rounds: a run measures each finalist kFinalRounds times. */
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "autotune/Records.h"

namespace tessel::autotune {

// How much faster than the previous finals' winner a finalist must be to replace it.
constexpr double kKeepMargin = 0.03;
// Rounds of the finals: each finalist is measured this many times (Tuner::remeasure_best).
constexpr int kFinalRounds = 3;

// The best record per (workload key, target key); its costs are the one cost it won on.
std::map<std::pair<std::string, std::string>, Record> best_records(const std::vector<Record>& recs);

}  // namespace tessel::autotune
