// CUDA negative log-likelihood: gather -log_probs[n, target[n]] and its
// scatter-shaped backward, one thread per sample. A target outside [0, C)
// that is not ignore_index is recorded in the device's error record (raised at
// the next synchronizing call, worded as the CPU's IndexError) and that
// sample is skipped instead of read or written out of bounds.
#include "backend/cuda/common.cuh"
#include "backend/stubs/loss.h"

namespace tiny::cuda_backend {

namespace {

__device__ __forceinline__ bool target_ok(int64_t t, int64_t i, int64_t classes, int64_t ignore_index,
                                          gpu::DeviceErrorTarget errors, gpu::DeviceErrorOp op) {
  if (t == ignore_index || (t >= 0 && t < classes)) return true;
  report_error(errors, op, t, i, classes, ignore_index);
  return false;
}

template <typename T, typename acc_t>
__global__ void nll_forward_impl(T* losses, const T* log_probs, const int64_t* target, int64_t n, int64_t classes,
                                 int64_t ignore_index, gpu::DeviceErrorTarget errors) {
  grid_stride_for(n, [&](int64_t i) {
    const int64_t t = target[i];
    if (!target_ok(t, i, classes, ignore_index, errors, gpu::DeviceErrorOp::NllLoss) || t == ignore_index) {
      losses[i] = static_cast<T>(acc_t(0));
      return;
    }
    losses[i] = static_cast<T>(-static_cast<acc_t>(log_probs[i * classes + t]));
  });
}

// grad_input (zero-filled by the caller) gets -grad_losses[i] at [i, target[i]].
template <typename T>
__global__ void nll_backward_impl(T* grad_input, const T* grad_losses, const int64_t* target, int64_t n,
                                  int64_t classes, int64_t ignore_index, gpu::DeviceErrorTarget errors) {
  grid_stride_for(n, [&](int64_t i) {
    const int64_t t = target[i];
    if (!target_ok(t, i, classes, ignore_index, errors, gpu::DeviceErrorOp::NllLossBackward) || t == ignore_index) {
      return;
    }
    grad_input[i * classes + t] = -grad_losses[i];
  });
}

}  // namespace

void nll_forward_kernel(const Tensor& losses, const Tensor& log_probs, const Tensor& target, int64_t ignore_index) {
  const int64_t n = log_probs.size(0), c = log_probs.size(1);
  if (n == 0) return;
  TINY_DISPATCH_FLOATING(log_probs.dtype(), "nll_loss", [&] {
    const LaunchContext ctx(device_of(losses));
    nll_forward_impl<scalar_t, opmath_t><<<grid_size(n), kBlockSize, 0, ctx.stream>>>(
        dev_ptr<scalar_t>(losses), dev_ptr<const scalar_t>(log_probs), dev_ptr<const int64_t>(target), n, c,
        ignore_index, ctx.errors());
    ctx.launched("nll_loss");
  });
}

void nll_backward_kernel(const Tensor& grad_input, const Tensor& grad_losses, const Tensor& target,
                         int64_t ignore_index) {
  const int64_t n = grad_input.size(0), c = grad_input.size(1);
  if (n == 0) return;
  TINY_DISPATCH_FLOATING(grad_input.dtype(), "nll_loss_backward", [&] {
    const LaunchContext ctx(device_of(grad_input));
    nll_backward_impl<scalar_t><<<grid_size(n), kBlockSize, 0, ctx.stream>>>(
        dev_ptr<scalar_t>(grad_input), dev_ptr<const scalar_t>(grad_losses), dev_ptr<const int64_t>(target), n, c,
        ignore_index, ctx.errors());
    ctx.launched("nll_loss_backward");
  });
}

TINY_REGISTER_KERNEL(nll_forward_stub, CUDA, nll_forward_kernel);
TINY_REGISTER_KERNEL(nll_backward_stub, CUDA, nll_backward_kernel);

}  // namespace tiny::cuda_backend
