#include <numeric>

#include "ir/IRMutator.h"
#include "ir/Simplify.h"
#include "passes/Passes.h"

namespace tessel {
namespace {

struct FlatBuffer {
  Var buffer;
  std::vector<Expr> mins;
  std::vector<int64_t> strides;
};

class Flattener : public IRMutator {
 public:
  std::map<const OperationNode*, FlatBuffer> buffers;
  const std::map<std::string, BufferLayout>* layouts;

  static std::vector<int64_t> strides_of(const std::vector<int64_t>& ext, const BufferLayout* layout) {
    std::vector<int> order(ext.size());
    std::iota(order.begin(), order.end(), 0);
    if (layout && !layout->order.empty()) order = layout->order;
    std::vector<int64_t> strides(ext.size(), 1);
    int64_t s = 1;
    for (int p = int(order.size()) - 1; p >= 0; --p) {
      int d = order[p];
      if (layout && p + 1 < int(order.size()))
        for (auto& [dim, fo] : layout->align)
          if (dim == d)
            while (s % fo.first != fo.second) ++s;
      strides[d] = s;
      s *= ext[d];
    }
    return strides;
  }

  using IRMutator::mutate;

  Expr flat_index(const OperationNode* op, const std::vector<Expr>& idx) {
    auto it = buffers.find(op);
    TESSEL_USER_CHECK(it != buffers.end(), "tensor '", op->name,
                      "' is read or written by the kernel but is neither an argument nor computed by the "
                      "schedule; add it to the argument list");
    const FlatBuffer& b = it->second;
    Expr index;
    for (size_t d = 0; d < idx.size(); ++d) {
      Expr term = (idx[d] - b.mins[d]) * make_int(b.strides[d]);
      index = index.defined() ? index + term : term;
    }
    return simplify(index.defined() ? index : make_int(0));
  }

  Expr visit(const TensorLoad* op, const Expr& e) override {
    Expr r = IRMutator::visit(op, e);
    const TensorLoad* l = r.as<TensorLoad>();
    return Load::make(op->type, buffers.at(op->op.get()).buffer, flat_index(op->op.get(), l->indices));
  }
  Stmt visit(const TensorStore* op, const Stmt& s) override {
    Expr v = mutate(op->value);
    std::vector<Expr> idx;
    for (auto& i : op->indices) idx.push_back(mutate(i));
    Expr index = flat_index(op->op.get(), idx);
    return Store::make(buffers.at(op->op.get()).buffer, v, index);
  }
  // One buffer variable per tensor: loop partitioning copies a Realize into each part, and
  // the copies, which run one after another, are then one buffer (one GPU shared array).
  std::map<const OperationNode*, Var> vars;

  Stmt visit(const Realize* op, const Stmt& s) override {
    auto layout = layouts->find(op->op->name);
    Var var = vars.emplace(op->op.get(), Var(op->op->name, handle)).first->second;
    FlatBuffer b{var, op->mins, strides_of(op->extents, layout == layouts->end() ? nullptr : &layout->second)};
    int64_t size = 1;
    for (size_t d = 0; d < op->extents.size(); ++d) size = std::max(size, b.strides[d] * op->extents[d]);
    buffers[op->op.get()] = b;
    Stmt body = mutate(op->body);
    buffers.erase(op->op.get());
    return Allocate::make(b.buffer, op->op->dtype, size, op->scope, body);
  }
};

}  // namespace

Stmt storage_flatten(const Stmt& s, const std::vector<ArgBuffer>& args,
                     const std::map<std::string, BufferLayout>& layouts) {
  Flattener f;
  f.layouts = &layouts;
  for (auto& a : args) {
    std::vector<Expr> mins(a.op->shape.size(), make_int(0));
    f.buffers[a.op.get()] = FlatBuffer{a.buffer, mins, Flattener::strides_of(a.op->shape, nullptr)};
  }
  return f.mutate(s);
}

}  // namespace tessel
