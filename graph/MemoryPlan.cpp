// The arena planner: lifetimes in, offsets out.
#include "graph/MemoryPlan.h"

#include <algorithm>
#include <numeric>

namespace tessel::graph {

MemoryPlan plan_memory(std::vector<TensorLifetime> uses, int64_t alignment) {
  MemoryPlan plan;
  size_t n = uses.size();
  auto root = [&](size_t k) {
    while (uses[k].alias >= 0) k = size_t(uses[k].alias);
    return k;
  };
  // An aliased chain is one block: the largest size, from the first write to the last read.
  std::vector<TensorLifetime> block = uses;
  for (size_t k = 0; k < n; ++k) {
    plan.separate_bytes += uses[k].bytes;
    size_t r = root(k);
    if (r == k) continue;
    block[r].bytes = std::max(block[r].bytes, uses[k].bytes);
    block[r].first = std::min(block[r].first, uses[k].first);
    block[r].last = std::max(block[r].last, uses[k].last);
  }
  std::vector<size_t> order;
  for (size_t k = 0; k < n; ++k)
    if (root(k) == k) order.push_back(k);
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return block[a].bytes > block[b].bytes; });
  plan.offsets.assign(n, -1);
  std::vector<size_t> placed;  // kept sorted by offset
  for (size_t k : order) {
    int64_t size = (block[k].bytes + alignment - 1) / alignment * alignment;
    int64_t at = 0, best = -1, best_gap = INT64_MAX;
    for (size_t p : placed) {
      if (block[p].last < block[k].first || block[k].last < block[p].first) continue;  // never alive together
      int64_t gap = plan.offsets[p] - at;
      if (gap >= size && gap < best_gap) best = at, best_gap = gap;
      at = std::max(at, plan.offsets[p] + (block[p].bytes + alignment - 1) / alignment * alignment);
    }
    plan.offsets[k] = best >= 0 ? best : at;
    plan.arena_bytes = std::max(plan.arena_bytes, plan.offsets[k] + size);
    placed.insert(std::upper_bound(placed.begin(), placed.end(), k,
                                   [&](size_t a, size_t b) { return plan.offsets[a] < plan.offsets[b]; }),
                  k);
  }
  for (size_t k = 0; k < n; ++k) plan.offsets[k] = plan.offsets[root(k)];
  return plan;
}

}  // namespace tessel::graph
