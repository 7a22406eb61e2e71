// Hyperparameters of the fused optimizer updates, shared by every backend's
// driver, and the per-element update structs (one read and one write of each
// state tensor per step, instead of a chain of pointwise ops).
//
// The arithmetic follows torch.optim 1.13's `_single_tensor_sgd` /
// `_single_tensor_adam` / `_single_tensor_adamw` /
// `_single_tensor_rmsprop` statement by statement, in the
// parameter's dtype (`scalar_t`), with the Python-side scalars (step_size,
// sqrt(bias_correction2), 1 - dampening, ...) computed in double on the host
// and rounded to the dtype once, as PyTorch's scalar arguments are.
#pragma once

#include <cmath>
#include <cstdint>
#include <type_traits>

#include "kernels/macros.h"
#include "kernels/math.h"

namespace tiny::kernels {

// torch.optim.SGD's update for one parameter tensor.
struct SgdParams {
  double lr = 0.0;
  double momentum = 0.0;
  double dampening = 0.0;
  double weight_decay = 0.0;
  bool nesterov = false;
  bool maximize = false;
  bool first_step = false;  // the momentum buffer is initialised from the gradient
};

// torch.optim.Adam / AdamW's update for one parameter tensor.
struct AdamParams {
  double lr = 0.0;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 0.0;
  bool decoupled_weight_decay = false;  // AdamW
  bool amsgrad = false;
  bool maximize = false;
  int64_t step = 1;  // after this update (bias corrections use it)
};

// torch.optim.RMSprop's update for one parameter tensor.
struct RmspropParams {
  double lr = 0.01;
  double alpha = 0.99;
  double eps = 1e-8;
  double weight_decay = 0.0;
  double momentum = 0.0;
  bool centered = false;
  bool maximize = false;
};

// One element of SGD. Built on the host from SgdParams; operator() runs on any
// backend. `buf` is ignored when momentum == 0.
template <typename T>
struct SgdUpdate {
  T neg_lr, momentum, one_minus_dampening, weight_decay;
  bool use_momentum, use_weight_decay, nesterov, maximize, first_step;

  explicit SgdUpdate(const SgdParams& p)
      : neg_lr(static_cast<T>(-p.lr)),
        momentum(static_cast<T>(p.momentum)),
        one_minus_dampening(static_cast<T>(1.0 - p.dampening)),
        weight_decay(static_cast<T>(p.weight_decay)),
        use_momentum(p.momentum != 0.0),
        use_weight_decay(p.weight_decay != 0.0),
        nesterov(p.nesterov),
        maximize(p.maximize),
        first_step(p.first_step) {}

  // The options as compile-time bits: drivers instantiate apply<flags()> so
  // the per-element loop has no branches and vectorises.
  enum Flag : int { kMaximize = 1, kWeightDecay = 2, kMomentum = 4, kFirstStep = 8, kNesterov = 16 };
  static constexpr int kNumFlags = 5;
  int flags() const {
    return (maximize ? kMaximize : 0) | (use_weight_decay ? kWeightDecay : 0) | (use_momentum ? kMomentum : 0) |
           (first_step ? kFirstStep : 0) | (nesterov ? kNesterov : 0);
  }

  template <int F>
  TINY_HOST_DEVICE TINY_FORCE_INLINE void apply(T& param, T grad, T& buf) const {
    T d_p = (F & kMaximize) ? -grad : grad;                   // d_p = -grad if maximize
    if constexpr ((F & kWeightDecay) != 0) d_p = d_p + weight_decay * param;  // d_p.add(param, alpha=weight_decay)
    if constexpr ((F & kMomentum) != 0) {
      T b;
      if constexpr ((F & kFirstStep) != 0) {
        b = d_p;                                              // buf = clone(d_p): no dampening
      } else {
        b = buf * momentum;                                   // buf.mul_(momentum)
        b = b + one_minus_dampening * d_p;                    //    .add_(d_p, alpha=1 - dampening)
      }
      buf = b;
      if constexpr ((F & kNesterov) != 0) {
        d_p = d_p + momentum * b;                             // d_p.add(buf, alpha=momentum)
      } else {
        d_p = b;
      }
    }
    param = param + neg_lr * d_p;                             // param.add_(d_p, alpha=-lr)
  }
};

// One element of Adam or AdamW. `max_sq` is ignored unless amsgrad.
template <typename T>
struct AdamUpdate {
  T beta1, one_minus_beta1, beta2, one_minus_beta2, eps, weight_decay, decay_factor, neg_step_size,
      bias_correction2_sqrt;
  bool coupled_weight_decay, decoupled_weight_decay, amsgrad, maximize;

  explicit AdamUpdate(const AdamParams& p)
      : beta1(static_cast<T>(p.beta1)),
        one_minus_beta1(static_cast<T>(1.0 - p.beta1)),
        beta2(static_cast<T>(p.beta2)),
        one_minus_beta2(static_cast<T>(1.0 - p.beta2)),
        eps(static_cast<T>(p.eps)),
        weight_decay(static_cast<T>(p.weight_decay)),
        decay_factor(static_cast<T>(1.0 - p.lr * p.weight_decay)),
        // bias_correction1 = 1 - beta1 ** step; step_size = lr / bias_correction1
        neg_step_size(static_cast<T>(-(p.lr / (1.0 - std::pow(p.beta1, static_cast<double>(p.step)))))),
        bias_correction2_sqrt(static_cast<T>(std::sqrt(1.0 - std::pow(p.beta2, static_cast<double>(p.step))))),
        coupled_weight_decay(!p.decoupled_weight_decay && p.weight_decay != 0.0),
        decoupled_weight_decay(p.decoupled_weight_decay),
        amsgrad(p.amsgrad),
        maximize(p.maximize) {}

  // The options as compile-time bits (see SgdUpdate::flags).
  enum Flag : int { kMaximize = 1, kCoupled = 2, kDecoupled = 4, kAmsgrad = 8 };
  static constexpr int kNumFlags = 4;
  int flags() const {
    return (maximize ? kMaximize : 0) | (coupled_weight_decay ? kCoupled : 0) |
           (decoupled_weight_decay ? kDecoupled : 0) | (amsgrad ? kAmsgrad : 0);
  }

  template <int F>
  TINY_HOST_DEVICE TINY_FORCE_INLINE void apply(T& param, T grad, T& exp_avg, T& exp_avg_sq, T& max_sq) const {
    T g = (F & kMaximize) ? -grad : grad;
    if constexpr ((F & kCoupled) != 0) g = g + weight_decay * param;    // Adam: grad.add(param, alpha=weight_decay)
    if constexpr ((F & kDecoupled) != 0) param = param * decay_factor;  // AdamW: param.mul_(1 - lr * weight_decay)
    T m = exp_avg * beta1;                                    // exp_avg.mul_(beta1)
    m = m + one_minus_beta1 * g;                              //        .add_(grad, alpha=1 - beta1)
    T v = exp_avg_sq * beta2;                                 // exp_avg_sq.mul_(beta2)
    v = v + one_minus_beta2 * g * g;                          //           .addcmul_(grad, grad, value=1 - beta2)
    exp_avg = m;
    exp_avg_sq = v;
    T second = v;
    if constexpr ((F & kAmsgrad) != 0) {
      // torch.maximum(max_exp_avg_sq, exp_avg_sq), which propagates a NaN from either side
      second = (t_isnan(max_sq) || max_sq > v) ? max_sq : v;
      if (t_isnan(v)) second = v;
      max_sq = second;
    }
    const T denom = t_sqrt(second) / bias_correction2_sqrt + eps;  // (sqrt(.) / sqrt(bc2)).add_(eps)
    param = param + neg_step_size * (m / denom);              // param.addcdiv_(exp_avg, denom, value=-step_size)
  }
};

// One element of RMSprop (torch.optim 1.13's `_single_tensor_rmsprop`).
// `buf` is ignored unless momentum > 0, `grad_avg` unless centered.
template <typename T>
struct RmspropUpdate {
  T alpha, one_minus_alpha, eps, weight_decay, momentum, neg_lr;
  bool use_weight_decay, centered, use_momentum, maximize;

  explicit RmspropUpdate(const RmspropParams& p)
      : alpha(static_cast<T>(p.alpha)),
        one_minus_alpha(static_cast<T>(1.0 - p.alpha)),
        eps(static_cast<T>(p.eps)),
        weight_decay(static_cast<T>(p.weight_decay)),
        momentum(static_cast<T>(p.momentum)),
        neg_lr(static_cast<T>(-p.lr)),
        use_weight_decay(p.weight_decay != 0.0),
        centered(p.centered),
        use_momentum(p.momentum > 0.0),
        maximize(p.maximize) {}

  // The options as compile-time bits (see SgdUpdate::flags).
  enum Flag : int { kMaximize = 1, kWeightDecay = 2, kCentered = 4, kMomentum = 8 };
  static constexpr int kNumFlags = 4;
  int flags() const {
    return (maximize ? kMaximize : 0) | (use_weight_decay ? kWeightDecay : 0) | (centered ? kCentered : 0) |
           (use_momentum ? kMomentum : 0);
  }

  template <int F>
  TINY_HOST_DEVICE TINY_FORCE_INLINE void apply(T& param, T grad, T& square_avg, T& grad_avg, T& buf) const {
    T g = (F & kMaximize) ? -grad : grad;                     // grad = -grad if maximize
    if constexpr ((F & kWeightDecay) != 0) g = g + weight_decay * param;  // grad.add(param, alpha=weight_decay)
    T sq = square_avg * alpha;                                // square_avg.mul_(alpha)
    sq = sq + one_minus_alpha * g * g;                        //           .addcmul_(grad, grad, value=1 - alpha)
    square_avg = sq;
    T avg;
    if constexpr ((F & kCentered) != 0) {
      T ga = grad_avg * alpha;                                // grad_avg.mul_(alpha)
      ga = ga + one_minus_alpha * g;                          //         .add_(grad, alpha=1 - alpha)
      grad_avg = ga;
      avg = t_sqrt(sq - ga * ga) + eps;                       // square_avg.addcmul(ga, ga, value=-1).sqrt_().add_(eps)
    } else {
      avg = t_sqrt(sq) + eps;                                 // square_avg.sqrt().add_(eps)
    }
    if constexpr ((F & kMomentum) != 0) {
      T b = buf * momentum;                                   // buf.mul_(momentum)
      b = b + g / avg;                                        //    .addcdiv_(grad, avg)
      buf = b;
      param = param + neg_lr * b;                             // param.add_(buf, alpha=-lr)
    } else {
      param = param + neg_lr * (g / avg);                     // param.addcdiv_(grad, avg, value=-lr)
    }
  }
};

// Calls fn(std::integral_constant<int, mask>) for a runtime mask of kBits
// bits, so a loop can be compiled once per combination of options.
template <int kBits, int kMask = 0, typename Fn>
void with_flags(int mask, Fn&& fn) {
  if constexpr (kMask < (1 << kBits)) {
    if (mask == kMask) {
      fn(std::integral_constant<int, kMask>{});
    } else {
      with_flags<kBits, kMask + 1>(mask, fn);
    }
  }
}

}  // namespace tiny::kernels
