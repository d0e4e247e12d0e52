#pragma once
/** \file The learned cost model: gradient-boosted trees (XGBoost, through its C API) that
 * map a candidate's program features (Features.h) to its normalised throughput
 * (best cost of its workload / its cost, so the best known program scores 1). Retrained
 * from all measurements after every round; saved with the feature version it was
 * trained on. */
#include <string>
#include <vector>

namespace tessel::autotune {

class CostModel {
 public:
  explicit CostModel(uint64_t seed = 1);
  ~CostModel();
  CostModel(const CostModel&) = delete;
  CostModel& operator=(const CostModel&) = delete;

  // rows: program features; labels in [0, 1]; importance: how much each row counts
  // (empty: all alike), on top of the label weighting.
  void train(const std::vector<std::vector<float>>& rows, const std::vector<float>& labels,
             const std::vector<float>& importance = {});
  // Higher is faster. Before any training, all zero.
  std::vector<float> predict(const std::vector<std::vector<float>>& rows) const;
  bool trained() const { return booster_ != nullptr; }
  int samples() const { return samples_; }
  void save(const std::string& path) const;
  void load(const std::string& path);  // throws tessel::Error on a missing file or another feature version

 private:
  void* booster_ = nullptr;
  uint64_t seed_;
  int samples_ = 0;
};

// How often the model orders two candidates as their measurements do (0.5: chance), over
// pairs more than 5% apart (closer is noise); errors (infinite seconds) are slowest.
// -1 with fewer than 10 such pairs.
double pairwise_accuracy(const std::vector<float>& predicted, const std::vector<double>& seconds);

}  // namespace tessel::autotune
