#pragma once
// Dense, 64-byte aligned tensor storage that built kernels read and write. A Buffer is a
// shared handle: copies alias the same memory.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "tessel/dtype.h"

namespace tessel {

class Buffer {
 public:
  Buffer() = default;
  Buffer(std::vector<int64_t> shape, DType dtype);  // zero-filled
  // A tensor of `shape` inside `memory`, `byte_offset` bytes in (a network's arena); it keeps
  // the memory alive.
  static Buffer view(const Buffer& memory, int64_t byte_offset, std::vector<int64_t> shape, DType dtype);

  bool defined() const { return storage_ != nullptr; }
  const std::vector<int64_t>& shape() const { return shape_; }
  DType dtype() const { return dtype_; }
  int64_t size() const;  // number of elements
  int64_t bytes() const { return size() * dtype_.bytes(); }
  void* raw() const { return storage_.get(); }
  template <typename T>
  T* data() const { return static_cast<T*>(raw()); }

  // Element access by flat index, converting to/from double (float16 included).
  double get(int64_t i) const;
  void set(int64_t i, double v);
  // Uniform values in [lo, hi) (rounded for integer types), reproducible from the seed.
  void fill_random(uint64_t seed, double lo = -1.0, double hi = 1.0);
  void fill(double v);
  std::string describe() const;  // "float32[64, 128]"

 private:
  std::vector<int64_t> shape_;
  DType dtype_;
  std::shared_ptr<uint8_t> storage_;
};

// `b` seen as `shape` (the same elements in the same order), its axes permuted: axis d of the
// result is axis perm[d] of `shape` (weights blocked or moved between layouts once).
Buffer transposed(const Buffer& b, const std::vector<int64_t>& shape, const std::vector<int64_t>& perm);

// Largest |a - b| relative to max(1, |b|), element by element; throws if shapes differ.
double max_relative_error(const Buffer& a, const Buffer& b);

// float16 <-> float32 conversions used by Buffer and the reference implementations.
uint16_t float_to_half(float f);
float half_to_float(uint16_t h);

}  // namespace tessel
