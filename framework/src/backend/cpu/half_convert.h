// Bulk float16 <-> float32 conversion for the CPU kernels (and so for the
// emulated GPU). Bit for bit the same as tiny::Half's scalar conversions
// (include/tiny/half.h: round to nearest even, a NaN becomes sign | 0x7E00,
// Half -> float is exact and keeps a NaN's payload), but 8 at a time with the
// x86 F16C instructions when the CPU has them (every x86-64 CPU since 2012),
// which is about 10x faster than the portable integer code. Other CPUs use
// the portable code. bfloat16 needs none of this: its conversion is a shift
// the compiler already vectorises.
#pragma once

#include <cstdint>

#include "tiny/half.h"

namespace tiny::cpu {

// dst[i] = float(src[i]) for i < n.
void half_to_float(const Half* src, float* dst, int64_t n);

// dst[i] = Half(src[i]) for i < n.
void float_to_half(const float* src, Half* dst, int64_t n);

// Whether the two functions above use F16C on this CPU (for tests and benchmarks).
bool half_convert_uses_f16c();

// dst[i] = float(src[i]) and dst[i] = T(src[i]) for any element type: the
// bulk functions above for Half, else one element at a time (bfloat16's shift
// vectorises as it is).
template <typename T>
void to_float(const T* src, float* dst, int64_t n) {
  for (int64_t i = 0; i < n; ++i) dst[i] = static_cast<float>(src[i]);
}
template <typename T>
void from_float(const float* src, T* dst, int64_t n) {
  for (int64_t i = 0; i < n; ++i) dst[i] = T(src[i]);
}
inline void to_float(const Half* src, float* dst, int64_t n) { half_to_float(src, dst, n); }
inline void from_float(const float* src, Half* dst, int64_t n) { float_to_half(src, dst, n); }

}  // namespace tiny::cpu
