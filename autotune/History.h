#pragma once
/** \file What a tuning run starts from besides its own measurements: the records of a
 * resumed log (never measured again), the best programs of a CPU that stands in for this
 * one, and other workloads' records on this target (--history), which train the cost
 * model from the first round on. */
#include <memory>
#include <vector>

#include "autotune/TaskState.h"

namespace tessel::autotune {

// Cost-model rows from records that are not the tasks' own measurements on this target.
struct HistoryRows {
  std::vector<std::vector<float>> rows;
  std::vector<float> labels;
  std::vector<bool> kin;  // the record's operator is one being tuned
};

using Tasks = std::vector<std::unique_ptr<TaskState>>;

// --resume: the log's records (`recs`) of the tasks on this target join their measurements; records
// of a stand-in CPU seed each task's first candidates and add rows. Returns the number of
// records loaded (they count against the budget).
int resume_log(const TuneOptions& opts, const std::vector<Record>& recs, Tasks& tasks, HistoryRows& history);
// --history: other workloads' records on this target become rows.
void load_history(const TuneOptions& opts, const Tasks& tasks, HistoryRows& history);

}  // namespace tessel::autotune
