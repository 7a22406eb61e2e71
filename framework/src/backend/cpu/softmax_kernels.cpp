// CPU softmax/log_softmax on a contiguous tensor viewed as [outer, dim, inner]:
// one pass for the online max/sum statistics, one to write the result.
#include "backend/stubs/softmax.h"
#include "kernels/row_shape.h"
#include "kernels/reduce_ops.h"
#include "backend/cpu/loops.h"
#include "backend/dtype_dispatch.h"

namespace tiny::cpu {

using namespace kernels;

void softmax_kernel(const Tensor& out, const Tensor& in, int64_t dim, bool log) {
  const RowShape s = row_shape(in.sizes(), dim);
  TINY_DISPATCH_FLOATING(in.dtype(), log ? "log_softmax" : "softmax", [&] {
    const scalar_t* x = in.data_ptr<scalar_t>();
    scalar_t* y = out.data_ptr<scalar_t>();
    // 16-bit inputs: statistics and results in float, one rounding per output (as PyTorch).
    const OnlineSoftmaxOp<opmath_t> op;
    const int64_t rows = s.outer * s.inner;
    const int64_t grain = std::max<int64_t>(1, kPointwiseGrain / std::max<int64_t>(s.size, 1));
    runtime::parallel_for(0, rows, grain, [&](int64_t b, int64_t e) {
      for (int64_t r = b; r < e; ++r) {
        const int64_t base = (r / s.inner) * s.size * s.inner + r % s.inner;
        auto stats = op.identity();
        for (int64_t i = 0; i < s.size; ++i) stats = op.reduce(stats, x[base + i * s.inner], i);
        if (log) {
          // (x - max) - log(sum), in that order: x - max is exact, while
          // max + log(sum) would round to the ulp of max (PyTorch issue 11752).
          const opmath_t log_sum = t_log(stats.sum);
          for (int64_t i = 0; i < s.size; ++i) {
            y[base + i * s.inner] = (static_cast<opmath_t>(x[base + i * s.inner]) - stats.max) - log_sum;
          }
        } else {
          const opmath_t inv = opmath_t(1) / stats.sum;
          for (int64_t i = 0; i < s.size; ++i) {
            y[base + i * s.inner] = t_exp(static_cast<opmath_t>(x[base + i * s.inner]) - stats.max) * inv;
          }
        }
      }
    });
  });
}

void softmax_backward_kernel(const Tensor& grad_in, const Tensor& grad_out, const Tensor& out, int64_t dim,
                             bool log) {
  const RowShape s = row_shape(out.sizes(), dim);
  TINY_DISPATCH_FLOATING(out.dtype(), "softmax_backward", [&] {
    const scalar_t* g = grad_out.data_ptr<scalar_t>();
    const scalar_t* y = out.data_ptr<scalar_t>();
    scalar_t* gi = grad_in.data_ptr<scalar_t>();
    const int64_t rows = s.outer * s.inner;
    const int64_t grain = std::max<int64_t>(1, kPointwiseGrain / std::max<int64_t>(s.size, 1));
    runtime::parallel_for(0, rows, grain, [&](int64_t b, int64_t e) {
      for (int64_t r = b; r < e; ++r) {
        const int64_t base = (r / s.inner) * s.size * s.inner + r % s.inner;
        opmath_t dot = 0;
        for (int64_t i = 0; i < s.size; ++i) {
          const int64_t j = base + i * s.inner;
          const opmath_t gj = g[j], yj = y[j];
          dot += log ? gj : gj * yj;
        }
        for (int64_t i = 0; i < s.size; ++i) {
          const int64_t j = base + i * s.inner;
          const opmath_t gj = g[j], yj = y[j];
          // softmax: y * (g - sum(g*y));  log_softmax: g - exp(y) * sum(g)
          gi[j] = log ? gj - t_exp(yj) * dot : yj * (gj - dot);
        }
      }
    });
  });
}

TINY_REGISTER_KERNEL(softmax_stub, CPU, softmax_kernel);
TINY_REGISTER_KERNEL(softmax_backward_stub, CPU, softmax_backward_kernel);

}  // namespace tiny::cpu
