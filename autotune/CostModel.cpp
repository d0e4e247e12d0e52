#include "autotune/CostModel.h"

#include <dlfcn.h>
#include <xgboost/c_api.h>

#include <algorithm>
#include <cmath>
#include <mutex>
#include <string>

#include "autotune/Features.h"
#include "tessel/error.h"

namespace tessel::autotune {
namespace {

// XGBoost's C API, loaded when the tuner first needs it: a program that only builds kernels
// or reads a tuning log does not depend on libxgboost. The header gives the types.
struct XGBoost {
  decltype(&XGBGetLastError) last_error = nullptr;
  decltype(&XGDMatrixCreateFromMat) matrix = nullptr;
  decltype(&XGDMatrixSetFloatInfo) set_info = nullptr;
  decltype(&XGDMatrixFree) free_matrix = nullptr;
  decltype(&XGBoosterCreate) create = nullptr;
  decltype(&XGBoosterFree) free = nullptr;
  decltype(&XGBoosterSetParam) set_param = nullptr;
  decltype(&XGBoosterUpdateOneIter) update = nullptr;
  decltype(&XGBoosterPredict) predict = nullptr;
  decltype(&XGBoosterSetAttr) set_attr = nullptr;
  decltype(&XGBoosterGetAttr) get_attr = nullptr;
  decltype(&XGBoosterSaveModel) save = nullptr;
  decltype(&XGBoosterLoadModel) load = nullptr;
};

const XGBoost& xgb() {
  static XGBoost x;
  static std::string error;
  static std::once_flag once;
  std::call_once(once, [] {
    void* lib = nullptr;
    for (const char* name : {"libxgboost.so.0", "libxgboost.so"})
      if ((lib = dlopen(name, RTLD_NOW | RTLD_LOCAL))) break;
    if (!lib) {
      error = "the tuner's cost model needs XGBoost (libxgboost.so.0), which could not be loaded: install it "
              "(Debian: apt-get install libxgboost0), or tune with random search (`tune --random-search`)";
      return;
    }
    auto sym = [&](auto& fn, const char* name) {
      fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(dlsym(lib, name));
      if (!fn && error.empty())
        error = std::string("libxgboost has no symbol ") + name + ": install XGBoost 1.6 or later";
    };
    sym(x.last_error, "XGBGetLastError");
    sym(x.matrix, "XGDMatrixCreateFromMat");
    sym(x.set_info, "XGDMatrixSetFloatInfo");
    sym(x.free_matrix, "XGDMatrixFree");
    sym(x.create, "XGBoosterCreate");
    sym(x.free, "XGBoosterFree");
    sym(x.set_param, "XGBoosterSetParam");
    sym(x.update, "XGBoosterUpdateOneIter");
    sym(x.predict, "XGBoosterPredict");
    sym(x.set_attr, "XGBoosterSetAttr");
    sym(x.get_attr, "XGBoosterGetAttr");
    sym(x.save, "XGBoosterSaveModel");
    sym(x.load, "XGBoosterLoadModel");
  });
  if (!error.empty()) throw Error(error);
  return x;
}

void check(int rc, const char* what) {
  if (rc != 0) throw Error(std::string("XGBoost ") + what + " failed: " + xgb().last_error());
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
    check(xgb().matrix(flat.data(), rows.size(), width, NAN, &h), "DMatrix");
  }
  ~DMatrix() { xgb().free_matrix(h); }
};

}  // namespace

CostModel::CostModel(uint64_t seed, std::string target_kind) : seed_(seed), kind_(std::move(target_kind)) {}
CostModel::~CostModel() {
  if (booster_) xgb().free(booster_);
}

void CostModel::train(const std::vector<std::vector<float>>& rows, const std::vector<float>& labels,
                      const std::vector<float>& importance) {
  if (rows.size() < 8) return;  // too little to learn from; keep the previous model
  DMatrix d(rows);
  check(xgb().set_info(d.h, "label", labels.data(), labels.size()), "labels");
  // Good programs matter most (Ansor weighs samples by their label).
  std::vector<float> w(labels.size());
  for (size_t i = 0; i < labels.size(); ++i) w[i] = (0.1f + labels[i]) * (importance.empty() ? 1.f : importance[i]);
  check(xgb().set_info(d.h, "weight", w.data(), w.size()), "weights");
  BoosterHandle b;
  check(xgb().create(&d.h, 1, &b), "booster");
  auto set = [&](const char* k, const std::string& v) { check(xgb().set_param(b, k, v.c_str()), k); };
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
  for (int i = 0; i < rounds; ++i) check(xgb().update(b, i, d.h), "training");
  check(xgb().set_attr(b, "tessel_feature_version", std::to_string(kFeatureVersion).c_str()), "attribute");
  check(xgb().set_attr(b, "tessel_target_kind", kind_.c_str()), "attribute");
  if (booster_) xgb().free(booster_);
  booster_ = b;
  samples_ = int(rows.size());
}

std::vector<float> CostModel::predict(const std::vector<std::vector<float>>& rows) const {
  std::vector<float> out(rows.size(), 0.f);
  if (!booster_ || rows.empty()) return out;
  DMatrix d(rows);
  bst_ulong len = 0;
  const float* res = nullptr;
  check(xgb().predict(booster_, d.h, 0, 0, 0, &len, &res), "prediction");
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
  check(xgb().save(booster_, path.c_str()), "saving the model");
}

void CostModel::load(const std::string& path) {
  BoosterHandle b;
  check(xgb().create(nullptr, 0, &b), "booster");
  if (xgb().load(b, path.c_str()) != 0) {
    xgb().free(b);
    throw Error("cannot load cost model '" + path + "': " + xgb().last_error());
  }
  const char* v = nullptr;
  int ok = 0;
  xgb().get_attr(b, "tessel_feature_version", &v, &ok);
  if (!ok || std::string(v) != std::to_string(kFeatureVersion)) {
    xgb().free(b);
    throw Error("cost model '" + path + "' was trained on feature version " + (ok ? std::string(v) : "?") +
                "; this Tessel extracts version " + std::to_string(kFeatureVersion) + " (train a new one)");
  }
  xgb().get_attr(b, "tessel_target_kind", &v, &ok);
  std::string kind = ok && v ? v : "llvm";
  if (kind != kind_) {
    xgb().free(b);
    throw Error("cost model '" + path + "' was trained for " + kind + " targets; this run tunes for " + kind_ +
                " (its features differ: train a new one for " + kind_ + ")");
  }
  if (booster_) xgb().free(booster_);
  booster_ = b;
  samples_ = 1;
}

}  // namespace tessel::autotune
