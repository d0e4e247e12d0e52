// Search efficiency: best GFLOP/s against trials for the cost-model-guided search and for
// random search over the same space, same budget and seed (one comparison per seed given).
// Prints the curve points and the number of trials the guided search needed to reach the
// random search's final best.
//   bench_search [trials [seed...]]   (default 160 trials, seed 42)
#include <cstdio>
#include <cstdlib>

#include "tessel/autotune.h"

using namespace tessel;
using namespace tessel::autotune;

int main(int argc, char** argv) {
  int trials = argc > 1 ? std::atoi(argv[1]) : 160;
  std::vector<uint64_t> seeds;
  for (int i = 2; i < argc; ++i) seeds.push_back(std::strtoull(argv[i], nullptr, 10));
  if (seeds.empty()) seeds = {42};
  std::vector<std::pair<std::string, std::string>> cases = {
      {"matmul", "M=1024,N=1024,K=1024"},
      {"conv2d_nchwc", "C=128,H=28,W=28,K=128,R=3,S=3,stride=1,pad=1"},
  };
  for (uint64_t seed : seeds) {
    for (auto& [op, shape] : cases) {
      Workload w = make_workload(op, parse_shape(shape));
      TaskResult res[2];
      for (int guided = 1; guided >= 0; --guided) {
        TuneOptions o;
        o.trials = trials;
        o.seed = seed;
        o.use_cost_model = guided;
        o.remeasure_top = 0;  // compare the search itself
        res[guided] = tune(w, o);
        for (auto& [t, g] : res[guided].curve)
          std::printf("{\"bench\": \"search\", \"shape\": \"%s\", \"impl\": \"%s\", \"trials\": %d, \"gflops\": %.1f}\n",
                      w.key().c_str(), guided ? "guided" : "random", t, g);
        std::fflush(stdout);
      }
      double target = res[0].curve.back().second;
      int reach = -1;
      for (auto& [t, g] : res[1].curve)
        if (g >= target) {
          reach = t;
          break;
        }
      std::printf("{\"bench\": \"search\", \"shape\": \"%s\", \"seed\": %llu, \"budget\": %d, "
                  "\"random_final_gflops\": %.1f, \"guided_final_gflops\": %.1f, "
                  "\"guided_trials_to_random_final\": %d, \"ratio\": %.2f}\n",
                  w.key().c_str(), (unsigned long long)seed, trials, target, res[1].curve.back().second, reach,
                  reach > 0 ? double(reach) / trials : -1.0);
      std::fflush(stdout);
    }
  }
  return 0;
}
