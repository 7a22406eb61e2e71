// The arithmetic of mixed-precision training, shared by every backend's driver:
// PyTorch's _amp_foreach_non_finite_check_and_unscale_ (per element: flag a
// non-finite value, multiply by 1/scale) and _amp_update_scale_ (the
// GradScaler's growth/backoff rule on the device).
#pragma once

#include <cmath>
#include <cstdint>

#include "kernels/macros.h"
#include "kernels/math.h"

namespace tiny::kernels {

// One gradient element: returns 1 when it is inf or NaN, 0 otherwise, and
// multiplies it by inv_scale (also when it is not finite, as PyTorch does:
// the step is skipped anyway). Computed in opmath_t (float for 16-bit grads).
template <typename opmath_t>
struct UnscaleOp {
  opmath_t inv_scale;
  TINY_HOST_DEVICE TINY_FORCE_INLINE float operator()(opmath_t& value) const {
    // x - x is NaN exactly when x is inf or NaN: one branch-free test that vectorises.
    const float flag = t_isnan(value - value) ? 1.0f : 0.0f;
    value = inv_scale == opmath_t(1) ? value : value * inv_scale;
    return flag;
  }
};

// found_inf is a max-reduction of the per-element flags: a driver folds its
// elements' flags with combine() and merges partial results the same way.
struct FoundInfOp {
  TINY_HOST_DEVICE TINY_FORCE_INLINE float identity() const { return 0.0f; }
  TINY_HOST_DEVICE TINY_FORCE_INLINE float combine(float a, float b) const { return a > b ? a : b; }
};

// _amp_update_scale_ for one scale: the products are taken in double and
// rounded to float once, as PyTorch's kernel multiplies a float by a double.
TINY_HOST_DEVICE inline void update_scale(float& scale, int64_t& growth_tracker, float found_inf,
                                          double growth_factor, double backoff_factor, int64_t growth_interval) {
  if (found_inf > 0.0f) {
    scale = static_cast<float>(static_cast<double>(scale) * backoff_factor);
    growth_tracker = 0;
    return;
  }
  const int64_t successful = growth_tracker + 1;
  if (successful == growth_interval) {
    const float grown = static_cast<float>(static_cast<double>(scale) * growth_factor);
    if (!t_isnan(grown - grown)) scale = grown;  // a scale that would overflow to inf stays
    growth_tracker = 0;
  } else {
    growth_tracker = successful;
  }
}

}  // namespace tiny::kernels
