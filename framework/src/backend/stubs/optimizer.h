// The fused optimizer updates (see backend/dispatch.h): the arithmetic is in
// kernels/optimizer_ops.h; optim/sgd.cpp, optim/adam.cpp and optim/rmsprop.cpp
// define the stubs.
#pragma once

#include "backend/dispatch.h"
#include "kernels/optimizer_ops.h"
#include "tiny/tensor.h"

namespace tiny {

// One fused SGD update of `param` in place (momentum_buffer undefined when momentum == 0).
using SgdStepFn = void (*)(const Tensor& param, const Tensor& grad, const Tensor& momentum_buffer,
                           const kernels::SgdParams& params);
// One fused Adam/AdamW update of `param` in place (max_exp_avg_sq undefined unless amsgrad).
using AdamStepFn = void (*)(const Tensor& param, const Tensor& grad, const Tensor& exp_avg, const Tensor& exp_avg_sq,
                            const Tensor& max_exp_avg_sq, const kernels::AdamParams& params);
// One fused RMSprop update of `param` in place (grad_avg undefined unless centered,
// momentum_buffer undefined unless momentum > 0).
using RmspropStepFn = void (*)(const Tensor& param, const Tensor& grad, const Tensor& square_avg,
                               const Tensor& grad_avg, const Tensor& momentum_buffer,
                               const kernels::RmspropParams& params);

TINY_DECLARE_DISPATCH(SgdStepFn, sgd_step_stub);
TINY_DECLARE_DISPATCH(AdamStepFn, adam_step_stub);
TINY_DECLARE_DISPATCH(RmspropStepFn, rmsprop_step_stub);

}  // namespace tiny
