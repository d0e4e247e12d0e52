// The search policy of a round (see SearchPolicy.h).
#include "autotune/SearchPolicy.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>

namespace tessel::autotune {
namespace {
constexpr double kTrustAccuracy = 0.6;  // pairwise ranking accuracy that lets the model guide
constexpr double kUntrustedRandomShare = 0.25;  // of each round, until then (see propose)
}  // namespace

bool SearchPolicy::model_ranks_latest(TaskState& t, size_t n) const {
  if (!model_.trained()) return false;
  std::vector<std::vector<float>> rows;
  std::vector<double> seconds;
  for (size_t i = t.measured.size() - std::min(n, t.measured.size()); i < t.measured.size(); ++i) {
    const auto& f = features_of(t, opts_.target, t.measured[i].cand);
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
std::vector<Candidate> SearchPolicy::propose(TaskState& t, int n) {
  std::vector<Candidate> out;
  std::set<std::string> chosen;
  auto take = [&](const Candidate& c, int limit) {
    if (int(out.size()) >= limit || t.measured_keys.count(c.key) || !chosen.insert(c.key).second) return;
    if (features_of(t, opts_.target, c).empty()) {  // not valid here: not worth a measurement
      ++t.result.rejected;
      return;
    }
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
std::pair<std::vector<Candidate>, std::vector<Candidate>> SearchPolicy::evolve(TaskState& t) {
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
    cache_features(t, opts_.target, each);
    std::vector<std::vector<float>> rows;
    std::vector<size_t> valid;
    for (size_t i = 0; i < pop.size(); ++i) {
      const auto& f = features_of(t, opts_.target, pop[i]);
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

}  // namespace tessel::autotune
