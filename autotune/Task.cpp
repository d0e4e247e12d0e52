// Workloads (what to tune), their keys, and the target description.
#include <algorithm>
#include <sstream>
#include <thread>

#include "tessel/autotune.h"
#include "tessel/error.h"
#include "tessel/ops.h"

namespace tessel::autotune {

std::string Workload::key() const {
  std::string k = op + "[";
  bool first = true;
  for (auto& [name, v] : shape) k += (first ? "" : ",") + name + "=" + std::to_string(v), first = false;
  k += "]" + dtype.str();
  if (!layout.empty()) k += "/" + layout;
  return k;
}

std::string Workload::hash() const {
  uint64_t h = 1469598103934665603ull;  // FNV-1a
  for (char c : key()) h = (h ^ uint8_t(c)) * 1099511628211ull;
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", (unsigned long long)h);
  return buf;
}

Schedule default_schedule(const Workload& w, const Target& target) {
  std::vector<Tensor> constants;
  for (auto& t : w.args)
    if (std::find(w.constants.begin(), w.constants.end(), t.name()) != w.constants.end()) constants.push_back(t);
  return ops::default_schedule(w.outputs, target, constants);
}

std::map<std::string, int64_t> parse_shape(const std::string& text) {
  std::map<std::string, int64_t> out;
  std::stringstream ss(text);
  for (std::string item; std::getline(ss, item, ',');) {
    auto eq = item.find('=');
    TESSEL_USER_CHECK(eq != std::string::npos && eq > 0, "shape item '", item,
                      "' is not NAME=VALUE (e.g. M=1024,N=1024,K=1024)");
    std::string name = item.substr(0, eq), value = item.substr(eq + 1);
    char* end = nullptr;
    long long v = std::strtoll(value.c_str(), &end, 10);
    TESSEL_USER_CHECK(!value.empty() && *end == 0 && v >= 0, "shape item '", item, "': '", value,
                      "' is not a non-negative integer");
    TESSEL_USER_CHECK(out.emplace(name, v).second, "shape names '", name, "' twice");
  }
  TESSEL_USER_CHECK(!out.empty(), "empty shape; give NAME=VALUE pairs, e.g. M=1024,N=1024,K=1024");
  return out;
}

namespace {

struct OpDef {
  const char* name;
  const char* params;  // required parameters, then optional ones with defaults
  std::map<std::string, int64_t> defaults;
  std::vector<std::string> required;
  void (*make)(Workload& w);
  std::vector<std::string> flags = {};  // 0/1 parameters (default 0) that are in the key only when set
};

int64_t get(const Workload& w, const char* k) { return w.shape.at(k); }

void make_matmul(Workload& w) {
  Tensor A = placeholder({get(w, "M"), get(w, "K")}, w.dtype, "A");
  Tensor B = placeholder({get(w, "K"), get(w, "N")}, w.dtype, "B");
  Tensor C = ops::matmul(A, B);
  w.args = {A, B, C};
  w.outputs = {C};
  if (w.shape.count("const_b")) w.constants = {"B"};  // a flag: in the shape only when set
  w.flops = 2.0 * get(w, "M") * get(w, "N") * get(w, "K");
}

void make_dense(Workload& w) {
  Tensor X = placeholder({get(w, "M"), get(w, "K")}, w.dtype, "X");
  Tensor W = placeholder({get(w, "N"), get(w, "K")}, w.dtype, "W");
  Tensor b = placeholder({get(w, "N")}, w.dtype, "bias");
  Tensor Y = ops::dense(X, W, b, get(w, "relu") ? ops::Activation::Relu : ops::Activation::None);
  w.args = {X, W, b, Y};
  w.outputs = {Y};
  w.constants = {"W"};
  w.flops = 2.0 * get(w, "M") * get(w, "N") * get(w, "K");
}

void make_batch_matmul(Workload& w) {
  Tensor A = placeholder({get(w, "B"), get(w, "M"), get(w, "K")}, w.dtype, "A");
  Tensor B = placeholder({get(w, "B"), get(w, "K"), get(w, "N")}, w.dtype, "Bm");
  Tensor C = ops::batch_matmul(A, B);
  w.args = {A, B, C};
  w.outputs = {C};
  if (w.shape.count("const_b")) w.constants = {"Bm"};
  w.flops = 2.0 * get(w, "B") * get(w, "M") * get(w, "N") * get(w, "K");
}

ops::Conv2dParams conv_params(const Workload& w) {
  ops::Conv2dParams p;
  p.stride_h = p.stride_w = get(w, "stride");
  p.pad_h = p.pad_w = get(w, "pad");
  p.dilation_h = p.dilation_w = get(w, "dilation");
  p.groups = w.shape.count("groups") ? get(w, "groups") : 1;
  return p;
}

double conv_flops(const Workload& w, const Tensor& Y, int64_t cin_per_group) {
  double out = 1;
  for (int64_t d : Y.shape()) out *= double(d);
  return 2.0 * out * double(cin_per_group) * double(get(w, "R")) * double(get(w, "S"));
}

// NCHW ("conv2d") or NHWC ("conv2d_nhwc", weights HWIO).
void make_conv2d_in(Workload& w, bool nhwc) {
  ops::Conv2dParams p = conv_params(w);
  Tensor X = nhwc ? placeholder({get(w, "N"), get(w, "H"), get(w, "W"), get(w, "C")}, w.dtype, "X")
                  : placeholder({get(w, "N"), get(w, "C"), get(w, "H"), get(w, "W")}, w.dtype, "X");
  Tensor Wt = nhwc ? placeholder({get(w, "R"), get(w, "S"), get(w, "C") / p.groups, get(w, "K")}, w.dtype, "Wt")
                   : placeholder({get(w, "K"), get(w, "C") / p.groups, get(w, "R"), get(w, "S")}, w.dtype, "Wt");
  Tensor Y = nhwc ? ops::conv2d_nhwc(X, Wt, p, "conv") : ops::conv2d_nchw(X, Wt, p, "conv");
  Tensor out = Y;
  std::vector<Tensor> args{X, Wt};
  if (get(w, "bias_relu")) {
    Tensor b = placeholder({get(w, "K")}, w.dtype, "bias");
    out = ops::relu(ops::bias_add(Y, b, nhwc ? 3 : 1, "bias_add"), "relu");
    args.push_back(b);
  }
  args.push_back(out);
  w.args = args;
  w.outputs = {out};
  w.constants = {"Wt"};
  w.flops = conv_flops(w, Y, get(w, "C") / p.groups);
  w.layout = nhwc ? "NHWC" : "NCHW";
}
void make_conv2d(Workload& w) { make_conv2d_in(w, false); }
void make_conv2d_nhwc(Workload& w) { make_conv2d_in(w, true); }

void make_conv2d_nchwc(Workload& w) {
  ops::Conv2dParams p = conv_params(w);
  TESSEL_USER_CHECK(p.groups == 1, "conv2d_nchwc: groups must be 1");
  int64_t cb = get(w, "cb"), kb = get(w, "kb");
  TESSEL_USER_CHECK(get(w, "C") % cb == 0 && get(w, "K") % kb == 0, "conv2d_nchwc: C=", get(w, "C"), " and K=",
                    get(w, "K"), " must be multiples of cb=", cb, " and kb=", kb);
  Tensor X = placeholder({get(w, "N"), get(w, "C") / cb, get(w, "H"), get(w, "W"), cb}, w.dtype, "X");
  Tensor Wt = placeholder({get(w, "K") / kb, get(w, "C") / cb, get(w, "R"), get(w, "S"), cb, kb}, w.dtype, "Wt");
  Tensor Y = ops::conv2d_nchwc(X, Wt, p, "conv");
  w.args = {X, Wt, Y};
  w.outputs = {Y};
  w.flops = conv_flops(w, Y, get(w, "C"));
  w.layout = "NCHW" + std::to_string(cb) + "c";
}

// conv2d (NCHW, or NHWC: "conv2d_winograd_nhwc"; 3x3, stride 1) by Winograd's F(m x m, 3x3): U is
// winograd_weights_oihw (or _hwio) of the weights. Its GFLOP/s count the direct sum's
// multiplications, as oneDNN's figures do.
void make_conv2d_winograd_in(Workload& w, bool nhwc) {
  int64_t C = get(w, "C"), K = get(w, "K"), cb = get(w, "cb"), kb = get(w, "kb"), m = get(w, "m");
  TESSEL_USER_CHECK(C % cb == 0 && K % kb == 0, "conv2d_winograd: C=", C, " and K=", K, " must be multiples of cb=",
                    cb, " and kb=", kb);
  TESSEL_USER_CHECK(m == 2 || m == 4, "conv2d_winograd: m (the output tile) is 2 or 4, not ", m);
  ops::Conv2dParams p;
  p.pad_h = p.pad_w = get(w, "pad");
  Tensor X = nhwc ? placeholder({get(w, "N"), get(w, "H"), get(w, "W"), C}, w.dtype, "X")
                  : placeholder({get(w, "N"), C, get(w, "H"), get(w, "W")}, w.dtype, "X");
  Tensor U = placeholder({m + 2, m + 2, K / kb, C / cb, cb, kb}, w.dtype, "U");
  Tensor Y = nhwc ? ops::conv2d_winograd_nhwc(X, U, p, "conv") : ops::conv2d_winograd_nchw(X, U, p, "conv");
  w.args = {X, U, Y};
  w.outputs = {Y};
  w.constants = {"U"};
  double outputs = 1;
  for (int64_t d : Y.shape()) outputs *= double(d);
  w.flops = 2.0 * outputs * double(C) * 9;
  w.layout = nhwc ? "NHWC" : "NCHW";
}
void make_conv2d_winograd(Workload& w) { make_conv2d_winograd_in(w, false); }
void make_conv2d_winograd_nhwc(Workload& w) { make_conv2d_winograd_in(w, true); }

// NCHW ("depthwise_conv2d", weights [C*M, 1, R, S]) or NHWC ("depthwise_conv2d_nhwc",
// weights [R, S, C, M]).
void make_depthwise_in(Workload& w, bool nhwc) {
  ops::Conv2dParams p = conv_params(w);
  int64_t C = get(w, "C"), M = get(w, "M");
  Tensor X = nhwc ? placeholder({get(w, "N"), get(w, "H"), get(w, "W"), C}, w.dtype, "X")
                  : placeholder({get(w, "N"), C, get(w, "H"), get(w, "W")}, w.dtype, "X");
  Tensor Wt = nhwc ? placeholder({get(w, "R"), get(w, "S"), C, M}, w.dtype, "Wt")
                   : placeholder({C * M, 1, get(w, "R"), get(w, "S")}, w.dtype, "Wt");
  Tensor Y = nhwc ? ops::depthwise_conv2d_nhwc(X, Wt, p, "dwconv") : ops::depthwise_conv2d_nchw(X, Wt, p, "dwconv");
  w.args = {X, Wt, Y};
  w.constants = {"Wt"};
  w.outputs = {Y};
  w.flops = conv_flops(w, Y, 1);
  w.layout = nhwc ? "NHWC" : "NCHW";
}
void make_depthwise(Workload& w) { make_depthwise_in(w, false); }
void make_depthwise_nhwc(Workload& w) { make_depthwise_in(w, true); }

void make_softmax(Workload& w) {
  Tensor X = placeholder({get(w, "rows"), get(w, "cols")}, w.dtype, "X");
  Tensor Y = ops::softmax(X);
  w.args = {X, Y};
  w.outputs = {Y};
  w.flops = 5.0 * get(w, "rows") * get(w, "cols");
}

void make_layer_norm(Workload& w) {
  Tensor X = placeholder({get(w, "rows"), get(w, "cols")}, w.dtype, "X");
  Tensor g = placeholder({get(w, "cols")}, w.dtype, "gamma");
  Tensor b = placeholder({get(w, "cols")}, w.dtype, "beta");
  Tensor Y = ops::layer_norm(X, g, b);
  w.args = {X, g, b, Y};
  w.outputs = {Y};
  w.flops = 8.0 * get(w, "rows") * get(w, "cols");
}

void make_max_pool(Workload& w) {
  ops::Pool2dParams p{get(w, "R"), get(w, "R"), get(w, "stride"), get(w, "stride"), get(w, "pad"), get(w, "pad")};
  Tensor X = placeholder({get(w, "N"), get(w, "C"), get(w, "H"), get(w, "W")}, w.dtype, "X");
  Tensor Y = ops::max_pool2d(X, p);
  w.args = {X, Y};
  w.outputs = {Y};
  double out = 1;
  for (int64_t d : Y.shape()) out *= double(d);
  w.flops = out * double(get(w, "R") * get(w, "R"));
  w.layout = "NCHW";
}

const std::vector<OpDef>& registry() {
  static const std::vector<OpDef> ops = {
      {"matmul", "M, N, K; const_b=0 (B constant between calls)", {{"const_b", 0}}, {"M", "N", "K"}, make_matmul,
       {"const_b"}},
      {"dense", "M, N, K; relu=1 (with bias)", {{"relu", 1}}, {"M", "N", "K"}, make_dense},
      {"batch_matmul", "B, M, N, K; const_b=0 (Bm constant between calls)", {{"const_b", 0}}, {"B", "M", "N", "K"},
       make_batch_matmul, {"const_b"}},
      {"conv2d", "N, C, H, W, K, R, S; stride=1, pad=0, dilation=1, groups=1, bias_relu=0 (NCHW)",
       {{"stride", 1}, {"pad", 0}, {"dilation", 1}, {"groups", 1}, {"bias_relu", 0}, {"N", 1}},
       {"C", "H", "W", "K", "R", "S"}, make_conv2d},
      {"conv2d_nhwc", "N, C, H, W, K, R, S; stride=1, pad=0, dilation=1, groups=1, bias_relu=0 (NHWC, weights HWIO)",
       {{"stride", 1}, {"pad", 0}, {"dilation", 1}, {"groups", 1}, {"bias_relu", 0}, {"N", 1}},
       {"C", "H", "W", "K", "R", "S"}, make_conv2d_nhwc},
      {"conv2d_nchwc", "N, C, H, W, K, R, S; stride=1, pad=0, dilation=1, cb=16, kb=16 (NCHW[cb]c)",
       {{"stride", 1}, {"pad", 0}, {"dilation", 1}, {"cb", 16}, {"kb", 16}, {"N", 1}},
       {"C", "H", "W", "K", "R", "S"}, make_conv2d_nchwc},
      {"conv2d_winograd", "N, C, H, W, K; pad=1, m=4 (output tile, 2 or 4), cb=16, kb=16 (NCHW, 3x3, stride 1; "
       "U = winograd_weights_oihw(W, cb, kb, m))",
       {{"pad", 1}, {"m", 4}, {"cb", 16}, {"kb", 16}, {"N", 1}}, {"C", "H", "W", "K"}, make_conv2d_winograd},
      {"conv2d_winograd_nhwc", "N, C, H, W, K; pad=1, m=4 (output tile, 2 or 4), cb=16, kb=16 (NHWC, 3x3, stride 1; "
       "U = winograd_weights_hwio(W, cb, kb, m))",
       {{"pad", 1}, {"m", 4}, {"cb", 16}, {"kb", 16}, {"N", 1}}, {"C", "H", "W", "K"}, make_conv2d_winograd_nhwc},
      {"depthwise_conv2d", "N, C, H, W, R, S; M=1 (multiplier), stride=1, pad=0, dilation=1",
       {{"M", 1}, {"stride", 1}, {"pad", 0}, {"dilation", 1}, {"N", 1}}, {"C", "H", "W", "R", "S"}, make_depthwise},
      {"depthwise_conv2d_nhwc", "N, C, H, W, R, S; M=1 (multiplier), stride=1, pad=0, dilation=1 (NHWC, weights RSCM)",
       {{"M", 1}, {"stride", 1}, {"pad", 0}, {"dilation", 1}, {"N", 1}}, {"C", "H", "W", "R", "S"},
       make_depthwise_nhwc},
      {"softmax", "rows, cols", {}, {"rows", "cols"}, make_softmax},
      {"layer_norm", "rows, cols", {}, {"rows", "cols"}, make_layer_norm},
      {"max_pool2d", "N, C, H, W, R; stride=2, pad=0", {{"stride", 2}, {"pad", 0}, {"N", 1}},
       {"C", "H", "W", "R"}, make_max_pool},
  };
  return ops;
}

}  // namespace

std::vector<std::pair<std::string, std::string>> list_ops() {
  std::vector<std::pair<std::string, std::string>> out;
  for (auto& d : registry()) out.emplace_back(d.name, d.params);
  return out;
}

Workload make_workload(const std::string& op, const std::map<std::string, int64_t>& shape, DType dtype) {
  const OpDef* def = nullptr;
  std::string names;
  for (auto& d : registry()) {
    names += (names.empty() ? "" : ", ") + std::string(d.name);
    if (op == d.name) def = &d;
  }
  TESSEL_USER_CHECK(def, "unknown operator '", op, "'; known operators: ", names);
  Workload w;
  w.op = op;
  w.dtype = dtype;
  w.shape = def->defaults;
  for (auto& [k, v] : shape) {
    bool known = def->defaults.count(k) > 0;
    for (auto& r : def->required) known |= r == k;
    TESSEL_USER_CHECK(known, op, ": unknown shape parameter '", k, "'; its parameters are: ", def->params);
    w.shape[k] = v;
  }
  for (auto& r : def->required)
    TESSEL_USER_CHECK(w.shape.count(r), op, ": shape parameter '", r, "' is missing; its parameters are: ", def->params);
  for (auto& f : def->flags) {
    TESSEL_USER_CHECK(w.shape[f] == 0 || w.shape[f] == 1, op, ": ", f, " is 0 or 1, got ", w.shape[f]);
    if (w.shape[f] == 0) w.shape.erase(f);  // keys of workloads that leave it unset stay as they were
  }
  def->make(w);
  return w;
}

std::optional<Workload> winograd_companion(const Workload& w, const Target& target) {
  auto at = [&](const char* k) { return w.shape.count(k) ? w.shape.at(k) : -1; };
  int64_t lanes = target.vector_bytes / w.dtype.bytes();
  bool conv = w.op == "conv2d" || w.op == "conv2d_nhwc";
  if (!conv || target.is_gpu() || w.dtype != float32 || at("R") != 3 || at("S") != 3 || at("stride") != 1 ||
      at("dilation") != 1 || at("groups") != 1 || at("bias_relu") != 0 || at("C") % lanes || at("K") % lanes)
    return std::nullopt;
  int64_t m = ops::winograd_tile(at("H") + 2 * at("pad") - 2, at("W") + 2 * at("pad") - 2);
  if (!m) return std::nullopt;
  return make_workload(w.op == "conv2d" ? "conv2d_winograd" : "conv2d_winograd_nhwc",
                       {{"N", at("N")}, {"C", at("C")}, {"H", at("H")}, {"W", at("W")}, {"K", at("K")},
                        {"pad", at("pad")}, {"m", m}, {"cb", lanes}, {"kb", lanes}},
                       w.dtype);
}

Workload custom_workload(const std::string& name, const std::vector<Tensor>& inputs,
                         const std::vector<Tensor>& outputs, double flops,
                         const std::map<std::string, int64_t>& shape) {
  Workload w;
  w.op = name;
  w.shape = shape;
  w.args = inputs;
  w.args.insert(w.args.end(), outputs.begin(), outputs.end());
  w.outputs = outputs;
  w.flops = flops;
  if (w.shape.empty())  // shapes of every argument, so different sizes get different keys
    for (size_t i = 0; i < w.args.size(); ++i)
      for (size_t d = 0; d < w.args[i].shape().size(); ++d)
        w.shape[w.args[i].name() + std::to_string(d)] = w.args[i].shape()[d];
  if (!outputs.empty()) w.dtype = outputs[0].dtype();
  return w;
}

}  // namespace tessel::autotune
