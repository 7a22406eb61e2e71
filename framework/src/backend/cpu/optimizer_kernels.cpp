// CPU fused optimizer updates: one pass over param, grad and state per step.
//
// The per-element arithmetic is kernels::SgdUpdate / kernels::AdamUpdate
// (kernels/optimizer_ops.h), shared with the GPU drivers. Here we only loop:
// flat over contiguous memory, in chunks of a fixed size on tiny's thread pool
// (elements are independent, so the result never depends on the thread count).
// An operand that is not contiguous (a parameter that is a strided view, a
// transposed gradient) is first copied to a contiguous buffer, and a written
// one is copied back after the update.
//
// The element loops are compiled twice: for baseline x86-64, which tiny
// targets (SSE2: 4 floats per instruction), and for AVX2 (8), one chosen once
// at run time from the CPU, as PyTorch's CPU_CAPABILITY dispatch does. The
// AVX2 copy has no FMA, so it performs the same IEEE operations in the same
// order: every result is bitwise the baseline's.
#include <vector>

#include "backend/stubs/optimizer.h"
#include "backend/cpu/loops.h"
#include "backend/dtype_dispatch.h"
#include "backend/optimizer_operands.h"
#include "core/tensor_impl.h"
#include "runtime/thread_pool.h"

namespace tiny::cpu {
namespace {

using backend::ContiguousOperand;

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
// flatten: the loop's body is inlined here and vectorised for AVX2.
template <typename Loop>
__attribute__((target("avx2"), flatten)) void run_avx2(const Loop& loop, int64_t begin, int64_t end) {
  loop(begin, end);
}
#endif

// loop(begin, end), in the widest of the two copies this CPU runs.
template <typename Loop>
void run_widest(const Loop& loop, int64_t begin, int64_t end) {
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
  static const bool avx2 = __builtin_cpu_supports("avx2");
  if (avx2) {
    run_avx2(loop, begin, end);
    return;
  }
#endif
  loop(begin, end);
}

void sgd_step_kernel(const Tensor& param, const Tensor& grad, const Tensor& momentum_buffer,
                     const kernels::SgdParams& params) {
  const bool use_momentum = params.momentum != 0.0;
  backend::check_sgd_operands(param, grad, momentum_buffer, params);
  const int64_t n = param.numel();
  ContiguousOperand p(param, /*written=*/true);
  ContiguousOperand g(grad, /*written=*/false);
  // Without momentum the buffer operand is the gradient (read only, never written).
  ContiguousOperand b(use_momentum ? momentum_buffer : grad, /*written=*/use_momentum);
  TINY_DISPATCH_FLOATING(param.dtype(), "sgd_step", [&] {
    // 16-bit parameters: each element is widened, updated in float, rounded once.
    using Update = kernels::SgdUpdate<opmath_t>;
    const Update update(params);
    scalar_t* pp = p.data<scalar_t>();
    const scalar_t* gp = g.data<scalar_t>();
    scalar_t* bp = use_momentum ? b.data<scalar_t>() : nullptr;
    kernels::with_flags<Update::kNumFlags>(update.flags(), [&](auto flags) {
      constexpr int F = decltype(flags)::value;
      const auto loop = [&](int64_t begin, int64_t end) {
        scalar_t* __restrict__ param_ = pp;
        const scalar_t* __restrict__ grad_ = gp;
        if constexpr ((F & Update::kMomentum) != 0) {
          scalar_t* __restrict__ buf_ = bp;
          for (int64_t i = begin; i < end; ++i) {
            opmath_t pv = param_[i], bv = buf_[i];
            update.template apply<F>(pv, grad_[i], bv);
            param_[i] = pv;
            buf_[i] = bv;
          }
        } else {
          // Without momentum the buffer is never touched: a scratch value.
          opmath_t scratch = 0;
          for (int64_t i = begin; i < end; ++i) {
            opmath_t pv = param_[i];
            update.template apply<F>(pv, grad_[i], scratch);
            param_[i] = pv;
          }
        }
      };
      runtime::parallel_for(0, n, kPointwiseGrain, [&](int64_t begin, int64_t end) { run_widest(loop, begin, end); });
    });
  });
  p.finish();
  if (use_momentum) b.finish();
}

void adam_step_kernel(const Tensor& param, const Tensor& grad, const Tensor& exp_avg, const Tensor& exp_avg_sq,
                      const Tensor& max_exp_avg_sq, const kernels::AdamParams& params) {
  backend::check_adam_operands(param, grad, exp_avg, exp_avg_sq, max_exp_avg_sq, params);
  const int64_t n = param.numel();
  ContiguousOperand p(param, true);
  ContiguousOperand g(grad, false);
  ContiguousOperand m(exp_avg, true);
  ContiguousOperand v(exp_avg_sq, true);
  ContiguousOperand vmax(params.amsgrad ? max_exp_avg_sq : exp_avg_sq, params.amsgrad);
  TINY_DISPATCH_FLOATING(param.dtype(), "adam_step", [&] {
    // 16-bit parameters and states: widened, updated in float, rounded once.
    using Update = kernels::AdamUpdate<opmath_t>;
    const Update update(params);
    scalar_t* pp = p.data<scalar_t>();
    const scalar_t* gp = g.data<scalar_t>();
    scalar_t* mp = m.data<scalar_t>();
    scalar_t* vp = v.data<scalar_t>();
    scalar_t* xp = params.amsgrad ? vmax.data<scalar_t>() : nullptr;
    kernels::with_flags<Update::kNumFlags>(update.flags(), [&](auto flags) {
      constexpr int F = decltype(flags)::value;
      const auto loop = [&](int64_t begin, int64_t end) {
        scalar_t* __restrict__ param_ = pp;
        const scalar_t* __restrict__ grad_ = gp;
        scalar_t* __restrict__ m_ = mp;
        scalar_t* __restrict__ v_ = vp;
        if constexpr ((F & Update::kAmsgrad) != 0) {
          scalar_t* __restrict__ max_ = xp;
          for (int64_t i = begin; i < end; ++i) {
            opmath_t pv = param_[i], mv = m_[i], vv = v_[i], xv = max_[i];
            update.template apply<F>(pv, grad_[i], mv, vv, xv);
            param_[i] = pv;
            m_[i] = mv;
            v_[i] = vv;
            max_[i] = xv;
          }
        } else {
          opmath_t scratch = 0;
          for (int64_t i = begin; i < end; ++i) {
            opmath_t pv = param_[i], mv = m_[i], vv = v_[i];
            update.template apply<F>(pv, grad_[i], mv, vv, scratch);
            param_[i] = pv;
            m_[i] = mv;
            v_[i] = vv;
          }
        }
      };
      runtime::parallel_for(0, n, kPointwiseGrain, [&](int64_t begin, int64_t end) { run_widest(loop, begin, end); });
    });
  });
  p.finish();
  m.finish();
  v.finish();
  if (params.amsgrad) vmax.finish();
}

void rmsprop_step_kernel(const Tensor& param, const Tensor& grad, const Tensor& square_avg, const Tensor& grad_avg,
                         const Tensor& momentum_buffer, const kernels::RmspropParams& params) {
  backend::check_rmsprop_operands(param, grad, square_avg, grad_avg, momentum_buffer, params);
  const bool centered = params.centered, use_momentum = params.momentum > 0.0;
  const int64_t n = param.numel();
  ContiguousOperand p(param, true);
  ContiguousOperand g(grad, false);
  ContiguousOperand sq(square_avg, true);
  // Operands an option leaves out stand in as read-only aliases, never touched.
  ContiguousOperand ga(centered ? grad_avg : square_avg, centered);
  ContiguousOperand b(use_momentum ? momentum_buffer : square_avg, use_momentum);
  TINY_DISPATCH_FLOATING(param.dtype(), "rmsprop_step", [&] {
    using Update = kernels::RmspropUpdate<opmath_t>;
    const Update update(params);
    scalar_t* pp = p.data<scalar_t>();
    const scalar_t* gp = g.data<scalar_t>();
    scalar_t* sp = sq.data<scalar_t>();
    scalar_t* gap = centered ? ga.data<scalar_t>() : nullptr;
    scalar_t* bp = use_momentum ? b.data<scalar_t>() : nullptr;
    kernels::with_flags<Update::kNumFlags>(update.flags(), [&](auto flags) {
      constexpr int F = decltype(flags)::value;
      runtime::parallel_for(0, n, kPointwiseGrain, [&](int64_t begin, int64_t end) {
        for (int64_t i = begin; i < end; ++i) {
          opmath_t pv = pp[i], sv = sp[i];
          opmath_t av = 0, bv = 0;  // scratch unless the option is on
          if constexpr ((F & Update::kCentered) != 0) av = gap[i];
          if constexpr ((F & Update::kMomentum) != 0) bv = bp[i];
          update.template apply<F>(pv, gp[i], sv, av, bv);
          pp[i] = pv;
          sp[i] = sv;
          if constexpr ((F & Update::kCentered) != 0) gap[i] = av;
          if constexpr ((F & Update::kMomentum) != 0) bp[i] = bv;
        }
      });
    });
  });
  p.finish();
  sq.finish();
  if (centered) ga.finish();
  if (use_momentum) b.finish();
}

}  // namespace

TINY_REGISTER_KERNEL(sgd_step_stub, CPU, sgd_step_kernel);
TINY_REGISTER_KERNEL(adam_step_stub, CPU, adam_step_kernel);
TINY_REGISTER_KERNEL(rmsprop_step_stub, CPU, rmsprop_step_kernel);

}  // namespace tiny::cpu
