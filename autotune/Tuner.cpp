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
#include "autotune/Finals.h"
#include "autotune/History.h"
#include "autotune/Pipes.h"
#include "autotune/RunnerPool.h"
#include "autotune/SearchPolicy.h"
#include "autotune/TaskScheduler.h"
#include "tessel/ops.h"

namespace tessel::autotune {
namespace {


class Tuner {
 public:
  Tuner(const std::vector<Workload>& ws, const std::vector<double>& weights, const TuneOptions& o)
      : opts_(o), rng_(o.seed), model_(o.seed, o.target.kind_name()) {
    TESSEL_USER_CHECK(!ws.empty(), "tune: no workloads given");
    TESSEL_USER_CHECK(o.trials > 0, "tune: the trial budget must be positive, got ", o.trials);
    TESSEL_USER_CHECK(o.per_round > 0, "tune: per_round must be positive, got ", o.per_round);
    TESSEL_USER_CHECK(o.timeout > 0, "tune: the timeout must be positive, got ", o.timeout);
    TESSEL_USER_CHECK(o.remeasure_top >= 0, "tune: remeasure_top (the finals) must be 0 (none) or more, got ",
                      o.remeasure_top);
    if (opts_.target.is_gpu()) start_runners();
    for (size_t i = 0; i < ws.size(); ++i) {
      auto t = std::make_unique<TaskState>();
      t->w = ws[i];
      t->weight = i < weights.size() ? weights[i] : 1.0;
      t->space = std::make_unique<SearchSpace>(ws[i], opts_.target);
      t->result.task = ws[i].op;
      t->result.key = ws[i].key();
      tasks_.push_back(std::move(t));
    }
    if (!o.cost_model_in.empty()) model_.load(o.cost_model_in);
    if (!o.log.empty()) {
      std::vector<std::string> warnings;
      std::vector<Record> recs = read_log(o.log, &warnings);
      for (auto& w : warnings) std::fprintf(stderr, "warning: %s\n", w.c_str());
      std::map<std::string, TaskState*> by_key;
      for (auto& t : tasks_) by_key[t->w.key()] = t.get();
      for (auto& r : recs)
        if (auto it = by_key.find(r.workload_key); it != by_key.end() && r.target_key == opts_.target.key())
          it->second->log.push_back(r);
      if (o.resume) trials_ = loaded_trials_ = resume_log(opts_, recs, tasks_, history_);
    }
    if (!o.history.empty() && o.use_cost_model) load_history(opts_, tasks_, history_);
    if (loaded_trials_ || !history_.rows.empty()) retrain();
    if (!o.log.empty()) writer_ = std::make_unique<LogWriter>(o.log);
  }

  std::vector<TaskResult> run() {
    start_ = Clock::now();
    int budget = opts_.trials;
    while (trials_ < budget) {
      TaskState* t = pick_task(tasks_);
      if (!t) break;  // every task's space is exhausted
      auto t0 = Clock::now();
      ensure_measurer(*t);  // the default schedule is the task's first measurement
      t->result.time.total += seconds_since(t0);
      int n = std::min(opts_.per_round, budget - trials_);
      if (n > 0) round(*t, n);
    }
    for (auto& t : tasks_) {
      auto t0 = Clock::now();
      remeasure_best(*t);
      t->result.time.total += seconds_since(t0);
      if (t->measurer) t->result.time.build = t->measurer->build_seconds(), t->result.time.run = t->measurer->run_seconds();
    }
    if (!opts_.cost_model_out.empty() && model_.trained()) model_.save(opts_.cost_model_out);
    std::vector<TaskResult> out;
    for (auto& t : tasks_) out.push_back(t->result);
    return out;
  }

 private:
  // GPU targets: the runners (given, or the local one) say which device they run on; its
  // name joins the log key. Without one, a CUDA tuning estimates (StaticModel.h) and checks
  // a sample of candidates on the local OpenCL device.
  void start_runners() {
    std::vector<std::string> cmds = opts_.runners;
    if (cmds.empty()) cmds.push_back(local_runner_command(opts_.target));
    runners_ = std::make_unique<RunnerPool>(cmds, opts_.timeout);
    std::string device = runners_->device();
    if (!device.empty()) {
      size_t arch = device.rfind(" (sm_");  // the CUDA runner adds the device's architecture
      opts_.target.device = arch == std::string::npos ? device : device.substr(0, arch);
      std::fprintf(stderr, "tune: candidates run on %s (%s)\n", device.c_str(), opts_.target.key().c_str());
    } else {
      TESSEL_USER_CHECK(opts_.target.kind == Target::Kind::CUDA, "tune --target ", opts_.target.str(), ": ",
                        runners_->unavailable());
      runners_.reset();
      checker_ = std::make_unique<RunnerPool>(std::vector<std::string>{local_runner_command(Target::parse("opencl"))},
                                              opts_.timeout);
      if (checker_->device().empty()) checker_.reset();
      std::fprintf(stderr,
                   "tune: no GPU (%s). Every candidate is compiled for %s and checked against its limits, its time is "
                   "ESTIMATED by a static model (nothing is measured)%s; records are marked as estimates\n",
                   opts_.runners.empty() ? "no local CUDA device; give --runner CMD to run on another machine"
                                         : "the runners have no device",
                   opts_.target.arch.c_str(),
                   checker_ ? ", and every fourth is checked for its answer as OpenCL on this machine" : "");
    }
  }

  // ---- one round ----
  void round(TaskState& t, int n) {
    auto t0 = Clock::now();
    std::vector<Candidate> cands = policy_.propose(t, n);
    t.result.time.search += seconds_since(t0);
    if (cands.empty()) {
      t.dead = true;
      return;
    }
    std::vector<std::vector<Step>> steps;
    std::vector<int> idx;
    for (auto& c : cands) steps.push_back(c.steps), idx.push_back(candidate_counter_++);
    double known = std::min(best_seconds(t), t.result.default_seconds);
    std::vector<MeasureResult> res = t.measurer->measure(steps, idx, std::isfinite(known) ? known : 0);
    // What the model predicted for them, for reports (the features are cached by now).
    std::vector<float> predicted;
    if (opts_.use_cost_model && model_.trained()) {
      std::vector<std::vector<float>> rows;
      for (auto& c : cands) rows.push_back(features_of(t, opts_.target, c));
      predicted = model_.predict(rows);
    }
    for (size_t i = 0; i < cands.size(); ++i)
      record(t, cands[i], res[i], rounds_, predicted.empty() ? std::nan("") : double(predicted[i]));
    ++rounds_;
    if (!t.model_trusted) t.model_trusted = policy_.model_ranks_latest(t, cands.size());
    t.best_history.push_back(best_seconds(t));
    // The search's own progress: its trials (not the default's measurement) and its best.
    const Measured* found = best_searched(t);
    int searched = int(std::count_if(t.measured.begin(), t.measured.end(), [](auto& m) { return !m.cand.decisions.empty(); }));
    double gflops = found && t.w.flops > 0 ? t.w.flops / found->seconds / 1e9 : 0;
    auto& improvements = t.result.improvements;
    if (found && (improvements.empty() || steps_to_json(improvements.back().second) != found->cand.key))
      improvements.emplace_back(searched, found->cand.steps);
    t.result.curve.emplace_back(searched, gflops);
    auto t_model = Clock::now();
    if (retraining_due()) retrain();
    t.result.time.model += seconds_since(t_model);
    t.result.time.total += seconds_since(t0);
    report(t);
  }

  // ---- records ----
  // A measurement as a log record, appended to the log.
  Record log_record(TaskState& t, const Candidate& c, const MeasureResult& r, int round = -1,
                    double predicted = std::nan("")) {
    Record rec = make_record(t.w, opts_.target);
    rec.round = round;
    rec.predicted = predicted;
    rec.steps = c.steps;
    rec.decisions = c.decisions;
    rec.costs = r.costs;
    rec.error = r.error;
    rec.message = r.message;
    rec.build_seconds = r.build_seconds;
    rec.estimate = r.estimate;
    if (writer_) writer_->append(rec);
    t.log.push_back(rec);
    return rec;
  }

  // Candidates found invalid when compiled (registers, spills) are logged, so a resumed run
  // skips them, but cost no trial: they never ran.
  void record(TaskState& t, const Candidate& c, const MeasureResult& r, int round = -1,
              double predicted = std::nan("")) {
    Record rec = log_record(t, c, r, round, predicted);
    add_measured(t, c, rec);
    if (rec.error == ErrorCode::Invalid) {
      ++t.result.rejected;
      return;
    }
    ++trials_;
    ++t.result.trials;
    if (!rec.ok()) ++t.result.errors;
  }

  // A training costs in proportion to the records it learns from, so retraining after every
  // round made a run's model time grow with the square of its length (53% of a 5,900-trial
  // run). The model is retrained once the records have grown by a sixteenth (every round
  // while they are few): amortised, a constant cost a record.
  bool retraining_due() const {
    return !model_.trained() || records() >= trained_on_ + std::max<size_t>(opts_.per_round, trained_on_ / 16);
  }
  size_t records() const {
    size_t n = 0;
    for (auto& t : tasks_) n += t->measured.size();
    return n;
  }

  // Labels: each workload's best cost over the candidate's cost (errors score 0).
  // History rows count less as the tasks' own measurements arrive: together the records
  // of the tuned operators weigh at most as much as max(kHistoryFloor, own records), those
  // of other operators a quarter of that. Unweighted, 2,400 conv2d records outvoted a
  // GEMM's own 100 and the model steered the GEMM search worse than no history at all.
  void retrain() {
    if (!opts_.use_cost_model) return;
    trained_on_ = records();
    // Of many history rows (a stand-in CPU's log: up to 1,000 a workload), an even sample of at most
    // max(kHistoryRows, 4 x own): weighed as below, they count as much in all, and a training costs in
    // proportion to its rows (a ResNet-50 log's 15,000 made 67% of a 368-trial run's time).
    size_t cap = std::max(kHistoryRows, 4 * trained_on_), stride = (history_.rows.size() + cap - 1) / cap;
    std::vector<std::vector<float>> rows;
    std::vector<float> labels;
    std::vector<bool> kin;
    for (size_t i = 0; i < history_.rows.size(); i += stride) {
      rows.push_back(history_.rows[i]);
      labels.push_back(history_.labels[i]);
      kin.push_back(history_.kin[i]);
    }
    size_t from_history = rows.size();
    std::vector<float> importance;
    for (auto& t : tasks_) {
      std::vector<const Candidate*> each;
      for (auto& m : t->measured) each.push_back(&m.cand);
      cache_features(*t, opts_.target, each);
      double best = best_seconds(*t);
      for (auto& m : t->measured) {
        const auto& f = features_of(*t, opts_.target, m.cand);
        if (f.empty()) continue;
        rows.push_back(f);
        labels.push_back(label(best, m.seconds));
      }
    }
    if (from_history > 0) {
      double own = double(rows.size() - from_history);
      double kins = double(std::count(kin.begin(), kin.end(), true));
      double other = double(from_history) - kins;
      double budget = std::max(kHistoryFloor, own);
      float kin_w = float(std::min(1.0, budget / std::max(1.0, kins)));
      float other_w = float(std::min(1.0, 0.25 * budget / std::max(1.0, other)));
      for (bool k : kin) importance.push_back(k ? kin_w : other_w);
      importance.resize(rows.size(), 1.f);
    }
    model_.train(rows, labels, importance);
  }

  // The default schedule is measured first, in a worker like every candidate (timings in
  // this process would not be comparable), and logged: the speed-up is over it, and a
  // lookup never returns a schedule slower than the default.
  void ensure_measurer(TaskState& t) {
    if (t.measurer) return;
    t.measurer = std::make_unique<Measurer>(t.w, opts_, runners_.get(), checker_.get());
    t.result.estimated = t.measurer->estimates();
    t.result.device = opts_.target.device;
    Candidate c;
    c.steps = default_schedule(t.w, opts_.target).steps();
    c.key = steps_to_json(c.steps);
    t.default_key = c.key;
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

  // The finals: the best few programs the search found (or an older build's default schedule,
  // found in the log: left out, a re-run of the finals lost ResNet-50's 256@28 stride-2 layer's
  // best program, 394 against this build's default's 294 GFLOP/s) and the default schedule are
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
    if (t.measurer->estimates()) return;  // an estimate is the same every time
    std::vector<const Measured*> searched;
    const Measured* dflt = nullptr;
    for (auto& m : t.measured) {
      if (!std::isfinite(m.seconds)) continue;
      if (m.cand.key == t.default_key) dflt = &m;
      else searched.push_back(&m);  // the search's programs, and older builds' defaults found in the log
    }
    std::sort(searched.begin(), searched.end(), [](auto* a, auto* b) { return a->seconds < b->seconds; });
    // The previous finals' winner defends its place (Finals.h), so it runs in these finals too.
    const Measured* incumbent = nullptr;
    if (std::any_of(t.log.begin(), t.log.end(), [](const Record& r) { return r.message == kRemeasuredMessage; })) {
      auto before = best_records(t.log);
      if (!before.empty()) {
        std::string key = candidate_of(before.begin()->second).key;
        for (auto* m : searched)
          if (m->cand.key == key) incumbent = m;
      }
    }
    searched.resize(std::min<size_t>(searched.size(), size_t(opts_.remeasure_top)));
    std::vector<const Measured*> finalists = searched;
    if (incumbent && std::find(finalists.begin(), finalists.end(), incumbent) == finalists.end())
      finalists.push_back(incumbent);
    if (dflt) finalists.push_back(dflt);
    if (finalists.empty()) return;
    std::vector<std::vector<Step>> steps;
    for (auto* m : finalists) steps.push_back(m->cand.steps);
    std::vector<Record> finals;
    for (int r = 0; r < kFinalRounds; ++r) {
      auto res = t.measurer->measure(steps, std::vector<int>(steps.size(), -1));
      for (size_t i = 0; i < finalists.size(); ++i) {
        if (res[i].error != ErrorCode::None || res[i].costs.empty()) continue;
        res[i].message = kRemeasuredMessage;
        finals.push_back(log_record(t, finalists[i]->cand, res[i]));
      }
    }
    if (finals.empty()) return;
    auto best = best_records(t.log);  // the rule every lookup of the log applies
    if (best.empty()) return;
    const Record& winner = best.begin()->second;
    t.result.best_seconds = winner.mean_cost();
    t.result.best_steps = winner.steps;
    if (t.w.flops > 0) t.result.best_gflops = t.w.flops / t.result.best_seconds / 1e9;
    std::vector<double> dflt_rounds;
    for (auto& f : finals)
      if (dflt && candidate_of(f).key == t.default_key) dflt_rounds.push_back(f.min_cost());  // not older defaults
    if (!dflt_rounds.empty()) {
      t.result.default_seconds = median(dflt_rounds);
      t.result.default_gflops = t.w.flops > 0 ? t.w.flops / t.result.default_seconds / 1e9 : 0;
    }
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
    p.estimated = t.result.estimated;
    double el = std::chrono::duration<double>(Clock::now() - start_).count();
    int done_here = trials_ - loaded_trials_;
    p.trials_per_second = el > 0 ? done_here / el : 0;
    p.eta_seconds = p.trials_per_second > 0 ? (opts_.trials - trials_) / p.trials_per_second : 0;
    opts_.on_progress(p);
  }

  TuneOptions opts_;  // its target gains the device name the runners report (start_runners)
  std::mt19937_64 rng_;
  CostModel model_;
  size_t trained_on_ = 0;  // the tasks' records when the model was last trained
  std::vector<std::unique_ptr<TaskState>> tasks_;
  std::unique_ptr<LogWriter> writer_;
  std::unique_ptr<RunnerPool> runners_, checker_;  // GPU targets
  HistoryRows history_;  // rows of records from before this run (resumed stand-ins, --history)
  SearchPolicy policy_{opts_, rng_, model_};
  static constexpr double kHistoryFloor = 64;
  static constexpr size_t kHistoryRows = 2048;
  int trials_ = 0, loaded_trials_ = 0, candidate_counter_ = 0;
  int rounds_ = 0;  // search rounds of this run, numbered in the log's records
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
