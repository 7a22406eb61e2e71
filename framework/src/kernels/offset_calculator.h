// Maps a linear element index to the memory offset of each operand of a
// pointwise or reduction kernel, for any broadcasting and any strides. Plain
// arrays only, so the same struct is passed by value to a CUDA kernel.
#pragma once

#include <cstdint>

#include "kernels/macros.h"

namespace tiny::kernels {

// Dimensions left after coalescing; enough for any lesson tensor (PyTorch allows 25).
constexpr int kMaxDims = 12;

template <int NARGS>
struct OffsetCalculator {
  int ndim = 0;
  int64_t sizes[kMaxDims] = {};              // dim 0 is the fastest-moving one
  int64_t strides[NARGS][kMaxDims] = {};     // in elements, per operand

  // offsets[k] = element offset of operand k for linear index `linear`.
  TINY_HOST_DEVICE TINY_FORCE_INLINE void get(int64_t linear, int64_t (&offsets)[NARGS]) const {
    for (int k = 0; k < NARGS; ++k) offsets[k] = 0;
    for (int d = 0; d < ndim; ++d) {
      const int64_t size = sizes[d];
      const int64_t idx = linear % size;
      linear /= size;
      for (int k = 0; k < NARGS; ++k) offsets[k] += idx * strides[k][d];
    }
  }
};

}  // namespace tiny::kernels
