// The graph IR: values, nodes and their attributes, and its printed form.
#include <algorithm>
#include <sstream>

#include "graph/Operators.h"

namespace tessel::graph {

int64_t Value::elements() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

namespace {
const Attribute* find_attr(const Node& n, const std::string& name, Attribute::Kind kind) {
  auto it = n.attrs.find(name);
  if (it == n.attrs.end()) return nullptr;
  if (it->second.kind != kind)
    throw Error("node '" + n.name + "' (" + n.op + "): attribute '" + name + "' has the wrong type");
  return &it->second;
}
}  // namespace

int64_t Node::attr_int(const std::string& a, int64_t otherwise) const {
  const Attribute* at = find_attr(*this, a, Attribute::Int);
  return at ? at->i : otherwise;
}
double Node::attr_float(const std::string& a, double otherwise) const {
  const Attribute* at = find_attr(*this, a, Attribute::Float);
  return at ? at->f : otherwise;
}
std::string Node::attr_string(const std::string& a, const std::string& otherwise) const {
  const Attribute* at = find_attr(*this, a, Attribute::String);
  return at ? at->s : otherwise;
}
std::vector<int64_t> Node::attr_ints(const std::string& a, const std::vector<int64_t>& otherwise) const {
  const Attribute* at = find_attr(*this, a, Attribute::Ints);
  return at ? at->ints : otherwise;
}

int Graph::add_value(Value v) {
  values.push_back(std::move(v));
  return int(values.size()) - 1;
}

int Graph::find(const std::string& name) const {
  for (size_t k = 0; k < values.size(); ++k)
    if (values[k].name == name) return int(k);
  return -1;
}

std::vector<int> Graph::readers() const {
  std::vector<int> n(values.size(), 0);
  for (const Node& node : nodes)
    for (int i : node.inputs)
      if (i >= 0) ++n[size_t(i)];
  for (int o : outputs) ++n[size_t(o)];
  return n;
}

void Graph::index_producers() {
  for (size_t k = 0; k < nodes.size(); ++k)
    for (int o : nodes[k].outputs)
      if (o >= 0) values[size_t(o)].producer = int(k);
}

void Graph::bind(const std::string& name, const Buffer& data) {
  int id = find(name);
  auto it = std::find(inputs.begin(), inputs.end(), id);
  if (id < 0 || it == inputs.end()) {
    std::string names;
    for (int i : inputs) names += (names.empty() ? "" : ", ") + values[size_t(i)].name;
    throw Error("cannot bind '" + name + "': the graph has no input of that name (inputs: " + names + ")");
  }
  Value& v = values[size_t(id)];
  if (data.dtype() != v.dtype || data.shape() != v.shape)
    throw Error("cannot bind '" + name + "': it is " + v.dtype.str() + shape_str(v.shape) + ", the data is " +
                data.describe());
  v.constant = data;
  inputs.erase(it);
}

std::string Attribute::str() const {
  const Attribute& a = *this;
  std::ostringstream os;
  auto list = [&](const auto& xs) {
    os << "[";
    for (size_t k = 0; k < xs.size(); ++k) os << (k ? ", " : "") << xs[k];
    os << "]";
  };
  switch (a.kind) {
    case Attribute::Int: os << a.i; break;
    case Attribute::Float: os << a.f; break;
    case Attribute::String: os << '"' << a.s << '"'; break;
    case Attribute::Tensor: os << a.t.describe(); break;
    case Attribute::Ints: list(a.ints); break;
    case Attribute::Floats: list(a.floats); break;
    case Attribute::Strings: list(a.strings); break;
  }
  return os.str();
}

std::string Graph::str() const {
  std::ostringstream os;
  auto type = [&](int id) { return values[size_t(id)].dtype.str() + shape_str(values[size_t(id)].shape); };
  for (int i : inputs) os << "input %" << values[size_t(i)].name << " : " << type(i) << "\n";
  for (const Node& n : nodes) {
    os << (n.group >= 0 ? "[" + std::to_string(n.group) + "] " : "");
    for (size_t k = 0; k < n.outputs.size(); ++k)
      os << (k ? ", " : "") << (n.outputs[k] < 0 ? "_" : "%" + values[size_t(n.outputs[k])].name);
    os << " = " << n.op << "(";
    for (size_t k = 0; k < n.inputs.size(); ++k) {
      int id = n.inputs[k];
      std::string sigil = id >= 0 && values[size_t(id)].is_constant() ? "$" : "%";
      os << (k ? ", " : "") << (id < 0 ? "_" : sigil + values[size_t(id)].name);
    }
    os << ")";
    if (!n.attrs.empty()) {
      os << " {";
      bool first = true;
      for (auto& [name, a] : n.attrs) os << (first ? "" : ", ") << name << "=" << a.str(), first = false;
      os << "}";
    }
    for (int o : n.outputs)
      if (o >= 0) os << " : " << type(o);
    os << "\n";
  }
  for (int o : outputs) os << "output %" << values[size_t(o)].name << " : " << type(o) << "\n";
  return os.str();
}

}  // namespace tessel::graph
