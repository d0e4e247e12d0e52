#pragma once
/** \file The search space of a workload, derived from its compute definition alone.
 *
 * A candidate is the output of one generator program that walks the stages (consumers
 * first) and applies sketch rules: inline cheap element-wise stages; tile stages with data
 * reuse at several levels (S S R S R S); accumulate them in a cache-write stage (or one
 * that is just the register block, as a micro-kernel) or fuse them into an element-wise
 * consumer; choose compute locations; parallelize the outer
 * loops, vectorize the inner one and pick an auto-unroll depth. Every random choice is a
 * Decision. Replaying the decisions gives the same steps; mutating one decision and
 * replaying gives a neighbour. Tile factors need not divide their extent. */
#include <cstdint>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "tessel/autotune.h"
#include "tessel/step.h"

namespace tessel::autotune {

struct Decision {
  enum Kind : uint8_t { Tile, Choice } kind = Choice;
  int64_t range = 1;             // Tile: the axis extent; Choice: number of options
  int64_t max_inner = 64;        // Tile: bound of the innermost factor
  std::vector<int64_t> value;    // Tile: inner factors, outer to inner; Choice: {index}
  bool operator==(const Decision& o) const { return kind == o.kind && range == o.range && value == o.value; }
};

class Tracer;

struct Candidate {
  std::vector<Decision> decisions;
  std::vector<Step> steps;
  std::string key;  // steps as JSON: equal keys are the same program
};

class SearchSpace {
 public:
  SearchSpace(const Workload& w, const Target& t);
  // A random candidate (throws tessel::Error only on a bug; invalid draws are retried).
  Candidate sample(std::mt19937_64& rng) const;
  // Replays decisions (resampling any that no longer fit) into a candidate.
  Candidate replay(const std::vector<Decision>& d, std::mt19937_64& rng) const;
  // One decision changed: tile factors (most often), unroll depth, compute location,
  // parallel granularity, vector width; or a register block reshaped (two tiles at once).
  Candidate mutate(const Candidate& c, std::mt19937_64& rng) const;
  // Structurally different sketches (the first decisions of the generator), for reports.
  std::vector<std::string> sketch_names() const;
  const Workload& workload() const { return w_; }

  struct StageInfo {
    std::string name;
    bool placeholder = false, output = false, reduce = false;
    bool inline_always = false;     // cheap element-wise producer
    bool multi_level_tiling = false;
    std::string fused_consumer;     // element-wise output consumer tiled together with it
    bool fused_into_producer = false;
    bool needs_rfactor = false;
    // Axes that pick a row of a constant matrix (`select(i == 0, row 0, select(i == 1, ...))`,
    // Winograd's transforms), each with the modulus it is read under (0: the axis itself).
    std::vector<std::pair<std::string, int64_t>> row_axes;
  };
  const std::vector<StageInfo>& stages() const { return info_; }

 private:
  Candidate generate(const std::vector<Decision>* replay, std::mt19937_64& rng) const;
  // Each target's sketch rules, in a file of their own (SketchCPU.cpp, SketchGPU.cpp).
  Candidate generate_cpu(Tracer& tr) const;
  Candidate generate_gpu(Tracer& tr) const;
  bool fits_gpu(const OperationNode* op, const std::vector<std::vector<int64_t>>& spatial,
                const std::vector<std::vector<int64_t>>& reduce) const;
  int lanes() const { return std::max(1, target_.vector_bytes / std::max(1, w_.dtype.bytes())); }  // per vector
  Workload w_;
  Target target_;
  std::set<std::string> constants_;  // w_.constants
  std::vector<StageInfo> info_;
};

}  // namespace tessel::autotune
