// The order of torch.sort, written once for every backend's sort kernel:
// NaN sorts as the largest value (first when descending), and elements that
// compare equal keep their positions (a stable sort; the kernels break ties
// by index).
#pragma once

#include "kernels/macros.h"

namespace tiny::kernels {

// True when `a` goes before `b` (values in the kernel's compute type: float for 16-bit floats).
template <typename T>
TINY_HOST_DEVICE TINY_FORCE_INLINE bool sorts_before(T a, T b, bool descending) {
  const bool a_nan = a != a, b_nan = b != b;  // NOLINT: NaN is the value unequal to itself
  if (descending) return a_nan ? !b_nan : (!b_nan && a > b);
  return b_nan ? !a_nan : (!a_nan && a < b);
}

}  // namespace tiny::kernels
