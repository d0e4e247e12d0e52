#pragma once
/** \file What lowering knows about one stage after inlining and bound inference: the body
 * it computes, the region of its tensor it must produce at its attach point, the extent
 * of every loop axis and how root indices are computed from loop variables. */
#include <map>
#include <string>
#include <vector>

#include "ir/IR.h"
#include "schedule/ScheduleState.h"

namespace tessel {

struct StageNest {
  const StageState* st = nullptr;
  Expr body;                        // the op's body with inlined producers substituted
  std::vector<Expr> root_min;       // per root axis (spatial then reduce)
  std::vector<int64_t> root_ext;
  std::vector<int64_t> axis_ext;    // per axis of st->axes
  std::vector<Expr> root_value;     // root_min + position derived from the leaf loop vars
  std::vector<Expr> split_guards;   // conditions from splits that do not divide
  std::vector<Expr> domain_guards;  // root index within the tensor (attached stages)
};

struct LoopProgram {
  std::vector<StageNest> stages;    // every non-inline compute stage, producers first
  const StageNest* find(const std::string& name) const;
};

// Effective body of every compute stage, with inlined stages substituted (Inline.cpp).
std::map<std::string, Expr> inline_stages(const ScheduleState& st);
// Bound inference (InferBound.cpp).
LoopProgram infer_bounds(const ScheduleState& st);
// The loop nest of the whole schedule, before storage flattening (MakeLoopNest.cpp).
Stmt make_loop_nest(const ScheduleState& st, const LoopProgram& prog);

}  // namespace tessel
