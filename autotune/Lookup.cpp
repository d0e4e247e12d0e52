// Deploy-time use of a tuning log: the best record of a workload on a target, the kernel
// built from it, and log maintenance (merge, keep the best).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>

#include "autotune/Records.h"
#include "tessel/ops.h"

namespace tessel::autotune {

namespace {
// The best record per (workload, target). When the tuner finished, its finalists have
// "re-measured" records and only they compete, each at the median over those records of
// their fastest repeat (Record::min_cost): the search's single timings rank candidates,
// the finals choose. A run writes a workload's finals as one uninterrupted block, so the
// last block is the latest verdict and supersedes older ones (measured, say, before the
// compiler or the runtime changed). A log without finals (an
// interrupted run) counts each program at its slowest measurement, not its luckiest.
std::map<std::pair<std::string, std::string>, Record> best_records(const std::vector<Record>& recs) {
  struct Program {
    const Record* slowest = nullptr;
    std::vector<double> finals;
  };
  std::map<std::pair<std::string, std::string>, std::vector<const Record*>> by_key;  // in log order
  for (const Record& r : recs) by_key[{r.workload_key, r.target_key}].push_back(&r);
  std::map<std::pair<std::string, std::string>, Record> best;
  for (auto& [key, rs] : by_key) {
    size_t end = rs.size(), begin;
    while (end > 0 && rs[end - 1]->message != kRemeasuredMessage) --end;
    for (begin = end; begin > 0 && rs[begin - 1]->message == kRemeasuredMessage;) --begin;
    std::map<std::string, Program> progs;
    for (size_t i = 0; i < rs.size(); ++i) {
      if (!rs[i]->ok()) continue;
      Program& p = progs[steps_to_json(rs[i]->steps)];
      if (!p.slowest || rs[i]->mean_cost() > p.slowest->mean_cost()) p.slowest = rs[i];
      if (i >= begin && i < end) p.finals.push_back(rs[i]->min_cost());
    }
    bool finals = std::any_of(progs.begin(), progs.end(), [](auto& p) { return !p.second.finals.empty(); });
    double best_cost = INFINITY;
    for (auto& [steps, p] : progs) {
      if (finals && p.finals.empty()) continue;
      double c = finals ? median(p.finals) : p.slowest->mean_cost();
      if (c >= best_cost) continue;
      best_cost = c;
      Record r = *p.slowest;
      r.costs = {c};  // the cost the choice was made on
      best[key] = r;
    }
  }
  return best;
}
}  // namespace

std::optional<BestSchedule> best_schedule(const std::string& log_path, const Workload& w, const Target& target,
                                          bool stand_in) {
  std::vector<Record> own;
  std::map<std::string, std::vector<Record>> others;  // by target key
  for (Record& r : read_log(log_path)) {
    if (r.workload_key != w.key()) continue;
    if (r.target_key == target.key()) own.push_back(std::move(r));
    else if (stand_in && stands_in(r, target)) others[r.target_key].push_back(std::move(r));
  }
  // Without records of this CPU: those of the CPU that stands in best (most records on a tie).
  if (own.empty()) {
    std::pair<double, size_t> best_score{-1, 0};
    for (auto& [key, recs] : others) {
      std::pair<double, size_t> score{stand_in_score(recs[0], target), recs.size()};
      if (score > best_score) best_score = score, own = std::move(recs);
    }
  }
  auto best = best_records(own);
  if (best.empty()) return std::nullopt;
  const Record& r = best.begin()->second;
  return BestSchedule{r.steps, r.mean_cost(), r.target_str, r.target_key};
}

Module build_best(const std::string& log_path, const Workload& w, const Target& target, bool* found) {
  std::optional<BestSchedule> best = best_schedule(log_path, w, target, /*stand_in=*/true);
  if (found) *found = best.has_value();
  if (best && best->target_key != target.key())
    std::fprintf(stderr,
                 "tessel: WARNING: no tuning record for workload %s on target %s in log '%s'; building the schedule "
                 "tuned on %s instead (a CPU of the same vector width: expect it to be slower here than one tuned "
                 "on this CPU; `tune ... --log %s --resume` starts from it)\n",
                 w.key().c_str(), target.key().c_str(), log_path.c_str(), best->target_key.c_str(),
                 log_path.c_str());
  if (best) return build(Schedule::replay(w.outputs, best->steps), w.args, {.name = w.op, .target = target});
  std::fprintf(stderr,
               "tessel: WARNING: no tuning record for workload %s on target %s (or a CPU of the same vector width) "
               "in log '%s'; building the DEFAULT schedule instead (expect lower performance; tune it with: tune "
               "--op %s ...)\n",
               w.key().c_str(), target.key().c_str(), log_path.c_str(), w.op.c_str());
  return build(ops::default_schedule(w.outputs, target), w.args, {.name = w.op, .target = target});
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
