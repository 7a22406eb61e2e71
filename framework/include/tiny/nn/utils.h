/// @file nn/utils.h
/// @brief Gradient clipping by norm and by value (PyTorch's `torch.nn.utils`).
#pragma once

#include <vector>

#include "tiny/tensor.h"

namespace tiny::nn::utils {

/// @brief Scales all gradients so that their joint norm is at most `max_norm` (PyTorch's `torch.nn.utils.clip_grad_norm_`).
///
/// The norm is taken over all gradients together, as if concatenated into one
/// vector; `norm_type` may be any p >= 0 or infinity (`INFINITY`: the largest
/// |g|). Parameters without a gradient are skipped. Each gradient is multiplied
/// in place by min(1, max_norm / (total_norm + 1e-6)): with a coefficient >= 1
/// the factor is exactly 1 and the gradients keep their values. Returns the
/// total norm (before clipping) as a 0-d tensor on the first gradient's device,
/// or a float32 0 on the CPU when no parameter has a gradient.
Tensor clip_grad_norm_(const std::vector<Tensor>& parameters, double max_norm, double norm_type = 2.0);

/// @brief Clamps every gradient in place to [-clip_value, clip_value] (PyTorch's `torch.nn.utils.clip_grad_value_`).
///
/// Parameters without a gradient are skipped; each gradient is clamped on its
/// own device (one kernel each, no synchronisation). Unlike PyTorch, which
/// silently sets every gradient to `clip_value` when it is negative (its clamp
/// with min > max), a negative or NaN `clip_value` throws tiny::ValueError.
void clip_grad_value_(const std::vector<Tensor>& parameters, double clip_value);

}  // namespace tiny::nn::utils
