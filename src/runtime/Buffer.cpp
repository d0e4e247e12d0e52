#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <new>
#include <random>

#include "runtime/Compare.h"
#include "tessel/buffer.h"
#include "tessel/error.h"

namespace tessel {

uint16_t float_to_half(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  uint32_t sign = (x >> 16) & 0x8000;
  int32_t exp = int32_t((x >> 23) & 0xff) - 127 + 15;
  uint32_t mant = x & 0x7fffff;
  if (((x >> 23) & 0xff) == 0xff) return uint16_t(sign | 0x7c00 | (mant ? 0x200 : 0));  // inf/nan
  if (exp >= 31) return uint16_t(sign | 0x7c00);
  if (exp <= 0) {
    if (exp < -10) return uint16_t(sign);
    mant |= 0x800000;
    uint32_t shift = uint32_t(14 - exp);
    uint32_t h = mant >> shift;
    uint32_t rem = mant & ((1u << shift) - 1), half = 1u << (shift - 1);
    if (rem > half || (rem == half && (h & 1))) ++h;
    return uint16_t(sign | h);
  }
  uint32_t h = sign | uint32_t(exp) << 10 | mant >> 13;
  uint32_t rem = mant & 0x1fff;
  if (rem > 0x1000 || (rem == 0x1000 && (h & 1))) ++h;  // round to nearest even
  return uint16_t(h);
}

float half_to_float(uint16_t h) {
  uint32_t sign = uint32_t(h & 0x8000) << 16;
  uint32_t exp = (h >> 10) & 0x1f;
  uint32_t mant = h & 0x3ff;
  uint32_t x;
  if (exp == 0) {
    if (mant == 0) x = sign;
    else {
      exp = 127 - 15 + 1;
      while (!(mant & 0x400)) mant <<= 1, --exp;
      x = sign | exp << 23 | (mant & 0x3ff) << 13;
    }
  } else if (exp == 31) {
    x = sign | 0x7f800000 | mant << 13;
  } else {
    x = sign | (exp - 15 + 127) << 23 | mant << 13;
  }
  float f;
  std::memcpy(&f, &x, 4);
  return f;
}

Buffer Buffer::view(const Buffer& memory, int64_t byte_offset, std::vector<int64_t> shape, DType dtype) {
  Buffer b;
  b.shape_ = std::move(shape);
  b.dtype_ = dtype;
  TESSEL_USER_CHECK(memory.defined() && byte_offset >= 0 && byte_offset + b.bytes() <= memory.bytes(),
                    "Buffer::view: ", b.bytes(), " bytes at offset ", byte_offset, " do not fit in ", memory.describe());
  b.storage_ = std::shared_ptr<uint8_t>(memory.storage_, memory.storage_.get() + byte_offset);
  return b;
}

Buffer::Buffer(std::vector<int64_t> shape, DType dtype) : shape_(std::move(shape)), dtype_(dtype) {
  TESSEL_USER_CHECK(dtype.is_scalar() && !dtype.is_handle(), "Buffer of dtype ", dtype.str(),
                    "; use a scalar element type");
  for (size_t d = 0; d < shape_.size(); ++d)
    TESSEL_USER_CHECK(shape_[d] >= 0, "Buffer dimension ", d, " has extent ", shape_[d], "; extents are sizes");
  int64_t n = std::max<int64_t>(bytes(), 1);
  void* p = std::aligned_alloc(64, size_t((n + 63) / 64 * 64));
  if (!p) throw std::bad_alloc();
  storage_ = std::shared_ptr<uint8_t>(static_cast<uint8_t*>(p), [](uint8_t* q) { std::free(q); });
  std::memset(storage_.get(), 0, size_t(n));
}

int64_t Buffer::size() const {
  int64_t n = 1;
  for (int64_t e : shape_) n *= e;
  return n;
}

double Buffer::get(int64_t i) const {
  const uint8_t* p = storage_.get() + i * dtype_.bytes();
  switch (dtype_.code) {
    case DType::Float:
      if (dtype_.bits == 16) return half_to_float(*reinterpret_cast<const uint16_t*>(p));
      if (dtype_.bits == 32) return *reinterpret_cast<const float*>(p);
      return *reinterpret_cast<const double*>(p);
    case DType::Int:
      if (dtype_.bits == 8) return *reinterpret_cast<const int8_t*>(p);
      if (dtype_.bits == 16) return *reinterpret_cast<const int16_t*>(p);
      if (dtype_.bits == 32) return *reinterpret_cast<const int32_t*>(p);
      return double(*reinterpret_cast<const int64_t*>(p));
    case DType::UInt:
      if (dtype_.bits == 8) return *p;
      if (dtype_.bits == 16) return *reinterpret_cast<const uint16_t*>(p);
      if (dtype_.bits == 32) return *reinterpret_cast<const uint32_t*>(p);
      return double(*reinterpret_cast<const uint64_t*>(p));
    case DType::Bool: return *p ? 1.0 : 0.0;
    default: throw Error("Buffer::get on a handle buffer");
  }
}

void Buffer::set(int64_t i, double v) {
  uint8_t* p = storage_.get() + i * dtype_.bytes();
  switch (dtype_.code) {
    case DType::Float:
      if (dtype_.bits == 16) *reinterpret_cast<uint16_t*>(p) = float_to_half(float(v));
      else if (dtype_.bits == 32) *reinterpret_cast<float*>(p) = float(v);
      else *reinterpret_cast<double*>(p) = v;
      return;
    case DType::Int:
      if (dtype_.bits == 8) *reinterpret_cast<int8_t*>(p) = int8_t(v);
      else if (dtype_.bits == 16) *reinterpret_cast<int16_t*>(p) = int16_t(v);
      else if (dtype_.bits == 32) *reinterpret_cast<int32_t*>(p) = int32_t(v);
      else *reinterpret_cast<int64_t*>(p) = int64_t(v);
      return;
    case DType::UInt:
      if (dtype_.bits == 8) *p = uint8_t(v);
      else if (dtype_.bits == 16) *reinterpret_cast<uint16_t*>(p) = uint16_t(v);
      else if (dtype_.bits == 32) *reinterpret_cast<uint32_t*>(p) = uint32_t(v);
      else *reinterpret_cast<uint64_t*>(p) = uint64_t(v);
      return;
    case DType::Bool: *p = v != 0; return;
    default: throw Error("Buffer::set on a handle buffer");
  }
}

void Buffer::fill_random(uint64_t seed, double lo, double hi) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> dist(lo, hi);
  bool integer = !dtype_.is_float();
  for (int64_t i = 0, n = size(); i < n; ++i) {
    double v = dist(rng);
    set(i, integer ? std::floor(v) : v);
  }
}

void Buffer::fill(double v) {
  for (int64_t i = 0, n = size(); i < n; ++i) set(i, v);
}

std::string Buffer::describe() const {
  std::string s = dtype_.str() + "[";
  for (size_t d = 0; d < shape_.size(); ++d) s += (d ? ", " : "") + std::to_string(shape_[d]);
  return s + "]";
}

Buffer transposed(const Buffer& b, const std::vector<int64_t>& shape, const std::vector<int64_t>& perm) {
  std::vector<int64_t> out_shape, stride(shape.size(), 1);
  for (int64_t p : perm) out_shape.push_back(shape[size_t(p)]);
  for (size_t d = shape.size() - 1; d-- > 0;) stride[d] = stride[d + 1] * shape[d + 1];
  Buffer out(out_shape, b.dtype());
  std::vector<int64_t> idx(out_shape.size(), 0);
  for (int64_t k = 0; k < out.size(); ++k) {
    int64_t from = 0;
    for (size_t d = 0; d < out_shape.size(); ++d) from += idx[d] * stride[size_t(perm[d])];
    out.set(k, b.get(from));
    for (size_t d = out_shape.size(); d-- > 0;)
      if (++idx[d] < out_shape[d]) break;
      else idx[d] = 0;
  }
  return out;
}

double max_relative_error(const Buffer& a, const Buffer& b) {
  TESSEL_USER_CHECK(a.shape() == b.shape(), "max_relative_error: shapes differ: ", a.describe(), " vs ", b.describe());
  return max_relative_difference(a.size(), [&](int64_t i) { return a.get(i); }, [&](int64_t i) { return b.get(i); });
}

}  // namespace tessel
