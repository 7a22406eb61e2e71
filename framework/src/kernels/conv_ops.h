// The index arithmetic of convolutions and 2-D pooling, written once for the
// CPU, the emulated GPU and CUDA (TINY_HOST_DEVICE).
//
// A convolution is im2col + GEMM (PyTorch's slow_conv2d path, which cuDNN
// replaces on a GPU): im2col copies every input patch into a column of a
// matrix `cols` [C*KH*KW, B*OH*OW] (rows (c, kh, kw), columns (n, oh, ow)), so
// that the output is weight [OC, C*KH*KW] @ cols. Its backward, col2im, is a
// gather: each input element sums the column entries it was copied to, in a
// fixed order (kh, kw ascending), so there are no atomics and every backend
// adds in the same order.
//
// Pooling backward is a gather too (PyTorch's CUDA formulation): each input
// element walks the outputs whose window can contain it, in (oh, ow) order,
// which is the order PyTorch's CPU scatter adds them in.
#pragma once

#include <cstdint>

#include "kernels/macros.h"
#include "kernels/math.h"

namespace tiny::kernels {

// Shape of one im2col/col2im: `batch` images of [channels, height, width] and
// a kernel of [kernel_h, kernel_w] giving [out_h, out_w] outputs.
struct Conv2dGeometry {
  int64_t batch = 0, channels = 0, height = 0, width = 0;
  int64_t kernel_h = 1, kernel_w = 1;
  int64_t stride_h = 1, stride_w = 1;
  int64_t pad_h = 0, pad_w = 0;
  int64_t dilation_h = 1, dilation_w = 1;
  int64_t out_h = 0, out_w = 0;

  TINY_HOST_DEVICE int64_t col_rows() const { return channels * kernel_h * kernel_w; }
  TINY_HOST_DEVICE int64_t col_cols() const { return batch * out_h * out_w; }
};

// Offset in a contiguous [batch, channels, height, width] input of the element
// that entry (row = (c, kh, kw), column = (n, oh, ow)) of cols copies, or -1
// where the window lies on the zero padding.
TINY_HOST_DEVICE TINY_FORCE_INLINE int64_t im2col_source(const Conv2dGeometry& g, int64_t c, int64_t kh, int64_t kw,
                                                         int64_t n, int64_t oh, int64_t ow) {
  const int64_t ih = oh * g.stride_h - g.pad_h + kh * g.dilation_h;
  const int64_t iw = ow * g.stride_w - g.pad_w + kw * g.dilation_w;
  if (ih < 0 || ih >= g.height || iw < 0 || iw >= g.width) return -1;
  return ((n * g.channels + c) * g.height + ih) * g.width + iw;
}

// cols[e] for e in [0, col_rows * col_cols) (row-major).
template <typename T>
TINY_HOST_DEVICE TINY_FORCE_INLINE T im2col_element(const Conv2dGeometry& g, const T* input, int64_t e) {
  const int64_t columns = g.col_cols();
  const int64_t row = e / columns, col = e % columns;
  const int64_t kw = row % g.kernel_w, kh = (row / g.kernel_w) % g.kernel_h, c = row / (g.kernel_w * g.kernel_h);
  const int64_t ow = col % g.out_w, oh = (col / g.out_w) % g.out_h, n = col / (g.out_w * g.out_h);
  const int64_t src = im2col_source(g, c, kh, kw, n, oh, ow);
  return src < 0 ? T(0.0f) : input[src];
}

// grad_input[e] (contiguous [batch, channels, height, width]): the sum, in
// (kh, kw) order, of the cols entries that im2col copied element e into.
template <typename T, typename acc_t>
TINY_HOST_DEVICE TINY_FORCE_INLINE acc_t col2im_element(const Conv2dGeometry& g, const T* cols, int64_t e) {
  const int64_t w = e % g.width, h = (e / g.width) % g.height;
  const int64_t c = (e / (g.width * g.height)) % g.channels, n = e / (g.width * g.height * g.channels);
  const int64_t columns = g.col_cols(), plane = g.out_h * g.out_w;
  acc_t sum = acc_t(0);
  for (int64_t kh = 0; kh < g.kernel_h; ++kh) {
    const int64_t hh = h + g.pad_h - kh * g.dilation_h;
    if (hh < 0 || hh % g.stride_h != 0) continue;
    const int64_t oh = hh / g.stride_h;
    if (oh >= g.out_h) continue;
    for (int64_t kw = 0; kw < g.kernel_w; ++kw) {
      const int64_t ww = w + g.pad_w - kw * g.dilation_w;
      if (ww < 0 || ww % g.stride_w != 0) continue;
      const int64_t ow = ww / g.stride_w;
      if (ow >= g.out_w) continue;
      const int64_t row = (c * g.kernel_h + kh) * g.kernel_w + kw;
      sum += static_cast<acc_t>(cols[row * columns + n * plane + oh * g.out_w + ow]);
    }
  }
  return sum;
}

enum class PoolKind : uint8_t { Max, Avg, AdaptiveAvg };

// One 2-D pooling over `planes` = N * C contiguous [height, width] planes.
struct Pool2dGeometry {
  PoolKind kind = PoolKind::Max;
  int64_t planes = 0, height = 0, width = 0, out_h = 0, out_w = 0;
  int64_t kernel_h = 1, kernel_w = 1;
  int64_t stride_h = 1, stride_w = 1;
  int64_t pad_h = 0, pad_w = 0;
  int64_t dilation_h = 1, dilation_w = 1;  // max pooling only
  bool count_include_pad = true;           // average pooling only
  int64_t divisor_override = 0;            // average pooling only; 0: none
};

// Adaptive pooling's window of output o along a dimension of `in` inputs and
// `out` outputs: [floor(o * in / out), ceil((o + 1) * in / out)).
TINY_HOST_DEVICE TINY_FORCE_INLINE int64_t adaptive_start(int64_t o, int64_t in, int64_t out) { return (o * in) / out; }
TINY_HOST_DEVICE TINY_FORCE_INLINE int64_t adaptive_end(int64_t o, int64_t in, int64_t out) {
  return ((o + 1) * in + out - 1) / out;
}

// An average window's clipped bounds and divisor (PyTorch's avg_pool2d).
struct AvgWindow {
  int64_t h0, h1, w0, w1, divisor;
};
TINY_HOST_DEVICE TINY_FORCE_INLINE AvgWindow avg_window(const Pool2dGeometry& g, int64_t oh, int64_t ow) {
  int64_t h0 = oh * g.stride_h - g.pad_h, w0 = ow * g.stride_w - g.pad_w;
  int64_t h1 = h0 + g.kernel_h, w1 = w0 + g.kernel_w;
  if (h1 > g.height + g.pad_h) h1 = g.height + g.pad_h;
  if (w1 > g.width + g.pad_w) w1 = g.width + g.pad_w;
  const int64_t pool_size = (h1 - h0) * (w1 - w0);
  if (h0 < 0) h0 = 0;
  if (w0 < 0) w0 = 0;
  if (h1 > g.height) h1 = g.height;
  if (w1 > g.width) w1 = g.width;
  int64_t divisor = g.divisor_override;
  if (divisor == 0) divisor = g.count_include_pad ? pool_size : (h1 - h0) * (w1 - w0);
  return {h0, h1, w0, w1, divisor};
}

// Output e (plane, oh, ow) of a pooling; for max pooling also the index of the
// maximum within its plane (h * width + w), as PyTorch's return_indices. NaN
// wins (PyTorch: `val > maxval || isnan(val)`); ties keep the first.
template <typename T, typename acc_t>
TINY_HOST_DEVICE TINY_FORCE_INLINE acc_t pool2d_element(const Pool2dGeometry& g, const T* input, int64_t e,
                                                        int64_t* index) {
  const int64_t ow = e % g.out_w, oh = (e / g.out_w) % g.out_h, p = e / (g.out_w * g.out_h);
  const T* plane = input + p * g.height * g.width;
  if (g.kind == PoolKind::Max) {
    int64_t h0 = oh * g.stride_h - g.pad_h, w0 = ow * g.stride_w - g.pad_w;
    int64_t h1 = h0 + (g.kernel_h - 1) * g.dilation_h + 1, w1 = w0 + (g.kernel_w - 1) * g.dilation_w + 1;
    if (h1 > g.height) h1 = g.height;
    if (w1 > g.width) w1 = g.width;
    while (h0 < 0) h0 += g.dilation_h;
    while (w0 < 0) w0 += g.dilation_w;
    int64_t best_index = h0 * g.width + w0;
    acc_t best = -static_cast<acc_t>(INFINITY);
    for (int64_t h = h0; h < h1; h += g.dilation_h) {
      for (int64_t w = w0; w < w1; w += g.dilation_w) {
        const acc_t v = static_cast<acc_t>(plane[h * g.width + w]);
        if (v > best || t_isnan(v)) {
          best = v;
          best_index = h * g.width + w;
        }
      }
    }
    *index = best_index;
    return best;
  }
  int64_t h0, h1, w0, w1, divisor;
  if (g.kind == PoolKind::AdaptiveAvg) {
    h0 = adaptive_start(oh, g.height, g.out_h), h1 = adaptive_end(oh, g.height, g.out_h);
    w0 = adaptive_start(ow, g.width, g.out_w), w1 = adaptive_end(ow, g.width, g.out_w);
    divisor = 0;
  } else {
    const AvgWindow win = avg_window(g, oh, ow);
    h0 = win.h0, h1 = win.h1, w0 = win.w0, w1 = win.w1, divisor = win.divisor;
    if (h0 >= h1 || w0 >= w1) return acc_t(0);
  }
  acc_t sum = acc_t(0);
  for (int64_t h = h0; h < h1; ++h) {
    for (int64_t w = w0; w < w1; ++w) sum += static_cast<acc_t>(plane[h * g.width + w]);
  }
  // PyTorch's adaptive pooling divides by the window's height, then its width.
  if (g.kind == PoolKind::AdaptiveAvg) return sum / static_cast<acc_t>(h1 - h0) / static_cast<acc_t>(w1 - w0);
  return sum / static_cast<acc_t>(divisor);
}

// grad_input[e] (plane, h, w): the sum over the outputs whose window holds
// element e, in (oh, ow) order, of their gradient's share (max: all of it
// where e was the maximum; average: gradient / divisor).
template <typename T, typename acc_t>
TINY_HOST_DEVICE TINY_FORCE_INLINE acc_t pool2d_backward_element(const Pool2dGeometry& g, const T* grad_out,
                                                                 const int64_t* indices, int64_t e) {
  const int64_t w = e % g.width, h = (e / g.width) % g.height, p = e / (g.width * g.height);
  const int64_t out_plane = g.out_h * g.out_w;
  const T* go = grad_out + p * out_plane;
  acc_t sum = acc_t(0);
  if (g.kind == PoolKind::Max) {
    const int64_t* idx = indices + p * out_plane;
    const int64_t span_h = (g.kernel_h - 1) * g.dilation_h + 1, span_w = (g.kernel_w - 1) * g.dilation_w + 1;
    const int64_t oh0 = (h + g.pad_h < span_h) ? 0 : (h + g.pad_h - span_h) / g.stride_h + 1;
    const int64_t ow0 = (w + g.pad_w < span_w) ? 0 : (w + g.pad_w - span_w) / g.stride_w + 1;
    int64_t oh1 = (h + g.pad_h) / g.stride_h + 1, ow1 = (w + g.pad_w) / g.stride_w + 1;
    if (oh1 > g.out_h) oh1 = g.out_h;
    if (ow1 > g.out_w) ow1 = g.out_w;
    const int64_t self = h * g.width + w;
    for (int64_t oh = oh0; oh < oh1; ++oh) {
      for (int64_t ow = ow0; ow < ow1; ++ow) {
        if (idx[oh * g.out_w + ow] == self) sum += static_cast<acc_t>(go[oh * g.out_w + ow]);
      }
    }
    return sum;
  }
  if (g.kind == PoolKind::AdaptiveAvg) {
    const int64_t oh0 = adaptive_start(h, g.out_h, g.height), oh1 = adaptive_end(h, g.out_h, g.height);
    const int64_t ow0 = adaptive_start(w, g.out_w, g.width), ow1 = adaptive_end(w, g.out_w, g.width);
    for (int64_t oh = oh0; oh < oh1; ++oh) {
      const int64_t kh = adaptive_end(oh, g.height, g.out_h) - adaptive_start(oh, g.height, g.out_h);
      for (int64_t ow = ow0; ow < ow1; ++ow) {
        const int64_t kw = adaptive_end(ow, g.width, g.out_w) - adaptive_start(ow, g.width, g.out_w);
        sum += static_cast<acc_t>(go[oh * g.out_w + ow]) / static_cast<acc_t>(kh) / static_cast<acc_t>(kw);
      }
    }
    return sum;
  }
  const int64_t oh0 = (h + g.pad_h < g.kernel_h) ? 0 : (h + g.pad_h - g.kernel_h) / g.stride_h + 1;
  const int64_t ow0 = (w + g.pad_w < g.kernel_w) ? 0 : (w + g.pad_w - g.kernel_w) / g.stride_w + 1;
  int64_t oh1 = (h + g.pad_h) / g.stride_h + 1, ow1 = (w + g.pad_w) / g.stride_w + 1;
  if (oh1 > g.out_h) oh1 = g.out_h;
  if (ow1 > g.out_w) ow1 = g.out_w;
  for (int64_t oh = oh0; oh < oh1; ++oh) {
    for (int64_t ow = ow0; ow < ow1; ++ow) {
      const AvgWindow win = avg_window(g, oh, ow);
      sum += static_cast<acc_t>(go[oh * g.out_w + ow]) / static_cast<acc_t>(win.divisor);
    }
  }
  return sum;
}

}  // namespace tiny::kernels
