// CPU drivers of im2col, col2im and 2-D pooling: parallel loops over the
// index arithmetic of kernels/conv_ops.h. Each output element is computed by
// one thread from its own inputs (gathers, no scatter), so results are the
// same with any thread count and the same as the emulated GPU's and CUDA's.
#include <algorithm>

#include "backend/stubs/conv.h"
#include "backend/cpu/loops.h"
#include "backend/dtype_dispatch.h"

namespace tiny::cpu {

namespace {

using kernels::Conv2dGeometry;
using kernels::Pool2dGeometry;

// cols [C*KH*KW, B*OH*OW] from input [B, C, H, W], both contiguous. Rows are
// handed out whole: each writes its B*OH*OW entries in memory order.
void im2col_kernel(const Tensor& cols, const Tensor& input, const Conv2dGeometry& g) {
  const int64_t rows = g.col_rows(), columns = g.col_cols();
  if (rows == 0 || columns == 0) return;
  const int64_t grain = std::max<int64_t>(1, kPointwiseGrain / columns);
  TINY_DISPATCH_FLOATING(input.dtype(), "im2col", [&] {
    const scalar_t* in = input.data_ptr<scalar_t>();
    scalar_t* out = cols.data_ptr<scalar_t>();
    runtime::parallel_for(0, rows, grain, [&](int64_t r0, int64_t r1) {
      for (int64_t row = r0; row < r1; ++row) {
        const int64_t kw = row % g.kernel_w, kh = (row / g.kernel_w) % g.kernel_h;
        const int64_t c = row / (g.kernel_w * g.kernel_h);
        scalar_t* dst = out + row * columns;
        for (int64_t n = 0; n < g.batch; ++n) {
          for (int64_t oh = 0; oh < g.out_h; ++oh) {
            for (int64_t ow = 0; ow < g.out_w; ++ow) {
              const int64_t src = kernels::im2col_source(g, c, kh, kw, n, oh, ow);
              *dst++ = src < 0 ? scalar_t(0.0f) : in[src];
            }
          }
        }
      }
    });
  });
}

// grad_input [B, C, H, W] (overwritten) from cols, both contiguous.
void col2im_kernel(const Tensor& grad_input, const Tensor& cols, const Conv2dGeometry& g) {
  const int64_t n = grad_input.numel();
  if (n == 0) return;
  const int64_t grain = std::max<int64_t>(1, kPointwiseGrain / (g.kernel_h * g.kernel_w));
  TINY_DISPATCH_FLOATING(grad_input.dtype(), "col2im", [&] {
    const scalar_t* src = cols.data_ptr<scalar_t>();
    scalar_t* out = grad_input.data_ptr<scalar_t>();
    runtime::parallel_for(0, n, grain, [&](int64_t begin, int64_t end) {
      for (int64_t e = begin; e < end; ++e) out[e] = scalar_t(kernels::col2im_element<scalar_t, opmath_t>(g, src, e));
    });
  });
}

int64_t window_elements(const Pool2dGeometry& g) {
  if (g.kind == kernels::PoolKind::AdaptiveAvg) {
    return std::max<int64_t>(1, (g.height / std::max<int64_t>(1, g.out_h) + 1) *
                                    (g.width / std::max<int64_t>(1, g.out_w) + 1));
  }
  return std::max<int64_t>(1, g.kernel_h * g.kernel_w);
}

void pool2d_kernel(const Tensor& out, const Tensor& indices, const Tensor& input, const Pool2dGeometry& g) {
  const int64_t n = out.numel();
  if (n == 0) return;
  const int64_t grain = std::max<int64_t>(1, kPointwiseGrain / window_elements(g));
  TINY_DISPATCH_FLOATING(input.dtype(), "pool2d", [&] {
    const scalar_t* in = input.data_ptr<scalar_t>();
    scalar_t* o = out.data_ptr<scalar_t>();
    int64_t* idx = indices.defined() ? indices.data_ptr<int64_t>() : nullptr;
    runtime::parallel_for(0, n, grain, [&](int64_t begin, int64_t end) {
      int64_t unused = 0;
      for (int64_t e = begin; e < end; ++e) {
        o[e] = scalar_t(kernels::pool2d_element<scalar_t, opmath_t>(g, in, e, idx ? idx + e : &unused));
      }
    });
  });
}

void pool2d_backward_kernel(const Tensor& grad_input, const Tensor& grad_out, const Tensor& indices,
                            const Pool2dGeometry& g) {
  const int64_t n = grad_input.numel();
  if (n == 0) return;
  const int64_t grain = std::max<int64_t>(1, kPointwiseGrain / window_elements(g));
  TINY_DISPATCH_FLOATING(grad_input.dtype(), "pool2d_backward", [&] {
    const scalar_t* go = grad_out.data_ptr<scalar_t>();
    const int64_t* idx = indices.defined() ? indices.data_ptr<int64_t>() : nullptr;
    scalar_t* gi = grad_input.data_ptr<scalar_t>();
    runtime::parallel_for(0, n, grain, [&](int64_t begin, int64_t end) {
      for (int64_t e = begin; e < end; ++e) {
        gi[e] = scalar_t(kernels::pool2d_backward_element<scalar_t, opmath_t>(g, go, idx, e));
      }
    });
  });
}

}  // namespace

TINY_REGISTER_KERNEL(im2col_stub, CPU, im2col_kernel);
TINY_REGISTER_KERNEL(col2im_stub, CPU, col2im_kernel);
TINY_REGISTER_KERNEL(pool2d_stub, CPU, pool2d_kernel);
TINY_REGISTER_KERNEL(pool2d_backward_stub, CPU, pool2d_backward_kernel);

}  // namespace tiny::cpu
