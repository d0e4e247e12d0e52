#pragma once
/** \file The internal state of a schedule: one StageState per operation with its axes,
 * the split/fuse relations between them, annotations and its attach point. Every change
 * goes through apply_step() so that the recorded steps always rebuild the same state. */
#include <string>
#include <vector>

#include "ir/IR.h"
#include "tessel/schedule.h"
#include "tessel/step.h"

namespace tessel {

struct AxisState {
  std::string name;
  Var var;         // the loop variable this axis becomes
  int64_t extent;  // assuming the stage computes its whole domain (bound inference may shrink roots)
  IterKind kind;
  ForKind annotation = ForKind::Serial;
  std::string thread_tag;
  std::vector<std::pair<std::string, int64_t>> pragmas;
  std::vector<std::pair<std::string, int64_t>> prefetches;  // the buffer prefetched (a stage's name), offset
};

struct Relation {
  enum Kind { Split, Fuse } kind;
  // Split: parent -> (outer, inner). Fuse: (outer, inner) -> fused (stored in parent).
  int parent, outer, inner;
  int64_t factor;   // split: the inner extent requested by the step (factor mode)
  int64_t nparts;   // split: the outer extent requested (nparts mode), else 0
};

struct StageState {
  enum Attach { Root, Inline, At };
  std::string name;
  Operation op;
  std::vector<AxisState> axes;  // every axis ever made: roots first (op->axis, then op->reduce_axis)
  int num_root = 0;
  std::vector<int> leaf;        // current loop order, outermost first
  std::vector<Relation> relations;
  Attach attach = Root;
  std::string attach_stage, attach_axis;
  std::string scope = "global";
  std::vector<std::pair<int, std::pair<int64_t, int64_t>>> align;  // dimension -> (factor, offset)
  std::vector<int> storage_order;  // reorder_storage: data dimensions, outermost first (empty: row-major)
  bool transformed = false;     // any split/fuse/reorder/annotation applied

  bool is_placeholder() const { return op->kind == OperationNode::Placeholder; }
  int find_axis(const std::string& name) const;   // index in axes, or -1
  int leaf_position(int axis) const;              // position in leaf, or -1
  std::string leaf_names() const;                 // "i.outer, j.outer, k, i.inner"
};

struct ScheduleState {
  std::vector<Tensor> outputs;
  std::vector<StageState> stages;  // producers before consumers
  std::vector<Step> steps;
  std::vector<LayoutRewrite> rewrites;

  int find_stage(const std::string& name) const;  // -1 if absent
  StageState& stage(const std::string& name);     // throws a user error naming the stages
  const StageState& stage(const std::string& name) const;
  bool is_output(const std::string& name) const;
  // Stages whose op reads `name`'s op.
  std::vector<std::string> readers(const std::string& name) const;
  // Readers that are not inlined; an inlined reader's readers stand in for it.
  std::vector<std::string> effective_readers(const std::string& name) const;
  std::string stage_list() const;
  // Where a stage's buffer lives. A stage left "global" but computed inside a GPU kernel
  // lives where its attach point puts it (TVM's rule): in registers ("local") under a
  // threadIdx or vthread loop, in "shared" memory under blockIdx loops only.
  std::string storage_scope(const StageState& s) const;
};

void init_schedule_state(ScheduleState& st, const std::vector<Tensor>& outputs);
void apply_step(ScheduleState& st, const Step& step);

}  // namespace tessel
