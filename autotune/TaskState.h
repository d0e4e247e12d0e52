#pragma once
/** \file What the tuner knows of one task (a workload being tuned): its search space, its
 * measurements, the cost model's features of its candidates (cached by candidate key) and
 * its result so far. The search policy, the task scheduler, the history loader and the
 * finals all work on it. */
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "autotune/Measure.h"
#include "autotune/Records.h"
#include "autotune/SearchSpace.h"

namespace tessel::autotune {

struct Measured {
  Candidate cand;
  double seconds;  // +inf for errors
};

struct TaskState {
  Workload w;
  double weight = 1;
  std::unique_ptr<SearchSpace> space;
  std::unique_ptr<Measurer> measurer;
  std::string default_key;  // this build's default schedule (a log may hold older defaults)
  std::set<std::string> measured_keys;
  std::vector<Measured> measured;
  // The task's records on this target in its log, in log order: those the log held when the
  // run began and those the run appended (the finals' verdict is the log's: Finals.h).
  std::vector<Record> log;
  std::map<std::string, std::vector<float>> features;  // by candidate key
  TaskResult result;
  std::vector<double> best_history;  // best seconds after each round
  bool dead = false;
  bool model_trusted = false;  // the model has ranked one of this task's rounds before seeing it
  std::vector<Candidate> stand_ins;  // the best programs of another CPU, measured first (best first)
};

// Features of schedules' lowered programs (empty where one does not lower or is not valid
// on the target), lowered on all cores at once.
std::vector<std::vector<float>> program_features_of(const Workload& w, const Target& target,
                                                    const std::vector<const std::vector<Step>*>& steps);
// Fills the task's feature cache for these candidates.
void cache_features(TaskState& t, const Target& target, const std::vector<const Candidate*>& cands);
const std::vector<float>& features_of(TaskState& t, const Target& target, const Candidate& c);

// The cost model's label: the workload's best cost over this one (errors score 0).
float label(double best, double seconds);
// Best time measured for the task (+inf before any).
double best_seconds(const TaskState& t);
// The fastest valid program the search itself found: the default schedule (the only
// record without decisions) left out. Null before the search found one.
const Measured* best_searched(const TaskState& t);
// A record (measured now or read from a log) joins the task's measurements.
void add_measured(TaskState& t, const Candidate& c, const Record& rec);
// A log record as a candidate (its steps, decisions and key).
Candidate candidate_of(const Record& r);

}  // namespace tessel::autotune
