// Philox 4x32-10 and the conversions from its 32-bit words to random values.
//
// Written once for the host and the GPU (TINY_HOST_DEVICE): the CPU drivers,
// the emulator and the CUDA drivers all call these functions, so the same seed
// gives the same dropout mask and the same initial weights on every backend,
// whatever the thread count or grid size (DESIGN.md section 5).
//
// Philox is counter-based: the output for a (counter, key) pair is a pure
// function, so any thread can compute any element's numbers without a shared
// state to advance. The algorithm is Random123's philox4x32 with 10 rounds
// (Salmon et al., "Parallel Random Numbers: As Easy as 1, 2, 3", SC'11), and
// tests/framework/test_philox.cpp checks it against Random123's known answers.
//
// Stream layout. A random op on n elements, each taking k 32-bit draws, calls
// Generator::reserve(philox_counters_needed(n, k)) on the host when it is
// queued and gets {seed, offset}. Element i's j-th draw is stream position
// p = i*k + j, which is lane p%4 of Philox counter c = offset + p/4; the
// 128-bit counter is {low32(c), high32(c), 0, 0} and the key is
// {low32(seed), high32(seed)}. Because positions, not threads, pick the
// numbers, a driver may split the elements any way it likes.
//
// No std:: containers or exceptions here: this header must compile for the
// device under nvcc. Argument checks (p in [0, 1], low < high) belong to the
// ops that call these functions.
#pragma once

#include <math.h>
#include <stdint.h>

#include "kernels/macros.h"

namespace tiny::kernels {

/// Four 32-bit words: a Philox counter going in, four random words coming out.
struct PhiloxCounter {
  uint32_t x[4];
};

namespace philox_detail {

// Random123's constants: the multipliers were chosen for good avalanche
// (PHILOX_M4x32_0/1), the key schedule adds the golden ratio and sqrt(3)-1
// (PHILOX_W32_0/1) so each round sees a different key.
constexpr uint32_t kMul0 = 0xD2511F53u;
constexpr uint32_t kMul1 = 0xCD9E8D57u;
constexpr uint32_t kWeyl0 = 0x9E3779B9u;
constexpr uint32_t kWeyl1 = 0xBB67AE85u;

TINY_HOST_DEVICE TINY_FORCE_INLINE PhiloxCounter philox_round(PhiloxCounter c, uint32_t k0, uint32_t k1) {
  // 32x32->64 multiplies; on the GPU these become mul.lo/mul.hi pairs.
  const uint64_t p0 = static_cast<uint64_t>(kMul0) * c.x[0];
  const uint64_t p1 = static_cast<uint64_t>(kMul1) * c.x[2];
  const uint32_t hi0 = static_cast<uint32_t>(p0 >> 32);
  const uint32_t lo0 = static_cast<uint32_t>(p0);
  const uint32_t hi1 = static_cast<uint32_t>(p1 >> 32);
  const uint32_t lo1 = static_cast<uint32_t>(p1);
  PhiloxCounter out;
  out.x[0] = hi1 ^ c.x[1] ^ k0;
  out.x[1] = lo1;
  out.x[2] = hi0 ^ c.x[3] ^ k1;
  out.x[3] = lo0;
  return out;
}

// High 64 bits of a 64x64-bit product, from 32-bit pieces so that the host
// (any compiler, no __int128) and the device compute it the same way.
TINY_HOST_DEVICE TINY_FORCE_INLINE uint64_t mulhi64(uint64_t a, uint64_t b) {
  const uint64_t a_lo = a & 0xFFFFFFFFu, a_hi = a >> 32;
  const uint64_t b_lo = b & 0xFFFFFFFFu, b_hi = b >> 32;
  const uint64_t lo_lo = a_lo * b_lo;
  const uint64_t hi_lo = a_hi * b_lo;
  const uint64_t lo_hi = a_lo * b_hi;
  const uint64_t hi_hi = a_hi * b_hi;
  const uint64_t cross = (lo_lo >> 32) + (hi_lo & 0xFFFFFFFFu) + lo_hi;
  return hi_hi + (hi_lo >> 32) + (cross >> 32);
}

}  // namespace philox_detail

/// Random123's philox4x32 with 10 rounds: a pure function of counter and key.
TINY_HOST_DEVICE inline PhiloxCounter philox4x32_10(PhiloxCounter ctr, uint32_t key0, uint32_t key1) {
  // Round r uses key + r*Weyl; bumping after each round (not before the first)
  // is Random123's schedule, which the known-answer tests pin down.
  for (int r = 0; r < 10; ++r) {
    ctr = philox_detail::philox_round(ctr, key0, key1);
    key0 += philox_detail::kWeyl0;
    key1 += philox_detail::kWeyl1;
  }
  return ctr;
}

/// The four lanes of Philox counter `counter` under `seed`, for drivers that use a whole block at once.
TINY_HOST_DEVICE inline PhiloxCounter philox_block(uint64_t seed, uint64_t counter) {
  PhiloxCounter ctr;
  ctr.x[0] = static_cast<uint32_t>(counter);
  ctr.x[1] = static_cast<uint32_t>(counter >> 32);
  ctr.x[2] = 0;
  ctr.x[3] = 0;
  return philox4x32_10(ctr, static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32));
}

/// The 32-bit draw at stream `position` of a reservation starting at counter `offset`.
TINY_HOST_DEVICE inline uint32_t philox_draw(uint64_t seed, uint64_t offset, uint64_t position) {
  return philox_block(seed, offset + position / 4).x[position % 4];
}

/// Counters to reserve for n elements of `draws_per_element` draws each: ceil(n*k/4).
TINY_HOST_DEVICE constexpr uint64_t philox_counters_needed(uint64_t n, uint64_t draws_per_element) {
  // Written without "+ 3" so that a stream of nearly 2^64 draws does not wrap.
  return (n * draws_per_element) / 4 + ((n * draws_per_element) % 4 != 0 ? 1 : 0);
}

// Draws per element of each conversion below: ops pass these to
// philox_counters_needed, and element i's draws are positions i*k .. i*k+k-1,
// in the order of the conversion's arguments.

/// Draws per element of uniform_float.
constexpr uint64_t kDrawsUniformFloat = 1;
/// Draws per element of uniform_double (first draw = hi).
constexpr uint64_t kDrawsUniformDouble = 2;
/// Draws per element of normal_from_uniforms (first draw = a, the radius).
constexpr uint64_t kDrawsNormal = 2;
/// Draws per element of bernoulli.
constexpr uint64_t kDrawsBernoulli = 1;
/// Draws per element of randint_from (first draw = hi).
constexpr uint64_t kDrawsRandint = 2;

/// Uniform in [0, 1) with 24 random bits: every value is exact in float, and 1 is never returned.
TINY_HOST_DEVICE inline float uniform_float(uint32_t u) {
  // 24 bits, not 32: u * 2^-32 rounded to float would round values near 1 up
  // to exactly 1.0f.
  return static_cast<float>(u >> 8) * 0x1p-24f;
}

/// Uniform in [0, 1) with 53 random bits (the top 53 bits of hi:lo), exact in double.
TINY_HOST_DEVICE inline double uniform_double(uint32_t hi, uint32_t lo) {
  const uint64_t bits = (static_cast<uint64_t>(hi) << 21) | (lo >> 11);
  return static_cast<double>(bits) * 0x1p-53;
}

/// Standard normal by Box-Muller in double, from two draws; callers round to their dtype.
///
/// u1 = (a + 1) * 2^-32 lies in (0, 1], so log(u1) is finite and |z| <= sqrt(64 ln 2) ~ 6.66
/// (the tail beyond is ~3e-11 of the mass). Integer-to-double steps are exact everywhere;
/// log and cos come from each platform's libm, so CPU and emulator agree bit for bit while
/// CUDA's double log/cos (within 1-2 ulp) can differ in the last bit of the double before
/// rounding to float.
TINY_HOST_DEVICE inline double normal_from_uniforms(uint32_t a, uint32_t b) {
  const double u1 = (static_cast<double>(a) + 1.0) * 0x1p-32;
  const double u2 = static_cast<double>(b) * 0x1p-32;
  const double two_pi = 6.283185307179586476925286766559;
  const double r = sqrt(-2.0 * log(u1));
  return r * cos(two_pi * u2);
}

/// True with probability p (p in [0, 1]): the draw as u * 2^-32 compared with `<` against p.
///
/// All 32 bits are used and the comparison is exact in double, so p = 0 is never true, p = 1 is
/// always true, and every backend makes the same choice for the same draw.
TINY_HOST_DEVICE inline bool bernoulli(uint32_t u, double p) {
  return static_cast<double>(u) * 0x1p-32 < p;
}

/// Uniform integer in [low, high) from two draws, by Lemire's multiply-shift on hi:lo.
///
/// No rejection loop, so it is branch-free and the same on every backend; the bias is below
/// (high - low) / 2^64, far under anything a test can see. Requires low < high (checked by the
/// op); low == high returns low. Any range that fits int64 works, including ones wider than
/// INT64_MAX (the arithmetic is done in uint64).
TINY_HOST_DEVICE inline int64_t randint_from(uint32_t hi, uint32_t lo, int64_t low, int64_t high) {
  const uint64_t range = static_cast<uint64_t>(high) - static_cast<uint64_t>(low);
  const uint64_t x = (static_cast<uint64_t>(hi) << 32) | lo;
  const uint64_t pick = philox_detail::mulhi64(x, range);
  // Two's-complement wrap back to int64: the sum is in [low, high) by construction.
  return static_cast<int64_t>(static_cast<uint64_t>(low) + pick);
}

}  // namespace tiny::kernels
