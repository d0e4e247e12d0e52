// Host/device split. On a GPU every root stage is one kernel launch; a bound loop is not a
// loop there but the hardware index of the thread running it. Stages of one kernel that
// bind the same tag share that index (a shared-memory fetch bound to threadIdx.x inside
// a consumer's threadIdx.x loop is executed by the consumer's threads together), so the
// launch extent of a tag is the largest extent bound to it, and a stage bound to less is
// guarded. Root stages that are not outputs become temporaries in global memory.
#include <algorithm>

#include "ir/IRMutator.h"
#include "ir/IRVisitor.h"
#include "passes/Passes.h"
#include "tessel/schedule.h"

namespace tessel {
namespace {

// The ThreadIndex dimension of a tag: its position in kThreadTags (blockIdx.x/y/z, then
// threadIdx.x/y/z); -1 for vthread.
int tag_dim(const std::string& tag) {
  for (int d = 0; d < 6; ++d)
    if (tag == kThreadTags[d]) return d;
  return -1;
}

class BindThreads : public IRMutator {
 public:
  int64_t launch[6] = {1, 1, 1, 1, 1, 1};
  using IRMutator::mutate;

 protected:
  Stmt visit(const For* op, const Stmt& s) override {
    if (op->for_kind != ForKind::ThreadBound) return IRMutator::visit(op, s);
    Stmt body = mutate(op->body);
    int d = tag_dim(op->thread_tag);
    TESSEL_INTERNAL_CHECK(d >= 0, "a vthread loop reached the host/device split");
    int64_t ext;
    TESSEL_INTERNAL_CHECK(is_const_int(op->extent, &ext) && is_zero(op->min), "loop bound to ", op->thread_tag,
                          " has no constant extent from 0");
    Expr idx = Call::make(int32, Intrinsic::ThreadIndex, {make_int(d)});
    Stmt out = LetStmt::make(op->var, idx, body);
    return ext < launch[d] ? IfThenElse::make(idx < make_int(ext), out) : out;
  }
};

void launch_extents(const Stmt& s, int64_t* launch) {
  visit_stmts(s, [&](const Stmt& st) {
    const For* f = st.as<For>();
    if (!f || f->for_kind != ForKind::ThreadBound) return;
    int d = tag_dim(f->thread_tag);
    int64_t ext;
    if (d >= 0 && is_const_int(f->extent, &ext)) launch[d] = std::max(launch[d], ext);
  });
}

}  // namespace

DeviceProgram split_host_device(const Stmt& s, const std::vector<ArgBuffer>& args, const std::string& name) {
  DeviceProgram prog;
  std::vector<Stmt> roots;
  std::function<void(const Stmt&)> walk = [&](const Stmt& st) {
    if (const Allocate* a = st.as<Allocate>(); a && a->scope == "global") {
      prog.temps.push_back(DeviceTemp{a->buffer, a->dtype, a->size});
      walk(a->body);
    } else if (const Block* b = st.as<Block>()) {
      for (auto& x : b->stmts) walk(x);
    } else if (st.defined()) {
      roots.push_back(st);
    }
  };
  walk(s);
  std::vector<Var> globals;
  for (auto& a : args) globals.push_back(a.buffer);
  for (auto& t : prog.temps) globals.push_back(t.buffer);
  for (size_t i = 0; i < roots.size(); ++i) {
    DeviceKernel k;
    k.name = name + "_k" + std::to_string(i);  // not `name` itself: "kernel" is an OpenCL keyword
    BindThreads bind;
    launch_extents(roots[i], bind.launch);
    k.body = bind.mutate(roots[i]);
    for (int d = 0; d < 3; ++d) k.grid[d] = bind.launch[d], k.block[d] = bind.launch[3 + d];
    for (auto& g : globals)
      if (uses_var(k.body, g.var_node())) k.params.push_back(g);
    prog.kernels.push_back(std::move(k));
  }
  return prog;
}

}  // namespace tessel
