// CUDA softmax/log_softmax and their backward on a contiguous tensor viewed
// as [outer, size, inner]: one block per row (grid-stride over rows), the
// row's online max/sum statistics (kernels::OnlineSoftmaxOp) merged with
// block_reduce, then one pass to write. The formulas are the CPU driver's.
#include "backend/cuda/common.cuh"
#include "backend/stubs/softmax.h"
#include "kernels/row_shape.h"
#include "kernels/reduce_ops.h"

namespace tiny::cuda_backend {

using namespace kernels;

namespace {

template <typename T, typename acc_t>
__global__ void softmax_forward(T* y, const T* x, RowShape s, bool is_log) {
  __shared__ SoftmaxStats<acc_t> shared[kReduceThreads];
  const OnlineSoftmaxOp<acc_t> op;
  const int64_t rows = s.outer * s.inner;
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const int64_t base = (r / s.inner) * s.size * s.inner + r % s.inner;
    SoftmaxStats<acc_t> stats = op.identity();
    for (int64_t i = threadIdx.x; i < s.size; i += blockDim.x) {
      stats = op.reduce(stats, static_cast<acc_t>(x[base + i * s.inner]), i);
    }
    stats = block_reduce(stats, shared,
                         [&](const SoftmaxStats<acc_t>& a, const SoftmaxStats<acc_t>& b) { return op.combine(a, b); });
    if (is_log) {
      // (x - max) - log(sum), in that order, as the CPU driver (PyTorch issue 11752).
      const acc_t log_sum = t_log(stats.sum);
      for (int64_t i = threadIdx.x; i < s.size; i += blockDim.x) {
        const int64_t j = base + i * s.inner;
        y[j] = static_cast<T>((static_cast<acc_t>(x[j]) - stats.max) - log_sum);
      }
    } else {
      const acc_t inv = acc_t(1) / stats.sum;
      for (int64_t i = threadIdx.x; i < s.size; i += blockDim.x) {
        const int64_t j = base + i * s.inner;
        y[j] = static_cast<T>(t_exp(static_cast<acc_t>(x[j]) - stats.max) * inv);
      }
    }
  }
}

template <typename T, typename acc_t>
__global__ void softmax_backward_impl(T* grad_in, const T* grad_out, const T* y, RowShape s, bool is_log) {
  __shared__ acc_t shared[kReduceThreads];
  const int64_t rows = s.outer * s.inner;
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const int64_t base = (r / s.inner) * s.size * s.inner + r % s.inner;
    acc_t dot = 0;
    for (int64_t i = threadIdx.x; i < s.size; i += blockDim.x) {
      const int64_t j = base + i * s.inner;
      const acc_t gj = static_cast<acc_t>(grad_out[j]), yj = static_cast<acc_t>(y[j]);
      dot += is_log ? gj : gj * yj;
    }
    dot = block_reduce(dot, shared, [](acc_t a, acc_t b) { return a + b; });
    for (int64_t i = threadIdx.x; i < s.size; i += blockDim.x) {
      const int64_t j = base + i * s.inner;
      const acc_t gj = static_cast<acc_t>(grad_out[j]), yj = static_cast<acc_t>(y[j]);
      // softmax: y * (g - sum(g*y));  log_softmax: g - exp(y) * sum(g)
      grad_in[j] = static_cast<T>(is_log ? gj - t_exp(yj) * dot : yj * (gj - dot));
    }
  }
}

unsigned int row_blocks(const RowShape& s) {
  return static_cast<unsigned int>(std::max<int64_t>(1, std::min<int64_t>(s.outer * s.inner, kMaxGridBlocks)));
}

}  // namespace

void softmax_kernel(const Tensor& out, const Tensor& in, int64_t dim, bool log) {
  const RowShape s = row_shape(in.sizes(), dim);
  if (s.outer * s.inner == 0 || s.size == 0) return;
  TINY_DISPATCH_FLOATING(in.dtype(), log ? "log_softmax" : "softmax", [&] {
    const LaunchContext ctx(device_of(out));
    // 16-bit inputs: statistics and results in float, one rounding per output (as PyTorch).
    softmax_forward<scalar_t, opmath_t><<<row_blocks(s), reduce_threads(s.size), 0, ctx.stream>>>(
        dev_ptr<scalar_t>(out), dev_ptr<const scalar_t>(in), s, log);
    ctx.launched(log ? "log_softmax" : "softmax");
  });
}

void softmax_backward_kernel(const Tensor& grad_in, const Tensor& grad_out, const Tensor& out, int64_t dim,
                             bool log) {
  const RowShape s = row_shape(out.sizes(), dim);
  if (s.outer * s.inner == 0 || s.size == 0) return;
  TINY_DISPATCH_FLOATING(out.dtype(), "softmax_backward", [&] {
    const LaunchContext ctx(device_of(out));
    softmax_backward_impl<scalar_t, opmath_t><<<row_blocks(s), reduce_threads(s.size), 0, ctx.stream>>>(
        dev_ptr<scalar_t>(grad_in), dev_ptr<const scalar_t>(grad_out), dev_ptr<const scalar_t>(out), s, log);
    ctx.launched("softmax_backward");
  });
}

TINY_REGISTER_KERNEL(softmax_stub, CUDA, softmax_kernel);
TINY_REGISTER_KERNEL(softmax_backward_stub, CUDA, softmax_backward_kernel);

}  // namespace tiny::cuda_backend
