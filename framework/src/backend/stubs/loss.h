// The negative log-likelihood loss's rows (see backend/dispatch.h);
// ops/nn_functional.cpp defines the stubs.
#pragma once

#include <cstdint>

#include "backend/dispatch.h"
#include "tiny/tensor.h"

namespace tiny {

using NllForwardFn = void (*)(const Tensor& losses, const Tensor& log_probs, const Tensor& target,
                              int64_t ignore_index);
using NllBackwardFn = void (*)(const Tensor& grad_input, const Tensor& grad_losses, const Tensor& target,
                               int64_t ignore_index);

TINY_DECLARE_DISPATCH(NllForwardFn, nll_forward_stub);
TINY_DECLARE_DISPATCH(NllBackwardFn, nll_backward_stub);

}  // namespace tiny
