#pragma once
// How an output is compared with the expected one, by the library and the GPU runner alike.
#include <algorithm>
#include <cmath>
#include <cstdint>

namespace tessel {

// How two elements compare before their difference: 1 where they cannot be compared by it (one
// is NaN or infinite and the other is not the same), 0 where both are the same infinity, -1
// where both are finite.
inline int special(double x, double y) {
  if (std::isnan(x) != std::isnan(y)) return 1;
  if (std::isinf(x) || std::isinf(y)) return x != y;
  return -1;
}

// The largest |got - want| / max(1, |want|) over n elements (got(i), want(i) give them as
// doubles); infinite where one is NaN or infinite and the other is not the same.
template <typename Got, typename Want>
double max_relative_difference(int64_t n, Got got, Want want) {
  double worst = 0;
  for (int64_t i = 0; i < n; ++i) {
    double x = got(i), y = want(i);
    int k = special(x, y);
    if (k == 1) return INFINITY;
    if (k < 0) worst = std::max(worst, std::abs(x - y) / std::max(1.0, std::abs(y)));
  }
  return worst;
}

// The largest |got - want| relative to the largest finite |want| (at least 1): how the tuner
// and the GPU runner check a candidate. A schedule reorders the sums, and where outputs come
// out of cancellation (a Winograd convolution's output transform adds and subtracts terms up
// to 8x the result) an element's own size is the wrong scale: reordering alone moved
// ResNet-50's F(4x4) outputs by 1e-3 of themselves.
template <typename Got, typename Want>
double max_scaled_difference(int64_t n, Got got, Want want) {
  double worst = 0, scale = 1;
  for (int64_t i = 0; i < n; ++i) {
    double x = got(i), y = want(i);
    int k = special(x, y);
    if (k == 1) return INFINITY;
    if (k < 0) worst = std::max(worst, std::abs(x - y)), scale = std::max(scale, std::abs(y));
  }
  return worst / scale;
}

}  // namespace tessel
