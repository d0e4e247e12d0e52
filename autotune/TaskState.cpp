#include "autotune/TaskState.h"

#include <atomic>
#include <cmath>
#include <mutex>
#include <thread>

#include "autotune/Features.h"
#include "passes/Lower.h"
#include "passes/Passes.h"

namespace tessel::autotune {
namespace {

// Statements a candidate may unroll to (as counted on its program lowered for features).
// Over some 12,000 measured candidates of ResNet-50's and MobileNetV2's convolutions (NCHW
// and NHWC) on the AVX-512 machine, none within 5% of its layer's best had more than 820;
// of those with 1,024 and more, 20 timed again warm ran 1.4-57x slower than the best. LLVM
// took 1-8 s over the largest (Winograd products under auto_unroll_max_step 512): on conv2d
// 64@56 3x3 they took a fifth of a 256-trial run's build time.
constexpr int64_t kMaxUnrolledStatements = 1024;

std::vector<float> features_of_steps(const Workload& w, const Target& target, const std::vector<Step>& steps) {
  try {
    Schedule s = Schedule::replay(w.outputs, steps);
    LoweredProgram prog = lower_for_features(s, w.args, target);
    if (!target.is_gpu() && unrolled_size(prog.func.body, 0).stmts > kMaxUnrolledStatements) return {};
    return candidate_features(prog, target);
  } catch (const Error&) {
    return {};  // a candidate that does not lower scores nothing; measuring it would fail the same way
  }
}

}  // namespace

// Lowering a few thousand candidates a round is most of what the guided search adds to a
// round's time (conv2d: ~12 ms each), and the workers are idle meanwhile. Lowering shares
// only the immutable compute definition between threads.
std::vector<std::vector<float>> program_features_of(const Workload& w, const Target& target,
                                                    const std::vector<const std::vector<Step>*>& steps) {
  std::vector<std::vector<float>> out(steps.size());
  std::atomic<size_t> next{0};
  std::exception_ptr failure;
  std::mutex failure_mutex;
  auto work = [&] {
    try {
      for (size_t i; (i = next++) < steps.size();) out[i] = features_of_steps(w, target, *steps[i]);
    } catch (...) {  // an internal error: raised again in the caller's thread
      std::lock_guard<std::mutex> lock(failure_mutex);
      failure = std::current_exception();
      next = steps.size();
    }
  };
  size_t n_threads = std::min<size_t>(steps.size(), std::max(1u, std::thread::hardware_concurrency()));
  std::vector<std::thread> threads;
  for (size_t i = 1; i < n_threads; ++i) threads.emplace_back(work);
  work();
  for (auto& th : threads) th.join();
  if (failure) std::rethrow_exception(failure);
  return out;
}

void cache_features(TaskState& t, const Target& target, const std::vector<const Candidate*>& cands) {
  std::vector<const Candidate*> todo;
  std::set<std::string> seen;
  for (auto* c : cands)
    if (!t.features.count(c->key) && seen.insert(c->key).second) todo.push_back(c);
  std::vector<const std::vector<Step>*> steps;
  for (auto* c : todo) steps.push_back(&c->steps);
  auto rows = program_features_of(t.w, target, steps);
  for (size_t i = 0; i < todo.size(); ++i) t.features.emplace(todo[i]->key, std::move(rows[i]));
}

const std::vector<float>& features_of(TaskState& t, const Target& target, const Candidate& c) {
  auto it = t.features.find(c.key);
  if (it != t.features.end()) return it->second;
  return t.features.emplace(c.key, features_of_steps(t.w, target, c.steps)).first->second;
}

float label(double best, double seconds) {
  return seconds > 0 && std::isfinite(seconds) && std::isfinite(best) ? float(best / seconds) : 0.f;
}

double best_seconds(const TaskState& t) {
  double b = INFINITY;
  for (auto& m : t.measured) b = std::min(b, m.seconds);
  return b;
}

const Measured* best_searched(const TaskState& t) {
  const Measured* b = nullptr;
  for (auto& m : t.measured)
    if (!m.cand.decisions.empty() && std::isfinite(m.seconds) && (!b || m.seconds < b->seconds)) b = &m;
  return b;
}

void add_measured(TaskState& t, const Candidate& c, const Record& rec) {
  t.measured_keys.insert(c.key);
  t.measured.push_back({c, rec.mean_cost()});
  if (rec.ok() && (t.result.best_seconds == 0 || rec.mean_cost() < t.result.best_seconds)) {
    t.result.best_seconds = rec.mean_cost();
    t.result.best_gflops = t.w.flops > 0 ? t.w.flops / t.result.best_seconds / 1e9 : 0;
    t.result.best_steps = c.steps;
  }
}

Candidate candidate_of(const Record& r) {
  Candidate c;
  c.steps = r.steps;
  c.decisions = r.decisions;
  c.key = steps_to_json(r.steps);
  return c;
}

}  // namespace tessel::autotune
