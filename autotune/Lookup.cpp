// Deploy-time use of a tuning log: the best record of a workload on a target, the kernel
// built from it, and log maintenance (merge, keep the best).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <map>
#include <tuple>

#include "autotune/Finals.h"
#include "runtime/ModuleImpl.h"
#include "tessel/ops.h"

namespace tessel::autotune {


namespace {
bool measured(const std::vector<Record>& recs) {
  return std::any_of(recs.begin(), recs.end(), [](const Record& r) { return r.ok() && !r.estimate; });
}
}  // namespace

TuningLog::TuningLog(const std::string& path)
    : records_(std::make_shared<const std::vector<Record>>(read_log(path))) {}

std::optional<BestSchedule> best_schedule(const std::string& log_path, const Workload& w, const Target& target,
                                          bool stand_in) {
  return TuningLog(log_path).best(w, target, stand_in);
}

std::optional<BestSchedule> TuningLog::best(const Workload& w, const Target& target, bool stand_in) const {
  std::vector<Record> own;
  std::map<std::string, std::vector<Record>> others;  // by target key
  for (const Record& r : *records_) {
    if (r.workload_key != w.key()) continue;
    if (r.target_key == target.key()) own.push_back(r);
    else if (stand_in && stands_in(r, target)) others[r.target_key].push_back(r);
  }
  // Without measurements of this target: those of the one that stands in best (most records
  // on a tie), measured ones before estimates.
  if (!measured(own)) {
    std::tuple<bool, double, size_t> best_score{false, -1, 0};
    std::vector<Record>* pick = nullptr;
    for (auto& [key, recs] : others) {
      std::tuple<bool, double, size_t> score{measured(recs), stand_in_score(recs[0], target), recs.size()};
      if (score > best_score) best_score = score, pick = &recs;
    }
    if (pick && (std::get<0>(best_score) || own.empty())) own = std::move(*pick);
  }
  auto best = best_records(own);
  if (best.empty()) return std::nullopt;
  const Record& r = best.begin()->second;
  return BestSchedule{r.steps, r.mean_cost(), r.target_str, r.target_key, r.estimate};
}

namespace {
// The convolution by Winograd's algorithm where the log's record of it beats the direct one's
// on the same machine: a Module that takes the caller's weights and transforms them once.
std::optional<Module> build_winograd(const std::string& log_path, const Workload& w, const Target& target,
                                     const std::optional<BestSchedule>& direct) {
  std::optional<Workload> wino = winograd_companion(w, target);
  if (!wino) return std::nullopt;
  std::optional<BestSchedule> best = best_schedule(log_path, *wino, target, /*stand_in=*/true);
  if (!best || best->estimate) return std::nullopt;
  if (direct && (direct->target_key != best->target_key || direct->seconds <= best->seconds)) return std::nullopt;
  Module kernel;
  try {
    kernel = build(Schedule::replay(wino->outputs, best->steps), wino->args, {.name = w.op, .target = target});
  } catch (const Error& e) {
    std::fprintf(stderr, "tessel: WARNING: the best record for workload %s in log '%s' does not build (%s); using "
                 "the direct convolution's\n", wino->key().c_str(), log_path.c_str(), e.what());
    return std::nullopt;
  }
  int64_t cb = wino->shape.at("cb"), kb = wino->shape.at("kb"), m = wino->shape.at("m");
  const Tensor& W = w.args[1];
  ArgSpec caller{W.name(), W.shape(), W.dtype()};
  std::string what = "winograd F(" + std::to_string(m) + "x" + std::to_string(m) + ", 3x3)";
  return with_transformed_input(kernel, 1, caller, what, [=, wino = *wino](const void* src, Buffer& U) {
    Buffer weights(caller.shape, caller.dtype);
    std::memcpy(weights.raw(), src, size_t(weights.bytes()));
    Buffer u = wino.layout == "NHWC" ? ops::winograd_weights_hwio(weights, cb, kb, m)
                                      : ops::winograd_weights_oihw(weights, cb, kb, m);
    std::memcpy(U.raw(), u.raw(), size_t(U.bytes()));
  });
}
}  // namespace

Module build_best(const std::string& log_path, const Workload& w, const Target& target, bool* found) {
  std::optional<BestSchedule> best = best_schedule(log_path, w, target, /*stand_in=*/true);
  if (std::optional<Module> m = build_winograd(log_path, w, target, best)) {
    if (found) *found = true;
    return *m;
  }
  if (found) *found = best.has_value();
  if (best && best->estimate)
    std::fprintf(stderr,
                 "tessel: WARNING: the record for workload %s in log '%s' is ESTIMATED (%s was tuned without a GPU: "
                 "nothing was measured); `tune --target %s --resume` on a machine with the GPU measures it\n",
                 w.key().c_str(), log_path.c_str(), best->target_key.c_str(), target.str().c_str());
  else if (best && best->target_key != target.key() && best->target_key.rfind(target.key() + "/", 0) != 0)
    std::fprintf(stderr,
                 "tessel: WARNING: no tuning record for workload %s on target %s in log '%s'; building the schedule "
                 "tuned on %s instead (a CPU of the same vector width: expect it to be slower here than one tuned "
                 "on this CPU; `tune ... --log %s --resume` starts from it)\n",
                 w.key().c_str(), target.key().c_str(), log_path.c_str(), best->target_key.c_str(),
                 log_path.c_str());
  if (best) {
    // A record edited or corrupted into steps that no longer fit this workload must not take
    // the deployment down: say so, and build the default schedule.
    try {
      return build(Schedule::replay(w.outputs, best->steps), w.args, {.name = w.op, .target = target});
    } catch (const Error& e) {
      std::fprintf(stderr,
                   "tessel: WARNING: the best record for workload %s in log '%s' does not build (%s); building the "
                   "DEFAULT schedule instead (re-tune, or remove the record with `tune --keep-best`)\n",
                   w.key().c_str(), log_path.c_str(), e.what());
      if (found) *found = false;
      return build(default_schedule(w, target), w.args, {.name = w.op, .target = target});
    }
  }
  std::fprintf(stderr,
               "tessel: WARNING: no tuning record for workload %s on target %s (or a CPU of the same vector width) "
               "in log '%s'; building the DEFAULT schedule instead (expect lower performance; tune it with: tune "
               "--op %s ...)\n",
               w.key().c_str(), target.key().c_str(), log_path.c_str(), w.op.c_str());
  return build(default_schedule(w, target), w.args, {.name = w.op, .target = target});
}

namespace {
int write_records(const std::vector<Record>& recs, const std::string& output) {
  std::remove(output.c_str());
  LogWriter out(output);
  for (auto& r : recs) out.append(r);
  return int(recs.size());
}
}  // namespace

int merge_logs(const std::vector<std::string>& inputs, const std::string& output) {
  std::vector<Record> all;
  for (auto& in : inputs) {
    auto recs = read_log(in);
    all.insert(all.end(), recs.begin(), recs.end());
  }
  return write_records(all, output);
}

int keep_best(const std::string& input, const std::string& output) {
  std::vector<Record> recs;
  for (auto& [k, r] : best_records(read_log(input))) recs.push_back(r);
  return write_records(recs, output);
}

}  // namespace tessel::autotune
