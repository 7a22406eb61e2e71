// Bulk float16 conversion: F16C when the CPU has it, else tiny::Half's own code.
#include "backend/cpu/half_convert.h"

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#include <immintrin.h>
#define TINY_HAVE_F16C_PATH 1
#endif

namespace tiny::cpu {

namespace {

void half_to_float_portable(const Half* src, float* dst, int64_t n) {
  for (int64_t i = 0; i < n; ++i) dst[i] = static_cast<float>(src[i]);
}

void float_to_half_portable(const float* src, Half* dst, int64_t n) {
  for (int64_t i = 0; i < n; ++i) dst[i] = Half(src[i]);
}

#ifdef TINY_HAVE_F16C_PATH

// VCVTPH2PS is exact, keeps a NaN's payload and sets its quiet bit, as
// half_detail::half_to_float does; MXCSR's DAZ does not apply to its inputs.
__attribute__((target("avx,f16c"))) void half_to_float_f16c(const Half* src, float* dst, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i));
    _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(h));
  }
  half_to_float_portable(src + i, dst + i, n - i);
}

// VCVTPS2PH with an immediate rounding mode rounds to nearest even whatever
// MXCSR says and gives infinity on overflow, as half_detail::float_to_half
// does. It keeps part of a NaN's payload, so NaN lanes are replaced by the
// documented sign | 0x7E00. (A float32 subnormal rounds to a signed zero
// either way: it is far below half the smallest float16 subnormal.)
__attribute__((target("avx,f16c"))) void float_to_half_f16c(const float* src, Half* dst, int64_t n) {
  const __m128i sign_mask = _mm_set1_epi16(static_cast<int16_t>(0x8000));
  const __m128i quiet_nan = _mm_set1_epi16(0x7E00);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 v = _mm256_loadu_ps(src + i);
    __m128i h = _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT);
    const __m256i nan32 = _mm256_castps_si256(_mm256_cmp_ps(v, v, _CMP_UNORD_Q));
    // 8 x 32-bit all-ones/zero lanes -> 8 x 16-bit lanes, in order.
    const __m128i nan16 = _mm_packs_epi32(_mm256_castsi256_si128(nan32), _mm256_extractf128_si256(nan32, 1));
    const __m128i fixed = _mm_or_si128(_mm_and_si128(h, sign_mask), quiet_nan);
    h = _mm_or_si128(_mm_andnot_si128(nan16, h), _mm_and_si128(nan16, fixed));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + i), h);
  }
  float_to_half_portable(src + i, dst + i, n - i);
}

#endif

}  // namespace

#ifdef TINY_HAVE_F16C_PATH
namespace {

// CPUID leaf 1: F16C and AVX (F16C is VEX-encoded), and the OS saving the
// AVX registers (OSXSAVE, then XCR0's SSE and AVX bits). Asked of CPUID
// directly: clang's __builtin_cpu_supports does not know "f16c".
bool cpu_has_f16c() {
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  if (__get_cpuid(1, &eax, &ebx, &ecx, &edx) == 0) return false;
  constexpr unsigned kOsxsave = 1u << 27, kAvx = 1u << 28, kF16c = 1u << 29;
  if ((ecx & (kOsxsave | kAvx | kF16c)) != (kOsxsave | kAvx | kF16c)) return false;
  unsigned xcr0_low = 0, xcr0_high = 0;
  __asm__("xgetbv" : "=a"(xcr0_low), "=d"(xcr0_high) : "c"(0));
  return (xcr0_low & 0x6u) == 0x6u;
}

}  // namespace
#endif

bool half_convert_uses_f16c() {
#ifdef TINY_HAVE_F16C_PATH
  static const bool f16c = cpu_has_f16c();
  return f16c;
#else
  return false;
#endif
}

void half_to_float(const Half* src, float* dst, int64_t n) {
#ifdef TINY_HAVE_F16C_PATH
  if (half_convert_uses_f16c()) return half_to_float_f16c(src, dst, n);
#endif
  half_to_float_portable(src, dst, n);
}

void float_to_half(const float* src, Half* dst, int64_t n) {
#ifdef TINY_HAVE_F16C_PATH
  if (half_convert_uses_f16c()) return float_to_half_f16c(src, dst, n);
#endif
  float_to_half_portable(src, dst, n);
}

}  // namespace tiny::cpu
