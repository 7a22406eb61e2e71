#include "tiny/dtype.h"

#include <ostream>

#include "tiny/error.h"

namespace tiny {

size_t element_size(Dtype dtype) {
  switch (dtype) {
    case Dtype::Bool: return 1;
    case Dtype::Int64: return 8;
    case Dtype::Float32: return 4;
    case Dtype::Float64: return 8;
  }
  TINY_THROW(DtypeError, "unknown dtype code ", static_cast<int>(dtype));
}

const char* dtype_name(Dtype dtype) {
  switch (dtype) {
    case Dtype::Bool: return "bool";
    case Dtype::Int64: return "int64";
    case Dtype::Float32: return "float32";
    case Dtype::Float64: return "float64";
  }
  return "unknown";
}

bool is_floating_point(Dtype dtype) { return dtype == Dtype::Float32 || dtype == Dtype::Float64; }

Dtype promote_types(Dtype a, Dtype b) {
  // The enum is declared in promotion order: bool < int64 < float32 < float64.
  return static_cast<int>(a) >= static_cast<int>(b) ? a : b;
}

std::ostream& operator<<(std::ostream& out, Dtype dtype) { return out << dtype_name(dtype); }

}  // namespace tiny
