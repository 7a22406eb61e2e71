// Convolution as im2col + GEMM, and pooling (see backend/dispatch.h); the
// geometry is in kernels/conv_ops.h; ops/conv.cpp and ops/pooling.cpp define
// the stubs.
#pragma once

#include "backend/dispatch.h"
#include "kernels/conv_ops.h"
#include "tiny/tensor.h"

namespace tiny {

// cols [C*KH*KW, B*OH*OW] from a contiguous input [B, C, H, W], and back
// (col2im overwrites grad_input).
using Im2colFn = void (*)(const Tensor& cols, const Tensor& input, const kernels::Conv2dGeometry& geometry);
using Col2imFn = void (*)(const Tensor& grad_input, const Tensor& cols, const kernels::Conv2dGeometry& geometry);
// 2-D max/average/adaptive-average pooling of contiguous [N*C, H, W] planes;
// `indices` (int64, like `out`) is written by max pooling only (undefined otherwise).
using Pool2dFn = void (*)(const Tensor& out, const Tensor& indices, const Tensor& input,
                          const kernels::Pool2dGeometry& geometry);
// grad_input (overwritten) from grad_out, and max pooling's indices.
using Pool2dBackwardFn = void (*)(const Tensor& grad_input, const Tensor& grad_out, const Tensor& indices,
                                  const kernels::Pool2dGeometry& geometry);

TINY_DECLARE_DISPATCH(Im2colFn, im2col_stub);
TINY_DECLARE_DISPATCH(Col2imFn, col2im_stub);
TINY_DECLARE_DISPATCH(Pool2dFn, pool2d_stub);
TINY_DECLARE_DISPATCH(Pool2dBackwardFn, pool2d_backward_stub);

}  // namespace tiny
