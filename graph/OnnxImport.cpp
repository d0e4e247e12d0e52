// ONNX models into the graph IR, through Debian's libonnx 1.12 protobuf classes: IR up to
// 8, the default domain up to opset 17. Every node is checked against the operator table and
// every value's shape inferred (InferShapes.cpp) before the graph is handed out.
#include <cstring>
#include <fstream>
#include <sstream>

#include <onnx/onnx_pb.h>

#include "graph/InferShapes.h"
#include "graph/Operators.h"

namespace tessel::graph {

namespace {

constexpr int64_t kMaxIrVersion = 8, kMaxOpset = 17;

Buffer to_buffer(const onnx::TensorProto& t, const std::string& where) {
  if (t.data_location() == onnx::TensorProto::EXTERNAL)
    throw Error(where + "tensor '" + t.name() + "' keeps its data in an external file, which Tessel does not read "
                "(save the model with its data inside: onnx.save_model(..., save_as_external_data=False))");
  DType d = onnx_dtype(t.data_type(), where + "tensor '" + t.name() + "': ");
  std::vector<int64_t> shape(t.dims().begin(), t.dims().end());
  for (int64_t s : shape)
    if (s < 0) throw Error(where + "tensor '" + t.name() + "' has a negative dimension");
  Buffer b(shape, d);
  size_t n = size_t(b.size()), bytes = size_t(b.bytes());
  if (t.has_raw_data()) {
    if (t.raw_data().size() != bytes)
      throw Error(where + "tensor '" + t.name() + "' holds " + std::to_string(t.raw_data().size()) +
                  " bytes of data; " +
                  d.str() + shape_str(shape) + " needs " + std::to_string(bytes));
    std::memcpy(b.raw(), t.raw_data().data(), bytes);
    return b;
  }
  auto fill = [&](const auto& field, const char* name) {
    if (size_t(field.size()) != n)
      throw Error(where + "tensor '" + t.name() + "' has " + std::to_string(field.size()) + " values in " + name +
                  "; its shape " + shape_str(shape) + " needs " + std::to_string(n));
  };
  if (d == float32) {
    fill(t.float_data(), "float_data");
    std::memcpy(b.raw(), t.float_data().data(), bytes);
  } else if (d == float64) {
    fill(t.double_data(), "double_data");
    std::memcpy(b.raw(), t.double_data().data(), bytes);
  } else if (d == int64) {
    fill(t.int64_data(), "int64_data");
    std::memcpy(b.raw(), t.int64_data().data(), bytes);
  } else if (d == float16) {  // the bits of each half, one per int32
    fill(t.int32_data(), "int32_data");
    for (size_t k = 0; k < n; ++k) b.data<uint16_t>()[k] = uint16_t(t.int32_data(int(k)));
  } else if (d.is_uint() && d.bits >= 32) {
    fill(t.uint64_data(), "uint64_data");
    for (size_t k = 0; k < n; ++k) b.set(int64_t(k), double(t.uint64_data(int(k))));
  } else {
    fill(t.int32_data(), "int32_data");
    for (size_t k = 0; k < n; ++k) b.set(int64_t(k), double(t.int32_data(int(k))));
  }
  return b;
}

Attribute to_attribute(const onnx::AttributeProto& a, const std::string& where) {
  Attribute out;
  switch (a.type()) {
    case onnx::AttributeProto::INT: out.kind = Attribute::Int, out.i = a.i(); break;
    case onnx::AttributeProto::FLOAT: out.kind = Attribute::Float, out.f = a.f(); break;
    case onnx::AttributeProto::STRING: out.kind = Attribute::String, out.s = a.s(); break;
    case onnx::AttributeProto::TENSOR: out.kind = Attribute::Tensor, out.t = to_buffer(a.t(), where); break;
    case onnx::AttributeProto::INTS:
      out.kind = Attribute::Ints, out.ints.assign(a.ints().begin(), a.ints().end());
      break;
    case onnx::AttributeProto::FLOATS:
      out.kind = Attribute::Floats, out.floats.assign(a.floats().begin(), a.floats().end());
      break;
    case onnx::AttributeProto::STRINGS:
      out.kind = Attribute::Strings, out.strings.assign(a.strings().begin(), a.strings().end());
      break;
    default:
      throw Error(where + "attribute '" + a.name() + "' is a graph, sparse tensor or type, which Tessel does not read");
  }
  return out;
}

// A Constant node's value (its one attribute says which form it takes).
Buffer constant_value(const Node& n, const std::string& where) {
  if (n.attrs.size() != 1) throw Error(where + "a Constant has exactly one attribute");
  auto& [name, a] = *n.attrs.begin();
  if (name == "value") return a.t;
  if (name == "value_float" || name == "value_int") {
    Buffer b(std::vector<int64_t>{}, name == "value_float" ? float32 : int64);
    b.set(0, name == "value_float" ? a.f : double(a.i));
    return b;
  }
  if (name == "value_floats" || name == "value_ints") {
    bool f = name == "value_floats";
    Buffer b({int64_t(f ? a.floats.size() : a.ints.size())}, f ? float32 : int64);
    for (int64_t k = 0; k < b.size(); ++k) b.set(k, f ? a.floats[size_t(k)] : double(a.ints[size_t(k)]));
    return b;
  }
  throw Error(where + "a Constant given as '" + name + "' is not supported (value, value_float(s), value_int(s) are)");
}

Value input_value(const onnx::ValueInfoProto& v) {
  std::string where = "graph input '" + v.name() + "': ";
  if (!v.type().has_tensor_type())
    throw Error(where + "not a tensor (sequences, maps and optionals are not supported)");
  const auto& tt = v.type().tensor_type();
  Value out;
  out.name = v.name();
  out.dtype = onnx_dtype(tt.elem_type(), where);
  if (!tt.has_shape()) throw Error(where + "its shape is unknown; Tessel compiles for static shapes");
  for (const auto& d : tt.shape().dim()) {
    if (!d.has_dim_value())
      throw Error(where + "dimension '" + d.dim_param() + "' is symbolic; Tessel compiles for static shapes (export "
                  "the model with fixed input sizes)");
    out.shape.push_back(d.dim_value());
  }
  return out;
}

}  // namespace

Graph load_onnx_bytes(const std::string& bytes, const std::map<std::string, Buffer>& bind) {
  onnx::ModelProto m;
  if (!m.ParseFromString(bytes))
    throw Error("not an ONNX model: the data does not parse as a ModelProto (truncated or another format?)");
  if (m.ir_version() > kMaxIrVersion || m.ir_version() < 3)
    throw Error("the model has ONNX IR version " + std::to_string(m.ir_version()) + "; Tessel reads 3 to " +
                std::to_string(kMaxIrVersion) + " (ONNX 1.12); export with ir_version=8 and an opset of at most 17");
  int64_t opset = -1;
  for (const auto& o : m.opset_import())
    if (o.domain().empty() || o.domain() == "ai.onnx") opset = o.version();
  if (opset < 1) throw Error("the model imports no version of the default ONNX operator set");
  if (opset > kMaxOpset)
    throw Error("the model uses opset " + std::to_string(opset) + "; Tessel reads opsets 1 to " +
                std::to_string(kMaxOpset) + " (ONNX 1.12); export with opset_version=17 or lower");
  const onnx::GraphProto& gp = m.graph();
  Graph g;
  std::map<std::string, int> ids;
  auto define = [&](Value v, const std::string& where) {
    if (ids.count(v.name)) throw Error(where + "value '" + v.name + "' is defined twice");
    std::string name = v.name;
    ids[name] = g.add_value(std::move(v));
    return ids[name];
  };
  for (const auto& t : gp.initializer()) {
    Value v;
    v.name = t.name();
    v.constant = to_buffer(t, "initializer: ");
    v.dtype = v.constant.dtype();
    v.shape = v.constant.shape();
    define(std::move(v), "initializer: ");
  }
  if (gp.sparse_initializer_size()) throw Error("sparse initializers are not supported");
  // IR 3 files list the initializers among the inputs too: those stay constants.
  for (const auto& in : gp.input())
    if (!ids.count(in.name())) g.inputs.push_back(define(input_value(in), "graph input: "));
  for (auto& [name, data] : bind) g.bind(name, data);

  for (int k = 0; k < gp.node_size(); ++k) {
    const onnx::NodeProto& np = gp.node(k);
    Node n;
    n.op = np.op_type();
    n.name = np.name().empty() ? np.op_type() + "_" + std::to_string(k) : np.name();
    n.opset = int(opset);
    std::string where = "node '" + n.name + "' (" + n.op + "): ";
    if (!np.domain().empty() && np.domain() != "ai.onnx")
      throw Error(where + "domain '" + np.domain() + "' is not supported (only the default ONNX domain is)");
    if (n.op != "Constant" && !operators().count(n.op)) {
      std::string names;
      for (const std::string& s : supported_operators()) names += " " + s;
      throw Error(where + "operator " + n.op + " is not supported; Tessel implements Constant" + names);
    }
    for (const auto& a : np.attribute()) n.attrs[a.name()] = to_attribute(a, where);
    for (const std::string& in : np.input()) {
      if (in.empty()) {
        n.inputs.push_back(-1);
        continue;
      }
      auto it = ids.find(in);
      if (it == ids.end()) throw Error(where + "input '" + in + "' is not defined by an earlier node, an input or "
                                       "an initializer (nodes must be in topological order)");
      n.inputs.push_back(it->second);
    }
    for (const std::string& out : np.output()) {
      if (out.empty()) {
        n.outputs.push_back(-1);
        continue;
      }
      Value v;
      v.name = out;
      v.producer = int(g.nodes.size());
      n.outputs.push_back(define(std::move(v), where));
    }
    if (n.op == "Constant") {  // a constant value, not a node
      if (n.outputs.size() != 1 || n.outputs[0] < 0) throw Error(where + "a Constant has one output");
      Value& v = g.values[size_t(n.outputs[0])];
      v.constant = constant_value(n, where);
      v.dtype = v.constant.dtype(), v.shape = v.constant.shape(), v.producer = -1;
      continue;
    }
    g.nodes.push_back(std::move(n));
  }
  for (const auto& out : gp.output()) {
    auto it = ids.find(out.name());
    if (it == ids.end()) throw Error("graph output '" + out.name() + "' is not computed by any node");
    g.outputs.push_back(it->second);
  }
  infer_shapes(g);
  return g;
}

Graph load_onnx(const std::string& path, const std::map<std::string, Buffer>& bind) {
  std::ifstream f(path, std::ios::binary);
  if (!f) throw Error("cannot open ONNX model '" + path + "'");
  std::stringstream ss;
  ss << f.rdbuf();
  try {
    return load_onnx_bytes(ss.str(), bind);
  } catch (const Error& e) {
    throw Error("'" + path + "': " + e.what());
  }
}

Buffer load_onnx_tensor(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) throw Error("cannot open tensor file '" + path + "'");
  std::stringstream ss;
  ss << f.rdbuf();
  onnx::TensorProto t;
  if (!t.ParseFromString(ss.str())) throw Error("'" + path + "' is not a serialised ONNX TensorProto");
  return to_buffer(t, "'" + path + "': ");
}

}  // namespace tessel::graph
