#pragma once
// The graph compiler: whole networks, imported from ONNX, turned into Tessel kernels.
//
//   graph::Graph g = graph::load_onnx("model.onnx");     // every value's shape inferred
//   graph::Network net = graph::compile(g);               // passes, kernels, memory plan
//   std::vector<Buffer> y = net.run({x});                 // the graph's outputs
//
// A Graph is a list of nodes in execution order over values with static shapes. Each node
// keeps its ONNX operator and the opset version the model declared for it, so that an
// operator whose meaning changed between versions (Softmax at 13, Clip at 11, ...) is read
// the way its model meant. Passes rewrite the graph (graph/passes/), and compile() builds
// one kernel per group of nodes that fusion put together.
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "tessel/autotune.h"
#include "tessel/buffer.h"
#include "tessel/target.h"

namespace tessel::graph {

// An operator attribute, as ONNX gives it (a graph-valued attribute is refused at import).
struct Attribute {
  enum Kind { Int, Float, String, Tensor, Ints, Floats, Strings } kind = Int;
  Attribute() = default;
  Attribute(int64_t v) : kind(Int), i(v) {}  // NOLINT: {"group", 32}
  Attribute(int v) : kind(Int), i(v) {}      // NOLINT
  Attribute(double v) : kind(Float), f(v) {}  // NOLINT
  Attribute(const char* v) : kind(String), s(v) {}  // NOLINT
  Attribute(std::vector<int64_t> v) : kind(Ints), ints(std::move(v)) {}  // NOLINT
  Attribute(std::initializer_list<int64_t> v) : kind(Ints), ints(v) {}   // NOLINT: {"strides", {2, 2}}
  Attribute(const Buffer& v) : kind(Tensor), t(v) {}  // NOLINT
  int64_t i = 0;
  double f = 0;
  std::string s;
  Buffer t;
  std::vector<int64_t> ints;
  std::vector<double> floats;
  std::vector<std::string> strings;
  std::string str() const;  // "[2, 2]", "\"SAME_UPPER\"", "float32[64]"
};

struct Value {
  std::string name;
  DType dtype = float32;
  std::vector<int64_t> shape;  // empty for a scalar
  Buffer constant;             // defined for an initializer or a folded result
  int producer = -1;           // the node that computes it; -1 for inputs and constants
  bool is_constant() const { return constant.defined(); }
  int64_t elements() const;
};

struct Node {
  std::string op;       // "Conv", "MatMul", ...
  std::string name;     // the model's node name, or "<op>_<index>" when it has none
  int opset = 0;        // the opset version the model imports for the node's domain
  std::vector<int> inputs, outputs;  // value ids; -1 for an omitted optional input or output
  std::map<std::string, Attribute> attrs;
  int group = -1;       // the kernel it is part of, after fusion (-1: one of its own)

  bool has(const std::string& attr) const { return attrs.count(attr) > 0; }
  int64_t attr_int(const std::string& attr, int64_t otherwise) const;
  double attr_float(const std::string& attr, double otherwise) const;
  std::string attr_string(const std::string& attr, const std::string& otherwise) const;
  std::vector<int64_t> attr_ints(const std::string& attr, const std::vector<int64_t>& otherwise = {}) const;
};

class Graph {
 public:
  std::vector<Value> values;
  std::vector<Node> nodes;    // in execution order
  std::vector<int> inputs;    // values the caller gives, in order
  std::vector<int> outputs;   // values run() returns, in order

  int add_value(Value v);
  int find(const std::string& value_name) const;  // -1 when absent
  // Per value: how many node inputs read it, a graph output counting as one more.
  std::vector<int> readers() const;
  // Sets every value's producer from the node list (after a pass rewrote it).
  void index_producers();
  // Turns a graph input into a constant (an input the caller will always give the same, such
  // as a shape tensor). Shapes that depend on it can then be inferred.
  void bind(const std::string& input_name, const Buffer& data);
  // One line per node: "%y = Conv(%x, %w) {strides=[2, 2]} : float32[1, 64, 56, 56]".
  std::string str() const;
};

// Reads an ONNX model (IR up to 8, opsets up to 17, as Debian's libonnx 1.12 defines them),
// checks every node against the operators Tessel implements and infers every value's shape.
// Inputs named in `bind` become constants first. A model Tessel cannot run is an Error that
// names the node, its operator and what is wrong.
Graph load_onnx(const std::string& path, const std::map<std::string, Buffer>& bind = {});
Graph load_onnx_bytes(const std::string& bytes, const std::map<std::string, Buffer>& bind = {});
// A serialised ONNX TensorProto (the backend tests' input_0.pb) as a Buffer.
Buffer load_onnx_tensor(const std::string& path);

// The ONNX operators Tessel implements, by name.
std::vector<std::string> supported_operators();

struct CompileOptions {
  Target target = Target::host();
  bool rewrite = true;      // false: the nodes as the model has them (no batch-norm folding or splitting)
  bool fuse = true;         // false: a kernel per node (for debugging, and to check fusion)
  bool plan_memory = true;  // false: a buffer per intermediate tensor
  // A tuning log (tune() below, or `tessel-compile --tune`): kernels with a record get the
  // best schedule measured for this target, the others their default schedules.
  std::string log;
  // How each kernel's implementation is chosen: "log" (the tuned schedule where the log has
  // one, else the default) or "measure" (that one, the default, and a vendor kernel where one
  // exists, OpenBLAS's GEMM for a MatMul or Gemm with Tessel computing the rest of the kernel:
  // the fastest on this machine, timed when compiling). A network with a vendor kernel cannot
  // be saved.
  std::string select = "log";
  // "model": tensors in the model's layout; "NHWC": convolutions and the element-wise nodes
  // between them in NHWC, transposed only where a chain begins and ends (Tessel's depthwise
  // convolutions are faster with channels last); "NCHWc": those and the pools in NCHW[x]c,
  // blocks of one vector of channels (grouped convolutions stay in NCHW).
  std::string layout = "model";
  // With layout "NCHWc": 3x3 stride-1 convolutions on images of 14x14 or more by Winograd's
  // F(2x2, 3x3), and from 28x28 F(4x4, 3x3): 2.25x or 4x fewer multiplications (outputs within
  // 3e-6 or 1.2e-5 of the largest of the direct sum's; see ops::conv2d_winograd_nchwc).
  bool winograd = true;
};

class NetworkImpl;

// A compiled network: its kernels, built once, the memory they use, and the graph they came
// from. run() allocates nothing: intermediate tensors live in one arena planned at compile
// time, and the outputs in buffers of the network's own that the next run overwrites (copy
// them to keep them). A Network runs one call at a time.
class Network {
 public:
  Network() = default;
  explicit Network(std::shared_ptr<NetworkImpl> impl) : impl_(std::move(impl)) {}
  // One Buffer per graph input, in order; returns the graph's outputs.
  std::vector<Buffer> run(const std::vector<Buffer>& inputs) const;
  // The same, calling `each` with every value a kernel writes, right after its kernel (with
  // `fuse` off, every node's output: node-by-node debugging).
  std::vector<Buffer> run(const std::vector<Buffer>& inputs,
                          const std::function<void(const std::string& value, const Buffer& data)>& each) const;

  const Graph& graph() const;  // after the passes; Node::group is each node's kernel
  int num_kernels() const;
  int num_tuned() const;           // kernels built from a tuning log's record
  int64_t arena_bytes() const;     // the planned arena
  int64_t separate_bytes() const;  // the intermediate tensors, one buffer each
  // Runs the network `runs` times and keeps each kernel's median time for report(), timed in
  // the run, between the others (its weights out of the caches, as in every run).
  void profile(const std::vector<Buffer>& inputs, int runs = 10) const;
  // Writes the network to directory `dir` for deployment without the compiler: its kernels as
  // one shared library (network.so, the runtime linked in), the weights as the kernels read
  // them (weights.bin, blocked layouts already applied), and plan.json (each kernel call and
  // its arguments, the arena). tessel::deploy::Network (tessel/deploy.h) loads it.
  void save(const std::string& dir) const;
  // Each kernel: the nodes fused into it, its schedule (tuned from the log, or the default)
  // and, after profile(), its time; then the memory plan.
  std::string report() const;

 private:
  std::shared_ptr<NetworkImpl> impl_;
};

Network compile(const Graph& g, const CompileOptions& opts = {});

// The graph compile() builds kernels for: passes applied, nodes grouped (Node::group).
Graph optimize(const Graph& g, const CompileOptions& opts = {});

// Tunes a network: each distinct fused kernel that has a reduction (convolution, matmul,
// pooling, normalisation) is one task, weighted by how many kernels of the network it is; the
// task scheduler spreads `tuning.trials` over them, appending to `tuning.log` (resume with
// `tuning.resume`). Candidates are timed as the network runs them, their weights evicted by
// as many bytes as the network reads (TuneOptions::flush_caches). compile() with `log` set
// then builds the tuned kernels.
std::vector<autotune::TaskResult> tune(const Graph& g, const autotune::TuneOptions& tuning,
                                       const CompileOptions& opts = {});

class OnnxBuilderImpl;

// Writes ONNX models in code (IR 8, opset 17 by default): networks for tests, examples and
// benchmarks without an exporter. Names are made unique; each call returns the name of the
// value it defines.
//
//   graph::OnnxBuilder b;
//   std::string x = b.input("x", float32, {1, 3, 224, 224});
//   std::string y = b.node("Conv", {x, b.random("w", {64, 3, 7, 7}, 0.1)}, {{"strides", {2, 2}}});
//   b.output(b.node("Relu", {y}));
//   graph::Graph g = b.graph();   // or b.save("model.onnx")
class OnnxBuilder {
 public:
  explicit OnnxBuilder(int opset = 17);
  ~OnnxBuilder();
  OnnxBuilder(const OnnxBuilder&) = delete;
  OnnxBuilder& operator=(const OnnxBuilder&) = delete;

  std::string input(const std::string& name, DType dtype, const std::vector<int64_t>& shape);
  std::string constant(const std::string& name, const Buffer& data);  // an initializer
  // An initializer of uniform random values in [-scale, scale] (or [lo, hi] with `positive`:
  // [scale / 2, scale], for variances).
  std::string random(const std::string& name, const std::vector<int64_t>& shape, double scale, bool positive = false);
  std::string ints(const std::string& name, const std::vector<int64_t>& values);  // an int64 initializer
  std::string scalar(const std::string& name, double value);  // a float32 scalar initializer
  std::string node(const std::string& op, const std::vector<std::string>& inputs,
                   const std::map<std::string, Attribute>& attrs = {});
  std::vector<std::string> node(const std::string& op, const std::vector<std::string>& inputs,
                                const std::map<std::string, Attribute>& attrs, int num_outputs);
  void output(const std::string& value);

  std::string bytes() const;  // the serialised ModelProto, outputs typed by shape inference
  void save(const std::string& path) const;
  Graph graph() const;

 private:
  std::unique_ptr<OnnxBuilderImpl> impl_;
};

}  // namespace tessel::graph
