// Softmax and log-softmax along one dim (see backend/dispatch.h): the online
// statistics are kernels::OnlineSoftmaxOp (kernels/reduce_ops.h), the rows
// kernels::RowShape (kernels/row_shape.h); ops/nn_functional.cpp defines the stubs.
#pragma once

#include <cstdint>

#include "backend/dispatch.h"
#include "tiny/tensor.h"

namespace tiny {

using SoftmaxFn = void (*)(const Tensor& out, const Tensor& in, int64_t dim, bool log);
using SoftmaxBackwardFn = void (*)(const Tensor& grad_in, const Tensor& grad_out, const Tensor& out, int64_t dim,
                                   bool log);

TINY_DECLARE_DISPATCH(SoftmaxFn, softmax_stub);
TINY_DECLARE_DISPATCH(SoftmaxBackwardFn, softmax_backward_stub);

}  // namespace tiny
