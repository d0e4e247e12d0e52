// Element type names; the deploy library uses them without the IR.
#include "tessel/dtype.h"
#include "tessel/error.h"

namespace tessel {

std::string DType::str() const {
  std::string s;
  switch (code) {
    case Int: s = "int" + std::to_string(bits); break;
    case UInt: s = "uint" + std::to_string(bits); break;
    case Float: s = "float" + std::to_string(bits); break;
    case Bool: s = "bool"; break;
    case Handle: s = "handle"; break;
  }
  if (lanes > 1) s += "x" + std::to_string(lanes);
  return s;
}

DType DType::parse(const std::string& name) {
  for (DType t : {float16, float32, float64, int8, uint8, int32, int64, boolean})
    if (t.str() == name) return t;
  throw Error("unknown dtype '" + name +
              "'; expected one of float16, float32, float64, int8, uint8, int32, int64, bool");
}

}  // namespace tessel
