#include "autotune/CostModel.h"

#include <xgboost/c_api.h>

#include <algorithm>
#include <cmath>
#include <string>

#include "autotune/Features.h"
#include "tessel/error.h"

namespace tessel::autotune {
namespace {

void check(int rc, const char* what) {
  if (rc != 0) throw Error(std::string("XGBoost ") + what + " failed: " + XGBGetLastError());
}

struct DMatrix {
  DMatrixHandle h = nullptr;
  // Rows of one width: kProgramFeatures on a CPU, more on a GPU (Features.h).
  DMatrix(const std::vector<std::vector<float>>& rows) {
    size_t width = rows.empty() ? size_t(kProgramFeatures) : rows[0].size();
    std::vector<float> flat;
    flat.reserve(rows.size() * width);
    for (auto& r : rows) {
      TESSEL_INTERNAL_CHECK(r.size() == width, "feature rows of sizes ", r.size(), " and ", width);
      flat.insert(flat.end(), r.begin(), r.end());
    }
    check(XGDMatrixCreateFromMat(flat.data(), rows.size(), width, NAN, &h), "DMatrix");
  }
  ~DMatrix() { XGDMatrixFree(h); }
};

}  // namespace

CostModel::CostModel(uint64_t seed, std::string target_kind) : seed_(seed), kind_(std::move(target_kind)) {}
CostModel::~CostModel() {
  if (booster_) XGBoosterFree(booster_);
}

void CostModel::train(const std::vector<std::vector<float>>& rows, const std::vector<float>& labels,
                      const std::vector<float>& importance) {
  if (rows.size() < 8) return;  // too little to learn from; keep the previous model
  DMatrix d(rows);
  check(XGDMatrixSetFloatInfo(d.h, "label", labels.data(), labels.size()), "labels");
  // Good programs matter most (Ansor weighs samples by their label).
  std::vector<float> w(labels.size());
  for (size_t i = 0; i < labels.size(); ++i) w[i] = (0.1f + labels[i]) * (importance.empty() ? 1.f : importance[i]);
  check(XGDMatrixSetFloatInfo(d.h, "weight", w.data(), w.size()), "weights");
  BoosterHandle b;
  check(XGBoosterCreate(&d.h, 1, &b), "booster");
  auto set = [&](const char* k, const std::string& v) { check(XGBoosterSetParam(b, k, v.c_str()), k); };
  set("objective", "reg:squarederror");
  set("max_depth", "8");
  set("eta", "0.2");
  set("gamma", "0.001");
  set("min_child_weight", "0");
  set("subsample", "1");
  set("nthread", "1");  // the other core is measuring or compiling
  set("seed", std::to_string(seed_));
  set("verbosity", "0");
  int rounds = int(std::clamp<size_t>(rows.size() / 4, 30, 150));
  for (int i = 0; i < rounds; ++i) check(XGBoosterUpdateOneIter(b, i, d.h), "training");
  check(XGBoosterSetAttr(b, "tessel_feature_version", std::to_string(kFeatureVersion).c_str()), "attribute");
  check(XGBoosterSetAttr(b, "tessel_target_kind", kind_.c_str()), "attribute");
  if (booster_) XGBoosterFree(booster_);
  booster_ = b;
  samples_ = int(rows.size());
}

std::vector<float> CostModel::predict(const std::vector<std::vector<float>>& rows) const {
  std::vector<float> out(rows.size(), 0.f);
  if (!booster_ || rows.empty()) return out;
  DMatrix d(rows);
  bst_ulong len = 0;
  const float* res = nullptr;
  check(XGBoosterPredict(booster_, d.h, 0, 0, 0, &len, &res), "prediction");
  std::copy(res, res + std::min<size_t>(len, out.size()), out.begin());
  return out;
}

double pairwise_accuracy(const std::vector<float>& predicted, const std::vector<double>& seconds) {
  int agree = 0, pairs = 0;
  for (size_t i = 0; i < seconds.size(); ++i)
    for (size_t j = i + 1; j < seconds.size(); ++j) {
      double a = seconds[i], b = seconds[j];
      if (std::isinf(a) && std::isinf(b)) continue;
      if (std::abs(a - b) < 0.05 * std::min(a, b)) continue;
      ++pairs;
      agree += (predicted[i] > predicted[j]) == (a < b);
    }
  return pairs < 10 ? -1 : double(agree) / pairs;
}

void CostModel::save(const std::string& path) const {
  TESSEL_USER_CHECK(booster_, "save: the cost model has not been trained yet");
  check(XGBoosterSaveModel(booster_, path.c_str()), "saving the model");
}

void CostModel::load(const std::string& path) {
  BoosterHandle b;
  check(XGBoosterCreate(nullptr, 0, &b), "booster");
  if (XGBoosterLoadModel(b, path.c_str()) != 0) {
    XGBoosterFree(b);
    throw Error("cannot load cost model '" + path + "': " + XGBGetLastError());
  }
  const char* v = nullptr;
  int ok = 0;
  XGBoosterGetAttr(b, "tessel_feature_version", &v, &ok);
  if (!ok || std::string(v) != std::to_string(kFeatureVersion)) {
    XGBoosterFree(b);
    throw Error("cost model '" + path + "' was trained on feature version " + (ok ? std::string(v) : "?") +
                "; this Tessel extracts version " + std::to_string(kFeatureVersion) + " (train a new one)");
  }
  XGBoosterGetAttr(b, "tessel_target_kind", &v, &ok);
  std::string kind = ok && v ? v : "llvm";
  if (kind != kind_) {
    XGBoosterFree(b);
    throw Error("cost model '" + path + "' was trained for " + kind + " targets; this run tunes for " + kind_ +
                " (its features differ: train a new one for " + kind_ + ")");
  }
  if (booster_) XGBoosterFree(booster_);
  booster_ = b;
  samples_ = 1;
}

}  // namespace tessel::autotune
