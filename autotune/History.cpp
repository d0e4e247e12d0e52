// Records from before this run: a resumed log, a stand-in CPU's, other workloads' history.
#include "autotune/History.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>

namespace tessel::autotune {
namespace {
constexpr size_t kStandIns = 16;           // programs of a stand-in CPU measured first, per task
constexpr size_t kStandInTraining = 1000;  // of its records, at most this many train the model

// Records in the resumed log of the tuned workloads on another CPU that stands in for
// this one (a log tuned on one x86 machine, resumed on another; see stands_in): that
// CPU's best programs are measured first, and its records train the cost model like
// history, each labelled against that CPU's own best. Their timings are not this CPU's, so
// they rank nothing here until measured again. (--history logs stay what they are: other
// workloads' records of this CPU.)
void add_stand_ins(const TuneOptions& opts, const std::vector<Record>& recs, Tasks& tasks, HistoryRows& history) {
  std::map<std::pair<TaskState*, std::string>, std::vector<const Record*>> by;  // (task, target key)
  for (auto& r : recs) {
    if (!stands_in(r, opts.target)) continue;
    for (auto& t : tasks)
      if (r.workload_key == t->w.key()) by[{t.get(), r.target_key}].push_back(&r);
  }
  for (auto& [key, rs] : by) {
    TaskState& t = *key.first;
    // The searched programs (the default is measured anyway) by their median cost there.
    std::map<std::string, std::pair<std::vector<double>, const Record*>> progs;
    double best = INFINITY;
    for (auto* r : rs) {
      best = std::min(best, r->mean_cost());
      if (!r->ok() || r->decisions.empty()) continue;
      auto& p = progs[steps_to_json(r->steps)];
      p.first.push_back(r->mean_cost());
      p.second = r;
    }
    std::vector<std::pair<double, const Record*>> ranked;
    for (auto& [k, p] : progs) ranked.emplace_back(median(p.first), p.second);
    std::sort(ranked.begin(), ranked.end(), [](auto& a, auto& b) { return a.first < b.first; });
    int seeded = 0;  // of its best kStandIns, those not measured here yet
    for (size_t i = 0; i < std::min(ranked.size(), kStandIns); ++i) {
      Candidate c = candidate_of(*ranked[i].second);
      bool known = std::any_of(t.stand_ins.begin(), t.stand_ins.end(), [&](auto& s) { return s.key == c.key; });
      if (t.measured_keys.count(c.key) || known) continue;
      t.stand_ins.push_back(std::move(c));
      ++seeded;
    }
    size_t trained = 0;
    if (opts.use_cost_model && !ranked.empty() && t.measured.size() < kStandInTraining) {
      // An even sample: feature extraction costs ~10 ms a record, and the logs of a
      // well-tuned layer hold thousands.
      size_t stride = (rs.size() + kStandInTraining - 1) / kStandInTraining;
      std::vector<const Record*> sample;
      for (size_t i = 0; i < rs.size(); i += stride) sample.push_back(rs[i]);
      std::vector<const std::vector<Step>*> steps;
      for (auto* r : sample) steps.push_back(&r->steps);
      std::vector<std::vector<float>> rows = program_features_of(t.w, opts.target, steps);
      for (size_t i = 0; i < sample.size(); ++i) {
        if (rows[i].empty()) continue;
        history.rows.push_back(std::move(rows[i]));
        history.labels.push_back(label(best, sample[i]->mean_cost()));
        history.kin.push_back(true);
        ++trained;
      }
    }
    std::fprintf(stderr,
                 "stand-in: %s was tuned on %s too: %d of its %zu best programs there are measured first here "
                 "(%s), %zu of its records there train the cost model\n",
                 t.w.key().c_str(), key.second.c_str(), seeded, std::min(ranked.size(), kStandIns),
                 opts.target.key().c_str(), trained);
  }
}

}  // namespace

// The budget covers what the log already holds: re-running a killed command finishes it.
int resume_log(const TuneOptions& opts, const std::vector<Record>& recs, Tasks& tasks, HistoryRows& history) {
  int loaded = 0;
  for (auto& rec : recs) {
    if (rec.target_key != opts.target.key()) continue;
    for (auto& t : tasks)
      if (rec.workload_key == t->w.key()) {
        Candidate c = candidate_of(rec);
        if (t->measured_keys.count(c.key)) continue;
        add_measured(*t, c, rec);
        ++t->result.trials;
        if (!rec.ok()) ++t->result.errors;
        ++loaded;
      }
  }
  add_stand_ins(opts, recs, tasks, history);
  if (loaded) std::fprintf(stderr, "resume: %d records from %s; they will not be measured again\n", loaded, opts.log.c_str());
  return loaded;
}

// Records of other workloads on this target become training data of the cost model from
// the first round on (TVM's load_history): what was learnt tuning similar operators on
// this machine ranks a new operator's first candidates. Records of the workloads being
// tuned are left to --resume, which also keeps them from being measured again.
void load_history(const TuneOptions& opts, const Tasks& tasks, HistoryRows& history) {
  std::set<std::string> tuned, tuned_ops;
  for (auto& t : tasks) tuned.insert(t->w.key()), tuned_ops.insert(t->w.op);
  std::map<std::string, std::vector<Record>> by_workload;
  for (auto& path : opts.history) {
    TESSEL_USER_CHECK(std::ifstream(path).good(), "tune: cannot read the history log '", path, "'");
    std::vector<std::string> warnings;
    for (auto& rec : read_log(path, &warnings))
      if (rec.target_key == opts.target.key() && !tuned.count(rec.workload_key))
        by_workload[rec.workload_key].push_back(std::move(rec));
    for (auto& w : warnings) std::fprintf(stderr, "warning: %s\n", w.c_str());
  }
  for (auto& [key, recs] : by_workload) {
    Workload w;
    try {
      w = make_workload(recs[0].op, recs[0].shape, DType::parse(recs[0].dtype));
    } catch (const Error& e) {
      std::fprintf(stderr, "history: skipped %s (%s)\n", key.c_str(), e.what());
      continue;
    }
    double best = INFINITY;
    std::vector<const std::vector<Step>*> steps;
    for (auto& r : recs) best = std::min(best, r.mean_cost()), steps.push_back(&r.steps);
    std::vector<std::vector<float>> rows = program_features_of(w, opts.target, steps);
    for (size_t i = 0; i < recs.size(); ++i) {
      if (rows[i].empty()) continue;
      history.rows.push_back(std::move(rows[i]));
      history.labels.push_back(label(best, recs[i].mean_cost()));
      history.kin.push_back(tuned_ops.count(w.op) > 0);
    }
  }
  std::fprintf(stderr, "history: %zu records of %zu other workloads train the cost model\n", history.rows.size(),
               by_workload.size());
}

}  // namespace tessel::autotune
