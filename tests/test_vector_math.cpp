// float32 math in vector code (src/codegen/VectorMath.cpp): over float bit patterns spread
// across the whole range, and the special values, each function stays within its stated
// error of double-precision libm, its vector body agrees with its scalar tail, and a
// vectorized loop that calls it has no libm calls left.
#include <cfloat>
#include <cmath>
#include <cstring>
#include <functional>

#include "reference.h"

using namespace tessel;

namespace {

struct MathCase {
  const char* name;
  std::function<Expr(Expr)> dsl;
  std::function<double(double)> ref;
  double max_ulp;
};

// Distance in units of the reference's last place (ulps of float at that magnitude).
double ulp_error(float got, double want) {
  if (std::isnan(want)) return std::isnan(got) ? 0 : INFINITY;
  float wf = float(want);
  if (std::isinf(wf) && std::isinf(got) && std::signbit(got) == std::signbit(wf)) return 0;
  if (std::isnan(got) || std::isinf(got)) return INFINITY;
  double mag = std::isinf(wf) ? FLT_MAX : std::fabs(double(wf));
  int e;
  std::frexp(mag, &e);
  double ulp = std::ldexp(1.0, std::max(e - 24, -149));
  return std::fabs(double(got) - want) / ulp;
}

std::vector<float> sweep() {
  std::vector<float> x;
  for (uint64_t i = 0; i < (uint64_t(1) << 22); ++i) {
    uint32_t bits = uint32_t(i * 1031u);
    float f;
    std::memcpy(&f, &bits, 4);
    x.push_back(f);
  }
  for (float f : {0.f, -0.f, INFINITY, -INFINITY, NAN, FLT_MIN, FLT_MAX, -FLT_MAX, FLT_TRUE_MIN, 1.f, -1.f, 0.5f,
                  -0.5f, 0.625f, -0.625f, 88.72283935546875f, 88.7228f, -103.972084f, -87.3f, 9.0f, -9.0f, 4.0f})
    x.push_back(f);
  while (x.size() % 8) x.push_back(1.f);
  return x;
}

}  // namespace

class VectorMath : public ::testing::TestWithParam<MathCase> {};

TEST_P(VectorMath, WithinItsStatedErrorOverTheWholeFloatRange) {
  const MathCase& c = GetParam();
  static const std::vector<float> xs = sweep();
  int64_t n = int64_t(xs.size());
  Tensor X = placeholder({n}, float32, "X");
  Tensor Y = compute({n}, [&](Var i) { return c.dsl(X(i)); }, "Y");
  Schedule vec({Y});
  auto [o, i] = vec[Y].split("i", 8);
  vec[Y].vectorize(i);
  Module mv = build(vec, {X, Y});
  EXPECT_EQ(mv.llvm_ir().find("call float @"), std::string::npos) << "a libm call is left in the vector loop";
  Module ms = build(Schedule({Y}), {X, Y});
  Buffer in({n}, float32), outv({n}, float32), outs({n}, float32);
  std::memcpy(in.raw(), xs.data(), xs.size() * 4);
  mv(in, outv);
  ms(in, outs);
  const float* v = outv.data<float>();
  const float* s = outs.data<float>();
  double worst = 0;
  float worst_x = 0;
  for (int64_t k = 0; k < n; ++k) {
    double e = ulp_error(v[k], c.ref(double(xs[size_t(k)])));
    if (e > worst) worst = e, worst_x = xs[size_t(k)];
    ASSERT_TRUE(std::memcmp(&v[k], &s[k], 4) == 0 || (std::isnan(v[k]) && std::isnan(s[k])))
        << c.name << "(" << xs[size_t(k)] << "): vector " << v[k] << ", scalar " << s[k];
  }
  std::printf("%s: max error %.2f ulp (at %.9g)\n", c.name, worst, double(worst_x));
  EXPECT_LE(worst, c.max_ulp) << c.name << " at x = " << worst_x;
}

INSTANTIATE_TEST_SUITE_P(
    Codegen, VectorMath,
    ::testing::Values(MathCase{"exp", [](Expr x) { return exp(x); }, [](double x) { return std::exp(x); }, 1.0},
                      MathCase{"log", [](Expr x) { return log(x); }, [](double x) { return std::log(x); }, 1.0},
                      MathCase{"tanh", [](Expr x) { return tanh(x); }, [](double x) { return std::tanh(x); }, 2.0},
                      MathCase{"erf", [](Expr x) { return erf(x); }, [](double x) { return std::erf(x); }, 3.0},
                      MathCase{"sigmoid", [](Expr x) { return sigmoid(x); },
                               [](double x) { return 1 / (1 + std::exp(-x)); }, 2.5}),
    [](const auto& info) { return std::string(info.param.name); });
