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

}  // namespace tiny::cpu
