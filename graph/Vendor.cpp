// OpenBLAS as a candidate implementation (graph::compile with `select = "measure"`); oneDNN's
// convolutions are in VendorOnednn.cpp.
#include "graph/Vendor.h"

#include <cblas.h>

#include <cstring>

#include "graph/Operators.h"

namespace tessel::graph {

int step_argument(const Part& p, int value) {
  auto in = std::find(p.compute.input_ids.begin(), p.compute.input_ids.end(), value);
  if (in != p.compute.input_ids.end()) return int(in - p.compute.input_ids.begin());
  auto out = std::find(p.compute.output_ids.begin(), p.compute.output_ids.end(), value);
  return out != p.compute.output_ids.end() ? int(p.compute.input_ids.size() + (out - p.compute.output_ids.begin()))
                                           : -1;
}

std::shared_ptr<VendorKernel> vendor_kernel(const Graph& g, const Part& p, const Target& target) {
  if (target.is_gpu()) return nullptr;
  if (auto conv = onednn_conv(g, p)) return conv;
  const Node& mm = g.nodes[size_t(p.nodes[0])];
  if ((mm.op != "MatMul" && mm.op != "Gemm") || mm.outputs[0] < 0) return nullptr;
  const Value &a = g.values[size_t(mm.inputs[0])], &b = g.values[size_t(mm.inputs[1])];
  int v = mm.outputs[0];
  if (a.dtype != float32 || b.dtype != float32 || a.shape.size() < 2 || b.shape.size() != 2) return nullptr;
  bool ta = mm.op == "Gemm" && mm.attr_int("transA", 0), tb = mm.op == "Gemm" && mm.attr_int("transB", 0);
  if (mm.op == "Gemm" && (a.shape.size() != 2 || mm.attr_float("alpha", 1) != 1)) return nullptr;
  int64_t K = ta ? a.shape[0] : a.shape.back(), M = 1, N = tb ? b.shape[0] : b.shape[1];
  for (size_t d = 0; d + 1 < a.shape.size(); ++d) M *= a.shape[d];
  if (ta) M = a.shape[1];
  // Gemm's C: a row [N] (or [1, N]) added with beta 1, or nothing.
  int c = mm.op == "Gemm" && mm.inputs.size() > 2 && mm.attr_float("beta", 1) != 0 ? mm.inputs[2] : -1;
  if (c >= 0 && (mm.attr_float("beta", 1) != 1 || g.values[size_t(c)].elements() != N)) return nullptr;

  // The rest of the part, over the product as an input.
  Compute rest;
  rest.values[v] = placeholder(g.values[size_t(v)].shape, float32, "product");
  rest.input_ids.push_back(v), rest.inputs.push_back(rest.values[v]);
  for (size_t k = 1; k < p.nodes.size(); ++k) rest.add(g, g.nodes[size_t(p.nodes[k])]);
  rest.output_ids = p.compute.output_ids;
  bool product_out = std::count(rest.output_ids.begin(), rest.output_ids.end(), v) > 0;
  if (product_out && rest.output_ids.size() > 1) return nullptr;
  Module epilogue;
  if (!product_out) {
    rest.drop_unread_inputs();
    epilogue = build_kernel(rest, g, {.name = "epilogue", .target = target});
  }
  auto arg_of = [&](int id) { return step_argument(p, id); };
  int ia = arg_of(mm.inputs[0]), ib = arg_of(mm.inputs[1]), ic = c >= 0 ? arg_of(c) : -1;
  std::vector<int> sources;  // per epilogue argument: a step argument, or -1 for the product
  for (int id : rest.input_ids) sources.push_back(id == v ? -1 : arg_of(id));
  for (int id : rest.output_ids) sources.push_back(arg_of(id));
  Buffer product = product_out ? Buffer() : Buffer(g.values[size_t(v)].shape, float32);
  auto k = std::make_shared<VendorKernel>();
  k->name = "openblas";
  k->run = [=](const std::vector<Buffer>& args) {
    float* out = product_out ? args.back().data<float>() : product.data<float>();
    if (ic >= 0)
      for (int64_t r = 0; r < M; ++r) std::memcpy(out + r * N, args[size_t(ic)].raw(), size_t(N) * sizeof(float));
    // One slice of the product's rows (or, for a few rows, columns) per thread, each an OpenBLAS
    // call of one thread on Tessel's threads: OpenBLAS's own threads spin after each call and
    // take a core from the next Tessel kernel.
    openblas_set_num_threads(1);
    bool by_rows = M >= N || M >= 64;
    int64_t extent = by_rows ? M : N, slices = std::min<int64_t>(num_threads(), extent);
    const float *a = args[size_t(ia)].data<float>(), *b = args[size_t(ib)].data<float>();
    parallel_for(slices, [&](int64_t first, int64_t last) {
      int64_t from = extent * first / slices, to = extent * last / slices, m = by_rows ? to - from : M;
      int64_t n = by_rows ? N : to - from;
      const float* a_at = by_rows ? a + from * (ta ? 1 : K) : a;
      const float* b_at = by_rows ? b : b + from * (tb ? K : 1);
      float beta = ic >= 0 ? 1.0f : 0.0f, *out_at = out + (by_rows ? from * N : from);
      if (m == 1)  // a classifier's one row: SGEMM would pack all of B first, one more pass over the weights
        cblas_sgemv(CblasRowMajor, tb ? CblasNoTrans : CblasTrans, tb ? int(n) : int(K), tb ? int(K) : int(n), 1.0f,
                    b_at, tb ? int(K) : int(N), a_at, 1, beta, out_at, 1);
      else
        cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, int(m), int(n),
                    int(K), 1.0f, a_at, ta ? int(M) : int(K), b_at, tb ? int(K) : int(N), beta, out_at, int(N));
    });
    if (product_out) return;
    std::vector<Buffer> e;
    for (int s : sources) e.push_back(s < 0 ? product : args[size_t(s)]);
    epilogue(e);
  };
  return k;
}

}  // namespace tessel::graph
