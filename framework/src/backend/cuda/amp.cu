// CUDA drivers of the mixed-precision kernels (kernels/amp_ops.h; the CPU
// drivers are backend/cpu/amp_kernels.cpp): GradScaler's fused unscale +
// inf/NaN check, one launch per gradient, and the scale update, one thread.
// The scalars (inv_scale, found_inf, scale, growth_tracker) are read and
// written by the kernels on the device: the host never waits here.
#include "backend/cuda/common.cuh"
#include "backend/stubs/amp.h"
#include "kernels/amp_ops.h"
#include "tiny/tensor.h"

namespace tiny::cuda_backend {
namespace {

// Each thread folds its elements' flags with FoundInfOp and writes found_inf
// only when it found one (every writer writes 1.0: no race on the value).
template <typename T, typename opmath_t>
__global__ void non_finite_check_and_unscale(T* grad, int64_t n, float* found_inf, const float* inv_scale) {
  const kernels::UnscaleOp<opmath_t> op{static_cast<opmath_t>(*inv_scale)};
  const kernels::FoundInfOp reduce;
  float flag = reduce.identity();
  grid_stride_for(n, [&](int64_t i) {
    opmath_t v = static_cast<opmath_t>(grad[i]);
    flag = reduce.combine(flag, op(v));
    grad[i] = static_cast<T>(v);
  });
  if (flag > 0.0f) *found_inf = 1.0f;
}

__global__ void update_scale(float* scale, int64_t* growth_tracker, const float* found_inf, double growth_factor,
                             double backoff_factor, int64_t growth_interval) {
  kernels::update_scale(*scale, *growth_tracker, *found_inf, growth_factor, backoff_factor, growth_interval);
}

}  // namespace

void non_finite_check_and_unscale_kernel(const std::vector<Tensor>& grads, const Tensor& found_inf,
                                         const Tensor& inv_scale) {
  const LaunchContext ctx(device_of(found_inf));
  for (const Tensor& grad : grads) {
    const int64_t n = grad.numel();
    if (n == 0) continue;
    TINY_DISPATCH_FLOATING(grad.dtype(), "_amp_foreach_non_finite_check_and_unscale_", [&] {
      non_finite_check_and_unscale<scalar_t, opmath_t><<<grid_size(n), kBlockSize, 0, ctx.stream>>>(
          dev_ptr<scalar_t>(grad), n, dev_ptr<float>(found_inf), dev_ptr<const float>(inv_scale));
      ctx.launched("_amp_foreach_non_finite_check_and_unscale_");
    });
  }
}

void update_scale_kernel(const Tensor& scale, const Tensor& growth_tracker, const Tensor& found_inf,
                         double growth_factor, double backoff_factor, int64_t growth_interval) {
  const LaunchContext ctx(device_of(scale));
  update_scale<<<1, 1, 0, ctx.stream>>>(dev_ptr<float>(scale), dev_ptr<int64_t>(growth_tracker),
                                        dev_ptr<const float>(found_inf), growth_factor, backoff_factor,
                                        growth_interval);
  ctx.launched("_amp_update_scale_");
}

TINY_REGISTER_KERNEL(non_finite_check_and_unscale_stub, CUDA, non_finite_check_and_unscale_kernel);
TINY_REGISTER_KERNEL(update_scale_stub, CUDA, update_scale_kernel);

}  // namespace tiny::cuda_backend
