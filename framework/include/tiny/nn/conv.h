/// @file nn/conv.h
/// @brief 2-D convolution: `tiny::nn::functional::conv2d` and `tiny::nn::Conv2d` (PyTorch's `F.conv2d`, `nn.Conv2d`).
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "tiny/nn/module.h"
#include "tiny/tensor.h"

namespace tiny::nn {

/// @brief The keyword arguments of `F.conv2d` and `nn.Conv2d` (stride, padding, dilation, groups), as (height, width) pairs.
///
/// PyTorch's `stride=2` is `{2, 2}` here: `Conv2dOptions{{2, 2}, {1, 1}}` is
/// `stride=2, padding=1`. Padding is zeros on both sides (`padding_mode='zeros'`).
struct Conv2dOptions {
  std::array<int64_t, 2> stride{1, 1};    ///< step between windows; each > 0
  std::array<int64_t, 2> padding{0, 0};   ///< zeros added on each side; each >= 0
  std::array<int64_t, 2> dilation{1, 1};  ///< spacing between kernel elements; each > 0
  int64_t groups = 1;                     ///< in_channels and out_channels are split into this many groups

  /// @brief Same stride in both dimensions (PyTorch's `stride=s`).
  Conv2dOptions& set_stride(int64_t s) { stride = {s, s}; return *this; }
  /// @brief Same padding in both dimensions (PyTorch's `padding=p`).
  Conv2dOptions& set_padding(int64_t p) { padding = {p, p}; return *this; }
  /// @brief Same dilation in both dimensions (PyTorch's `dilation=d`).
  Conv2dOptions& set_dilation(int64_t d) { dilation = {d, d}; return *this; }
  /// @brief Number of groups (PyTorch's `groups=g`; `g == in_channels` is a depthwise convolution).
  Conv2dOptions& set_groups(int64_t g) { groups = g; return *this; }
};

namespace functional {

/// @brief 2-D convolution (cross-correlation) of `input` [N, C, H, W] (or unbatched [C, H, W]) with
/// `weight` [out_channels, C / groups, kH, kW], plus `bias` [out_channels] when defined (PyTorch's `F.conv2d`).
///
/// The output is [N, out_channels, H_out, W_out] with
/// `H_out = (H + 2 padding - dilation (kH - 1) - 1) / stride + 1` (rounded down).
/// Computed as im2col + GEMM on every device (OpenBLAS on the CPU, cuBLAS on a
/// GPU; no cuDNN), with a single autograd node (`ConvolutionBackward0`) that
/// saves the input and the weight, as PyTorch's does. Under autocast it runs in
/// the autocast dtype (PyTorch lists conv2d among the lower-precision ops).
/// Throws tiny::ShapeError, DtypeError or ValueError, in PyTorch's words, for a
/// wrong rank, a channel count that does not match `weight.size(1) * groups`,
/// out_channels not divisible by groups, a kernel larger than the padded input,
/// a bias of the wrong size, mismatched dtypes or devices, and non-positive
/// stride, dilation or groups or negative padding.
Tensor conv2d(const Tensor& input, const Tensor& weight, const Tensor& bias = Tensor(),
              const Conv2dOptions& options = {});

}  // namespace functional

/// @brief A 2-D convolution layer (PyTorch's `nn.Conv2d`).
///
/// weight is [out_channels, in_channels / groups, kH, kW] and bias
/// [out_channels], initialised as PyTorch does (`kaiming_uniform_(a=sqrt(5))`,
/// the bias uniform in ±1/sqrt(fan_in)) from tiny's default generator.
///
///     auto conv = std::make_shared<tiny::nn::Conv2d>(1, 32, 3, tiny::nn::Conv2dOptions().set_padding(1));
///     // PyTorch: nn.Conv2d(1, 32, 3, padding=1)
class Conv2d : public Module {
 public:
  /// @brief A layer from `in_channels` to `out_channels` with a kH x kW kernel.
  Conv2d(int64_t in_channels, int64_t out_channels, std::array<int64_t, 2> kernel_size, Conv2dOptions options = {},
         bool bias = true);
  /// @brief A square kernel_size x kernel_size kernel (PyTorch's `kernel_size=k`).
  Conv2d(int64_t in_channels, int64_t out_channels, int64_t kernel_size, Conv2dOptions options = {}, bool bias = true)
      : Conv2d(in_channels, out_channels, std::array<int64_t, 2>{kernel_size, kernel_size}, options, bias) {}
  /// @brief Draws new initial values, as the constructor does (PyTorch's `reset_parameters()`).
  void reset_parameters();
  /// @brief Applies `F::conv2d(x, weight, bias, options)`.
  Tensor forward(const Tensor& x) override;
  /// @brief "Conv2d".
  std::string name() const override { return "Conv2d"; }
  /// @brief A deep copy on `device` (or where this one is), drawing no random numbers (LibTorch's `clone`).
  std::shared_ptr<Module> clone(const std::optional<Device>& device = std::nullopt) const override;
  /// @brief PyTorch's repr: "1, 32, kernel_size=(3, 3), stride=(1, 1), padding=(1, 1)".
  std::string extra_repr() const override;

  int64_t in_channels;                 ///< channels of the input
  int64_t out_channels;                ///< channels of the output
  std::array<int64_t, 2> kernel_size;  ///< (kH, kW)
  Conv2dOptions options;               ///< stride, padding, dilation, groups
  Tensor weight;                       ///< [out_channels, in_channels / groups, kH, kW], the parameter "weight"
  Tensor bias;                         ///< [out_channels], the parameter "bias"; undefined without a bias
};

}  // namespace tiny::nn
