// ONNX models written in code (see OnnxBuilder in tessel/graph.h).
#include <cstring>
#include <fstream>
#include <random>

#include <onnx/onnx_pb.h>

#include "graph/Operators.h"

namespace tessel::graph {

class OnnxBuilderImpl {
 public:
  onnx::ModelProto model;
  std::map<std::string, int> used;  // base name -> times used
  std::mt19937_64 rng{20261126};
  std::vector<std::string> outputs;

  std::string fresh(const std::string& base) {
    int n = used[base]++;
    return n ? base + "_" + std::to_string(n) : base;
  }
};

namespace {
int onnx_type(DType d) {
  if (d == float32) return onnx::TensorProto::FLOAT;
  if (d == float64) return onnx::TensorProto::DOUBLE;
  if (d == float16) return onnx::TensorProto::FLOAT16;
  if (d == int64) return onnx::TensorProto::INT64;
  if (d == int32) return onnx::TensorProto::INT32;
  if (d == int8) return onnx::TensorProto::INT8;
  if (d == uint8) return onnx::TensorProto::UINT8;
  if (d == boolean) return onnx::TensorProto::BOOL;
  throw Error("OnnxBuilder: element type " + d.str() + " has no ONNX type here");
}

void set_tensor(onnx::TensorProto* t, const std::string& name, const Buffer& data) {
  t->set_name(name);
  t->set_data_type(onnx_type(data.dtype()));
  for (int64_t d : data.shape()) t->add_dims(d);
  t->set_raw_data(std::string(static_cast<const char*>(data.raw()), size_t(data.bytes())));
}

void set_type(onnx::ValueInfoProto* v, const std::string& name, DType dtype, const std::vector<int64_t>& shape) {
  v->set_name(name);
  auto* tt = v->mutable_type()->mutable_tensor_type();
  tt->set_elem_type(onnx_type(dtype));
  auto* s = tt->mutable_shape();
  for (int64_t d : shape) s->add_dim()->set_dim_value(d);
}
}  // namespace

OnnxBuilder::OnnxBuilder(int opset) : impl_(std::make_unique<OnnxBuilderImpl>()) {
  impl_->model.set_ir_version(8);
  impl_->model.set_producer_name("tessel");
  auto* o = impl_->model.add_opset_import();
  o->set_domain("");
  o->set_version(opset);
  impl_->model.mutable_graph()->set_name("tessel");
}

OnnxBuilder::~OnnxBuilder() = default;

std::string OnnxBuilder::input(const std::string& name, DType dtype, const std::vector<int64_t>& shape) {
  std::string n = impl_->fresh(name);
  set_type(impl_->model.mutable_graph()->add_input(), n, dtype, shape);
  return n;
}

std::string OnnxBuilder::constant(const std::string& name, const Buffer& data) {
  std::string n = impl_->fresh(name);
  set_tensor(impl_->model.mutable_graph()->add_initializer(), n, data);
  return n;
}

std::string OnnxBuilder::random(const std::string& name, const std::vector<int64_t>& shape, double scale,
                                bool positive) {
  Buffer b(shape, float32);
  std::uniform_real_distribution<float> dist(positive ? float(scale / 2) : float(-scale), float(scale));
  for (int64_t k = 0; k < b.size(); ++k) b.data<float>()[k] = dist(impl_->rng);
  return constant(name, b);
}

std::string OnnxBuilder::ints(const std::string& name, const std::vector<int64_t>& values) {
  Buffer b({int64_t(values.size())}, int64);
  std::memcpy(b.raw(), values.data(), values.size() * sizeof(int64_t));
  return constant(name, b);
}

std::string OnnxBuilder::scalar(const std::string& name, double value) {
  Buffer b(std::vector<int64_t>{}, float32);
  b.set(0, value);
  return constant(name, b);
}

std::vector<std::string> OnnxBuilder::node(const std::string& op, const std::vector<std::string>& inputs,
                                           const std::map<std::string, Attribute>& attrs, int num_outputs) {
  onnx::NodeProto* n = impl_->model.mutable_graph()->add_node();
  n->set_op_type(op);
  n->set_name(impl_->fresh(op));
  for (const std::string& i : inputs) n->add_input(i);
  std::vector<std::string> outs;
  for (int k = 0; k < num_outputs; ++k) {
    outs.push_back(impl_->fresh(n->name() + "_out"));
    n->add_output(outs.back());
  }
  for (auto& [name, a] : attrs) {
    onnx::AttributeProto* p = n->add_attribute();
    p->set_name(name);
    switch (a.kind) {
      case Attribute::Int: p->set_type(onnx::AttributeProto::INT), p->set_i(a.i); break;
      case Attribute::Float: p->set_type(onnx::AttributeProto::FLOAT), p->set_f(float(a.f)); break;
      case Attribute::String: p->set_type(onnx::AttributeProto::STRING), p->set_s(a.s); break;
      case Attribute::Tensor: p->set_type(onnx::AttributeProto::TENSOR), set_tensor(p->mutable_t(), "", a.t); break;
      case Attribute::Ints:
        p->set_type(onnx::AttributeProto::INTS);
        for (int64_t v : a.ints) p->add_ints(v);
        break;
      case Attribute::Floats:
        p->set_type(onnx::AttributeProto::FLOATS);
        for (double v : a.floats) p->add_floats(float(v));
        break;
      case Attribute::Strings:
        p->set_type(onnx::AttributeProto::STRINGS);
        for (auto& v : a.strings) p->add_strings(v);
        break;
    }
  }
  return outs;
}

std::string OnnxBuilder::node(const std::string& op, const std::vector<std::string>& inputs,
                              const std::map<std::string, Attribute>& attrs) {
  return node(op, inputs, attrs, 1)[0];
}

void OnnxBuilder::output(const std::string& value) { impl_->outputs.push_back(value); }

std::string OnnxBuilder::bytes() const {
  // Outputs carry their types (onnxruntime wants them): inferred by loading the model here.
  onnx::ModelProto m = impl_->model;
  std::string untyped;
  for (const std::string& o : impl_->outputs) m.mutable_graph()->add_output()->set_name(o);
  m.SerializeToString(&untyped);
  Graph g = load_onnx_bytes(untyped);
  m.mutable_graph()->clear_output();
  for (const std::string& o : impl_->outputs) {
    const Value& v = g.values[size_t(g.find(o))];
    set_type(m.mutable_graph()->add_output(), o, v.dtype, v.shape);
  }
  std::string out;
  m.SerializeToString(&out);
  return out;
}

void OnnxBuilder::save(const std::string& path) const {
  std::ofstream f(path, std::ios::binary);
  std::string b = bytes();
  f.write(b.data(), std::streamsize(b.size()));
  if (!f) throw Error("cannot write ONNX model '" + path + "'");
}

Graph OnnxBuilder::graph() const { return load_onnx_bytes(bytes()); }

}  // namespace tessel::graph
