// The tuning loop. One round for one task: propose candidates (evolutionary search ranked
// by the cost model, plus a random share), measure them in worker processes, append the
// records to the log, retrain the model. A task scheduler picks the task of each round.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <thread>

#include "autotune/CostModel.h"
#include "autotune/Features.h"
#include "autotune/Measure.h"
#include "autotune/Records.h"
#include "autotune/SearchSpace.h"
#include "passes/Lower.h"
#include "tessel/ops.h"

namespace tessel::autotune {
namespace {

using Clock = std::chrono::steady_clock;

struct Measured {
  Candidate cand;
  double seconds;  // +inf for errors
};

struct TaskState {
  Workload w;
  double weight = 1;
  std::unique_ptr<SearchSpace> space;
  std::unique_ptr<Measurer> measurer;
  std::set<std::string> measured_keys;
  std::vector<Measured> measured;
  std::map<std::string, std::vector<float>> features;  // by candidate key
  TaskResult result;
  std::vector<double> best_history;  // best seconds after each round
  bool dead = false;
  bool model_trusted = false;  // the model has ranked one of this task's rounds before seeing it
  std::vector<Candidate> stand_ins;  // the best programs of another CPU, measured first (best first)
};

// Features of a schedule's lowered program; empty if it does not lower.
std::vector<float> program_features_of(const Workload& w, const Target& target, const std::vector<Step>& steps) {
  try {
    Schedule s = Schedule::replay(w.outputs, steps);
    return program_features(lower_program(s, w.args, "k", target, {}).func.body);
  } catch (const Error&) {
    return {};  // a candidate that does not lower scores nothing; measuring it would fail the same way
  }
}

// Features of many programs, lowered on all cores at once: lowering a few thousand
// candidates a round is most of what the guided search adds to a round's time (conv2d:
// ~12 ms each), and the workers are idle meanwhile. Lowering shares only the immutable
// compute definition between threads.
std::vector<std::vector<float>> program_features_of(const Workload& w, const Target& target,
                                                    const std::vector<const std::vector<Step>*>& steps) {
  std::vector<std::vector<float>> out(steps.size());
  std::atomic<size_t> next{0};
  std::exception_ptr failure;
  std::mutex failure_mutex;
  auto work = [&] {
    try {
      for (size_t i; (i = next++) < steps.size();) out[i] = program_features_of(w, target, *steps[i]);
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

// Fills the task's feature cache for these candidates (in parallel, see above).
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
  return t.features.emplace(c.key, program_features_of(t.w, target, c.steps)).first->second;
}

// The cost model's label: the workload's best cost over this one (errors score 0).
float label(double best, double seconds) {
  return seconds > 0 && std::isfinite(seconds) && std::isfinite(best) ? float(best / seconds) : 0.f;
}

constexpr int kFinalRounds = 3;  // rounds of the finals (see remeasure_best)
constexpr double kTrustAccuracy = 0.6;  // pairwise ranking accuracy that lets the model guide
constexpr double kUntrustedRandomShare = 0.25;  // of each round, until then (see propose)

// Best time measured for the task.
double best_seconds(const TaskState& t) {
  double b = INFINITY;
  for (auto& m : t.measured) b = std::min(b, m.seconds);
  return b;
}

// The fastest valid program the search itself found: the default schedule (the only
// record without decisions) left out. Null before the search found one.
const Measured* best_searched(const TaskState& t) {
  const Measured* b = nullptr;
  for (auto& m : t.measured)
    if (!m.cand.decisions.empty() && std::isfinite(m.seconds) && (!b || m.seconds < b->seconds)) b = &m;
  return b;
}

class Tuner {
 public:
  Tuner(const std::vector<Workload>& ws, const std::vector<double>& weights, const TuneOptions& o)
      : opts_(o), target_(o.target), rng_(o.seed), model_(o.seed) {
    TESSEL_USER_CHECK(!ws.empty(), "tune: no workloads given");
    TESSEL_USER_CHECK(o.trials > 0, "tune: the trial budget must be positive, got ", o.trials);
    TESSEL_USER_CHECK(o.per_round > 0, "tune: per_round must be positive, got ", o.per_round);
    TESSEL_USER_CHECK(o.timeout > 0, "tune: the timeout must be positive, got ", o.timeout);
    TESSEL_USER_CHECK(o.remeasure_top >= 0, "tune: remeasure_top (the finals) must be 0 (none) or more, got ",
                      o.remeasure_top);
    for (size_t i = 0; i < ws.size(); ++i) {
      auto t = std::make_unique<TaskState>();
      t->w = ws[i];
      t->weight = i < weights.size() ? weights[i] : 1.0;
      t->space = std::make_unique<SearchSpace>(ws[i], target_);
      t->result.task = ws[i].op;
      t->result.key = ws[i].key();
      tasks_.push_back(std::move(t));
    }
    if (!o.cost_model_in.empty()) model_.load(o.cost_model_in);
    if (o.resume && !o.log.empty()) load_log();
    if (!o.history.empty() && o.use_cost_model) load_history();
    if (!o.log.empty()) writer_ = std::make_unique<LogWriter>(o.log);
  }

  std::vector<TaskResult> run() {
    start_ = Clock::now();
    int budget = opts_.trials;
    while (trials_ < budget) {
      TaskState* t = pick_task();
      if (!t) break;  // every task's space is exhausted
      ensure_measurer(*t);  // the default schedule is the task's first measurement
      int n = std::min(opts_.per_round, budget - trials_);
      if (n > 0) round(*t, n);
    }
    for (auto& t : tasks_) remeasure_best(*t);
    if (!opts_.cost_model_out.empty() && model_.trained()) model_.save(opts_.cost_model_out);
    std::vector<TaskResult> out;
    for (auto& t : tasks_) out.push_back(t->result);
    return out;
  }

 private:
  // ---- one round ----
  void round(TaskState& t, int n) {
    std::vector<Candidate> cands = propose(t, n);
    if (cands.empty()) {
      t.dead = true;
      return;
    }
    std::vector<std::vector<Step>> steps;
    std::vector<int> idx;
    for (auto& c : cands) steps.push_back(c.steps), idx.push_back(candidate_counter_++);
    double known = std::min(best_seconds(t), t.result.default_seconds);
    std::vector<MeasureResult> res = t.measurer->measure(steps, idx, std::isfinite(known) ? known : 0);
    for (size_t i = 0; i < cands.size(); ++i) record(t, cands[i], res[i]);
    if (!t.model_trusted) t.model_trusted = model_ranks_latest(t, cands.size());
    t.best_history.push_back(best_seconds(t));
    // The search's own progress: its trials (not the default's measurement) and its best.
    const Measured* found = best_searched(t);
    int searched = int(std::count_if(t.measured.begin(), t.measured.end(), [](auto& m) { return !m.cand.decisions.empty(); }));
    double gflops = found && t.w.flops > 0 ? t.w.flops / found->seconds / 1e9 : 0;
    auto& improvements = t.result.improvements;
    if (found && (improvements.empty() || steps_to_json(improvements.back().second) != found->cand.key))
      improvements.emplace_back(searched, found->cand.steps);
    t.result.curve.emplace_back(searched, gflops);
    retrain();
    report(t);
  }

  // Before it is retrained on them: did the model order the task's `n` latest measurements
  // as they measured, clearly better than chance?
  bool model_ranks_latest(TaskState& t, size_t n) {
    if (!model_.trained()) return false;
    std::vector<std::vector<float>> rows;
    std::vector<double> seconds;
    for (size_t i = t.measured.size() - std::min(n, t.measured.size()); i < t.measured.size(); ++i) {
      const auto& f = features_of(t, target_, t.measured[i].cand);
      if (f.empty()) continue;
      rows.push_back(f);
      seconds.push_back(t.measured[i].seconds);
    }
    return pairwise_accuracy(model_.predict(rows), seconds) >= kTrustAccuracy;
  }

  // Evolutionary search over the model's predictions, plus an epsilon-greedy random share.
  // Until the model has ranked a round of this task well (model_ranks_latest), a quarter of
  // each round is random: a model fitted to a few dozen measurements can rank no better
  // than chance, and random candidates keep its test fair. More is waste: on NCHW conv2d
  // 64@56 (one thread), the model's picks of the second round averaged 26-55 GFLOP/s
  // against the random ones' 12-28, and over six seeds of 64 cold trials a random quarter
  // found 90.5 GFLOP/s on average, a random half 84.9, the plain epsilon share 84.0.
  // The model's share is three best-predicted mutants to one best-predicted fresh sample:
  // mutants alone crowd around the first good programs found (cold runs stalled a few
  // percent below random search's best while the model ranked well), and the top of fresh
  // samples finds new families now and then; but the model ranks unfamiliar programs
  // poorly, and a round's fresh picks were often far slower than its mutants (NCHW conv2d
  // 64@56: 47-112 GFLOP/s against 153-198). Over six seeds of 64 cold trials on that
  // layer, one fresh pick in four found 170 GFLOP/s on average, one in two 147, none 157.
  std::vector<Candidate> propose(TaskState& t, int n) {
    std::vector<Candidate> out;
    std::set<std::string> chosen;
    auto take = [&](const Candidate& c, int limit) {
      if (int(out.size()) >= limit || t.measured_keys.count(c.key) || !chosen.insert(c.key).second) return;
      if (features_of(t, target_, c).empty()) return;  // does not lower: not worth a measurement
      out.push_back(c);
    };
    // Programs tuned on a CPU that stands in for this one come first (add_stand_ins).
    while (!t.stand_ins.empty() && int(out.size()) < n) {
      take(t.stand_ins.front(), n);
      t.stand_ins.erase(t.stand_ins.begin());
    }
    int left = n - int(out.size());
    if (left == 0) return out;
    double share = !opts_.use_cost_model || !model_.trained() ? 1.0
                   : t.model_trusted                          ? opts_.eps_greedy
                                                              : kUntrustedRandomShare;
    int n_random = std::max(1, int(std::round(left * share)));
    if (n_random < left) {
      auto [mutants, fresh] = evolve(t);
      size_t f = 0, m = 0;
      for (int k = 0; int(out.size()) < n - n_random && (f < fresh.size() || m < mutants.size()); ++k) {
        bool fresh_turn = k % 4 == 0 || m == mutants.size();
        if (fresh_turn && f < fresh.size()) take(fresh[f++], n - n_random);
        else take(mutants[m++], n - n_random);
      }
    }
    // The random share, and the rest when evolution found too few (a small space).
    for (int tries = 0; int(out.size()) < n && tries < 50 * n; ++tries) take(t.space->sample(rng_), n);
    return out;
  }

  // Unmeasured candidates by predicted score, best first: the mutants of the evolution's
  // generations, and the fresh samples of its first.
  std::pair<std::vector<Candidate>, std::vector<Candidate>> evolve(TaskState& t) {
    std::vector<Candidate> pop;
    // Seeds: fresh samples and the best measured programs (re-played from their decisions).
    std::vector<const Measured*> best;
    for (auto& m : t.measured)
      if (std::isfinite(m.seconds) && !m.cand.decisions.empty()) best.push_back(&m);
    std::sort(best.begin(), best.end(), [](auto* a, auto* b) { return a->seconds < b->seconds; });
    for (size_t i = 0; i < best.size() && int(pop.size()) < opts_.population / 5; ++i)
      pop.push_back(t.space->replay(best[i]->cand.decisions, rng_));
    size_t first_fresh = pop.size();
    while (int(pop.size()) < opts_.population) pop.push_back(t.space->sample(rng_));

    using Scored = std::map<std::string, std::pair<float, Candidate>>;  // unmeasured, by key
    Scored mutants, fresh;
    for (int g = 0; g <= opts_.generations; ++g) {
      std::vector<const Candidate*> each;
      for (auto& c : pop) each.push_back(&c);
      cache_features(t, target_, each);
      std::vector<std::vector<float>> rows;
      std::vector<size_t> valid;
      for (size_t i = 0; i < pop.size(); ++i) {
        const auto& f = features_of(t, target_, pop[i]);
        if (!f.empty()) rows.push_back(f), valid.push_back(i);
      }
      if (rows.empty()) break;
      std::vector<float> score = model_.predict(rows);
      for (size_t k = 0; k < valid.size(); ++k) {
        const Candidate& c = pop[valid[k]];
        if (t.measured_keys.count(c.key)) continue;
        Scored& into = g == 0 && valid[k] >= first_fresh ? fresh : mutants;
        into.emplace(c.key, std::make_pair(score[k], c));
      }
      if (g == opts_.generations) break;
      // Next generation: parents drawn in proportion to their predicted score, then mutated.
      std::vector<double> w;
      for (float s : score) w.push_back(std::max(1e-3, double(s)));
      std::discrete_distribution<size_t> parent(w.begin(), w.end());
      std::vector<Candidate> next;
      for (int i = 0; i < opts_.population; ++i) {
        const Candidate& p = pop[valid[parent(rng_)]];
        next.push_back(std::uniform_real_distribution<double>(0, 1)(rng_) < 0.85 ? t.space->mutate(p, rng_) : p);
      }
      pop = std::move(next);
    }
    auto best_first = [&](const Scored& scored) {
      std::vector<std::pair<float, Candidate>> sorted;
      for (auto& [k, v] : scored) sorted.push_back(v);
      std::shuffle(sorted.begin(), sorted.end(), rng_);  // ties in random order, not by key
      std::stable_sort(sorted.begin(), sorted.end(), [](auto& a, auto& b) { return a.first > b.first; });
      std::vector<Candidate> out;
      for (auto& [s, c] : sorted) out.push_back(c);
      return out;
    };
    return {best_first(mutants), best_first(fresh)};
  }

  // ---- records ----
  // A measurement as a log record, appended to the log.
  Record log_record(const TaskState& t, const Candidate& c, const MeasureResult& r) {
    Record rec = make_record(t.w, target_);
    rec.steps = c.steps;
    rec.decisions = c.decisions;
    rec.costs = r.costs;
    rec.error = r.error;
    rec.message = r.message;
    rec.build_seconds = r.build_seconds;
    if (writer_) writer_->append(rec);
    return rec;
  }

  void record(TaskState& t, const Candidate& c, const MeasureResult& r) {
    Record rec = log_record(t, c, r);
    add_measured(t, c, rec);
    ++trials_;
    ++t.result.trials;
    if (!rec.ok()) ++t.result.errors;
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

  void load_log() {
    std::vector<std::string> warnings;
    std::vector<Record> recs = read_log(opts_.log, &warnings);
    for (auto& w : warnings) std::fprintf(stderr, "warning: %s\n", w.c_str());
    int loaded = 0;
    for (auto& rec : recs) {
      if (rec.target_key != target_.key()) continue;
      for (auto& t : tasks_)
        if (rec.workload_key == t->w.key()) {
          Candidate c;
          c.steps = rec.steps;
          c.decisions = rec.decisions;
          c.key = steps_to_json(rec.steps);
          if (t->measured_keys.count(c.key)) continue;
          add_measured(*t, c, rec);
          ++t->result.trials;
          if (!rec.ok()) ++t->result.errors;
          ++loaded;
        }
    }
    // The budget covers what the log already holds: re-running a killed command finishes it.
    trials_ = loaded_trials_ = loaded;
    add_stand_ins(recs);
    if (loaded) std::fprintf(stderr, "resume: %d records from %s; they will not be measured again\n", loaded, opts_.log.c_str());
    if (loaded || !history_rows_.empty()) retrain();
  }

  // Records in the resumed log of the tuned workloads on another CPU that stands in for
  // this one (a log tuned on one x86 machine, resumed on another; see stands_in): that
  // CPU's best programs are measured first, and its records train the cost model like
  // history, each labelled against that CPU's own best. Their timings are not this CPU's, so
  // they rank nothing here until measured again. (--history logs stay what they are: other
  // workloads' records of this CPU.)
  void add_stand_ins(const std::vector<Record>& recs) {
    std::map<std::pair<TaskState*, std::string>, std::vector<const Record*>> by;  // (task, target key)
    for (auto& r : recs) {
      if (!stands_in(r, target_)) continue;
      for (auto& t : tasks_)
        if (r.workload_key == t->w.key()) by[{t.get(), r.target_key}].push_back(&r);
    }
    for (auto& [key, rs] : by) {
      TaskState& t = *key.first;
      // The searched programs (the default is measured anyway) by their median cost there.
      std::map<std::string, std::pair<std::vector<double>, const Record*>> progs;
      double best = INFINITY;
      for (auto* r : rs) {
        best = std::min(best, r->mean_cost());
        if (!r->ok() || r->decisions.empty()) continue;
        auto& p = progs[steps_to_json(r->steps)];
        p.first.push_back(r->mean_cost());
        p.second = r;
      }
      std::vector<std::pair<double, const Record*>> ranked;
      for (auto& [k, p] : progs) ranked.emplace_back(median(p.first), p.second);
      std::sort(ranked.begin(), ranked.end(), [](auto& a, auto& b) { return a.first < b.first; });
      int seeded = 0;  // of its best kStandIns, those not measured here yet
      for (size_t i = 0; i < std::min(ranked.size(), kStandIns); ++i) {
        Candidate c;
        c.steps = ranked[i].second->steps;
        c.decisions = ranked[i].second->decisions;
        c.key = steps_to_json(c.steps);
        bool known = std::any_of(t.stand_ins.begin(), t.stand_ins.end(), [&](auto& s) { return s.key == c.key; });
        if (t.measured_keys.count(c.key) || known) continue;
        t.stand_ins.push_back(std::move(c));
        ++seeded;
      }
      size_t trained = 0;
      if (opts_.use_cost_model && !ranked.empty() && t.measured.size() < kStandInTraining) {
        // An even sample: feature extraction costs ~10 ms a record, and the logs of a
        // well-tuned layer hold thousands.
        size_t stride = (rs.size() + kStandInTraining - 1) / kStandInTraining;
        std::vector<const Record*> sample;
        for (size_t i = 0; i < rs.size(); i += stride) sample.push_back(rs[i]);
        std::vector<const std::vector<Step>*> steps;
        for (auto* r : sample) steps.push_back(&r->steps);
        std::vector<std::vector<float>> rows = program_features_of(t.w, target_, steps);
        for (size_t i = 0; i < sample.size(); ++i) {
          if (rows[i].empty()) continue;
          history_rows_.push_back(std::move(rows[i]));
          history_labels_.push_back(label(best, sample[i]->mean_cost()));
          history_kin_.push_back(true);
          ++trained;
        }
      }
      std::fprintf(stderr,
                   "stand-in: %s was tuned on %s too: %d of its %zu best programs there are measured first here "
                   "(%s), %zu of its records there train the cost model\n",
                   t.w.key().c_str(), key.second.c_str(), seeded, std::min(ranked.size(), kStandIns),
                   target_.key().c_str(), trained);
    }
  }

  // Records of other workloads on this target become training data of the cost model from
  // the first round on (TVM's load_history): what was learnt tuning similar operators on
  // this machine ranks a new operator's first candidates. Records of the workloads being
  // tuned are left to --resume, which also keeps them from being measured again.
  void load_history() {
    std::set<std::string> tuned, tuned_ops;
    for (auto& t : tasks_) tuned.insert(t->w.key()), tuned_ops.insert(t->w.op);
    std::map<std::string, std::vector<Record>> by_workload;
    for (auto& path : opts_.history) {
      TESSEL_USER_CHECK(std::ifstream(path).good(), "tune: cannot read the history log '", path, "'");
      std::vector<std::string> warnings;
      for (auto& rec : read_log(path, &warnings))
        if (rec.target_key == target_.key() && !tuned.count(rec.workload_key))
          by_workload[rec.workload_key].push_back(std::move(rec));
      for (auto& w : warnings) std::fprintf(stderr, "warning: %s\n", w.c_str());
    }
    for (auto& [key, recs] : by_workload) {
      Workload w;
      try {
        w = make_workload(recs[0].op, recs[0].shape, DType::parse(recs[0].dtype));
      } catch (const Error& e) {
        std::fprintf(stderr, "history: skipped %s (%s)\n", key.c_str(), e.what());
        continue;
      }
      double best = INFINITY;
      std::vector<const std::vector<Step>*> steps;
      for (auto& r : recs) best = std::min(best, r.mean_cost()), steps.push_back(&r.steps);
      std::vector<std::vector<float>> rows = program_features_of(w, target_, steps);
      for (size_t i = 0; i < recs.size(); ++i) {
        if (rows[i].empty()) continue;
        history_rows_.push_back(std::move(rows[i]));
        history_labels_.push_back(label(best, recs[i].mean_cost()));
        history_kin_.push_back(tuned_ops.count(w.op) > 0);
      }
    }
    std::fprintf(stderr, "history: %zu records of %zu other workloads train the cost model\n", history_rows_.size(),
                 by_workload.size());
    retrain();
  }

  // Labels: each workload's best cost over the candidate's cost (errors score 0).
  // History rows count less as the tasks' own measurements arrive: together the records
  // of the tuned operators weigh at most as much as max(kHistoryFloor, own records), those
  // of other operators a quarter of that. Unweighted, 2,400 conv2d records outvoted a
  // GEMM's own 100 and the model steered the GEMM search worse than no history at all.
  void retrain() {
    if (!opts_.use_cost_model) return;
    std::vector<std::vector<float>> rows = history_rows_;
    std::vector<float> labels = history_labels_;
    std::vector<float> importance;
    for (auto& t : tasks_) {
      std::vector<const Candidate*> each;
      for (auto& m : t->measured) each.push_back(&m.cand);
      cache_features(*t, target_, each);
      double best = best_seconds(*t);
      for (auto& m : t->measured) {
        const auto& f = features_of(*t, target_, m.cand);
        if (f.empty()) continue;
        rows.push_back(f);
        labels.push_back(label(best, m.seconds));
      }
    }
    if (!history_rows_.empty()) {
      double own = double(rows.size() - history_rows_.size());
      double kin = double(std::count(history_kin_.begin(), history_kin_.end(), true));
      double other = double(history_kin_.size()) - kin;
      double budget = std::max(kHistoryFloor, own);
      float kin_w = float(std::min(1.0, budget / std::max(1.0, kin)));
      float other_w = float(std::min(1.0, 0.25 * budget / std::max(1.0, other)));
      for (bool k : history_kin_) importance.push_back(k ? kin_w : other_w);
      importance.resize(rows.size(), 1.f);
    }
    model_.train(rows, labels, importance);
  }

  // ---- task scheduling: round robin first, then the largest expected gain ----
  TaskState* pick_task() {
    std::vector<TaskState*> alive;
    for (auto& t : tasks_)
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

  // The default schedule is measured first, in a worker like every candidate (timings in
  // this process would not be comparable), and logged: the speed-up is over it, and a
  // lookup never returns a schedule slower than the default.
  void ensure_measurer(TaskState& t) {
    if (t.measurer) return;
    t.measurer = std::make_unique<Measurer>(t.w, opts_);
    Candidate c;
    c.steps = ops::default_schedule(t.w.outputs, target_).steps();
    c.key = steps_to_json(c.steps);
    auto known = std::find_if(t.measured.begin(), t.measured.end(), [&](auto& m) { return m.cand.key == c.key; });
    double s = INFINITY;
    if (known != t.measured.end()) {
      s = known->seconds;
    } else {
      MeasureResult r = t.measurer->measure({c.steps}, {-1})[0];
      if (r.error == ErrorCode::None) r.message = kDefaultScheduleMessage;
      record(t, c, r);
      s = t.measured.back().seconds;
    }
    if (std::isfinite(s)) {
      t.result.default_seconds = s;
      t.result.default_gflops = t.w.flops > 0 ? t.w.flops / s / 1e9 : 0;
    }
  }

  // The finals: the best few programs the search found and the default schedule are
  // measured again in kFinalRounds interleaved rounds, each time in fresh workers, and
  // logged as "re-measured". A finalist's cost is the median over its rounds of the
  // round's fastest repeat, and the best finalist is the result (the lookup chooses the
  // same way): one lucky or unlucky round should neither win nor lose, and a slow spell
  // within a round (which only slows repeats down) should not decide it. With the mean of
  // each round's repeats, finals in such a spell picked a conv 512@7 program 5% slower
  // than the 7 x 8 one it beat.
  void remeasure_best(TaskState& t) {
    if (opts_.remeasure_top <= 0 || t.measured.empty()) return;
    ensure_measurer(t);
    std::vector<const Measured*> searched;
    const Measured* dflt = nullptr;
    for (auto& m : t.measured) {
      if (!std::isfinite(m.seconds)) continue;
      if (m.cand.decisions.empty()) dflt = &m;
      else searched.push_back(&m);
    }
    std::sort(searched.begin(), searched.end(), [](auto* a, auto* b) { return a->seconds < b->seconds; });
    searched.resize(std::min<size_t>(searched.size(), size_t(opts_.remeasure_top)));
    std::vector<const Measured*> finalists = searched;
    if (dflt) finalists.push_back(dflt);
    if (finalists.empty()) return;
    std::vector<std::vector<Step>> steps;
    for (auto* m : finalists) steps.push_back(m->cand.steps);
    std::vector<std::vector<double>> rounds(finalists.size());
    for (int r = 0; r < kFinalRounds; ++r) {
      auto res = t.measurer->measure(steps, std::vector<int>(steps.size(), -1));
      for (size_t i = 0; i < finalists.size(); ++i) {
        if (res[i].error != ErrorCode::None || res[i].costs.empty()) continue;
        res[i].message = kRemeasuredMessage;
        rounds[i].push_back(log_record(t, finalists[i]->cand, res[i]).min_cost());
      }
    }
    t.result.best_seconds = 0;
    for (size_t i = 0; i < finalists.size(); ++i) {
      if (rounds[i].empty()) continue;
      double s = median(rounds[i]);
      if (finalists[i] == dflt) {
        t.result.default_seconds = s;
        t.result.default_gflops = t.w.flops > 0 ? t.w.flops / s / 1e9 : 0;
      }
      if (t.result.best_seconds == 0 || s < t.result.best_seconds) {
        t.result.best_seconds = s;
        t.result.best_steps = finalists[i]->cand.steps;
      }
    }
    if (t.result.best_seconds > 0 && t.w.flops > 0) t.result.best_gflops = t.w.flops / t.result.best_seconds / 1e9;
  }

  void report(TaskState& t) {
    if (!opts_.on_progress) return;
    Progress p;
    p.task = t.w.key();
    p.trials = trials_;
    p.budget = opts_.trials;
    p.errors = 0;
    for (auto& x : tasks_) p.errors += x->result.errors;
    p.best_seconds = t.result.best_seconds;
    p.best_gflops = t.result.best_gflops;
    double el = std::chrono::duration<double>(Clock::now() - start_).count();
    int done_here = trials_ - loaded_trials_;
    p.trials_per_second = el > 0 ? done_here / el : 0;
    p.eta_seconds = p.trials_per_second > 0 ? (opts_.trials - trials_) / p.trials_per_second : 0;
    opts_.on_progress(p);
  }

  TuneOptions opts_;
  Target target_;
  std::mt19937_64 rng_;
  CostModel model_;
  std::vector<std::unique_ptr<TaskState>> tasks_;
  std::unique_ptr<LogWriter> writer_;
  std::vector<std::vector<float>> history_rows_;  // features and labels of other workloads' records
  std::vector<float> history_labels_;
  std::vector<bool> history_kin_;  // the record's operator is one being tuned
  static constexpr double kHistoryFloor = 64;
  static constexpr size_t kStandIns = 16;           // programs of a stand-in CPU measured first, per task
  static constexpr size_t kStandInTraining = 1000;  // of its records, at most this many train the model
  int trials_ = 0, loaded_trials_ = 0, candidate_counter_ = 0;
  Clock::time_point start_;
};

}  // namespace

std::vector<TaskResult> tune_tasks(const std::vector<Workload>& tasks, const std::vector<double>& weights,
                                   const TuneOptions& opts) {
  Tuner t(tasks, weights, opts);
  return t.run();
}

TaskResult tune(const Workload& w, const TuneOptions& opts) { return tune_tasks({w}, {1.0}, opts)[0]; }

}  // namespace tessel::autotune
