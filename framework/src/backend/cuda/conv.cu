// CUDA drivers of im2col, col2im and 2-D pooling: one thread per output
// element running the index arithmetic of kernels/conv_ops.h (the convolution
// itself is cuBLAS's GEMM on the columns; no cuDNN). Every backward is a
// gather in the CPU's order, so no atomics and the same sums as the CPU.
#include "backend/cuda/common.cuh"
#include "backend/stubs/conv.h"
#include "kernels/conv_ops.h"

namespace tiny::cuda_backend {

namespace {

using kernels::Conv2dGeometry;
using kernels::Pool2dGeometry;

template <typename T>
__global__ void im2col_impl(T* cols, const T* input, Conv2dGeometry g, int64_t n) {
  grid_stride_for(n, [&](int64_t e) { cols[e] = kernels::im2col_element(g, input, e); });
}

template <typename T, typename acc_t>
__global__ void col2im_impl(T* grad_input, const T* cols, Conv2dGeometry g, int64_t n) {
  grid_stride_for(n, [&](int64_t e) { grad_input[e] = T(kernels::col2im_element<T, acc_t>(g, cols, e)); });
}

template <typename T, typename acc_t>
__global__ void pool2d_impl(T* out, int64_t* indices, const T* input, Pool2dGeometry g, int64_t n) {
  grid_stride_for(n, [&](int64_t e) {
    int64_t index = 0;
    out[e] = T(kernels::pool2d_element<T, acc_t>(g, input, e, &index));
    if (indices != nullptr) indices[e] = index;
  });
}

template <typename T, typename acc_t>
__global__ void pool2d_backward_impl(T* grad_input, const T* grad_out, const int64_t* indices, Pool2dGeometry g,
                                     int64_t n) {
  grid_stride_for(n, [&](int64_t e) {
    grad_input[e] = T(kernels::pool2d_backward_element<T, acc_t>(g, grad_out, indices, e));
  });
}

}  // namespace

void im2col_kernel(const Tensor& cols, const Tensor& input, const Conv2dGeometry& g) {
  const int64_t n = g.col_rows() * g.col_cols();
  if (n == 0) return;
  TINY_DISPATCH_FLOATING(input.dtype(), "im2col", [&] {
    const LaunchContext ctx(device_of(cols));
    im2col_impl<scalar_t><<<grid_size(n), kBlockSize, 0, ctx.stream>>>(dev_ptr<scalar_t>(cols),
                                                                        dev_ptr<const scalar_t>(input), g, n);
    ctx.launched("im2col");
  });
}

void col2im_kernel(const Tensor& grad_input, const Tensor& cols, const Conv2dGeometry& g) {
  const int64_t n = grad_input.numel();
  if (n == 0) return;
  TINY_DISPATCH_FLOATING(grad_input.dtype(), "col2im", [&] {
    const LaunchContext ctx(device_of(grad_input));
    col2im_impl<scalar_t, opmath_t><<<grid_size(n), kBlockSize, 0, ctx.stream>>>(
        dev_ptr<scalar_t>(grad_input), dev_ptr<const scalar_t>(cols), g, n);
    ctx.launched("col2im");
  });
}

void pool2d_kernel(const Tensor& out, const Tensor& indices, const Tensor& input, const Pool2dGeometry& g) {
  const int64_t n = out.numel();
  if (n == 0) return;
  TINY_DISPATCH_FLOATING(input.dtype(), "pool2d", [&] {
    const LaunchContext ctx(device_of(out));
    pool2d_impl<scalar_t, opmath_t><<<grid_size(n), kBlockSize, 0, ctx.stream>>>(
        dev_ptr<scalar_t>(out), indices.defined() ? dev_ptr<int64_t>(indices) : nullptr,
        dev_ptr<const scalar_t>(input), g, n);
    ctx.launched("pool2d");
  });
}

void pool2d_backward_kernel(const Tensor& grad_input, const Tensor& grad_out, const Tensor& indices,
                            const Pool2dGeometry& g) {
  const int64_t n = grad_input.numel();
  if (n == 0) return;
  TINY_DISPATCH_FLOATING(grad_input.dtype(), "pool2d_backward", [&] {
    const LaunchContext ctx(device_of(grad_input));
    pool2d_backward_impl<scalar_t, opmath_t><<<grid_size(n), kBlockSize, 0, ctx.stream>>>(
        dev_ptr<scalar_t>(grad_input), dev_ptr<const scalar_t>(grad_out),
        indices.defined() ? dev_ptr<const int64_t>(indices) : nullptr, g, n);
    ctx.launched("pool2d_backward");
  });
}

TINY_REGISTER_KERNEL(im2col_stub, CUDA, im2col_kernel);
TINY_REGISTER_KERNEL(col2im_stub, CUDA, col2im_kernel);
TINY_REGISTER_KERNEL(pool2d_stub, CUDA, pool2d_kernel);
TINY_REGISTER_KERNEL(pool2d_backward_stub, CUDA, pool2d_backward_kernel);

}  // namespace tiny::cuda_backend
