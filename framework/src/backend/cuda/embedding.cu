// CUDA embedding lookup (a row gather) and its backward (a row scatter-add).
//
// The backward keeps the CPU's order: one thread per column of grad_weight
// adds the rows of grad_out in the order of the indices, so no two threads
// add into the same element (no atomics) and the sums are bitwise those of
// the CPU (16-bit gradients are summed in a float buffer and rounded once, as
// there). The price is parallelism over columns only, enough for the
// embedding sizes of the lessons.
//
// An index outside [0, num_embeddings) is recorded in the device's error
// record (raised at the next synchronizing call, worded as the CPU's
// IndexError); its row is written as zeros (forward) or skipped (backward).
#include <type_traits>

#include "backend/cuda/common.cuh"
#include "backend/stubs/embedding.h"
#include "tiny/autograd.h"
#include "tiny/ops.h"

namespace tiny::cuda_backend {

namespace {

// out[i, c] = weight[indices[i], c], one thread per element of out [n, dim].
template <typename T>
__global__ void embedding_forward_impl(T* out, const T* weight, const int64_t* indices, int64_t n, int64_t dim,
                                       int64_t num, int64_t s0, int64_t s1, gpu::DeviceErrorTarget errors) {
  grid_stride_for(n * dim, [&](int64_t e) {
    const int64_t i = e / dim, c = e % dim;
    const int64_t index = indices[i];
    if (index < 0 || index >= num) {
      report_error(errors, gpu::DeviceErrorOp::Embedding, index, i, num, 0);
      out[e] = T(0.0f);
      return;
    }
    out[e] = weight[index * s0 + c * s1];
  });
}

// acc[indices[i], c] += grad_out[i, c] for i in order, one thread per column c.
template <typename T, typename acc_t>
__global__ void embedding_backward_impl(acc_t* acc, const T* grad_out, const int64_t* indices, int64_t n,
                                        int64_t dim, int64_t num, int64_t padding_idx,
                                        gpu::DeviceErrorTarget errors) {
  grid_stride_for(dim, [&](int64_t c) {
    for (int64_t i = 0; i < n; ++i) {
      const int64_t index = indices[i];
      if (index == padding_idx) continue;
      if (index < 0 || index >= num) {
        if (c == 0) report_error(errors, gpu::DeviceErrorOp::EmbeddingBackward, index, i, num, 0);
        continue;
      }
      acc[index * dim + c] += static_cast<acc_t>(grad_out[i * dim + c]);
    }
  });
}

}  // namespace

void embedding_kernel(const Tensor& out, const Tensor& weight, const Tensor& indices) {
  const int64_t n = indices.numel();
  const int64_t num = weight.size(0), dim = weight.size(1);
  if (n == 0 || dim == 0) return;
  TINY_DISPATCH_FLOATING(weight.dtype(), "embedding", [&] {
    const LaunchContext ctx(device_of(out));
    embedding_forward_impl<scalar_t><<<grid_size(n * dim), kBlockSize, 0, ctx.stream>>>(
        dev_ptr<scalar_t>(out), dev_ptr<const scalar_t>(weight), dev_ptr<const int64_t>(indices), n, dim, num,
        weight.stride(0), weight.stride(1), ctx.errors());
    ctx.launched("embedding");
  });
}

// grad_weight [num, dim] (contiguous, zero-filled by the caller) += grad_out [n, dim] (contiguous) by rows.
void embedding_backward_kernel(const Tensor& grad_weight, const Tensor& grad_out, const Tensor& indices,
                               int64_t padding_idx) {
  const int64_t n = indices.numel();
  const int64_t num = grad_weight.size(0), dim = grad_weight.size(1);
  if (n == 0 || dim == 0) return;
  TINY_DISPATCH_FLOATING(grad_weight.dtype(), "embedding_backward", [&] {
    // 16-bit gradients: summed in a zeroed float buffer on the same stream,
    // then rounded into grad_weight by the copy kernel.
    Tensor widened;
    if constexpr (!std::is_same_v<opmath_t, scalar_t>) {
      widened = zeros({num, dim}, TensorOptions(dtype_of<opmath_t>()).device(grad_weight.device()));
    }
    {
      const LaunchContext ctx(device_of(grad_weight));
      opmath_t* acc = widened.defined() ? dev_ptr<opmath_t>(widened) : dev_ptr<opmath_t>(grad_weight);
      embedding_backward_impl<scalar_t, opmath_t><<<grid_size(dim), kBlockSize, 0, ctx.stream>>>(
          acc, dev_ptr<const scalar_t>(grad_out), dev_ptr<const int64_t>(indices), n, dim, num, padding_idx,
          ctx.errors());
      ctx.launched("embedding_backward");
    }
    if (widened.defined()) {
      NoGradGuard no_grad;
      grad_weight.copy_(widened);
    }
  });
}

TINY_REGISTER_KERNEL(embedding_stub, CUDA, embedding_kernel);
TINY_REGISTER_KERNEL(embedding_backward_stub, CUDA, embedding_backward_kernel);

}  // namespace tiny::cuda_backend
