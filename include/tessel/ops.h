#pragma once
// The operator library: compute definitions of common tensor operators, each tagged so
// that default_schedule() (and the tuner) can recognise it. Shapes are checked when the
// operator is built; errors name the operator, the argument and the expected shape.
#include <optional>
#include <string>
#include <vector>

#include "tessel/buffer.h"
#include "tessel/schedule.h"
#include "tessel/target.h"
#include "tessel/tensor.h"

namespace tessel::ops {

enum class Activation { None, Relu, Sigmoid, Tanh, Gelu };

// C[M, N] = A[M, K] x B[K, N]; with transposes A is [K, M] and/or B is [N, K].
Tensor matmul(const Tensor& A, const Tensor& B, bool trans_a = false, bool trans_b = false,
              const std::string& name = "C");
// Y[M, N] = act(X[M, K] x W[N, K]^T + bias[N]). Without bias/activation only the product.
Tensor dense(const Tensor& X, const Tensor& W, const std::optional<Tensor>& bias = std::nullopt,
             Activation act = Activation::None, const std::string& name = "Y");
// C[b, M, N] = A[b] x B[b] (with optional transposes of the two last dimensions).
Tensor batch_matmul(const Tensor& A, const Tensor& B, bool trans_a = false, bool trans_b = false,
                    const std::string& name = "C");

// GEMM with B repacked into panels [N/bn, K, bn] so the inner loop reads B contiguously,
// and the hand-written x86 schedule the benchmarks report as "tessel-hand": bm x bn
// blocks in parallel, an mr x bn register tile accumulated in a local buffer, the
// reduction unrolled by 4. N must be a multiple of bn.
struct PackedMatmul {
  Tensor packed_b, C;
};
PackedMatmul matmul_packed(const Tensor& A, const Tensor& B, int64_t bn = 32, const std::string& name = "C");
Schedule hand_schedule(const PackedMatmul& mm, int64_t bm = 64, int64_t mr = 8);

struct Conv2dParams {
  int64_t stride_h = 1, stride_w = 1;
  int64_t pad_h = 0, pad_w = 0;  // symmetric zero padding
  int64_t dilation_h = 1, dilation_w = 1;
  int64_t groups = 1;
};

// X [N, C, H, W], W [K, C/groups, R, S] -> [N, K, OH, OW].
Tensor conv2d_nchw(const Tensor& X, const Tensor& W, const Conv2dParams& p = {}, const std::string& name = "conv");
// X [N, H, W, C], W [R, S, C/groups, K] (HWIO) -> [N, OH, OW, K].
Tensor conv2d_nhwc(const Tensor& X, const Tensor& W, const Conv2dParams& p = {}, const std::string& name = "conv");
// Blocked layout: X [N, C/cb, H, W, cb], W [K/kb, C/cb, R, S, cb, kb] -> [N, K/kb, OH, OW, kb].
// groups must be 1.
Tensor conv2d_nchwc(const Tensor& X, const Tensor& W, const Conv2dParams& p = {}, const std::string& name = "conv");
// The same convolution by Winograd's F(m x m, 3x3) (3x3 windows, stride 1): X [N, C/cb, H, W,
// cb], U = winograd_weights(W, m) -> [N, K/kb, OH, OW, kb]. m, the output tile, is 2 or 4: 2.25x
// or 4x fewer multiplications; results differ from the direct sum's by up to 3e-6 (m = 2) or
// 1.2e-5 (m = 4) of the largest output (uniform data, 64 to 512 channels). Stages: the input
// transform (tag "winograd_input"), a product of the channels per point of the input tile
// ("winograd_product"), the output transform ("winograd_output", then "winograd").
Tensor conv2d_winograd_nchwc(const Tensor& X, const Tensor& U, const Conv2dParams& p = {},
                             const std::string& name = "conv");
// The same in the layout users give, NCHW: X [N, C, H, W], U = winograd_weights_oihw(W, cb, kb, m)
// -> [N, K, OH, OW]. The input is packed into NCHW[cb]c first (stage tag "layout") and the
// output unpacked from NCHW[kb]c last; C and K must be multiples of cb and kb.
Tensor conv2d_winograd_nchw(const Tensor& X, const Tensor& U, const Conv2dParams& p = {},
                            const std::string& name = "conv");
// And in NHWC: X [N, H, W, C], U = winograd_weights_hwio(W, cb, kb, m) -> [N, OH, OW, K].
Tensor conv2d_winograd_nhwc(const Tensor& X, const Tensor& U, const Conv2dParams& p = {},
                            const std::string& name = "conv");
// W [K/kb, C/cb, 3, 3, cb, kb] -> U [m + 2, m + 2, K/kb, C/cb, cb, kb] (G g G^T, in double precision).
Buffer winograd_weights(const Buffer& W, int64_t tile = 4);
// W [K, C, 3, 3] (OIHW) or [3, 3, C, K] (HWIO) -> the same U, blocked by cb input and kb output
// channels.
Buffer winograd_weights_oihw(const Buffer& W, int64_t cb, int64_t kb, int64_t tile = 4);
Buffer winograd_weights_hwio(const Buffer& W, int64_t cb, int64_t kb, int64_t tile = 4);
bool winograd_applies(const std::vector<int64_t>& weights, const Conv2dParams& p);
// The output tile worth using on an OH x OW output: 4 from 7x7 tiles of 4 (28x28), 2 from 7x7
// tiles of 2 (14x14), else 0. The transformed weights are (m + 2)^2 / 9 times the direct ones and
// each is read once per tile, so they pay off only over enough tiles (ResNet-50's 512-channel
// 7x7 layers would stream 16.8 MB of them).
int64_t winograd_tile(int64_t OH, int64_t OW);
// X [N, C, H, W], W [C*m, 1, R, S] (channel multiplier m) -> [N, C*m, OH, OW].
Tensor depthwise_conv2d_nchw(const Tensor& X, const Tensor& W, const Conv2dParams& p = {},
                             const std::string& name = "dwconv");
// X [N, H, W, C], W [R, S, C, m] (TensorFlow's depthwise layout) -> [N, OH, OW, C*m]; output
// channel c*m + j reads input channel c with weight W[., ., c, j].
Tensor depthwise_conv2d_nhwc(const Tensor& X, const Tensor& W, const Conv2dParams& p = {},
                             const std::string& name = "dwconv");

// Layout transforms for the blocked convolution.
Tensor nchw_to_nchwc(const Tensor& X, int64_t cb, const std::string& name = "X_nchwc");
Tensor nchwc_to_nchw(const Tensor& X, const std::string& name = "Y_nchw");
Tensor kcrs_to_kcrsck(const Tensor& W, int64_t cb, int64_t kb, const std::string& name = "W_blocked");

// Constant padding: `before[d]` and `after[d]` elements around dimension d (value outside).
Tensor pad(const Tensor& X, const std::vector<int64_t>& before, const std::vector<int64_t>& after,
           double value = 0.0, const std::string& name = "pad");

struct Pool2dParams {
  int64_t kernel_h = 2, kernel_w = 2;
  int64_t stride_h = 2, stride_w = 2;
  int64_t pad_h = 0, pad_w = 0;
};
// NCHW pooling; average pooling divides by the number of in-bounds elements.
Tensor max_pool2d(const Tensor& X, const Pool2dParams& p, const std::string& name = "pool");
Tensor avg_pool2d(const Tensor& X, const Pool2dParams& p, const std::string& name = "pool");

// Softmax and layer norm over the last axis.
Tensor softmax(const Tensor& X, const std::string& name = "softmax");
Tensor layer_norm(const Tensor& X, const Tensor& gamma, const Tensor& beta, double eps = 1e-5,
                  const std::string& name = "layer_norm");

// Element-wise and broadcasting operators (numpy broadcasting of trailing dimensions).
Tensor relu(const Tensor& X, const std::string& name = "relu");
Tensor activation(const Tensor& X, Activation act, const std::string& name = "act");
Tensor add(const Tensor& A, const Tensor& B, const std::string& name = "add");
Tensor subtract(const Tensor& A, const Tensor& B, const std::string& name = "sub");
Tensor multiply(const Tensor& A, const Tensor& B, const std::string& name = "mul");
Tensor divide(const Tensor& A, const Tensor& B, const std::string& name = "div");
Tensor maximum(const Tensor& A, const Tensor& B, const std::string& name = "maximum");
// bias [C] added along axis 1 of an NCHW tensor (or the last axis if `axis` = -1).
Tensor bias_add(const Tensor& X, const Tensor& bias, int axis = 1, const std::string& name = "bias_add");
Tensor cast(const Tensor& X, DType t, const std::string& name = "cast");

// A reasonable schedule for a computation built from these operators. On the CPU,
// GEMM-like stages get register tiling with a local accumulator, convolutions in NCHWc a
// vectorized output-channel block, element-wise producers are inlined, and every root
// stage runs its outer loops in parallel and its inner loop in vector lanes. On a GPU,
// GEMM-like stages and convolutions are tiled over thread blocks with their operands
// staged in shared memory and a register tile per thread, reductions over rows (softmax,
// layer norm) are cross-thread reductions, and element-wise stages run a thread per
// element (GpuSchedule.cpp). `constants` are inputs that stay the same between calls (the
// weights, at inference): CPU convolutions read them in a blocked layout that the built
// Module prepares once (Schedule::rewrite_layout); other weights are blocked on each call.
Schedule default_schedule(const std::vector<Tensor>& outputs, const Target& target = Target::host(),
                          const std::vector<Tensor>& constants = {});

}  // namespace tessel::ops
