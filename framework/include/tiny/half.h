/// @file half.h
/// @brief The 16-bit floating-point element types: tiny::Half (IEEE binary16,
/// `torch.float16`) and tiny::BFloat16 (`torch.bfloat16`).
///
/// Both are 16 bits of storage and nothing else. They convert to and from
/// float implicitly, as c10::Half and c10::BFloat16 do, so arithmetic on them is
/// float arithmetic: `a + b` on two Half values is a float, rounded back only
/// when stored. Kernels load 16-bit values, compute in float ("opmath") and
/// round once per result; reductions accumulate in float.
///
/// Conversions from float round to nearest, ties to even, with integer
/// arithmetic only, so the result is the same on every host and inside CUDA
/// device code (the header compiles under nvcc as `__host__ __device__`).
/// Overflow gives infinity; values below the smallest subnormal round to a
/// signed zero. NaN: float -> Half gives the quiet NaN `sign | 0x7E00` and
/// float -> BFloat16 gives `0x7FC0` (payloads are not kept: the patterns that
/// c10::Half and c10::BFloat16's scalar conversions produce; PyTorch 1.13's
/// vectorised CPU copy to bfloat16 writes 0xFFFF instead, so only NaN-ness is
/// portable). Half -> float is exact and a NaN keeps its payload with the quiet
/// bit set (as c10::Half, x86 F16C and CUDA); BFloat16 -> float is the 16 bits
/// shifted into the top half of a float, payload and all (as c10::BFloat16).
/// A double converts through float, as in PyTorch (`static_cast<Half>(d)`).
#pragma once

#include <cstdint>
#include <cstring>
#include <iosfwd>
#include <type_traits>

#if defined(__CUDACC__)
#define TINY_HALF_HD __host__ __device__
#else
#define TINY_HALF_HD
#endif

namespace tiny {

/// @cond
namespace half_detail {

TINY_HALF_HD inline uint32_t float_bits(float f) {
  uint32_t u;
  memcpy(&u, &f, sizeof(u));
  return u;
}

TINY_HALF_HD inline float bits_float(uint32_t u) {
  float f;
  memcpy(&f, &u, sizeof(f));
  return f;
}

// IEEE binary16 -> binary32, exact.
TINY_HALF_HD inline float half_to_float(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1Fu;
  uint32_t mant = h & 0x3FFu;
  if (exp == 0x1Fu) {  // inf or NaN: widen the payload, quiet a NaN
    return bits_float(sign | 0x7F800000u | (mant << 13) | (mant ? 0x00400000u : 0u));
  }
  if (exp == 0) {
    if (mant == 0) return bits_float(sign);
    // Subnormal: shift the leading one up to the implicit bit.
    int e = -1;
    do {
      mant <<= 1;
      ++e;
    } while ((mant & 0x400u) == 0);
    mant &= 0x3FFu;
    return bits_float(sign | (static_cast<uint32_t>(127 - 15 - e) << 23) | (mant << 13));
  }
  return bits_float(sign | ((exp + (127 - 15)) << 23) | (mant << 13));
}

// Shifts `m` right by `s` (s >= 1) rounding to nearest, ties to even.
TINY_HALF_HD inline uint32_t shift_right_rne(uint32_t m, uint32_t s) {
  if (s >= 32) return 0;  // far below half the smallest step: rounds to zero
  const uint32_t kept = m >> s;
  const uint32_t rest = m & ((1u << s) - 1u);
  const uint32_t halfway = 1u << (s - 1);
  return kept + ((rest > halfway || (rest == halfway && (kept & 1u))) ? 1u : 0u);
}

// binary32 -> IEEE binary16, round to nearest even.
TINY_HALF_HD inline uint16_t float_to_half(float f) {
  const uint32_t u = float_bits(f);
  const uint16_t sign = static_cast<uint16_t>((u >> 16) & 0x8000u);
  const uint32_t exp = (u >> 23) & 0xFFu;
  const uint32_t mant = u & 0x7FFFFFu;
  if (exp == 0xFFu) return static_cast<uint16_t>(sign | (mant ? 0x7E00u : 0x7C00u));
  const int32_t e = static_cast<int32_t>(exp) - 127 + 15;  // the half exponent field
  if (e >= 0x1F) return static_cast<uint16_t>(sign | 0x7C00u);
  if (e <= 0) {
    // Subnormal half (or zero): the value is (1.mant) * 2^(exp-127) and a half
    // subnormal step is 2^-24, so the 24-bit significand shifts by 14 - e.
    if (exp == 0) return sign;  // float subnormals are far below 2^-25
    const uint32_t sig = mant | 0x800000u;
    return static_cast<uint16_t>(sign | shift_right_rne(sig, static_cast<uint32_t>(14 - e)));
  }
  // Normal: drop 13 bits; a carry out of the mantissa bumps the exponent, and
  // out of the largest exponent gives 0x7C00 (infinity), both by the addition.
  const uint32_t rounded = shift_right_rne((static_cast<uint32_t>(e) << 23 | mant), 13);
  return static_cast<uint16_t>(sign | rounded);
}

// binary32 -> bfloat16, round to nearest even.
TINY_HALF_HD inline uint16_t float_to_bfloat16(float f) {
  const uint32_t u = float_bits(f);
  if ((u & 0x7FFFFFFFu) > 0x7F800000u) return 0x7FC0u;
  // Adding 0x7FFF plus the lowest kept bit rounds half to even; a carry into
  // the exponent is the correct result (up to infinity).
  return static_cast<uint16_t>((u + 0x7FFFu + ((u >> 16) & 1u)) >> 16);
}

// bfloat16 -> binary32: the 16 bits become the top half, NaN payload and all
// (c10::BFloat16 and CUDA's __bfloat162float do the same).
TINY_HALF_HD inline float bfloat16_to_float(uint16_t b) { return bits_float(static_cast<uint32_t>(b) << 16); }

}  // namespace half_detail
/// @endcond

/// @brief `torch.float16`: IEEE 754 binary16 (1 sign, 5 exponent, 10 mantissa bits).
///
/// Largest finite value 65504, machine epsilon 2^-10; integers are exact up to 2048.
struct alignas(2) Half {
  /// @brief The raw bits.
  uint16_t x;

  /// @brief Positive zero.
  Half() = default;
  /// @brief The nearest Half to `f` (ties to even).
  TINY_HALF_HD Half(float f) : x(half_detail::float_to_half(f)) {}  // NOLINT: implicit like c10::Half
  /// @brief The value, exactly, as a float.
  TINY_HALF_HD operator float() const { return half_detail::half_to_float(x); }  // NOLINT
  /// @brief A Half with the given bit pattern.
  TINY_HALF_HD static Half from_bits(uint16_t bits) {
    Half h;
    h.x = bits;
    return h;
  }
};

/// @brief `torch.bfloat16`: the top 16 bits of a float32 (1 sign, 8 exponent, 7 mantissa bits).
///
/// Same range as float32, machine epsilon 2^-7; integers are exact up to 256.
struct alignas(2) BFloat16 {
  /// @brief The raw bits.
  uint16_t x;

  /// @brief Positive zero.
  BFloat16() = default;
  /// @brief The nearest BFloat16 to `f` (ties to even).
  TINY_HALF_HD BFloat16(float f) : x(half_detail::float_to_bfloat16(f)) {}  // NOLINT: implicit like c10::BFloat16
  /// @brief The value, exactly, as a float.
  TINY_HALF_HD operator float() const { return half_detail::bfloat16_to_float(x); }  // NOLINT
  /// @brief A BFloat16 with the given bit pattern.
  TINY_HALF_HD static BFloat16 from_bits(uint16_t bits) {
    BFloat16 b;
    b.x = bits;
    return b;
  }
};

static_assert(sizeof(Half) == 2 && sizeof(BFloat16) == 2, "16-bit storage");

/// @brief The type arithmetic on T is done in: float for Half and BFloat16, T itself otherwise.
template <typename T>
struct opmath_type {
  /// @brief The compute type.
  using type = T;
};
/// @cond
template <> struct opmath_type<Half> { using type = float; };
template <> struct opmath_type<BFloat16> { using type = float; };
/// @endcond
/// @brief `opmath_t<Half>` is float (PyTorch's `at::opmath_type`).
template <typename T>
using opmath_t = typename opmath_type<T>::type;

/// @brief True for Half and BFloat16.
template <typename T>
inline constexpr bool is_reduced_float_v = !std::is_same_v<opmath_t<T>, T>;

/// @brief Prints the value as a float.
std::ostream& operator<<(std::ostream& out, Half h);
/// @brief Prints the value as a float.
std::ostream& operator<<(std::ostream& out, BFloat16 b);

}  // namespace tiny

#undef TINY_HALF_HD
