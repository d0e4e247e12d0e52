#pragma once
/** \file The learned cost model: gradient-boosted trees (XGBoost, through its C API) that
 * map a candidate's program features (Features.h) to its normalised throughput
 * (best cost of its workload / its cost, so the best known program scores 1). Retrained
 * from all measurements after every round; saved with the feature version it was
 * trained on. */
#include <cstdint>
#include <string>
#include <vector>

namespace tessel::autotune {

class CostModel {
 public:
  // `target_kind` ("llvm", "cuda", "opencl") is saved with the model; load refuses another.
  explicit CostModel(uint64_t seed = 1, std::string target_kind = "llvm");
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
  // Throws tessel::Error on a missing file, another feature version or another target kind.
  void load(const std::string& path);

 private:
  void* booster_ = nullptr;
  uint64_t seed_;
  int samples_ = 0;
  std::string kind_;
};

// How often the model orders two candidates as their measurements do (0.5: chance), over
// pairs more than 5% apart (closer is noise); errors (infinite seconds) are slowest.
// -1 with fewer than 10 such pairs.
double pairwise_accuracy(const std::vector<float>& predicted, const std::vector<double>& seconds);

}  // namespace tessel::autotune
