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
    case Dtype::Float16: return 2;
    case Dtype::BFloat16: return 2;
    case Dtype::Int32: return 4;
    case Dtype::UInt8: return 1;
  }
  TINY_THROW(DtypeError, "unknown dtype code ", static_cast<int>(dtype));
}

const char* dtype_name(Dtype dtype) {
  switch (dtype) {
    case Dtype::Bool: return "bool";
    case Dtype::Int64: return "int64";
    case Dtype::Float32: return "float32";
    case Dtype::Float64: return "float64";
    case Dtype::Float16: return "float16";
    case Dtype::BFloat16: return "bfloat16";
    case Dtype::Int32: return "int32";
    case Dtype::UInt8: return "uint8";
  }
  return "unknown";
}

bool is_floating_point(Dtype dtype) {
  return dtype == Dtype::Float32 || dtype == Dtype::Float64 || is_reduced_floating_point(dtype);
}

bool is_integral(Dtype dtype) { return dtype == Dtype::UInt8 || dtype == Dtype::Int32 || dtype == Dtype::Int64; }

bool is_reduced_floating_point(Dtype dtype) { return dtype == Dtype::Float16 || dtype == Dtype::BFloat16; }

namespace {

// Rank: bool < uint8 < int32 < int64 < float16 = bfloat16 < float32 < float64.
// (PyTorch meets uint8 and int8 in int16; tiny has neither int8 nor int16.)
int promotion_rank(Dtype d) {
  switch (d) {
    case Dtype::Bool: return 0;
    case Dtype::UInt8: return 1;
    case Dtype::Int32: return 2;
    case Dtype::Int64: return 3;
    case Dtype::Float16:
    case Dtype::BFloat16: return 4;
    case Dtype::Float32: return 5;
    case Dtype::Float64: return 6;
  }
  TINY_THROW(DtypeError, "unknown dtype code ", static_cast<int>(d));
}

}  // namespace

Dtype promote_types(Dtype a, Dtype b) {
  if (a == b) return a;
  // Neither 16-bit float holds the other's values: PyTorch meets them in float32.
  if (is_reduced_floating_point(a) && is_reduced_floating_point(b)) return Dtype::Float32;
  return promotion_rank(a) >= promotion_rank(b) ? a : b;
}

std::ostream& operator<<(std::ostream& out, Dtype dtype) { return out << dtype_name(dtype); }

std::ostream& operator<<(std::ostream& out, Half h) { return out << static_cast<float>(h); }

std::ostream& operator<<(std::ostream& out, BFloat16 b) { return out << static_cast<float>(b); }

}  // namespace tiny
