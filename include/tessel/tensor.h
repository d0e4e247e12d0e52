#pragma once
// Tensors and the operations that produce them: placeholders (inputs) and computes
// (one expression per output point, possibly a reduction). Shapes are constants.
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

#include "tessel/expr.h"

namespace tessel {

struct OperationNode;
using Operation = std::shared_ptr<const OperationNode>;

class Tensor {
 public:
  Tensor() = default;
  explicit Tensor(Operation op) : op_(std::move(op)) {}

  const Operation& op() const { return op_; }
  bool defined() const { return op_ != nullptr; }
  const std::string& name() const;
  const std::vector<int64_t>& shape() const;
  int ndim() const { return int(shape().size()); }
  DType dtype() const;
  // The loop axes of a compute tensor, in definition order.
  IterVar axis(int i) const;
  IterVar reduce_axis(int i) const;
  int num_reduce_axes() const;
  bool is_placeholder() const;

  Expr operator()(std::vector<Expr> indices) const;
  template <typename... Args>
  Expr operator()(Args... idx) const {
    return (*this)(std::vector<Expr>{Expr(idx)...});
  }
  bool operator==(const Tensor& o) const { return op_ == o.op_; }
  bool operator!=(const Tensor& o) const { return op_ != o.op_; }

 private:
  Operation op_;
};

Tensor placeholder(std::vector<int64_t> shape, DType dtype, const std::string& name);

using ComputeFn = std::function<Expr(const std::vector<Var>&)>;
// `tag` classifies the op for the tuner and the default schedules ("elemwise",
// "broadcast", "injective", "matmul", "conv2d", ...); `attrs` carry extra facts.
Tensor compute(std::vector<int64_t> shape, const ComputeFn& fn, const std::string& name,
               const std::string& tag = "",
               const std::map<std::string, std::string>& attrs = {});

// compute with a lambda of one Var per dimension: compute({M, N}, [&](Var i, Var j) {...}).
template <typename F>
  requires(!std::is_convertible_v<F, ComputeFn> || std::is_invocable_v<F, Var>)
Tensor compute(std::vector<int64_t> shape, F fn, const std::string& name,
               const std::string& tag = "",
               const std::map<std::string, std::string>& attrs = {}) {
  return compute(
      std::move(shape),
      ComputeFn([fn](const std::vector<Var>& v) -> Expr {
        if constexpr (std::is_invocable_v<F, Var>) return fn(v.at(0));
        else if constexpr (std::is_invocable_v<F, Var, Var>) return fn(v.at(0), v.at(1));
        else if constexpr (std::is_invocable_v<F, Var, Var, Var>) return fn(v.at(0), v.at(1), v.at(2));
        else if constexpr (std::is_invocable_v<F, Var, Var, Var, Var>)
          return fn(v.at(0), v.at(1), v.at(2), v.at(3));
        else if constexpr (std::is_invocable_v<F, Var, Var, Var, Var, Var>)
          return fn(v.at(0), v.at(1), v.at(2), v.at(3), v.at(4));
        else return fn(v.at(0), v.at(1), v.at(2), v.at(3), v.at(4), v.at(5));
      }),
      name, tag, attrs);
}

}  // namespace tessel
