// Math functions with one spelling for host and device code and for float and
// double, so the op structs never pick the wrong overload (`::exp(float)` is
// the double function under g++, `expf` is float everywhere).
#pragma once

#include <cmath>
#include <cstdint>
#include <type_traits>

#include "kernels/macros.h"

namespace tiny::kernels {

TINY_HOST_DEVICE TINY_FORCE_INLINE float t_exp(float x) { return expf(x); }
TINY_HOST_DEVICE TINY_FORCE_INLINE double t_exp(double x) { return ::exp(x); }
TINY_HOST_DEVICE TINY_FORCE_INLINE float t_log(float x) { return logf(x); }
TINY_HOST_DEVICE TINY_FORCE_INLINE double t_log(double x) { return ::log(x); }
TINY_HOST_DEVICE TINY_FORCE_INLINE float t_sqrt(float x) { return sqrtf(x); }
TINY_HOST_DEVICE TINY_FORCE_INLINE double t_sqrt(double x) { return ::sqrt(x); }
TINY_HOST_DEVICE TINY_FORCE_INLINE float t_tanh(float x) { return tanhf(x); }
TINY_HOST_DEVICE TINY_FORCE_INLINE double t_tanh(double x) { return ::tanh(x); }
TINY_HOST_DEVICE TINY_FORCE_INLINE float t_erf(float x) { return erff(x); }
TINY_HOST_DEVICE TINY_FORCE_INLINE double t_erf(double x) { return ::erf(x); }
TINY_HOST_DEVICE TINY_FORCE_INLINE float t_sin(float x) { return sinf(x); }
TINY_HOST_DEVICE TINY_FORCE_INLINE double t_sin(double x) { return ::sin(x); }
TINY_HOST_DEVICE TINY_FORCE_INLINE float t_cos(float x) { return cosf(x); }
TINY_HOST_DEVICE TINY_FORCE_INLINE double t_cos(double x) { return ::cos(x); }
TINY_HOST_DEVICE TINY_FORCE_INLINE float t_log1p(float x) { return log1pf(x); }
TINY_HOST_DEVICE TINY_FORCE_INLINE double t_log1p(double x) { return ::log1p(x); }
TINY_HOST_DEVICE TINY_FORCE_INLINE float t_expm1(float x) { return expm1f(x); }
TINY_HOST_DEVICE TINY_FORCE_INLINE double t_expm1(double x) { return ::expm1(x); }
TINY_HOST_DEVICE TINY_FORCE_INLINE float t_floor(float x) { return floorf(x); }
TINY_HOST_DEVICE TINY_FORCE_INLINE double t_floor(double x) { return ::floor(x); }
// Half to even, as torch.round: nearbyint in the default rounding mode.
TINY_HOST_DEVICE TINY_FORCE_INLINE float t_round(float x) { return nearbyintf(x); }
TINY_HOST_DEVICE TINY_FORCE_INLINE double t_round(double x) { return ::nearbyint(x); }
TINY_HOST_DEVICE TINY_FORCE_INLINE float t_pow(float x, float y) { return powf(x, y); }
TINY_HOST_DEVICE TINY_FORCE_INLINE double t_pow(double x, double y) { return ::pow(x, y); }
TINY_HOST_DEVICE TINY_FORCE_INLINE float t_abs(float x) { return fabsf(x); }
TINY_HOST_DEVICE TINY_FORCE_INLINE double t_abs(double x) { return ::fabs(x); }
// The integer forms (uint8, int32, int64): |x| of an unsigned value is itself.
template <typename T, std::enable_if_t<std::is_integral_v<T> && !std::is_same_v<T, bool>, int> = 0>
TINY_HOST_DEVICE TINY_FORCE_INLINE T t_abs(T x) {
  if constexpr (std::is_unsigned_v<T>) {
    return x;
  } else {
    return x < 0 ? static_cast<T>(-x) : x;
  }
}

// Integer power by squaring (PyTorch raises integers to integer powers exactly,
// wrapping as the type's own multiplication does).
template <typename T, std::enable_if_t<std::is_integral_v<T> && !std::is_same_v<T, bool>, int> = 0>
TINY_HOST_DEVICE inline T t_pow(T base, T exp) {
  if constexpr (std::is_signed_v<T>) {
    if (exp < 0) return base == 1 ? T(1) : (base == -1 ? ((exp & 1) ? T(-1) : T(1)) : T(0));
  }
  T result = 1;
  while (exp) {
    if (exp & 1) result = static_cast<T>(result * base);
    base = static_cast<T>(base * base);
    exp = static_cast<T>(exp >> 1);
  }
  return result;
}

template <typename T>
TINY_HOST_DEVICE TINY_FORCE_INLINE bool t_isnan(T x) {
  return x != x;  // false for integers, true only for NaN floats
}

}  // namespace tiny::kernels
