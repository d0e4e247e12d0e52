// Deploy-time use of a tuning log: the best record of a workload on a target, the kernel
// built from it, and log maintenance (merge, keep the best).
#include <cmath>
#include <cstdio>
#include <map>

#include "autotune/Records.h"
#include "tessel/ops.h"

namespace tessel::autotune {

namespace {
// A program measured more than once (the tuner re-measures its best few) counts at its
// slowest measurement: what it reliably does, not its luckiest run. Returns, per
// (workload, target), the record holding the best program's slowest measurement.
std::map<std::pair<std::string, std::string>, Record> best_records(const std::vector<Record>& recs) {
  std::map<std::string, const Record*> slowest;  // by workload, target and steps
  for (const Record& r : recs) {
    if (!r.ok()) continue;
    const Record*& s = slowest[r.workload_key + "|" + r.target_key + "|" + steps_to_json(r.steps)];
    if (!s || r.mean_cost() > s->mean_cost()) s = &r;
  }
  std::map<std::pair<std::string, std::string>, Record> best;
  for (auto& [k, r] : slowest) {
    auto key = std::make_pair(r->workload_key, r->target_key);
    auto it = best.find(key);
    if (it == best.end() || r->mean_cost() < it->second.mean_cost()) best[key] = *r;
  }
  return best;
}
}  // namespace

std::optional<BestSchedule> best_schedule(const std::string& log_path, const Workload& w, const Target& target) {
  std::vector<Record> recs;
  for (Record& r : read_log(log_path))
    if (r.workload_key == w.key() && r.target_key == target.key()) recs.push_back(std::move(r));
  auto best = best_records(recs);
  if (best.empty()) return std::nullopt;
  const Record& r = best.begin()->second;
  return BestSchedule{r.steps, r.mean_cost(), r.target_str};
}

Module build_best(const std::string& log_path, const Workload& w, const Target& target, bool* found) {
  std::optional<BestSchedule> best = best_schedule(log_path, w, target);
  if (found) *found = best.has_value();
  if (best) return build(Schedule::replay(w.outputs, best->steps), w.args, {.name = w.op});
  std::fprintf(stderr,
               "tessel: WARNING: no tuning record for workload %s on target %s in log '%s'; building the "
               "DEFAULT schedule instead (expect lower performance; tune it with: tune --op %s ...)\n",
               w.key().c_str(), target.key().c_str(), log_path.c_str(), w.op.c_str());
  return build(ops::default_schedule(w.outputs), w.args, {.name = w.op});
}

namespace {
int write_records(const std::vector<Record>& recs, const std::string& output) {
  std::remove(output.c_str());
  LogWriter out(output);
  for (auto& r : recs) out.append(r);
  return int(recs.size());
}
}  // namespace

int merge_logs(const std::vector<std::string>& inputs, const std::string& output) {
  std::vector<Record> all;
  for (auto& in : inputs) {
    auto recs = read_log(in);
    all.insert(all.end(), recs.begin(), recs.end());
  }
  return write_records(all, output);
}

int keep_best(const std::string& input, const std::string& output) {
  std::vector<Record> recs;
  for (auto& [k, r] : best_records(read_log(input))) recs.push_back(r);
  return write_records(recs, output);
}

}  // namespace tessel::autotune
