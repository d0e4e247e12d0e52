#include "codegen/VectorMath.h"

#include <cmath>
#include <initializer_list>

namespace tessel {
namespace {

// Constants of x's shape (a splat for vectors).
llvm::Value* fconst(llvm::Value* like, double v) { return llvm::ConstantFP::get(like->getType(), v); }
llvm::Value* iconst(llvm::IRBuilder<>& b, llvm::Value* like, int64_t v) {
  llvm::Type* t = like->getType();
  llvm::Type* it = b.getInt32Ty();
  if (auto* vt = llvm::dyn_cast<llvm::FixedVectorType>(t)) it = llvm::FixedVectorType::get(it, vt->getNumElements());
  return llvm::ConstantInt::get(it, uint64_t(v), true);
}
llvm::Type* int_type(llvm::IRBuilder<>& b, llvm::Value* like) {
  llvm::Type* it = b.getInt32Ty();
  if (auto* vt = llvm::dyn_cast<llvm::FixedVectorType>(like->getType()))
    it = llvm::FixedVectorType::get(it, vt->getNumElements());
  return it;
}

// c[0] + x (c[1] + x (c[2] + ...)), highest degree last, by Horner's rule (FMAs once
// contracted).
llvm::Value* poly(llvm::IRBuilder<>& b, llvm::Value* x, std::initializer_list<double> c) {
  auto it = std::rbegin(c);
  llvm::Value* acc = fconst(x, *it++);
  for (; it != std::rend(c); ++it) acc = b.CreateFAdd(b.CreateFMul(acc, x), fconst(x, *it));
  return acc;
}

// 1 / d for a finite d (or NaN), allowed to be a reciprocal estimate refined by one Newton
// step (within 2 ulp; CodeGenLLVM enables estimates for the divisions that carry `arcp` and
// `ninf`, never a user's): a 512-bit division holds the divider 10-16 cycles per vector.
llvm::Value* reciprocal(llvm::IRBuilder<>& b, llvm::Value* d) {
  auto* r = llvm::cast<llvm::Instruction>(b.CreateFDiv(fconst(d, 1.0), d));
  r->setHasAllowReciprocal(true);
  r->setHasNoInfs(true);
  return r;
}

llvm::Value* unary(llvm::IRBuilder<>& b, llvm::Intrinsic::ID id, llvm::Value* x) {
  return b.CreateUnaryIntrinsic(id, x);
}

// x 2^n for integer-valued float n in [-252, 254]: two factors, each a normal power of two,
// applied one after the other, so results in the denormal range and up to the largest
// float come out right (2^n alone may not be a float).
llvm::Value* scale_by_exp2(llvm::IRBuilder<>& b, llvm::Value* x, llvm::Value* n) {
  llvm::Value* half = unary(b, llvm::Intrinsic::floor, b.CreateFMul(n, fconst(n, 0.5)));
  llvm::Value* rest = b.CreateFSub(n, half);
  auto pow2 = [&](llvm::Value* k) {
    llvm::Value* bits = b.CreateShl(b.CreateAdd(b.CreateFPToSI(k, int_type(b, k)), iconst(b, k, 127)), iconst(b, k, 23));
    return b.CreateBitCast(bits, k->getType());
  };
  return b.CreateFMul(b.CreateFMul(x, pow2(half)), pow2(rest));
}

}  // namespace

llvm::Value* emit_exp(llvm::IRBuilder<>& b, llvm::Value* x) {
  // exp(x) = 2^n exp(r), n = round(x / ln 2), r = x - n ln 2 (ln 2 in two parts, exactly).
  llvm::Value* xc = b.CreateMinNum(b.CreateMaxNum(x, fconst(x, -104.0)), fconst(x, 89.0));
  llvm::Value* n = unary(b, llvm::Intrinsic::floor, b.CreateFAdd(b.CreateFMul(xc, fconst(x, 1.44269504088896341)),
                                                                  fconst(x, 0.5)));
  llvm::Value* r = b.CreateFSub(xc, b.CreateFMul(n, fconst(x, 0.693359375)));
  r = b.CreateFSub(r, b.CreateFMul(n, fconst(x, -2.12194440e-4)));
  llvm::Value* p = poly(b, r, {5.0000001201E-1, 1.6666665459E-1, 4.1665795894E-2, 8.3334519073E-3, 1.3981999507E-3,
                               1.9875691500E-4});
  p = b.CreateFAdd(b.CreateFAdd(b.CreateFMul(b.CreateFMul(r, r), p), r), fconst(x, 1.0));
  llvm::Value* y = scale_by_exp2(b, p, n);
  y = b.CreateSelect(b.CreateFCmpOGT(x, fconst(x, 88.72283935546875)), fconst(x, INFINITY), y);
  y = b.CreateSelect(b.CreateFCmpOLT(x, fconst(x, -103.972084045410)), fconst(x, 0.0), y);
  return b.CreateSelect(b.CreateFCmpUNO(x, x), x, y);  // NaN stays NaN
}

llvm::Value* emit_log(llvm::IRBuilder<>& b, llvm::Value* x) {
  llvm::Type* it = int_type(b, x);
  // Denormals scaled into the normal range first.
  llvm::Value* tiny = b.CreateFCmpOLT(x, fconst(x, 1.17549435e-38));
  llvm::Value* xs = b.CreateSelect(tiny, b.CreateFMul(x, fconst(x, 8388608.0)), x);
  llvm::Value* bits = b.CreateBitCast(xs, it);
  // x = m 2^e with m in [0.5, 1).
  llvm::Value* e = b.CreateSIToFP(b.CreateSub(b.CreateLShr(bits, iconst(b, x, 23)), iconst(b, x, 126)), x->getType());
  e = b.CreateSelect(tiny, b.CreateFSub(e, fconst(x, 23.0)), e);
  llvm::Value* m = b.CreateBitCast(b.CreateOr(b.CreateAnd(bits, iconst(b, x, 0x807fffff)), iconst(b, x, 0x3f000000)),
                                   x->getType());
  // m in [sqrt(1/2), sqrt(2)) - 1, so the polynomial sees |m| < 0.42.
  llvm::Value* small = b.CreateFCmpOLT(m, fconst(x, 0.707106781186547524));
  e = b.CreateSelect(small, b.CreateFSub(e, fconst(x, 1.0)), e);
  m = b.CreateSelect(small, b.CreateFSub(b.CreateFAdd(m, m), fconst(x, 1.0)), b.CreateFSub(m, fconst(x, 1.0)));
  llvm::Value* z = b.CreateFMul(m, m);
  llvm::Value* y = poly(b, m, {3.3333331174E-1, -2.4999993993E-1, 2.0000714765E-1, -1.6668057665E-1, 1.4249322787E-1,
                               -1.2420140846E-1, 1.1676998740E-1, -1.1514610310E-1, 7.0376836292E-2});
  y = b.CreateFMul(b.CreateFMul(y, m), z);
  y = b.CreateFAdd(y, b.CreateFMul(e, fconst(x, -2.12194440e-4)));
  y = b.CreateFSub(y, b.CreateFMul(z, fconst(x, 0.5)));
  llvm::Value* out = b.CreateFAdd(b.CreateFAdd(m, y), b.CreateFMul(e, fconst(x, 0.693359375)));
  out = b.CreateSelect(b.CreateFCmpOEQ(x, fconst(x, 0.0)), fconst(x, -INFINITY), out);
  out = b.CreateSelect(b.CreateFCmpOEQ(x, fconst(x, INFINITY)), x, out);
  return b.CreateSelect(b.CreateFCmpULT(x, fconst(x, 0.0)), fconst(x, NAN), out);  // negatives and NaN
}

llvm::Value* emit_tanh(llvm::IRBuilder<>& b, llvm::Value* x) {
  llvm::Value* z = unary(b, llvm::Intrinsic::fabs, x);
  // |x| > 0.625: 1 - 2 / (exp(2|x|) + 1); below, an odd polynomial.
  llvm::Value* big = b.CreateFSub(fconst(x, 1.0), b.CreateFDiv(fconst(x, 2.0), b.CreateFAdd(emit_exp(b, b.CreateFAdd(z, z)),
                                                                                         fconst(x, 1.0))));
  big = b.CreateCopySign(big, x);
  llvm::Value* s = b.CreateFMul(x, x);
  llvm::Value* p = poly(b, s, {-3.33332819422E-1, 1.33314422036E-1, -5.37397155531E-2, 2.06390887954E-2,
                               -5.70498872745E-3});
  llvm::Value* small = b.CreateFAdd(b.CreateFMul(b.CreateFMul(p, s), x), x);
  return b.CreateSelect(b.CreateFCmpOGT(z, fconst(x, 0.625)), big, small);  // NaN takes `small`: NaN
}

llvm::Value* emit_erf(llvm::IRBuilder<>& b, llvm::Value* x) {
  llvm::Value* z = unary(b, llvm::Intrinsic::fabs, x);
  // |x| < 0.5: the Taylor series of 2/sqrt(pi) (x - x^3/3 + x^5/10 - ...), to x^13.
  llvm::Value* s = b.CreateFMul(x, x);
  llvm::Value* p = poly(b, s, {1.0, -1.0 / 3, 1.0 / 10, -1.0 / 42, 1.0 / 216, -1.0 / 1320, 1.0 / 9360});
  llvm::Value* small = b.CreateFMul(b.CreateFMul(p, x), fconst(x, 1.12837916709551257));
  // Otherwise 1 - erfc(|x|), erfc by Numerical Recipes' Chebyshev fit (relative error
  // under 1.2e-7): t exp(-z^2 + P(t)), t = 1 / (1 + z/2). From |x| = 4 on, erfc is under half
  // an ulp of 1 and erf rounds to 1: z stops there, or exp(-z^2) comes out denormal, which
  // costs the CPU a microcode assist per operation (a GEMM + GELU epilogue of BERT, whose
  // products reach |x| ~ 10, ran 1.74 -> 2.91 ms against 1.74 ms with a bias alone).
  z = b.CreateSelect(b.CreateFCmpOGT(z, fconst(x, 4.0)), fconst(x, 4.0), z);  // NaN stays NaN
  llvm::Value* t = reciprocal(b, b.CreateFAdd(fconst(x, 1.0), b.CreateFMul(z, fconst(x, 0.5))));
  llvm::Value* q = poly(b, t, {-1.26551223, 1.00002368, 0.37409196, 0.09678418, -0.18628806, 0.27886807, -1.13520398,
                               1.48851587, -0.82215223, 0.17087277});
  llvm::Value* erfc = b.CreateFMul(t, emit_exp(b, b.CreateFSub(q, b.CreateFMul(z, z))));
  llvm::Value* big = b.CreateCopySign(b.CreateFSub(fconst(x, 1.0), erfc), x);
  return b.CreateSelect(b.CreateFCmpOLT(z, fconst(x, 0.5)), small, big);
}

// 1 / (1 + e^-x), as e^x / (1 + e^x) for negative x: the tail down to the denormals stays
// accurate where e^-x would overflow.
llvm::Value* emit_sigmoid(llvm::IRBuilder<>& b, llvm::Value* x) {
  llvm::Value* e = emit_exp(b, b.CreateFNeg(unary(b, llvm::Intrinsic::fabs, x)));
  llvm::Value* d = b.CreateFAdd(fconst(x, 1.0), e);
  return b.CreateSelect(b.CreateFCmpOLT(x, fconst(x, 0.0)), b.CreateFDiv(e, d), b.CreateFDiv(fconst(x, 1.0), d));
}

}  // namespace tessel
