// The operator table and the helpers its files share.
#include "graph/Operators.h"

#include <algorithm>

namespace tessel::graph {

std::string OpInputs::where() const {
  return "node '" + node.name + "' (" + node.op + ", opset " + std::to_string(node.opset) + "): ";
}

const Tensor& OpInputs::operator[](size_t i) const {
  if (!given(i)) fail("input ", i, " is required but missing");
  return tensors_[i];
}

const Buffer& OpInputs::constant(size_t i, const char* what) const {
  (*this)[i];
  if (!is_constant(i))
    fail("input ", i, " (", what, ") must be known when compiling: an initializer, a Constant, or computed from "
         "them; bind the graph input it comes from to a constant (load_onnx's `bind`)");
  return *constants_[i];
}

std::vector<int64_t> OpInputs::ints(size_t i, const char* what) const {
  const Buffer& b = constant(i, what);
  if (!b.dtype().is_integer()) fail("input ", i, " (", what, ") must be integers, not ", b.dtype().str());
  std::vector<int64_t> out(size_t(b.size()));
  for (size_t k = 0; k < out.size(); ++k) out[k] = int64_t(b.get(int64_t(k)));
  return out;
}

int64_t normalize_axis(const OpInputs& in, int64_t axis, int64_t rank) {
  if (axis < -rank || axis >= std::max<int64_t>(rank, 1))
    in.fail("axis ", axis, " is outside a tensor of rank ", rank, " (valid: ", -rank, " to ", rank - 1, ")");
  return axis < 0 ? axis + rank : axis;
}

std::vector<int64_t> broadcast_shapes(const OpInputs& in, const std::vector<int64_t>& a,
                                      const std::vector<int64_t>& b) {
  size_t rank = std::max(a.size(), b.size());
  std::vector<int64_t> out(rank);
  for (size_t k = 0; k < rank; ++k) {
    int64_t da = k + a.size() >= rank ? a[k + a.size() - rank] : 1;
    int64_t db = k + b.size() >= rank ? b[k + b.size() - rank] : 1;
    if (da != db && da != 1 && db != 1)
      in.fail("shapes ", shape_str(a), " and ", shape_str(b),
              " do not broadcast: dimension ", k, " is ", da, " against ", db, " (each must be equal or 1)");
    out[k] = da == 1 ? db : da;
  }
  return out;
}

Expr broadcast_load(const Tensor& t, const std::vector<Var>& idx, const std::vector<int64_t>& out_shape) {
  const std::vector<int64_t>& s = t.shape();
  size_t off = out_shape.size() - s.size();
  std::vector<Expr> at;
  for (size_t k = 0; k < s.size(); ++k)
    at.push_back(s[k] == 1 && out_shape[k + off] != 1 ? Expr(0) : Expr(idx[k + off]));
  return t(at);
}

std::string stage_name(const OpInputs& in, int index, const std::string& suffix) {
  return "t" + std::to_string(in.node.outputs.at(size_t(index))) + suffix;
}

Tensor output(std::vector<int64_t> shape, const ComputeFn& fn, const OpInputs& in, const std::string& tag,
              int index) {
  if (std::find(shape.begin(), shape.end(), 0) != shape.end()) {
    // No elements to compute (a shape tensor of a scalar, an empty slice): a value of its
    // type that infer_shapes turns into an empty constant.
    std::vector<Var> axes;
    for (size_t k = 0; k < shape.size(); ++k) axes.emplace_back("i" + std::to_string(k));
    return placeholder(std::move(shape), fn(axes).dtype(), stage_name(in, index));
  }
  return compute(std::move(shape), fn, stage_name(in, index), tag);
}

std::string shape_str(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t k = 0; k < shape.size(); ++k) s += (k ? ", " : "") + std::to_string(shape[k]);
  return s + "]";
}

int64_t product(const std::vector<int64_t>& s, size_t from, size_t to) {
  int64_t p = 1;
  for (size_t k = from; k < std::min(to, s.size()); ++k) p *= s[k];
  return p;
}

Tensor reshape(const OpInputs& in, const Tensor& x, const std::vector<int64_t>& shape, const std::string& name) {
  const std::vector<int64_t>& from = x.shape();
  if (product(shape, 0) != product(from, 0))
    in.fail("cannot reshape ", shape_str(from), " (", product(from, 0), " elements) into ", shape_str(shape), " (",
            product(shape, 0), ")");
  if (product(shape, 0) == 0) return placeholder(shape, x.dtype(), name);  // nothing to compute (see output())
  // Trailing dimensions both shapes share are read as they are; only the leading ones go
  // through a linear index (so [1, 128, 768] -> [128, 768] reads rows by a division, not
  // every element).
  size_t keep = 0;
  while (keep < shape.size() && keep < from.size() && shape[shape.size() - 1 - keep] == from[from.size() - 1 - keep])
    ++keep;
  size_t lead_out = shape.size() - keep, lead_in = from.size() - keep;
  return compute(shape, ComputeFn([&](const std::vector<Var>& i) {
    std::vector<Expr> at(from.size());
    for (size_t k = 0; k < keep; ++k) at[lead_in + k] = i[lead_out + k];
    Expr linear = 0;
    for (size_t k = 0; k < lead_out; ++k) linear = linear * Expr(int(shape[k])) + i[k];
    int64_t inner = 1;
    for (size_t k = lead_in; k-- > 0;) {
      at[k] = k == 0 ? linear / Expr(int(inner)) : (linear / Expr(int(inner))) % Expr(int(from[k]));
      if (from[k] == 1) at[k] = Expr(0);
      inner *= from[k];
    }
    return x(at);
  }), name, "injective");
}

DType onnx_dtype(int64_t t, const std::string& where) {
  switch (t) {
    case 1: return float32;
    case 2: return uint8;
    case 3: return int8;
    case 4: return DType(DType::UInt, 16);
    case 5: return DType(DType::Int, 16);
    case 6: return int32;
    case 7: return int64;
    case 9: return boolean;
    case 10: return float16;
    case 11: return float64;
    case 12: return DType(DType::UInt, 32);
    case 13: return DType(DType::UInt, 64);
  }
  static const char* names[] = {"UNDEFINED", "FLOAT", "UINT8", "INT8", "UINT16", "INT16", "INT32", "INT64",
                                "STRING", "BOOL", "FLOAT16", "DOUBLE", "UINT32", "UINT64", "COMPLEX64",
                                "COMPLEX128", "BFLOAT16"};
  throw Error(where + "element type " + (t >= 0 && t <= 16 ? names[t] : std::to_string(t)) +
              " is not supported (Tessel computes in float16/32/64, int8/16/32/64, uint8/16/32/64 and bool)");
}

const OpTable& operators() {
  static const OpTable table = [] {
    OpTable t;
    add_elementwise_ops(t);
    add_shape_ops(t);
    add_nn_ops(t);
    add_reduce_ops(t);
    return t;
  }();
  return table;
}

std::vector<Tensor> build_node(const OpInputs& in) {
  auto it = operators().find(in.node.op);
  if (it == operators().end()) in.fail("operator ", in.node.op, " is not supported");
  return it->second(in);
}

std::vector<std::string> supported_operators() {
  std::vector<std::string> out;
  for (auto& [name, _] : operators())
    if (name.rfind("tessel.", 0) != 0) out.push_back(name);  // not the layout passes' own
  return out;
}

}  // namespace tessel::graph
