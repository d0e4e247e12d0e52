#include "autotune/Finals.h"

#include <algorithm>
#include <cmath>

namespace tessel::autotune {
namespace {

struct Program {
  const Record* slowest = nullptr;
  std::vector<double> finals;
};

struct Verdict {
  std::string steps;  // the program's steps as JSON; empty: no program
  Record record;
};

// The verdict of one workload's first n records (in log order; `programs` their steps as
// JSON): the program a lookup of the log, cut there, returns.
Verdict verdict(const std::vector<const Record*>& rs, const std::vector<std::string>& programs, size_t n) {
  size_t end = n, begin;
  while (end > 0 && rs[end - 1]->message != kRemeasuredMessage) --end;
  // The latest run's finals: back from the end while no program has run more than its rounds
  // (an earlier run's finals may follow with nothing measured between them).
  std::map<std::string, int> rounds;
  for (begin = end; begin > 0 && rs[begin - 1]->message == kRemeasuredMessage; --begin)
    if (++rounds[programs[begin - 1]] > kFinalRounds) break;
  std::map<std::string, Program> progs;
  bool any_measured = std::any_of(rs.begin(), rs.begin() + n, [](const Record* r) { return r->ok() && !r->estimate; });
  for (size_t i = 0; i < n; ++i) {
    if (!rs[i]->ok() || (any_measured && rs[i]->estimate)) continue;
    Program& p = progs[programs[i]];
    if (!p.slowest || rs[i]->mean_cost() > p.slowest->mean_cost()) p.slowest = rs[i];
    if (i >= begin && i < end) p.finals.push_back(rs[i]->min_cost());
  }
  bool finals = std::any_of(progs.begin(), progs.end(), [](auto& p) { return !p.second.finals.empty(); });
  auto cost = [&](const Program& p) { return finals ? median(p.finals) : p.slowest->mean_cost(); };
  Verdict v;
  double best_cost = INFINITY;
  for (auto& [steps, p] : progs) {
    if (finals && p.finals.empty()) continue;
    if (double c = cost(p); c < best_cost) best_cost = c, v.steps = steps;
  }
  if (v.steps.empty()) return v;
  // The previous finals' winner, measured in these finals too, stays unless beaten by the margin.
  if (finals && begin > 0) {
    Verdict before = verdict(rs, programs, begin);
    auto kept = progs.find(before.steps);
    if (kept != progs.end() && !kept->second.finals.empty() && cost(kept->second) * (1 - kKeepMargin) <= best_cost)
      best_cost = cost(kept->second), v.steps = before.steps;
  }
  v.record = *progs[v.steps].slowest;
  v.record.costs = {best_cost};  // the cost the choice was made on
  return v;
}

}  // namespace

std::map<std::pair<std::string, std::string>, Record> best_records(const std::vector<Record>& recs) {
  std::map<std::pair<std::string, std::string>, std::vector<const Record*>> by_key;  // in log order
  for (const Record& r : recs) by_key[{r.workload_key, r.target_key}].push_back(&r);
  std::map<std::pair<std::string, std::string>, Record> best;
  for (auto& [key, rs] : by_key) {
    std::vector<std::string> programs;
    for (const Record* r : rs) programs.push_back(steps_to_json(r->steps));
    Verdict v = verdict(rs, programs, rs.size());
    if (!v.steps.empty()) best[key] = v.record;
  }
  return best;
}

}  // namespace tessel::autotune
