// ResNet-50 conv2d layers (batch 1, fp32; the stride-2 layers and the 7x7 stem included):
// Tessel's default schedules in NCHW16c, and in the layouts users give (NCHW, NHWC), vs
// oneDNN (its preferred blocked layout, chosen with format_tag::any) vs im2col + OpenBLAS,
// at 1 and 2 threads. Layout transforms are excluded for Tessel's blocked kernel and oneDNN
// alike, and so are the NCHW and NHWC kernels' weight rewrites (made once, before timing).
#include <cblas.h>
#include <omp.h>

#include <dnnl.hpp>

#include "Harness.h"
#include "tessel/ops.h"
#include "tessel/tessel.h"

using namespace tessel;

// A oneDNN convolution made for the thread count now set (oneDNN plans its work for it),
// in the layouts it prefers, with its buffers filled.
struct OnednnConv {
  dnnl::convolution_forward::primitive_desc pd;
  dnnl::memory src, wei, dst;
  dnnl::convolution_forward conv;
  OnednnConv(const dnnl::convolution_forward::desc& desc, const dnnl::engine& eng)
      : pd(desc, eng), src(pd.src_desc(), eng), wei(pd.weights_desc(), eng), dst(pd.dst_desc(), eng), conv(pd) {
    std::fill_n(static_cast<float*>(src.get_data_handle()), pd.src_desc().get_size() / 4, 0.5f);
    std::fill_n(static_cast<float*>(wei.get_data_handle()), pd.weights_desc().get_size() / 4, 0.25f);
  }
  void run(dnnl::stream& strm) {
    conv.execute(strm, {{DNNL_ARG_SRC, src}, {DNNL_ARG_WEIGHTS, wei}, {DNNL_ARG_DST, dst}});
    strm.wait();
  }
};

struct Layer {
  int64_t C, H, K, R, stride, pad;
};

static std::string shape_of(const Layer& l) {
  return "N=1,C=" + std::to_string(l.C) + ",H=" + std::to_string(l.H) + ",W=" + std::to_string(l.H) +
         ",K=" + std::to_string(l.K) + ",R=" + std::to_string(l.R) + ",S=" + std::to_string(l.R) +
         ",stride=" + std::to_string(l.stride) + ",pad=" + std::to_string(l.pad);
}

int main(int argc, char** argv) {
  bench::unset_openblas_overrides(argv);
  std::vector<Layer> layers = {
      {64, 56, 64, 3, 1, 1},    {128, 28, 128, 3, 1, 1},  {256, 14, 256, 3, 1, 1},  {512, 7, 512, 3, 1, 1},
      {64, 56, 256, 1, 1, 0},   {256, 56, 64, 1, 1, 0},   {512, 28, 128, 1, 1, 0},  {1024, 14, 256, 1, 1, 0},
      {2048, 7, 512, 1, 1, 0},  {3, 224, 64, 7, 2, 3},   {128, 56, 128, 3, 2, 1},  {256, 28, 256, 3, 2, 1},
      {512, 14, 512, 3, 2, 1},  {256, 56, 512, 1, 2, 0},  {512, 28, 1024, 1, 2, 0}, {1024, 14, 2048, 1, 2, 0},
  };
  bench::Report report("conv2d");
  dnnl::engine eng(dnnl::engine::kind::cpu, 0);
  dnnl::stream strm(eng);
  for (const Layer& l : layers) {
    int64_t OH = (l.H + 2 * l.pad - l.R) / l.stride + 1;
    double flops = 2.0 * l.K * OH * OH * l.C * l.R * l.R;
    std::string shape = shape_of(l);
    // Tessel: blocked layout, default schedule (the stem's 3 channels make no block).
    const int64_t cb = l.C % 16 == 0 ? 16 : l.C, kb = 16;
    ops::Conv2dParams p;
    p.stride_h = p.stride_w = l.stride;
    p.pad_h = p.pad_w = l.pad;
    Tensor X = placeholder({1, l.C / cb, l.H, l.H, cb}, float32, "X");
    Tensor W = placeholder({l.K / kb, l.C / cb, l.R, l.R, cb, kb}, float32, "W");
    Tensor Y = ops::conv2d_nchwc(X, W, p, "conv");
    Module m = build(ops::default_schedule({Y}), {X, W, Y});
    Buffer x(X.shape(), float32), w(W.shape(), float32), y(Y.shape(), float32);
    x.fill_random(1), w.fill_random(2);
    // The same layer in the layouts users give.
    Tensor Xc = placeholder({1, l.C, l.H, l.H}, float32, "X"), Wc = placeholder({l.K, l.C, l.R, l.R}, float32, "W");
    Tensor Yc = ops::conv2d_nchw(Xc, Wc, p, "conv");
    Module mc = build(ops::default_schedule({Yc}, Target::host(), {Wc}), {Xc, Wc, Yc});
    Tensor Xh = placeholder({1, l.H, l.H, l.C}, float32, "X"), Wh = placeholder({l.R, l.R, l.C, l.K}, float32, "W");
    Tensor Yh = ops::conv2d_nhwc(Xh, Wh, p, "conv");
    Module mh = build(ops::default_schedule({Yh}, Target::host(), {Wh}), {Xh, Wh, Yh});
    Buffer xc(Xc.shape(), float32), wc(Wc.shape(), float32), yc(Yc.shape(), float32);
    Buffer xh(Xh.shape(), float32), wh(Wh.shape(), float32), yh(Yh.shape(), float32);
    xc.fill_random(1), wc.fill_random(2), xh.fill_random(1), wh.fill_random(2);
    // oneDNN: let it choose its layouts.
    using dt = dnnl::memory::data_type;
    using tag = dnnl::memory::format_tag;
    dnnl::memory::dims src{1, l.C, l.H, l.H}, wei{l.K, l.C, l.R, l.R}, dst{1, l.K, OH, OH};
    auto desc = dnnl::convolution_forward::desc(
        dnnl::prop_kind::forward_inference, dnnl::algorithm::convolution_direct, dnnl::memory::desc(src, dt::f32, tag::any),
        dnnl::memory::desc(wei, dt::f32, tag::any), dnnl::memory::desc(dst, dt::f32, tag::any), {l.stride, l.stride},
        {l.pad, l.pad}, {l.pad, l.pad});
    // im2col + OpenBLAS in NCHW.
    int64_t crs = l.C * l.R * l.R, ohw = OH * OH;
    std::vector<float> xin(size_t(l.C * l.H * l.H), 0.5f), win(size_t(l.K * crs), 0.25f), col(size_t(crs * ohw)),
        out(size_t(l.K * ohw));
    auto im2col_gemm = [&] {
      const float* src_p = xin.data();
      float* col_p = col.data();
      if (l.R == 1 && l.stride == 1 && l.pad == 0) {
        col_p = const_cast<float*>(src_p);  // a 1x1 convolution is a plain GEMM
      } else {
        for (int64_t c = 0; c < l.C; ++c)
          for (int64_t r = 0; r < l.R; ++r)
            for (int64_t s = 0; s < l.R; ++s) {
              float* row = col_p + ((c * l.R + r) * l.R + s) * ohw;
              for (int64_t oy = 0; oy < OH; ++oy)
                for (int64_t ox = 0; ox < OH; ++ox) {
                  int64_t iy = oy * l.stride + r - l.pad, ix = ox * l.stride + s - l.pad;
                  row[oy * OH + ox] = iy < 0 || iy >= l.H || ix < 0 || ix >= l.H ? 0.f : src_p[(c * l.H + iy) * l.H + ix];
                }
            }
      }
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, int(l.K), int(ohw), int(crs), 1.f, win.data(), int(crs),
                  col_p, int(ohw), 0.f, out.data(), int(ohw));
    };
    for (int t : {1, 2}) {
      set_num_threads(t);
      openblas_set_num_threads(t);
      omp_set_num_threads(t);
      OnednnConv onednn(desc, eng);
      bench::Impls impls = {{"tessel-default", [&] { m(x, w, y); }},
                            {"tessel-nchw", [&] { mc(xc, wc, yc); }},
                            {"tessel-nhwc", [&] { mh(xh, wh, yh); }},
                            {"onednn", [&] { onednn.run(strm); }},
                            {"im2col-openblas", im2col_gemm}};
      for (auto& [impl, sec] : bench::time_interleaved(impls)) report.add(shape, impl, t, flops / sec / 1e9);
    }
    std::printf("{\"bench\": \"conv2d\", \"shape\": \"%s\", \"impl\": \"tessel-nchw\", \"weight_rewrite_ms\": %.3f}\n",
                shape.c_str(), mc.prepare_seconds() * 1e3);
  }
  // MobileNetV2's depthwise 3x3 layers: Tessel's default schedule in NCHW vs oneDNN's
  // grouped convolution (groups = channels) in its preferred layout.
  struct Depthwise {
    int64_t C, H, stride;
  };
  for (const Depthwise& l : std::vector<Depthwise>{{32, 112, 1}, {96, 112, 2}, {144, 56, 1}, {144, 56, 2},
                                                   {192, 28, 1}, {384, 14, 1}, {576, 14, 2}, {960, 7, 1}}) {
    int64_t OH = (l.H + 2 - 3) / l.stride + 1;
    double flops = 2.0 * l.C * OH * OH * 9;
    std::string shape = "depthwise C=" + std::to_string(l.C) + ",H=" + std::to_string(l.H) +
                        ",stride=" + std::to_string(l.stride);
    ops::Conv2dParams p;
    p.stride_h = p.stride_w = l.stride;
    p.pad_h = p.pad_w = 1;
    Tensor X = placeholder({1, l.C, l.H, l.H}, float32, "X"), W = placeholder({l.C, 1, 3, 3}, float32, "W");
    Tensor Y = ops::depthwise_conv2d_nchw(X, W, p, "dw");
    Module m = build(ops::default_schedule({Y}, Target::host(), {W}), {X, W, Y});
    Buffer x(X.shape(), float32), w(W.shape(), float32), y(Y.shape(), float32);
    x.fill_random(1), w.fill_random(2);
    using dt = dnnl::memory::data_type;
    using tag = dnnl::memory::format_tag;
    auto desc = dnnl::convolution_forward::desc(
        dnnl::prop_kind::forward_inference, dnnl::algorithm::convolution_direct,
        dnnl::memory::desc({1, l.C, l.H, l.H}, dt::f32, tag::any), dnnl::memory::desc({l.C, 1, 1, 3, 3}, dt::f32, tag::any),
        dnnl::memory::desc({1, l.C, OH, OH}, dt::f32, tag::any), {l.stride, l.stride}, {1, 1}, {1, 1});
    for (int t : {1, 2}) {
      set_num_threads(t);
      omp_set_num_threads(t);
      OnednnConv onednn(desc, eng);
      bench::Impls impls = {{"tessel-depthwise", [&] { m(x, w, y); }}, {"onednn", [&] { onednn.run(strm); }}};
      for (auto& [impl, sec] : bench::time_interleaved(impls)) report.add(shape, impl, t, flops / sec / 1e9);
    }
  }
  report.ratio("tessel-default", "onednn");
  report.ratio("tessel-nchw", "onednn");
  report.ratio("tessel-nhwc", "onednn");
  report.ratio("tessel-depthwise", "onednn");
  report.ratio("tessel-default", "im2col-openblas");
  for (int t : {1, 2})
    for (const char* impl : {"tessel-default", "tessel-nchw", "tessel-nhwc", "tessel-depthwise"})
      std::printf("{\"bench\": \"conv2d\", \"threads\": %d, \"geomean\": \"%s/onednn\", \"value\": %.3f}\n", t,
                  impl, report.geomean(impl, "onednn", t));
  return 0;
}
