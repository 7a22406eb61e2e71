// Mixed precision's two kernels (see backend/dispatch.h): the arithmetic is in
// kernels/amp_ops.h; amp/amp_ops.cpp defines the stubs.
#pragma once

#include <cstdint>
#include <vector>

#include "backend/dispatch.h"
#include "tiny/tensor.h"

namespace tiny {

// PyTorch's _amp_foreach_non_finite_check_and_unscale_: every grad
// (contiguous, floating, on one device) *= inv_scale[0] in place, and
// found_inf[0] = 1 when any element was inf or NaN (never reset to 0). The
// scalars are float32 [1] tensors on the grads' device, read by the kernel.
using NonFiniteCheckAndUnscaleFn = void (*)(const std::vector<Tensor>& grads, const Tensor& found_inf,
                                            const Tensor& inv_scale);
// PyTorch's _amp_update_scale_ on scale (float32 [1]), growth_tracker (int64 [1]), found_inf (float32 [1]).
using UpdateScaleFn = void (*)(const Tensor& scale, const Tensor& growth_tracker, const Tensor& found_inf,
                               double growth_factor, double backoff_factor, int64_t growth_interval);

TINY_DECLARE_DISPATCH(NonFiniteCheckAndUnscaleFn, non_finite_check_and_unscale_stub);
TINY_DECLARE_DISPATCH(UpdateScaleFn, update_scale_stub);

}  // namespace tiny
