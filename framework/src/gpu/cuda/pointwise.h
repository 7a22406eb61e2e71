// CUDA drivers for pointwise ops (host declarations; kernels in pointwise.cu).
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "kernels/offset_calculator.h"
#include "kernels/pointwise_ops.h"
#include "tiny/dtype.h"

namespace tiny::cuda_backend {

/// @brief out = op(in) for `numel` elements of `dtype` on the current device, queued on `stream`.
///
/// `calc` maps an element index to element offsets: operand 0 is `out`,
/// operand 1 is `in` (TensorIter's layout). Throws tiny::DtypeError when the op
/// is not defined for the dtype, tiny::Error when the launch fails.
void launch_unary(void* out, const void* in, Dtype dtype, kernels::UnaryKind kind, const kernels::OpParams& params,
                  const kernels::OffsetCalculator<2>& calc, int64_t numel, cudaStream_t stream);

/// @brief The same from a calculator with more operands (a TensorIter's `calc`): operands 0 and 1 are used.
template <int N>
void launch_unary(void* out, const void* in, Dtype dtype, kernels::UnaryKind kind, const kernels::OpParams& params,
                  const kernels::OffsetCalculator<N>& calc, int64_t numel, cudaStream_t stream) {
  static_assert(N > 2, "operand 0 is the output, operand 1 the input");
  kernels::OffsetCalculator<2> two;
  two.ndim = calc.ndim;
  for (int d = 0; d < calc.ndim; ++d) {
    two.sizes[d] = calc.sizes[d];
    two.strides[0][d] = calc.strides[0][d];
    two.strides[1][d] = calc.strides[1][d];
  }
  launch_unary(out, in, dtype, kind, params, two, numel, stream);
}

}  // namespace tiny::cuda_backend
