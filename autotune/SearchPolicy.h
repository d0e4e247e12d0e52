#pragma once
/** \file What a round measures: evolutionary search over the cost model's predictions, plus
 * a random share (epsilon-greedy, larger until the model has shown it ranks the task well),
 * after the programs of a stand-in CPU. Candidates that do not lower, or are not valid on
 * the target, never fill a round. */
#include <random>
#include <vector>

#include "autotune/CostModel.h"
#include "autotune/TaskState.h"

namespace tessel::autotune {

class SearchPolicy {
 public:
  SearchPolicy(const TuneOptions& opts, std::mt19937_64& rng, const CostModel& model)
      : opts_(opts), rng_(rng), model_(model) {}
  // Up to n unmeasured candidates of the task (fewer when its space is exhausted). Those
  // drawn but not valid on the target are counted in the task's result.rejected.
  std::vector<Candidate> propose(TaskState& t, int n);
  // Before it is retrained on them: did the model order the task's `n` latest measurements
  // as they measured, clearly better than chance?
  bool model_ranks_latest(TaskState& t, size_t n) const;

 private:
  std::pair<std::vector<Candidate>, std::vector<Candidate>> evolve(TaskState& t);
  const TuneOptions& opts_;
  std::mt19937_64& rng_;
  const CostModel& model_;
};

}  // namespace tessel::autotune
