/// @file nn/utils.h
/// @brief Gradient clipping (PyTorch's `torch.nn.utils`).
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

}  // namespace tiny::nn::utils
