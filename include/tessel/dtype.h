#pragma once
// Element types. A DType is a scalar code and width plus a lane count; vectors only
// appear inside lowered IR, user-facing tensors are always scalar (lanes == 1).
#include <cstdint>
#include <string>

namespace tessel {

struct DType {
  enum Code : uint8_t { Int, UInt, Float, Bool, Handle };
  Code code = Float;
  uint8_t bits = 32;
  uint16_t lanes = 1;

  constexpr DType() = default;
  constexpr DType(Code c, int b, int l = 1) : code(c), bits(uint8_t(b)), lanes(uint16_t(l)) {}

  constexpr bool is_float() const { return code == Float; }
  constexpr bool is_int() const { return code == Int; }
  constexpr bool is_uint() const { return code == UInt; }
  constexpr bool is_bool() const { return code == Bool; }
  constexpr bool is_handle() const { return code == Handle; }
  constexpr bool is_integer() const { return code == Int || code == UInt; }
  constexpr bool is_vector() const { return lanes > 1; }
  constexpr bool is_scalar() const { return lanes == 1; }
  constexpr DType element_of() const { return DType(code, bits, 1); }
  constexpr DType with_lanes(int l) const { return DType(code, bits, l); }
  // Bytes of one element as stored in memory (bool is stored as one byte).
  constexpr int bytes() const { return code == Bool ? 1 : (bits + 7) / 8; }

  constexpr bool operator==(const DType& o) const {
    return code == o.code && bits == o.bits && lanes == o.lanes;
  }
  constexpr bool operator!=(const DType& o) const { return !(*this == o); }

  std::string str() const;                      // "float32", "int8", "float32x16"
  static DType parse(const std::string& name);  // inverse of str(); throws tessel::Error
};

inline constexpr DType float16{DType::Float, 16};
inline constexpr DType float32{DType::Float, 32};
inline constexpr DType float64{DType::Float, 64};
inline constexpr DType int8{DType::Int, 8};
inline constexpr DType uint8{DType::UInt, 8};
inline constexpr DType int32{DType::Int, 32};
inline constexpr DType int64{DType::Int, 64};
inline constexpr DType boolean{DType::Bool, 1};
inline constexpr DType handle{DType::Handle, 64};

}  // namespace tessel
