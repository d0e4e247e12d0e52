// The gradient-based task scheduler (MetaSchedule's estimate of each task's gain).
#include "autotune/TaskScheduler.h"

#include <cmath>

namespace tessel::autotune {

TaskState* pick_task(const Tasks& tasks) {
  std::vector<TaskState*> alive;
  for (auto& t : tasks)
    if (!t->dead) alive.push_back(t.get());
  if (alive.empty()) return nullptr;
  for (auto* t : alive)
    if (t->best_history.empty()) return t;
  // Gradient of the weighted total latency w.r.t. trials (MetaSchedule's estimate).
  TaskState* pick = nullptr;
  double best = -1;
  const double alpha = 0.2;
  for (auto* t : alive) {
    auto& L = t->best_history;
    size_t n = L.size();
    double last = std::isfinite(L.back()) ? L.back() : 1.0;
    double g1 = 0;
    const size_t win = 3;
    if (n > win && std::isfinite(L[n - 1 - win])) g1 = (L[n - 1 - win] - last) / win;
    double g2 = last / double(n);
    double grad = t->weight * (alpha * g1 + (1 - alpha) * g2);
    if (grad > best) best = grad, pick = t;
  }
  return pick;
}

}  // namespace tessel::autotune
