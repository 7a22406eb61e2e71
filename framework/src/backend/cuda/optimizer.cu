// CUDA fused optimizer updates: one pass over param, grad and state per step,
// one thread per element (grid-stride). The per-element arithmetic is
// kernels::SgdUpdate / kernels::AdamUpdate, shared with the CPU driver.
//
// The CPU driver compiles one loop per combination of options (apply<F>) so
// each vectorises; here the options stay compile-time inside the update
// (apply<F>) but one kernel per dtype picks F at run time with a branch that
// every thread takes the same way, which costs nothing on a GPU and keeps the
// number of kernels (and the build time) small.
//
// An operand that is not contiguous is first copied to a contiguous buffer,
// and a written one copied back after the update, as on the CPU.
#include "backend/cuda/common.cuh"
#include "backend/stubs/optimizer.h"
#include "backend/optimizer_operands.h"
#include "tiny/autograd.h"
#include "tiny/tensor.h"

namespace tiny::cuda_backend {

using kernels::AdamUpdate;
using kernels::RmspropUpdate;
using kernels::SgdUpdate;

namespace {

using backend::ContiguousOperand;

// u.apply<flags>(args...) for a run-time `flags` < 2^kBits.
template <int kBits, int F = 0, typename Update, typename... Args>
__device__ __forceinline__ void apply_flags(const Update& u, int flags, Args&&... args) {
  if constexpr (F < (1 << kBits)) {
    if (flags == F) {
      u.template apply<F>(args...);
    } else {
      apply_flags<kBits, F + 1>(u, flags, args...);
    }
  }
}

template <typename T, typename acc_t>
__global__ void sgd_kernel(T* param, const T* grad, T* buf, int64_t n, SgdUpdate<acc_t> update, int flags) {
  grid_stride_for(n, [&](int64_t i) {
    // 16-bit parameters: widened, updated in float, rounded once.
    acc_t p = param[i];
    acc_t b = buf != nullptr ? static_cast<acc_t>(buf[i]) : acc_t(0);  // without momentum: a scratch value
    apply_flags<SgdUpdate<acc_t>::kNumFlags>(update, flags, p, static_cast<acc_t>(grad[i]), b);
    param[i] = static_cast<T>(p);
    if (buf != nullptr) buf[i] = static_cast<T>(b);
  });
}

template <typename T, typename acc_t>
__global__ void adam_kernel(T* param, const T* grad, T* exp_avg, T* exp_avg_sq, T* max_sq, int64_t n,
                            AdamUpdate<acc_t> update, int flags) {
  grid_stride_for(n, [&](int64_t i) {
    acc_t p = param[i], m = exp_avg[i], v = exp_avg_sq[i];
    acc_t x = max_sq != nullptr ? static_cast<acc_t>(max_sq[i]) : acc_t(0);  // without amsgrad: a scratch value
    apply_flags<AdamUpdate<acc_t>::kNumFlags>(update, flags, p, static_cast<acc_t>(grad[i]), m, v, x);
    param[i] = static_cast<T>(p);
    exp_avg[i] = static_cast<T>(m);
    exp_avg_sq[i] = static_cast<T>(v);
    if (max_sq != nullptr) max_sq[i] = static_cast<T>(x);
  });
}

template <typename T, typename acc_t>
__global__ void rmsprop_kernel(T* param, const T* grad, T* square_avg, T* grad_avg, T* buf, int64_t n,
                               RmspropUpdate<acc_t> update, int flags) {
  grid_stride_for(n, [&](int64_t i) {
    acc_t p = param[i], s = square_avg[i];
    // Without centered / momentum: scratch values.
    acc_t a = grad_avg != nullptr ? static_cast<acc_t>(grad_avg[i]) : acc_t(0);
    acc_t b = buf != nullptr ? static_cast<acc_t>(buf[i]) : acc_t(0);
    apply_flags<RmspropUpdate<acc_t>::kNumFlags>(update, flags, p, static_cast<acc_t>(grad[i]), s, a, b);
    param[i] = static_cast<T>(p);
    square_avg[i] = static_cast<T>(s);
    if (grad_avg != nullptr) grad_avg[i] = static_cast<T>(a);
    if (buf != nullptr) buf[i] = static_cast<T>(b);
  });
}

}  // namespace

void sgd_step_kernel(const Tensor& param, const Tensor& grad, const Tensor& momentum_buffer,
                     const kernels::SgdParams& params) {
  const bool use_momentum = params.momentum != 0.0;
  backend::check_sgd_operands(param, grad, momentum_buffer, params);
  const int64_t n = param.numel();
  if (n == 0) return;
  NoGradGuard no_grad;
  ContiguousOperand p(param, /*written=*/true);
  ContiguousOperand g(grad, /*written=*/false);
  ContiguousOperand b(use_momentum ? momentum_buffer : grad, /*written=*/use_momentum);
  TINY_DISPATCH_FLOATING(param.dtype(), "sgd_step", [&] {
    const SgdUpdate<opmath_t> update(params);
    const LaunchContext ctx(device_of(param));
    sgd_kernel<scalar_t, opmath_t><<<grid_size(n), kBlockSize, 0, ctx.stream>>>(
        p.data<scalar_t>(), g.data<const scalar_t>(), use_momentum ? b.data<scalar_t>() : nullptr, n, update,
        update.flags());
    ctx.launched("sgd_step");
  });
  p.finish();
  if (use_momentum) b.finish();
}

void adam_step_kernel(const Tensor& param, const Tensor& grad, const Tensor& exp_avg, const Tensor& exp_avg_sq,
                      const Tensor& max_exp_avg_sq, const kernels::AdamParams& params) {
  backend::check_adam_operands(param, grad, exp_avg, exp_avg_sq, max_exp_avg_sq, params);
  const int64_t n = param.numel();
  if (n == 0) return;
  NoGradGuard no_grad;
  ContiguousOperand p(param, true);
  ContiguousOperand g(grad, false);
  ContiguousOperand m(exp_avg, true);
  ContiguousOperand v(exp_avg_sq, true);
  ContiguousOperand vmax(params.amsgrad ? max_exp_avg_sq : exp_avg_sq, params.amsgrad);
  TINY_DISPATCH_FLOATING(param.dtype(), "adam_step", [&] {
    const AdamUpdate<opmath_t> update(params);
    const LaunchContext ctx(device_of(param));
    adam_kernel<scalar_t, opmath_t><<<grid_size(n), kBlockSize, 0, ctx.stream>>>(
        p.data<scalar_t>(), g.data<const scalar_t>(), m.data<scalar_t>(), v.data<scalar_t>(),
        params.amsgrad ? vmax.data<scalar_t>() : nullptr, n, update, update.flags());
    ctx.launched("adam_step");
  });
  p.finish();
  m.finish();
  v.finish();
  if (params.amsgrad) vmax.finish();
}

void rmsprop_step_kernel(const Tensor& param, const Tensor& grad, const Tensor& square_avg, const Tensor& grad_avg,
                         const Tensor& momentum_buffer, const kernels::RmspropParams& params) {
  backend::check_rmsprop_operands(param, grad, square_avg, grad_avg, momentum_buffer, params);
  const int64_t n = param.numel();
  if (n == 0) return;
  const bool centered = params.centered, use_momentum = params.momentum > 0.0;
  NoGradGuard no_grad;
  ContiguousOperand p(param, true);
  ContiguousOperand g(grad, false);
  ContiguousOperand sq(square_avg, true);
  ContiguousOperand ga(centered ? grad_avg : square_avg, centered);
  ContiguousOperand b(use_momentum ? momentum_buffer : square_avg, use_momentum);
  TINY_DISPATCH_FLOATING(param.dtype(), "rmsprop_step", [&] {
    const RmspropUpdate<opmath_t> update(params);
    const LaunchContext ctx(device_of(param));
    rmsprop_kernel<scalar_t, opmath_t><<<grid_size(n), kBlockSize, 0, ctx.stream>>>(
        p.data<scalar_t>(), g.data<const scalar_t>(), sq.data<scalar_t>(), centered ? ga.data<scalar_t>() : nullptr,
        use_momentum ? b.data<scalar_t>() : nullptr, n, update, update.flags());
    ctx.launched("rmsprop_step");
  });
  p.finish();
  sq.finish();
  if (centered) ga.finish();
  if (use_momentum) b.finish();
}

TINY_REGISTER_KERNEL(sgd_step_stub, CUDA, sgd_step_kernel);
TINY_REGISTER_KERNEL(adam_step_stub, CUDA, adam_step_kernel);
TINY_REGISTER_KERNEL(rmsprop_step_stub, CUDA, rmsprop_step_kernel);

}  // namespace tiny::cuda_backend
