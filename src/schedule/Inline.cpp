// compute_inline: a stage's body replaces every read of its tensor.
#include "ir/IRMutator.h"
#include "schedule/StageNest.h"

namespace tessel {

std::map<std::string, Expr> inline_stages(const ScheduleState& st) {
  std::map<const OperationNode*, const StageState*> inlined;
  for (auto& s : st.stages)
    if (s.attach == StageState::Inline) inlined[s.op.get()] = &s;

  std::map<std::string, Expr> bodies;
  class Inliner : public IRMutator {
   public:
    std::map<const OperationNode*, const StageState*>* inlined;
    std::map<std::string, Expr>* bodies;
    using IRMutator::mutate;
    Expr visit(const TensorLoad* op, const Expr& e) override {
      Expr r = IRMutator::visit(op, e);
      auto it = inlined->find(op->op.get());
      if (it == inlined->end()) return r;
      const TensorLoad* load = r.as<TensorLoad>();
      VarMap m;
      for (size_t d = 0; d < op->op->axis.size(); ++d) m[op->op->axis[d].var().get()] = load->indices[d];
      // Producers come first, so their own inlined reads are already substituted.
      return substitute(bodies->at(it->second->name), m);
    }
  } inl;
  inl.inlined = &inlined;
  inl.bodies = &bodies;
  for (auto& s : st.stages)
    if (!s.is_placeholder()) bodies[s.name] = inl.mutate(s.op->body);
  return bodies;
}

}  // namespace tessel
