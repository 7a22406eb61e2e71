// Turns a runtime Dtype into a compile-time type: inside the lambda,
// `scalar_t` is the C++ type of the dtype's storage (tiny::Half for float16,
// tiny::BFloat16 for bfloat16) and `opmath_t` the type to compute in (float
// for the 16-bit floats, scalar_t otherwise): kernels load scalar_t, compute in
// opmath_t, and round once when they store. Adding a dtype is one case per macro.
#pragma once

#include <cstdint>

#include "tiny/dtype.h"
#include "tiny/error.h"

#define TINY_DTYPE_CASE(enum_value, type, ...)         \
  case ::tiny::Dtype::enum_value: {                    \
    using scalar_t = type;                             \
    using opmath_t [[maybe_unused]] = ::tiny::opmath_t<type>; \
    return __VA_ARGS__();                              \
  }

#define TINY_DTYPE_CASES_REDUCED_FLOAT(...)               \
  TINY_DTYPE_CASE(Float16, ::tiny::Half, __VA_ARGS__)     \
  TINY_DTYPE_CASE(BFloat16, ::tiny::BFloat16, __VA_ARGS__)

// uint8, int32 and int64: C++ arithmetic on them wraps as PyTorch's does for
// uint8 (modulo 256); signed overflow is the program's error, as in PyTorch.
#define TINY_DTYPE_CASES_INTEGRAL(...)                    \
  TINY_DTYPE_CASE(UInt8, uint8_t, __VA_ARGS__)            \
  TINY_DTYPE_CASE(Int32, int32_t, __VA_ARGS__)            \
  TINY_DTYPE_CASE(Int64, int64_t, __VA_ARGS__)

// Every dtype.
#define TINY_DISPATCH_ALL(dtype, op_name, ...)                                                    \
  [&] {                                                                                           \
    switch (dtype) {                                                                              \
      TINY_DTYPE_CASE(Bool, bool, __VA_ARGS__)                                                    \
      TINY_DTYPE_CASES_INTEGRAL(__VA_ARGS__)                                                      \
      TINY_DTYPE_CASE(Float32, float, __VA_ARGS__)                                                \
      TINY_DTYPE_CASE(Float64, double, __VA_ARGS__)                                               \
      TINY_DTYPE_CASES_REDUCED_FLOAT(__VA_ARGS__)                                                 \
    }                                                                                             \
    TINY_THROW(DtypeError, op_name, " does not support dtype code ", static_cast<int>(dtype));    \
  }()

// float16, bfloat16, float32 and float64.
#define TINY_DISPATCH_FLOATING(dtype, op_name, ...)                                              \
  [&] {                                                                                          \
    switch (dtype) {                                                                             \
      TINY_DTYPE_CASE(Float32, float, __VA_ARGS__)                                               \
      TINY_DTYPE_CASE(Float64, double, __VA_ARGS__)                                              \
      TINY_DTYPE_CASES_REDUCED_FLOAT(__VA_ARGS__)                                                \
      default: break;                                                                            \
    }                                                                                            \
    TINY_THROW(DtypeError, "\"", op_name, "\" not implemented for '", ::tiny::dtype_name(dtype), \
               "' (use a floating-point tensor: x.to(tiny::kFloat32))");                         \
  }()

// The integers and every floating dtype.
#define TINY_DISPATCH_NUMERIC(dtype, op_name, ...)                                               \
  [&] {                                                                                          \
    switch (dtype) {                                                                             \
      TINY_DTYPE_CASES_INTEGRAL(__VA_ARGS__)                                                     \
      TINY_DTYPE_CASE(Float32, float, __VA_ARGS__)                                               \
      TINY_DTYPE_CASE(Float64, double, __VA_ARGS__)                                              \
      TINY_DTYPE_CASES_REDUCED_FLOAT(__VA_ARGS__)                                                \
      default: break;                                                                            \
    }                                                                                            \
    TINY_THROW(DtypeError, "\"", op_name, "\" not implemented for '", ::tiny::dtype_name(dtype), \
               "'");                                                                             \
  }()
