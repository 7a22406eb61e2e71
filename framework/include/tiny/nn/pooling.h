/// @file nn/pooling.h
/// @brief 2-D pooling: max, average and adaptive average (PyTorch's `F.max_pool2d`, `F.avg_pool2d`,
/// `F.adaptive_avg_pool2d` and the modules `nn.MaxPool2d`, `nn.AvgPool2d`, `nn.AdaptiveAvgPool2d`).
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>

#include "tiny/nn/module.h"
#include "tiny/tensor.h"

namespace tiny::nn {

/// @brief A (height, width) pair: PyTorch's `kernel_size=(3, 2)`; `{k, k}` for `kernel_size=k`.
using Size2 = std::array<int64_t, 2>;

namespace functional {

/// @brief Max over kH x kW windows of `input` [N, C, H, W] or [C, H, W] (PyTorch's `F.max_pool2d`).
///
/// `stride` defaults to the kernel size (PyTorch's `stride=None`); padding is
/// -inf, at most half the kernel; `dilation` spaces the window's elements;
/// `ceil_mode` rounds the output size up (a last window that starts inside the
/// input or the left padding is kept). A NaN in a window is its maximum. The
/// gradient goes to the element that was the maximum (the first one on ties).
/// Throws tiny::ShapeError or ValueError in PyTorch's words for a wrong rank, a
/// non-positive kernel, stride or dilation, padding over half the kernel, or
/// an output smaller than 1x1.
Tensor max_pool2d(const Tensor& input, Size2 kernel_size, std::optional<Size2> stride = std::nullopt,
                  Size2 padding = {0, 0}, Size2 dilation = {1, 1}, bool ceil_mode = false);
/// @brief `max_pool2d` with square windows, as PyTorch's integer arguments: `F::max_pool2d(x, 3, 2, 1)` is
/// `F.max_pool2d(x, 3, stride=2, padding=1)` (ResNet's stem); `F::max_pool2d(x, 2)` is `F.max_pool2d(x, 2)`.
Tensor max_pool2d(const Tensor& input, int64_t kernel_size, std::optional<int64_t> stride = std::nullopt,
                  int64_t padding = 0, int64_t dilation = 1, bool ceil_mode = false);
/// @brief `max_pool2d` returning (output, indices): each maximum's int64 position `h * W + w` within its plane
/// (PyTorch's `F.max_pool2d(..., return_indices=True)`).
std::pair<Tensor, Tensor> max_pool2d_with_indices(const Tensor& input, Size2 kernel_size,
                                                  std::optional<Size2> stride = std::nullopt, Size2 padding = {0, 0},
                                                  Size2 dilation = {1, 1}, bool ceil_mode = false);

/// @brief Mean over kH x kW windows of `input` [N, C, H, W] or [C, H, W] (PyTorch's `F.avg_pool2d`).
///
/// `stride` defaults to the kernel size; zero padding of at most half the
/// kernel. The divisor is `divisor_override` when given, else the window's
/// size counting the padding (`count_include_pad`, PyTorch's default) or only
/// the input elements it covers. Errors as `max_pool2d`.
Tensor avg_pool2d(const Tensor& input, Size2 kernel_size, std::optional<Size2> stride = std::nullopt,
                  Size2 padding = {0, 0}, bool ceil_mode = false, bool count_include_pad = true,
                  std::optional<int64_t> divisor_override = std::nullopt);
/// @brief `avg_pool2d` with square windows, as PyTorch's integer arguments: `F::avg_pool2d(x, 3, 1, 1)` is
/// `F.avg_pool2d(x, 3, stride=1, padding=1)`.
Tensor avg_pool2d(const Tensor& input, int64_t kernel_size, std::optional<int64_t> stride = std::nullopt,
                  int64_t padding = 0, bool ceil_mode = false, bool count_include_pad = true,
                  std::optional<int64_t> divisor_override = std::nullopt);

/// @brief Mean pooling to a fixed output size (oH, oW) (PyTorch's `F.adaptive_avg_pool2d`).
///
/// Output (i, j) averages input rows [floor(i H / oH), ceil((i + 1) H / oH)) and
/// the same for columns: `{1, 1}` is global average pooling (ResNet's head).
Tensor adaptive_avg_pool2d(const Tensor& input, Size2 output_size);

}  // namespace functional

/// @brief Max pooling layer (PyTorch's `nn.MaxPool2d`); see `F::max_pool2d`.
class MaxPool2d : public Module {
 public:
  /// @brief `nn.MaxPool2d(kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False)`.
  explicit MaxPool2d(Size2 kernel_size, std::optional<Size2> stride = std::nullopt, Size2 padding = {0, 0},
                     Size2 dilation = {1, 1}, bool ceil_mode = false);
  /// @brief Square windows, as PyTorch's integer arguments: `MaxPool2d(2)` (stride = kernel_size), or
  /// `MaxPool2d(3, 2, 1)` for `nn.MaxPool2d(3, stride=2, padding=1)`.
  explicit MaxPool2d(int64_t kernel_size, std::optional<int64_t> stride = std::nullopt, int64_t padding = 0,
                     int64_t dilation = 1, bool ceil_mode = false);
  /// @cond
  // Not copyable, as no Module is. Declared with a non-const reference so that
  // MaxPool2d({3, 2}) is the 3 x 2 window, not a copy of a MaxPool2d(3, 2).
  MaxPool2d(MaxPool2d&) = delete;
  /// @endcond
  /// @brief Applies `F::max_pool2d`.
  Tensor forward(const Tensor& x) override;
  /// @brief "MaxPool2d".
  std::string name() const override { return "MaxPool2d"; }
  /// @brief A copy with the same settings and training mode.
  std::shared_ptr<Module> clone(const std::optional<Device>& device = std::nullopt) const override;
  /// @brief PyTorch's repr, with the sizes as they were given: "kernel_size=2, stride=2, padding=0, dilation=1,
  /// ceil_mode=False" for `MaxPool2d(2)`, "kernel_size=(3, 2), ..." for `MaxPool2d({3, 2})`.
  std::string extra_repr() const override;

  Size2 kernel_size;  ///< window (kH, kW)
  Size2 stride;       ///< step (the kernel size unless given)
  Size2 padding;      ///< implicit -inf padding on each side
  Size2 dilation;     ///< spacing of the window's elements
  bool ceil_mode;     ///< round the output size up

 private:
  bool given_as_ints_ = false;  // built from integers: the repr prints integers, as PyTorch's does
};

/// @brief Average pooling layer (PyTorch's `nn.AvgPool2d`); see `F::avg_pool2d`.
class AvgPool2d : public Module {
 public:
  /// @brief `nn.AvgPool2d(kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True, divisor_override=None)`.
  explicit AvgPool2d(Size2 kernel_size, std::optional<Size2> stride = std::nullopt, Size2 padding = {0, 0},
                     bool ceil_mode = false, bool count_include_pad = true,
                     std::optional<int64_t> divisor_override = std::nullopt);
  /// @brief Square windows, as PyTorch's integer arguments: `AvgPool2d(2)` (stride = kernel_size), or
  /// `AvgPool2d(3, 1, 1)` for `nn.AvgPool2d(3, stride=1, padding=1)`.
  explicit AvgPool2d(int64_t kernel_size, std::optional<int64_t> stride = std::nullopt, int64_t padding = 0,
                     bool ceil_mode = false, bool count_include_pad = true,
                     std::optional<int64_t> divisor_override = std::nullopt);
  /// @cond
  // Not copyable, as no Module is. Declared with a non-const reference so that
  // AvgPool2d({3, 2}) is the 3 x 2 window, not a copy of an AvgPool2d(3, 2).
  AvgPool2d(AvgPool2d&) = delete;
  /// @endcond
  /// @brief Applies `F::avg_pool2d`.
  Tensor forward(const Tensor& x) override;
  /// @brief "AvgPool2d".
  std::string name() const override { return "AvgPool2d"; }
  /// @brief A copy with the same settings and training mode.
  std::shared_ptr<Module> clone(const std::optional<Device>& device = std::nullopt) const override;
  /// @brief PyTorch's repr, with the sizes as they were given: "kernel_size=2, stride=2, padding=0" for
  /// `AvgPool2d(2)`, "kernel_size=(2, 2), stride=(2, 2), padding=(0, 0)" for `AvgPool2d({2, 2})`.
  std::string extra_repr() const override;

  Size2 kernel_size;                      ///< window (kH, kW)
  Size2 stride;                           ///< step (the kernel size unless given)
  Size2 padding;                          ///< implicit zero padding on each side
  bool ceil_mode;                         ///< round the output size up
  bool count_include_pad;                 ///< divide by the padded window size
  std::optional<int64_t> divisor_override;  ///< divide by this instead

 private:
  bool given_as_ints_ = false;  // built from integers: the repr prints integers, as PyTorch's does
};

/// @brief Adaptive average pooling to a fixed output size (PyTorch's `nn.AdaptiveAvgPool2d`).
class AdaptiveAvgPool2d : public Module {
 public:
  /// @brief Pools to (oH, oW): `AdaptiveAvgPool2d({1, 1})` is global average pooling.
  explicit AdaptiveAvgPool2d(Size2 output_size);
  /// @brief A square output: `AdaptiveAvgPool2d(1)`.
  explicit AdaptiveAvgPool2d(int64_t output_size) : AdaptiveAvgPool2d(Size2{output_size, output_size}) {}
  /// @brief Applies `F::adaptive_avg_pool2d`.
  Tensor forward(const Tensor& x) override;
  /// @brief "AdaptiveAvgPool2d".
  std::string name() const override { return "AdaptiveAvgPool2d"; }
  /// @brief A copy with the same settings and training mode.
  std::shared_ptr<Module> clone(const std::optional<Device>& device = std::nullopt) const override;
  /// @brief "output_size=(1, 1)".
  std::string extra_repr() const override;

  Size2 output_size;  ///< (oH, oW)
};

}  // namespace tiny::nn
