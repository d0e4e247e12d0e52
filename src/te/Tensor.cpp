// Tensors, placeholders and compute definitions.
#include <set>

#include "ir/IR.h"
#include "ir/IRVisitor.h"

namespace tessel {

const std::string& Tensor::name() const { return op_->name; }
const std::vector<int64_t>& Tensor::shape() const { return op_->shape; }
DType Tensor::dtype() const { return op_->dtype; }
bool Tensor::is_placeholder() const { return op_->kind == OperationNode::Placeholder; }

IterVar Tensor::axis(int i) const {
  TESSEL_USER_CHECK(op_->is_compute(), "tensor '", name(), "' is a placeholder and has no loop axes");
  TESSEL_USER_CHECK(i >= 0 && i < int(op_->axis.size()), "tensor '", name(), "' has ", op_->axis.size(),
                    " axes; axis(", i, ") does not exist");
  return op_->axis[i];
}

IterVar Tensor::reduce_axis(int i) const {
  TESSEL_USER_CHECK(i >= 0 && i < int(op_->reduce_axis.size()), "tensor '", name(), "' has ",
                    op_->reduce_axis.size(), " reduce axes; reduce_axis(", i, ") does not exist");
  return op_->reduce_axis[i];
}

int Tensor::num_reduce_axes() const { return int(op_->reduce_axis.size()); }

Expr Tensor::operator()(std::vector<Expr> indices) const {
  TESSEL_USER_CHECK(defined(), "indexing an undefined tensor");
  TESSEL_USER_CHECK(indices.size() == op_->shape.size(), "tensor '", name(), "' has ", op_->shape.size(),
                    " dimensions but is indexed with ", indices.size());
  for (size_t d = 0; d < indices.size(); ++d) {
    TESSEL_USER_CHECK(indices[d].defined(), "index ", d, " of tensor '", name(), "' is undefined");
    TESSEL_USER_CHECK(indices[d].dtype().is_integer() && indices[d].dtype().is_scalar(), "index ", d,
                      " of tensor '", name(), "' has type ", indices[d].dtype().str(),
                      "; indices must be integers (use cast(int32, ...))");
    if (indices[d].dtype() != int32) indices[d] = cast(int32, indices[d]);
  }
  return TensorLoad::make(op_, std::move(indices));
}

namespace {
// A placeholder may hold no elements (a graph's empty shape tensor); a compute may not.
void check_shape(const std::vector<int64_t>& shape, const std::string& name, bool empty_ok = false) {
  for (size_t d = 0; d < shape.size(); ++d)
    TESSEL_USER_CHECK(shape[d] > 0 || (empty_ok && shape[d] == 0), "tensor '", name, "': dimension ", d,
                      " has extent ", shape[d], "; extents must be positive");
  TESSEL_USER_CHECK(!name.empty(), "tensors need a name");
}

// Reduce axes not listed in any reduction would be silently unbound loop variables.
void check_free_vars(const Expr& body, const std::vector<Var>& axes, const std::string& name) {
  std::set<const ExprNode*> bound;
  for (const Var& v : axes) bound.insert(v.get());
  std::string bad;
  visit_exprs(body, [&](const Expr& e) {
    if (const Reduce* r = e.as<Reduce>())
      for (const IterVar& iv : r->axes) bound.insert(iv.var().get());
  });
  visit_exprs(body, [&](const Expr& e) {
    if (e.as<Variable>() && !bound.count(e.get()) && bad.empty()) bad = static_cast<const VarNode*>(e.get())->name;
  });
  TESSEL_USER_CHECK(bad.empty(), "compute '", name, "' uses variable '", bad,
                    "', which is neither one of its axes nor a reduce axis of a reduction in its body");
}
}  // namespace

Tensor placeholder(std::vector<int64_t> shape, DType dtype, const std::string& name) {
  check_shape(shape, name, true);
  TESSEL_USER_CHECK(dtype.is_scalar() && !dtype.is_handle(), "placeholder '", name, "' has dtype ", dtype.str(),
                    "; use a scalar element type");
  auto op = std::make_shared<OperationNode>();
  op->kind = OperationNode::Placeholder;
  op->name = name;
  op->shape = std::move(shape);
  op->dtype = dtype;
  return Tensor(op);
}

Tensor compute(std::vector<int64_t> shape, const ComputeFn& fn, const std::string& name, const std::string& tag,
               const std::map<std::string, std::string>& attrs) {
  check_shape(shape, name);
  static const char* kNames[] = {"i", "j", "k", "l", "m", "n"};
  std::vector<IterVar> axis;
  std::vector<Var> vars;
  for (size_t d = 0; d < shape.size(); ++d) {
    std::string n = d < 6 ? kNames[d] : "ax" + std::to_string(d);
    Var v(n);
    vars.push_back(v);
    axis.emplace_back(v, 0, shape[d], IterKind::Spatial);
  }
  Expr body = fn(vars);
  TESSEL_USER_CHECK(body.defined(), "compute '", name, "' returned an undefined expression");
  check_free_vars(body, vars, name);
  // A reduction may only be the whole body: nested reductions need their own stage.
  int reductions = 0;
  visit_exprs(body, [&](const Expr& e) { reductions += e.as<Reduce>() != nullptr; });
  TESSEL_USER_CHECK(reductions == 0 || (reductions == 1 && body.as<Reduce>()), "compute '", name,
                    "': a reduction must be the whole body (e.g. sum(A(i,k)*B(k,j), {k})); compute "
                    "the reduction as its own tensor and use that");
  return Tensor(make_compute_op(name, std::move(axis), std::move(body), tag, attrs));
}

}  // namespace tessel
