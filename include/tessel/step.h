#pragma once
// One recorded schedule primitive. A schedule is a list of these; so is a tuner
// candidate and a tuning-log record. Stages and axes are named, never numbered, so that
// records stay readable and survive the addition of stages.
//
// JSON form (an array, tag first):
//   ["split", stage, axis, factor]          ["split_nparts", stage, axis, nparts]
//   ["fuse", stage, [axes...]]              ["reorder", stage, [axes...]]
//   ["vectorize"|"unroll"|"parallel", stage, axis]
//   ["bind", stage, axis, thread_tag]       ["pragma", stage, axis, key, value]
//   ["prefetch", stage, axis, tensor, offset]
//   ["compute_at", stage, parent, axis]     ["compute_inline", stage]  ["compute_root", stage]
//   ["storage_align", stage, axis, factor, offset]
//   ["cache_read", tensor, scope, [readers...]]  ["cache_write", stage, scope]
//   ["rfactor", stage, axis]
//   ["pack", tensor, [readers...], dim, block(, dims)]
//   ["deinterleave"|"subsample", tensor, [readers...], dim, factor]
//   ["rewrite_layout", input, dim, block]   ["reorder_storage", stage, [axes...]]
#include <cstdint>
#include <string>
#include <vector>

namespace tessel {

struct Step {
  enum Kind {
    Split, SplitNParts, Fuse, Reorder, Vectorize, Unroll, Parallel, Bind, Pragma,
    ComputeAt, ComputeInline, ComputeRoot, StorageAlign, CacheRead, CacheWrite, RFactor, Pack,
    RewriteLayout, ReorderStorage, Deinterleave, Prefetch, Subsample
  };
  Kind kind = Split;
  std::string stage;              // the stage acted on (the tensor read, for cache_read and the copies)
  std::vector<std::string> axes;  // axes named by the step, in order
  // factor / nparts / pragma value / align factor+offset / pack, rewrite_layout, deinterleave and subsample dim+block /
  // prefetch offset
  std::vector<int64_t> ints;
  std::string str;                // parent stage, thread tag, pragma key, scope or the tensor prefetched
  std::vector<std::string> stages;  // the readers of cache_read and the copies

  std::string to_json() const;
  static Step from_json(const std::string& text);  // throws tessel::Error naming the problem
  std::string to_cpp(const std::string& schedule_var) const;
  bool operator==(const Step& o) const;
};

std::string steps_to_json(const std::vector<Step>& steps);
std::vector<Step> steps_from_json(const std::string& text);

}  // namespace tessel
