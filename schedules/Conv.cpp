// Padding, convolutions in NCHW, NHWC and NCHW[x]c, depthwise convolution, layout transforms.
#include <set>

#include "ir/IRMutator.h"
#include "ir/IRVisitor.h"
#include "ir/Simplify.h"
#include "schedules/Common.h"

namespace tessel::ops {

Tensor pad(const Tensor& X, const std::vector<int64_t>& before, const std::vector<int64_t>& after, double value,
           const std::string& name) {
  size_t nd = X.shape().size();
  TESSEL_USER_CHECK(before.size() == nd && after.size() == nd, "pad: give one before/after amount per dimension of ",
                    X.name(), shape_str(X.shape()));
  std::vector<int64_t> shape(nd);
  bool any = false;
  for (size_t d = 0; d < nd; ++d) {
    TESSEL_USER_CHECK(before[d] >= 0 && after[d] >= 0, "pad: amounts must be >= 0");
    shape[d] = X.shape()[d] + before[d] + after[d];
    any |= before[d] || after[d];
  }
  if (!any) return X;
  return compute(shape, ComputeFn([&](const std::vector<Var>& v) {
    Expr inside;
    std::vector<Expr> idx;
    for (size_t d = 0; d < nd; ++d) {
      Expr i = v[d] - int(before[d]);
      idx.push_back(i);
      if (before[d] || after[d]) {
        Expr c = (v[d] >= int(before[d])) && (i < int(X.shape()[d]));
        inside = inside.defined() ? (inside && c) : c;
      }
    }
    // The read is clamped so that it stays in bounds even where the select drops it.
    for (size_t d = 0; d < nd; ++d)
      if (before[d] || after[d]) idx[d] = max(min(idx[d], int(X.shape()[d] - 1)), 0);
    return select(inside, X(idx), make_const(X.dtype(), value));
  }), name, "pad");
}

namespace {
int64_t out_size(int64_t in, int64_t k, int64_t stride, int64_t pad, int64_t dil, const char* op, const char* dim) {
  int64_t o = (in + 2 * pad - dil * (k - 1) - 1) / stride + 1;
  TESSEL_USER_CHECK(o > 0, op, ": the ", dim, " output size is ", o, " (input ", in, ", kernel ", k, ", stride ",
                    stride, ", padding ", pad, ", dilation ", dil, "); the kernel does not fit");
  return o;
}
// Input channel read by output channel k at reduction channel rc (grouped convolutions
// read only their group's slice of the input).
Expr group_channel(Expr k, const IterVar& rc, int64_t Cg, int64_t Kg, int64_t groups) {
  return groups == 1 ? Expr(rc) : (k / int(Kg)) * int(Cg) + rc;
}

// Input position of output position y at window offset r.
Expr window(Expr y, const IterVar& r, int64_t stride, int64_t dilation) {
  return y * int(stride) + r * int(dilation);
}

// Where the window of output (y, x) at offset (ry, rx) reads the input rather than its
// padding (on the padded input's coordinates), as a skippable `where` of the sum: the
// padding's zeros add nothing, so loop partitioning may skip those taps at the borders,
// as oneDNN does, instead of multiplying by zero (a fifth of the work of a 7x7 layer with
// a 3x3 kernel). Undefined when nothing is padded.
Expr reads_input(Expr y, const IterVar& ry, Expr x, const IterVar& rx, const Conv2dParams& p, int64_t H, int64_t W) {
  Expr cond;
  auto inside = [&](Expr o, const IterVar& r, int64_t stride, int64_t dilation, int64_t pad, int64_t in) {
    if (pad == 0) return;
    Expr i = window(o, r, stride, dilation);
    Expr c = i >= int(pad) && i < int(pad + in);
    cond = cond.defined() ? (cond && c) : c;
  };
  inside(y, ry, p.stride_h, p.dilation_h, p.pad_h, H);
  inside(x, rx, p.stride_w, p.dilation_w, p.pad_w, W);
  return cond.defined() ? skippable(cond) : cond;
}

void check_groups(const char* op, int64_t C, int64_t K, int64_t groups) {
  TESSEL_USER_CHECK(C % groups == 0 && K % groups == 0, op, ": channels C=", C, " and K=", K,
                    " must both be divisible by groups=", groups);
}

void check_params(const Conv2dParams& p, const char* op) {
  TESSEL_USER_CHECK(p.stride_h > 0 && p.stride_w > 0, op, ": strides must be positive");
  TESSEL_USER_CHECK(p.dilation_h > 0 && p.dilation_w > 0, op, ": dilations must be positive");
  TESSEL_USER_CHECK(p.pad_h >= 0 && p.pad_w >= 0, op, ": padding must be >= 0");
  TESSEL_USER_CHECK(p.groups > 0, op, ": groups must be positive");
}
}  // namespace

Tensor conv2d_nchw(const Tensor& X, const Tensor& W, const Conv2dParams& p, const std::string& name) {
  check_rank("conv2d_nchw", "X", X, 4);
  check_rank("conv2d_nchw", "W", W, 4);
  check_params(p, "conv2d_nchw");
  auto& xs = X.shape();
  auto& ws = W.shape();
  int64_t N = xs[0], C = xs[1], H = xs[2], Wd = xs[3], K = ws[0], R = ws[2], S = ws[3];
  check_groups("conv2d_nchw", C, K, p.groups);
  TESSEL_USER_CHECK(ws[1] == C / p.groups, "conv2d_nchw: W", shape_str(ws), " must be [K, C/groups=", C / p.groups,
                    ", R, S] for X", shape_str(xs));
  int64_t OH = out_size(H, R, p.stride_h, p.pad_h, p.dilation_h, "conv2d_nchw", "height");
  int64_t OW = out_size(Wd, S, p.stride_w, p.pad_w, p.dilation_w, "conv2d_nchw", "width");
  Tensor Xp = pad(X, {0, 0, p.pad_h, p.pad_w}, {0, 0, p.pad_h, p.pad_w}, 0.0, name + ".pad");
  int64_t Cg = C / p.groups, Kg = K / p.groups;
  IterVar rc = reduce_axis(Cg, "rc"), ry = reduce_axis(R, "ry"), rx = reduce_axis(S, "rx");
  return compute({N, K, OH, OW}, [&](Var n, Var k, Var y, Var x) {
    Expr c = group_channel(k, rc, Cg, Kg, p.groups);
    return sum(Xp(n, c, window(y, ry, p.stride_h, p.dilation_h), window(x, rx, p.stride_w, p.dilation_w)) *
                   W(k, rc, ry, rx),
               {rc, ry, rx}, reads_input(y, ry, x, rx, p, H, Wd));
  }, name, "conv2d");
}

Tensor conv2d_nhwc(const Tensor& X, const Tensor& W, const Conv2dParams& p, const std::string& name) {
  check_rank("conv2d_nhwc", "X", X, 4);
  check_rank("conv2d_nhwc", "W", W, 4);
  check_params(p, "conv2d_nhwc");
  auto& xs = X.shape();
  auto& ws = W.shape();
  int64_t N = xs[0], H = xs[1], Wd = xs[2], C = xs[3], R = ws[0], S = ws[1], K = ws[3];
  check_groups("conv2d_nhwc", C, K, p.groups);
  TESSEL_USER_CHECK(ws[2] == C / p.groups, "conv2d_nhwc: W", shape_str(ws), " must be [R, S, C/groups=",
                    C / p.groups, ", K] (HWIO) for X", shape_str(xs));
  int64_t OH = out_size(H, R, p.stride_h, p.pad_h, p.dilation_h, "conv2d_nhwc", "height");
  int64_t OW = out_size(Wd, S, p.stride_w, p.pad_w, p.dilation_w, "conv2d_nhwc", "width");
  Tensor Xp = pad(X, {0, p.pad_h, p.pad_w, 0}, {0, p.pad_h, p.pad_w, 0}, 0.0, name + ".pad");
  int64_t Cg = C / p.groups, Kg = K / p.groups;
  IterVar ry = reduce_axis(R, "ry"), rx = reduce_axis(S, "rx"), rc = reduce_axis(Cg, "rc");
  return compute({N, OH, OW, K}, [&](Var n, Var y, Var x, Var k) {
    Expr c = group_channel(k, rc, Cg, Kg, p.groups);
    return sum(Xp(n, window(y, ry, p.stride_h, p.dilation_h), window(x, rx, p.stride_w, p.dilation_w), c) *
                   W(ry, rx, rc, k),
               {ry, rx, rc}, reads_input(y, ry, x, rx, p, H, Wd));
  }, name, "conv2d");
}

Tensor conv2d_nchwc(const Tensor& X, const Tensor& W, const Conv2dParams& p, const std::string& name) {
  check_rank("conv2d_nchwc", "X", X, 5);
  check_rank("conv2d_nchwc", "W", W, 6);
  check_params(p, "conv2d_nchwc");
  TESSEL_USER_CHECK(p.groups == 1, "conv2d_nchwc: groups=", p.groups,
                    " is not supported in the blocked layout; use conv2d_nchw for grouped convolutions");
  auto& xs = X.shape();
  auto& ws = W.shape();
  int64_t N = xs[0], CO = xs[1], H = xs[2], Wd = xs[3], cb = xs[4];
  int64_t KO = ws[0], R = ws[2], S = ws[3], kb = ws[5];
  TESSEL_USER_CHECK(ws[1] == CO && ws[4] == cb, "conv2d_nchwc: W", shape_str(ws), " must be [K/kb, C/cb=", CO,
                    ", R, S, cb=", cb, ", kb] for X", shape_str(xs));
  int64_t OH = out_size(H, R, p.stride_h, p.pad_h, p.dilation_h, "conv2d_nchwc", "height");
  int64_t OW = out_size(Wd, S, p.stride_w, p.pad_w, p.dilation_w, "conv2d_nchwc", "width");
  Tensor Xp = pad(X, {0, 0, p.pad_h, p.pad_w, 0}, {0, 0, p.pad_h, p.pad_w, 0}, 0.0, name + ".pad");
  IterVar ico = reduce_axis(CO, "ico"), ry = reduce_axis(R, "ry"), rx = reduce_axis(S, "rx"),
          ici = reduce_axis(cb, "ici");
  return compute({N, KO, OH, OW, kb}, [&](Var n, Var ko, Var y, Var x, Var ki) {
    return sum(Xp(n, ico, window(y, ry, p.stride_h, p.dilation_h), window(x, rx, p.stride_w, p.dilation_w), ici) *
                   W(ko, ico, ry, rx, ici, ki),
               {ico, ry, rx, ici}, reads_input(y, ry, x, rx, p, H, Wd));
  }, name, "conv2d");
}

Tensor depthwise_conv2d_nchw(const Tensor& X, const Tensor& W, const Conv2dParams& p, const std::string& name) {
  check_rank("depthwise_conv2d_nchw", "X", X, 4);
  check_rank("depthwise_conv2d_nchw", "W", W, 4);
  check_params(p, "depthwise_conv2d_nchw");
  auto& xs = X.shape();
  auto& ws = W.shape();
  int64_t N = xs[0], C = xs[1], H = xs[2], Wd = xs[3], K = ws[0], R = ws[2], S = ws[3];
  TESSEL_USER_CHECK(ws[1] == 1 && K % C == 0, "depthwise_conv2d_nchw: W", shape_str(ws),
                    " must be [C*multiplier, 1, R, S] with C=", C);
  int64_t m = K / C;
  int64_t OH = out_size(H, R, p.stride_h, p.pad_h, p.dilation_h, "depthwise_conv2d_nchw", "height");
  int64_t OW = out_size(Wd, S, p.stride_w, p.pad_w, p.dilation_w, "depthwise_conv2d_nchw", "width");
  Tensor Xp = pad(X, {0, 0, p.pad_h, p.pad_w}, {0, 0, p.pad_h, p.pad_w}, 0.0, name + ".pad");
  IterVar ry = reduce_axis(R, "ry"), rx = reduce_axis(S, "rx");
  return compute({N, K, OH, OW}, [&](Var n, Var k, Var y, Var x) {
    return sum(Xp(n, k / int(m), window(y, ry, p.stride_h, p.dilation_h), window(x, rx, p.stride_w, p.dilation_w)) *
                   W(k, 0, ry, rx),
               {ry, rx}, reads_input(y, ry, x, rx, p, H, Wd));
  }, name, "depthwise_conv2d");
}

Tensor depthwise_conv2d_nhwc(const Tensor& X, const Tensor& W, const Conv2dParams& p, const std::string& name) {
  check_rank("depthwise_conv2d_nhwc", "X", X, 4);
  check_rank("depthwise_conv2d_nhwc", "W", W, 4);
  check_params(p, "depthwise_conv2d_nhwc");
  auto& xs = X.shape();
  auto& ws = W.shape();
  int64_t N = xs[0], H = xs[1], Wd = xs[2], C = xs[3], R = ws[0], S = ws[1], m = ws[3];
  TESSEL_USER_CHECK(ws[2] == C, "depthwise_conv2d_nhwc: W", shape_str(ws), " must be [R, S, C=", C,
                    ", multiplier] for X", shape_str(xs));
  int64_t OH = out_size(H, R, p.stride_h, p.pad_h, p.dilation_h, "depthwise_conv2d_nhwc", "height");
  int64_t OW = out_size(Wd, S, p.stride_w, p.pad_w, p.dilation_w, "depthwise_conv2d_nhwc", "width");
  Tensor Xp = pad(X, {0, p.pad_h, p.pad_w, 0}, {0, p.pad_h, p.pad_w, 0}, 0.0, name + ".pad");
  IterVar ry = reduce_axis(R, "ry"), rx = reduce_axis(S, "rx");
  return compute({N, OH, OW, C * m}, [&](Var n, Var y, Var x, Var k) {
    // Multiplier 1 reads channel k itself: the weights' channel axis is then the output's.
    Expr c = m == 1 ? Expr(k) : k / int(m);
    Expr j = m == 1 ? Expr(0) : k % int(m);
    return sum(Xp(n, window(y, ry, p.stride_h, p.dilation_h), window(x, rx, p.stride_w, p.dilation_w), c) *
                   W(ry, rx, c, j),
               {ry, rx}, reads_input(y, ry, x, rx, p, H, Wd));
  }, name, "depthwise_conv2d");
}

Tensor nchw_to_nchwc(const Tensor& X, int64_t cb, const std::string& name) {
  check_rank("nchw_to_nchwc", "X", X, 4);
  auto& s = X.shape();
  TESSEL_USER_CHECK(cb > 0 && s[1] % cb == 0, "nchw_to_nchwc: C=", s[1], " must be divisible by the block ", cb);
  return compute({s[0], s[1] / cb, s[2], s[3], cb},
                 [&](Var n, Var c, Var h, Var w, Var b) { return X(n, c * int(cb) + b, h, w); }, name, "layout");
}

Tensor nchwc_to_nchw(const Tensor& X, const std::string& name) {
  check_rank("nchwc_to_nchw", "X", X, 5);
  auto& s = X.shape();
  int cb = int(s[4]);
  return compute({s[0], s[1] * s[4], s[2], s[3]},
                 [&](Var n, Var c, Var h, Var w) { return X(n, c / cb, h, w, c % cb); }, name, "layout");
}

Tensor kcrs_to_kcrsck(const Tensor& W, int64_t cb, int64_t kb, const std::string& name) {
  check_rank("kcrs_to_kcrsck", "W", W, 4);
  auto& s = W.shape();
  TESSEL_USER_CHECK(cb > 0 && kb > 0 && s[1] % cb == 0 && s[0] % kb == 0, "kcrs_to_kcrsck: K=", s[0], " and C=", s[1],
                    " must be divisible by the blocks kb=", kb, ", cb=", cb);
  return compute({s[0] / kb, s[1] / cb, s[2], s[3], cb, kb}, ComputeFn([&](const std::vector<Var>& v) {
    return W(v[0] * int(kb) + v[5], v[1] * int(cb) + v[4], v[2], v[3]);
  }), name, "layout");
}

// The stride at which `op` reads an image's pixels, its last two spatial axes (rows h and
// columns w): s where every input read along them is one of the kernel's inputs (not a
// padded copy, which may be inlined into reads at other pixels) and reads them as its own
// last two dimensions at (s*h, s*w), the same s for all (a 1x1 convolution in NCHW); 0
// otherwise.
int64_t pixel_stride(const OperationNode* op) {
  size_t n = op->axis.size();
  if (n < 3 || op->axis[n - 2].extent() < 2) return 0;
  VarMap unit = one_iteration_axes(op);
  const Expr h = op->axis[n - 2].var(), w = op->axis[n - 1].var();
  int64_t stride = -1;
  // The s of an index s*v (v itself for 1), or 0.
  auto times = [](const Expr& i, const Expr& v) -> int64_t {
    if (equal(i, v)) return 1;
    const Mul* m = i.as<Mul>();
    int64_t k;
    if (m && equal(m->a, v) && is_const_int(m->b, &k)) return k;
    if (m && equal(m->b, v) && is_const_int(m->a, &k)) return k;
    return 0;
  };
  visit_exprs(op->body, [&](const Expr& e) {
    const TensorLoad* l = e.as<TensorLoad>();
    if (!l || stride == 0) return;
    std::set<const ExprNode*> used;
    for (auto& i : l->indices) visit_exprs(i, [&](const Expr& x) { used.insert(x.get()); });
    if (!used.count(h.get()) && !used.count(w.get())) return;
    size_t d = l->indices.size();
    if (d < 2 || l->op->is_compute()) {
      stride = 0;
      return;
    }
    int64_t sh = times(simplify(substitute(l->indices[d - 2], unit)), h);
    int64_t sw = times(simplify(substitute(l->indices[d - 1], unit)), w);
    stride = sh > 0 && sh == sw && (stride < 0 || stride == sh) ? sh : 0;
  });
  return std::max<int64_t>(stride, 0);
}

// Whether the image's rows and columns (as in pixel_stride) can run as one loop of
// consecutive pixels: read at stride 1, with rows as long as the output's (a 1x1 stride-1
// convolution in NCHW). The stage is then a GEMM of the weights by the pixels: vectors of
// pixels times broadcast weights, running on across the ends of rows (a 28-column row is
// 3.5 vectors of 8), with no copy into another layout.
bool image_axes_fuse(const OperationNode* op) {
  if (pixel_stride(op) != 1) return false;
  bool ok = true;
  const Expr w = op->axis.back().var();
  visit_exprs(op->body, [&](const Expr& e) {
    const TensorLoad* l = e.as<TensorLoad>();
    if (!l) return;
    bool reads_w = false;
    visit_exprs(l->indices.back(), [&](const Expr& x) { reads_w |= x.same_as(w); });
    if (reads_w) ok &= l->op->shape.back() == op->axis.back().extent();
  });
  return ok;
}

// The input of `stage` (its first) subsampled by `stride` (pixel_stride): every stride-th
// column of every stride-th row, the [N][C][OH][OW] pixels the stage reads, contiguous. They
// fuse into vectors as a stride-1 layer's do, each reduction step reading one dense row
// instead of every other element of two, and may be packed into panels like them.
// ResNet-50's stride-2 1x1 layers (NCHW, AVX-512, 2 threads): 256->512 at 56x56 222 -> 300
// GFLOP/s, 512->1024 at 28x28 240 -> 275, the copy included. Returns the copy, the columns'
// copy inlined into it.
Tensor subsample_input(Schedule& s, const std::string& stage, int64_t stride) {
  Tensor x(op_of(s, stage)->inputs()[0]);
  int d = int(x.shape().size());
  Tensor cols = s.subsample(x, {s.tensor(stage)}, d - 1, stride);
  Tensor rows = s.subsample(cols, {s.tensor(stage)}, d - 2, stride);
  s[cols].compute_inline();
  return rows;
}

// Pixels fused as above in vectors of `lanes`, in blocks of `block` (a whole number of
// vectors): whether every vector is whole and the last block, if partial, is a power of two
// of them. LLVM legalises other widths lane by lane (a block of 3 vectors ran 30x slower); a
// last, narrower vector (196 pixels at 14x14) made the default's GEMM over the pixels no
// faster than the channel-blocked path (AVX2, 1024->256: 158 GFLOP/s against 157-165); a
// last block of one whole vector made it faster (AVX-512, 28x28: 144->32 234 -> 349
// GFLOP/s, 512->128 293 -> 374). With `narrower_last` the last block may end in a narrower
// vector, if that block is a power of two of lanes (196 pixels: 3 blocks of 64 and one of 4).
bool whole_pixel_vectors(int64_t pixels, int64_t block, int64_t lanes, bool narrower_last) {
  int64_t vectors = block / lanes, last = pixels % block;
  return block % lanes == 0 && (vectors & (vectors - 1)) == 0 && (narrower_last || pixels % lanes == 0) &&
         (last & (last - 1)) == 0;
}

}  // namespace tessel::ops
