// tiny::nn::utils::clip_grad_norm_ and clip_grad_value_, as torch/nn/utils/clip_grad.py (1.13).
#include "tiny/nn/utils.h"

#include <cmath>
#include <optional>

#include "tiny/autograd.h"
#include "tiny/ops.h"

namespace tiny::nn::utils {

namespace {

// torch.norm(x, p) of all elements, as a 0-d tensor of x's dtype on x's device.
Tensor vector_norm(const Tensor& x, double p) {
  if (std::isinf(p)) return p > 0 ? x.abs().max() : x.abs().min();
  if (p == 0.0) return (x != 0.0).sum().to(x.dtype());  // the number of non-zero elements
  if (p == 1.0) return x.abs().sum();
  if (p == 2.0) return x.mul(x).sum().sqrt();
  return x.abs().pow(p).sum().pow(1.0 / p);
}

}  // namespace

Tensor clip_grad_norm_(const std::vector<Tensor>& parameters, double max_norm, double norm_type) {
  TINY_CHECK(!std::isnan(norm_type) && norm_type >= 0.0, ValueError, "clip_grad_norm_: norm_type must be >= 0 or "
             "inf, got ", norm_type);
  NoGradGuard no_grad;
  std::vector<Tensor> grads;
  for (const Tensor& p : parameters) {
    if (p.defined() && p.grad().defined()) grads.push_back(p.grad());  // parameters without a gradient are skipped
  }
  if (grads.empty()) return scalar_tensor(0.0);  // torch.tensor(0.)
  const Device device = grads[0].device();
  Dtype dtype = grads[0].dtype();
  for (const Tensor& g : grads) {
    TINY_CHECK(g.is_floating_point(), DtypeError, "clip_grad_norm_: gradients must be floating point, got ",
               dtype_name(g.dtype()));
    dtype = promote_types(dtype, g.dtype());
  }

  // Each gradient's norm (on its own device), then the norm of those norms.
  std::vector<Tensor> norms;
  for (const Tensor& g : grads) norms.push_back(vector_norm(g.detach(), norm_type).to(device).to(dtype));
  Tensor total_norm;
  if (std::isinf(norm_type)) {
    total_norm = norms.size() == 1 ? norms[0] : stack(norms).max();
  } else {
    total_norm = vector_norm(stack(norms), norm_type);
  }

  // clip_coef = max_norm / (total_norm + 1e-6), clamped to at most 1. Like
  // PyTorch, multiply even when it is 1 (x * 1 == x exactly): deciding on the
  // host would need the norm's value there, a synchronisation on a GPU.
  const Tensor clip_coef = Scalar(max_norm) / (total_norm + 1e-6);
  const Tensor clip_coef_clamped = clip_coef.clamp(std::nullopt, Scalar(1.0));
  for (const Tensor& g : grads) g.mul_(clip_coef_clamped.to(g.device()));
  return total_norm;
}

void clip_grad_value_(const std::vector<Tensor>& parameters, double clip_value) {
  TINY_CHECK(clip_value >= 0.0, ValueError, "clip_grad_value_: clip_value must be >= 0, got ", clip_value,
             " (PyTorch would clamp with min=", -clip_value, " > max=", clip_value, " and set every gradient to ",
             clip_value, "); pass the magnitude, e.g. clip_grad_value_(params, ", std::abs(clip_value), ")");
  NoGradGuard no_grad;
  for (const Tensor& p : parameters) {
    if (!p.defined() || !p.grad().defined()) continue;  // as PyTorch: parameters without a gradient are skipped
    const Tensor g = p.grad();
    TINY_CHECK(g.is_floating_point(), DtypeError, "clip_grad_value_: gradients must be floating point, got ",
               dtype_name(g.dtype()));
    g.clamp_(Scalar(-clip_value), Scalar(clip_value));  // p.grad.data.clamp_(min=-clip_value, max=clip_value)
  }
}

}  // namespace tiny::nn::utils
