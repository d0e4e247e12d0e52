#pragma once
// How an output is compared with the expected one, by the library and the GPU runner alike.
#include <algorithm>
#include <cmath>
#include <cstdint>

namespace tessel {

// The largest |got - want| / max(1, |want|) over n elements (got(i), want(i) give them as
// doubles); infinite where one is NaN or infinite and the other is not the same.
template <typename Got, typename Want>
double max_relative_difference(int64_t n, Got got, Want want) {
  double worst = 0;
  for (int64_t i = 0; i < n; ++i) {
    double x = got(i), y = want(i);
    if (std::isnan(x) != std::isnan(y)) return INFINITY;
    if (std::isinf(x) || std::isinf(y)) {
      if (x != y) return INFINITY;
      continue;
    }
    worst = std::max(worst, std::abs(x - y) / std::max(1.0, std::abs(y)));
  }
  return worst;
}

}  // namespace tessel
