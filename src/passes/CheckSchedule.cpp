// What a schedule may ask of its target, checked before lowering so that the error names
// the stage and axis the user wrote: the CPU runs no GPU threads, and a GPU kernel has
// no parallel loops, no global scratch inside a kernel and no reduction across blocks.
#include "passes/Passes.h"
#include "schedule/ScheduleState.h"
#include "tessel/target.h"

namespace tessel {
namespace {

bool is_block_tag(const std::string& tag) { return tag.rfind("blockIdx", 0) == 0; }

void check_gpu_stage(const ScheduleState& st, const StageState& s, const Target& t) {
  bool cross_thread = false;
  for (int a : s.leaf)
    cross_thread |= s.axes[a].kind == IterKind::Reduce && s.axes[a].annotation == ForKind::ThreadBound;
  bool bound = false, reduce_seen = false;
  for (int k : s.leaf) {
    const AxisState& a = s.axes[k];
    TESSEL_USER_CHECK(a.annotation != ForKind::Parallel, "stage '", s.name, "': axis '", a.name,
                      "' is parallel; a GPU target runs parallel work as threads: bind the axis to blockIdx.x or "
                      "threadIdx.x instead");
    bool red = a.kind == IterKind::Reduce;
    if (a.annotation == ForKind::ThreadBound) {
      bound |= a.thread_tag != "vthread";
      TESSEL_USER_CHECK(a.thread_tag != "vthread" || a.extent <= t.max_vthread, "stage '", s.name, "': axis '",
                        a.name, "' of extent ", a.extent, " is bound to vthread; ", t.key(), " allows at most ",
                        t.max_vthread, " virtual threads");
      TESSEL_USER_CHECK(!red || !is_block_tag(a.thread_tag), "stage '", s.name, "': reduction axis '", a.name,
                        "' is bound to ", a.thread_tag, "; thread blocks cannot combine their partial results. "
                        "Bind spatial axes to blockIdx and the reduction to threadIdx.x (a cross-thread "
                        "reduction), or rfactor it into a stage whose new spatial axis is bound to blockIdx");
      TESSEL_USER_CHECK(!red || a.thread_tag == "threadIdx.x", "stage '", s.name, "': reduction axis '", a.name,
                        "' is bound to ", a.thread_tag, "; a cross-thread reduction runs over threadIdx.x only");
    }
    TESSEL_USER_CHECK(red || !reduce_seen || !cross_thread, "stage '", s.name, "': spatial axis '", a.name,
                      "' comes after a reduction axis in a cross-thread reduction (a reduction axis is bound to "
                      "threadIdx.x); reorder so that all spatial axes come first: ", s.leaf_names());
    reduce_seen |= red;
  }
  if (s.attach == StageState::Root && !s.is_placeholder())
    TESSEL_USER_CHECK(bound, "stage '", s.name, "' is computed at the root, which on a GPU is a kernel of its own, "
                      "but none of its loops is bound to a GPU thread; bind its outer loops, e.g. s[\"", s.name,
                      "\"].bind(outer, \"blockIdx.x\") and .bind(inner, \"threadIdx.x\"), or inline it or "
                      "compute it at a loop of a kernel");
  if (s.attach == StageState::At)
    TESSEL_USER_CHECK(st.storage_scope(s) != "global", "stage '", s.name, "' is computed at '", s.attach_stage,
                      "' loop '", s.attach_axis, "', outside the loops bound to GPU threads, in global memory, "
                      "which a kernel cannot allocate; compute it at a loop bound to blockIdx or threadIdx (or "
                      "inside one), or at the root as a kernel of its own");
}

}  // namespace

void check_schedule(const ScheduleState& st, const Target& target) {
  for (auto& s : st.stages) {
    TESSEL_USER_CHECK(s.scope == "global" || s.scope == "shared" || s.scope == "local", "stage '", s.name,
                      "': unknown storage scope '", s.scope, "'; the scopes are \"global\", \"shared\" (one "
                      "buffer per GPU thread block) and \"local\" (per thread, in registers)");
    if (s.is_placeholder() || s.attach == StageState::Inline) continue;
    for (auto& a : s.axes)
      TESSEL_USER_CHECK(a.prefetches.empty() || !target.is_gpu(), "stage '", s.name, "': loop '", a.name,
                        "' prefetches, which only CPU targets do; a GPU kernel stages its reads through "
                        "cache_read(..., \"shared\", ...) instead");
    if (target.is_gpu()) {
      check_gpu_stage(st, s, target);
      continue;
    }
    for (auto& a : s.axes)
      TESSEL_USER_CHECK(a.annotation != ForKind::ThreadBound, "stage '", s.name, "': axis '", a.name,
                        "' is bound to ", a.thread_tag, "; the CPU (llvm) target runs no GPU threads. Build for a "
                        "GPU target (cuda, opencl), or drop the bind");
  }
}

}  // namespace tessel
