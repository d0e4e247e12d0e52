// Schedule -> loop nest. Each stage becomes loops over its leaf axes around a store of its
// body; reductions get an init nest and an update nest; stages computed at a loop are
// placed at the top of that loop's body inside a Realize of the region they produce.
#include <algorithm>

#include "ir/IRMutator.h"
#include "ir/IRVisitor.h"
#include "ir/Simplify.h"
#include "schedule/StageNest.h"

namespace tessel {
namespace {

class NestBuilder {
 public:
  NestBuilder(const ScheduleState& st, const LoopProgram& prog) : st_(st), prog_(prog) {}

  Stmt build_root() {
    std::vector<Stmt> seq;
    std::vector<const StageNest*> realize;
    for (auto& n : prog_.stages) {
      if (n.st->attach != StageState::Root) continue;
      seq.push_back(stage(n));
      if (!st_.is_output(n.st->name)) realize.push_back(&n);
    }
    Stmt body = Block::make(seq);
    for (auto it = realize.rbegin(); it != realize.rend(); ++it) body = wrap_realize(**it, body);
    return body;
  }

 private:
  Stmt wrap_realize(const StageNest& n, Stmt body) {
    int nsp = int(n.st->op->axis.size());
    std::vector<Expr> mins(n.root_min.begin(), n.root_min.begin() + nsp);
    std::vector<int64_t> exts(n.root_ext.begin(), n.root_ext.begin() + nsp);
    return Realize::make(n.st->op, mins, exts, st_.storage_scope(*n.st), body);
  }

  // Stages attached at (stage, axis), producers first.
  std::vector<const StageNest*> attached(const std::string& stage, const std::string& axis) {
    std::vector<const StageNest*> out;
    for (auto& n : prog_.stages)
      if (n.st->attach == StageState::At && n.st->attach_stage == stage && n.st->attach_axis == axis)
        out.push_back(&n);
    return out;
  }

  // One loop around `body`, with the stages attached at this axis computed first.
  Stmt loop(const StageNest& n, int axis, Stmt body, bool with_attached) {
    const AxisState& a = n.st->axes[axis];
    if (with_attached) {
      auto prods = attached(n.st->name, a.name);
      std::vector<Stmt> seq;
      for (auto* p : prods) seq.push_back(stage(*p));
      seq.push_back(body);
      body = Block::make(seq);
      for (auto it = prods.rbegin(); it != prods.rend(); ++it) body = wrap_realize(**it, body);
    }
    Stmt s = For::make(a.var, make_int(0), make_int(n.axis_ext[axis]), a.annotation, body, a.thread_tag);
    for (auto& [key, value] : a.pragmas) s = AttrStmt::make(key, value, s);
    for (auto& [read, offset] : a.prefetches) s = AttrStmt::make(kPrefetchKey + read + "@" + a.var.name(), offset, s);
    return s;
  }

  static Stmt guarded(Stmt body, const std::vector<Expr>& conds) {
    Expr c;
    for (auto& g : conds) c = c.defined() ? (c && g) : g;
    return c.defined() ? IfThenElse::make(c, body) : body;
  }

  Stmt stage(const StageNest& n) {
    const StageState& s = *n.st;
    const OperationNode* op = s.op.get();
    int nsp = int(op->axis.size());
    VarMap root;
    for (int r = 0; r < s.num_root; ++r) {
      const IterVar& iv = r < nsp ? op->axis[r] : op->reduce_axis[r - nsp];
      root[iv.var().get()] = n.root_value[r];
    }
    std::vector<Expr> index;
    for (int d = 0; d < nsp; ++d) index.push_back(n.root_value[d]);
    std::vector<Expr> guards = n.split_guards;
    guards.insert(guards.end(), n.domain_guards.begin(), n.domain_guards.end());
    const Reduce* red = n.body.as<Reduce>();

    if (!red) {
      Stmt body = guarded(TensorStore::make(s.op, substitute(n.body, root), index), guards);
      for (int k = int(s.leaf.size()) - 1; k >= 0; --k) body = loop(n, s.leaf[k], body, true);
      return body;
    }

    // A leaf axis is a reduction axis if it derives from one; the init nest runs the
    // spatial leaves found below the first reduction leaf.
    auto is_reduce_leaf = [&](int a) { return s.axes[a].kind == IterKind::Reduce; };
    int first_red = int(s.leaf.size());
    for (int k = 0; k < int(s.leaf.size()); ++k)
      if (is_reduce_leaf(s.leaf[k])) {
        first_red = k;
        break;
      }
    // Guards that mention a reduction leaf do not belong in the init nest.
    std::vector<Expr> init_guards;
    for (auto& g : guards) {
      bool uses_red = false;
      for (int a : s.leaf)
        if (is_reduce_leaf(a)) uses_red |= uses_var(g, s.axes[a].var.var_node());
      if (!uses_red) init_guards.push_back(g);
    }
    if (cross_thread(s)) return cross_thread_reduction(n, root, index, first_red, guards, init_guards);
    Expr init = red->init.defined() ? red->init : combiner_identity(red->combiner, red->type);
    Stmt init_body = guarded(TensorStore::make(s.op, substitute(init, root), index), init_guards);
    Expr acc = TensorLoad::make(s.op, index);
    Expr update_value = combine(red->combiner, acc, substitute(red->source, root));
    std::vector<Expr> update_guards = guards;
    if (red->condition.defined()) update_guards.push_back(substitute(red->condition, root));
    Stmt update = guarded(TensorStore::make(s.op, update_value, index), update_guards);

    for (int k = int(s.leaf.size()) - 1; k >= first_red; --k) {
      update = loop(n, s.leaf[k], update, true);
      if (!is_reduce_leaf(s.leaf[k])) init_body = loop(n, s.leaf[k], init_body, false);
    }
    Stmt body = Block::make({init_body, update});
    for (int k = first_red - 1; k >= 0; --k) body = loop(n, s.leaf[k], body, true);
    return body;
  }

  // A reduction with a reduce axis bound to threadIdx.x (CheckGPUSchedule allows only this
  // form: spatial leaves first): each thread folds its share into a local accumulator,
  // the block's threads combine theirs (ThreadAllReduce), and thread 0 writes the result.
  static bool cross_thread(const StageState& s) {
    for (int a : s.leaf)
      if (s.axes[a].kind == IterKind::Reduce && s.axes[a].annotation == ForKind::ThreadBound) return true;
    return false;
  }

  Stmt cross_thread_reduction(const StageNest& n, const VarMap& root, const std::vector<Expr>& index, int first_red,
                              const std::vector<Expr>& guards, const std::vector<Expr>& store_guards) {
    const StageState& s = *n.st;
    const Reduce* red = n.body.as<Reduce>();
    DType t = red->type;
    Var acc(s.name + ".acc", handle), result(s.name + ".red", handle);
    Expr value = combine(red->combiner, Load::make(t, acc, make_int(0)), substitute(red->source, root));
    std::vector<Expr> update_guards = guards;
    if (red->condition.defined()) update_guards.push_back(substitute(red->condition, root));
    Stmt update = guarded(Store::make(acc, value, make_int(0)), update_guards);
    for (int k = int(s.leaf.size()) - 1; k >= first_red; --k) update = loop(n, s.leaf[k], update, true);
    Expr all = Call::make(t, Intrinsic::ThreadAllReduce,
                          {Load::make(t, acc, make_int(0)), make_int(int64_t(red->combiner))});
    Expr out = Load::make(t, result, make_int(0));
    if (red->init.defined()) out = combine(red->combiner, substitute(red->init, root), out);
    std::vector<Expr> write_guards = store_guards;
    write_guards.insert(write_guards.begin(), Call::make(int32, Intrinsic::ThreadIndex, {make_int(3)}) == make_int(0));
    Stmt body = Block::make({Store::make(acc, combiner_identity(red->combiner, t), make_int(0)), update,
                             Store::make(result, all, make_int(0)),
                             guarded(TensorStore::make(s.op, out, index), write_guards)});
    body = Allocate::make(acc, t, 1, "local", Allocate::make(result, t, 1, "local", body));
    for (int k = first_red - 1; k >= 0; --k) body = loop(n, s.leaf[k], body, true);
    return body;
  }

  const ScheduleState& st_;
  const LoopProgram& prog_;
};

}  // namespace

Stmt make_loop_nest(const ScheduleState& st, const LoopProgram& prog) {
  NestBuilder b(st, prog);
  return b.build_root();
}

}  // namespace tessel
