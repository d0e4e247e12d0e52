#pragma once
// The ONNX operators as compute definitions. A node's builder receives a placeholder of each
// input's shape (and the data of the constant ones) and returns the tensors of its outputs;
// the same definitions infer shapes at import, fold constants, and become kernels.
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "tessel/error.h"
#include "tessel/expr.h"
#include "tessel/graph.h"
#include "tessel/tensor.h"

namespace tessel::graph {

class OpInputs {
 public:
  OpInputs(const Node& node, std::vector<Tensor> tensors, std::vector<const Buffer*> constants)
      : node(node), tensors_(std::move(tensors)), constants_(std::move(constants)) {}
  const Node& node;

  size_t size() const { return tensors_.size(); }
  bool given(size_t i) const { return i < tensors_.size() && tensors_[i].defined(); }
  const Tensor& operator[](size_t i) const;  // an Error naming the input when it is missing
  // The data of a constant input, or an Error saying that `what` must be known when compiling.
  const Buffer& constant(size_t i, const char* what) const;
  std::vector<int64_t> ints(size_t i, const char* what) const;  // a constant input's values
  bool is_constant(size_t i) const { return i < constants_.size() && constants_[i]; }

  // An Error about this node: "node 'conv1' (Conv, opset 11): <pieces>".
  template <typename... Args>
  [[noreturn]] void fail(const Args&... pieces) const {
    throw Error(where() + detail::cat(pieces...));
  }
  std::string where() const;

 private:
  std::vector<Tensor> tensors_;
  std::vector<const Buffer*> constants_;
};

// One tensor per output of the node; an undefined tensor for an output it leaves out.
using OpBuilder = std::function<std::vector<Tensor>(const OpInputs&)>;
using OpTable = std::map<std::string, OpBuilder>;

// The table of every implemented operator (the files in graph/ops/ fill it).
const OpTable& operators();
void add_elementwise_ops(OpTable& t);
void add_shape_ops(OpTable& t);
void add_nn_ops(OpTable& t);
void add_reduce_ops(OpTable& t);

std::vector<Tensor> build_node(const OpInputs& in);

// Helpers the operator files share.
int64_t normalize_axis(const OpInputs& in, int64_t axis, int64_t rank);  // -rank..rank-1 -> 0..rank-1
std::vector<int64_t> broadcast_shapes(const OpInputs& in, const std::vector<int64_t>& a,
                                      const std::vector<int64_t>& b);
// The element of `t` that numpy broadcasting pairs with the output point `idx`.
Expr broadcast_load(const Tensor& t, const std::vector<Var>& idx, const std::vector<int64_t>& out_shape);
Tensor output(std::vector<int64_t> shape, const ComputeFn& fn, const OpInputs& in, const std::string& tag,
              int index = 0);
// The name of the stage computing output `index` ("t<value id>"), with a suffix for a stage
// inside the operator; names stay unique when fusion puts several nodes into one kernel.
std::string stage_name(const OpInputs& in, int index = 0, const std::string& suffix = "");
// Reduces `axes` of x (sum, max or mean of pre(x)); a reduced axis stays as 1 when `keep`.
Tensor reduce(const Tensor& x, std::vector<int64_t> axes, bool keep, const std::string& kind, const std::string& name,
              const std::function<Expr(Expr, const std::vector<Expr>&)>& pre = {});
// The product of shape[from, to): element counts.
int64_t product(const std::vector<int64_t>& shape, size_t from = 0, size_t to = SIZE_MAX);
// The same elements in another shape (row-major order kept).
Tensor reshape(const OpInputs& in, const Tensor& x, const std::vector<int64_t>& shape, const std::string& name);
DType onnx_dtype(int64_t onnx_type, const std::string& where);
std::string shape_str(const std::vector<int64_t>& shape);  // "[1, 64, 56, 56]"  // TensorProto.DataType -> DType

}  // namespace tessel::graph
