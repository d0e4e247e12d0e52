#include "autotune/Finals.h"

#include <algorithm>
#include <cmath>

namespace tessel::autotune {

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
    bool any_measured = std::any_of(rs.begin(), rs.end(), [](const Record* r) { return r->ok() && !r->estimate; });
    for (size_t i = 0; i < rs.size(); ++i) {
      if (!rs[i]->ok() || (any_measured && rs[i]->estimate)) continue;
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

}  // namespace tessel::autotune
