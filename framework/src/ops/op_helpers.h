// Shared steps of the ops: dtype rules, output allocation, running a kernel.
#pragma once

#include <optional>
#include <vector>

#include "autograd/function.h"
#include "core/op_scope.h"
#include "core/tensor_impl.h"
#include "kernels/kind_names.h"
#include "tiny/ops.h"

namespace tiny {
// Writes `src` (broadcast, converted to dst's dtype, from any device) into
// `dst` and bumps dst's version; no checks, no autograd (copy_'s data path,
// ops/copy.cpp).
void copy_values(const Tensor& dst, const Tensor& src, bool non_blocking);
}  // namespace tiny

namespace tiny::ops {

using kernels::BinaryKind;
using kernels::kind_name;
using kernels::OpParams;
using kernels::UnaryKind;

// PyTorch's error when inputs live on different devices.
void check_same_device(const Tensor& a, const Tensor& b, const char* op);
// Result dtype of `tensor op scalar` (PyTorch: a scalar never widens a tensor within its category).
Dtype result_type(const Tensor& t, const Scalar& s);
// Runs a unary kernel into a new tensor of the input's dtype (no autograd).
Tensor unary_kernel(const Tensor& a, UnaryKind kind, const OpParams& params = {});
// Runs a binary kernel on inputs converted to `compute`, into a new tensor (no autograd).
Tensor binary_kernel(const Tensor& a, const Tensor& b, BinaryKind kind, Dtype compute, const OpParams& params = {});
// Same, with compute = promote_types(a, b).
Tensor binary_kernel(const Tensor& a, const Tensor& b, BinaryKind kind, const OpParams& params = {});
// Gradient for `input` from a gradient shaped like the broadcast result.
Tensor reduce_grad(const Tensor& grad, const Tensor& input);
// Kernel parameters from numbers, keeping integers exact.
OpParams scalar_params(const Scalar& a);
OpParams scalar_params(std::optional<Scalar> a, std::optional<Scalar> b);
// out (row-major [m, n] with row stride n: contiguous, or a block of rows of
// a contiguous matrix) = alpha * a @ b + beta * out, by the device's GEMM; a
// and b may be transposed views. No autograd: the building block of conv2d.
void gemm_into(const Tensor& out, const Tensor& a, const Tensor& b, double alpha, double beta);
// conv2d's im2col columns hold at most this many elements at a time (the
// batch is cut into chunks); tests lower it to exercise the chunked path.
int64_t& conv_column_budget();

}  // namespace tiny::ops
