/// @file nn/init.h
/// @brief Filling tensors with initial values, in place (PyTorch's `torch.nn.init`).
///
/// Every function writes into the given tensor without recording a graph
/// (as under `torch.no_grad()`), so it works on parameters that require
/// gradients, and returns the same handle. Random ones draw from tiny's
/// Philox generator (`generator`, or the default one seeded by `tiny::manual_seed`).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>

#include "tiny/generator.h"
#include "tiny/scalar.h"
#include "tiny/tensor.h"

namespace tiny::nn::init {

/// @brief Which fan Kaiming initialisation preserves (PyTorch's `mode='fan_in'` / `'fan_out'`).
enum class FanMode {
  FanIn,   ///< keeps the variance of the forward pass
  FanOut,  ///< keeps the variance of the backward pass
};

/// @brief The recommended gain for a nonlinearity (PyTorch's `calculate_gain`).
///
/// "linear", "conv1d".."conv3d", "sigmoid": 1; "tanh": 5/3; "relu": sqrt(2);
/// "leaky_relu": sqrt(2 / (1 + slope^2)) with slope `param` (default 0.01); "selu": 3/4.
double calculate_gain(const std::string& nonlinearity, std::optional<double> param = std::nullopt);
/// @brief (fan_in, fan_out) = (size(1), size(0)) times the product of the remaining sizes (PyTorch's `_calculate_fan_in_and_fan_out`).
std::pair<int64_t, int64_t> calculate_fan_in_and_fan_out(const Tensor& tensor);

/// @brief Fills with values uniform in [a, b) (PyTorch's `uniform_`).
Tensor uniform_(const Tensor& tensor, double a = 0.0, double b = 1.0, std::optional<Generator> generator = std::nullopt);
/// @brief Fills with values from N(mean, std^2) (PyTorch's `normal_`).
Tensor normal_(const Tensor& tensor, double mean = 0.0, double std = 1.0,
               std::optional<Generator> generator = std::nullopt);
/// @brief Fills with `value` (PyTorch's `constant_`).
Tensor constant_(const Tensor& tensor, const Scalar& value);
/// @brief Fills with 0 (PyTorch's `zeros_`).
Tensor zeros_(const Tensor& tensor);
/// @brief Fills with 1 (PyTorch's `ones_`).
Tensor ones_(const Tensor& tensor);
/// @brief Uniform in ±gain*sqrt(3/fan) (He et al.; PyTorch's `kaiming_uniform_`).
Tensor kaiming_uniform_(const Tensor& tensor, double a = 0.0, FanMode mode = FanMode::FanIn,
                        const std::string& nonlinearity = "leaky_relu",
                        std::optional<Generator> generator = std::nullopt);
/// @brief Normal with std gain/sqrt(fan) (PyTorch's `kaiming_normal_`).
Tensor kaiming_normal_(const Tensor& tensor, double a = 0.0, FanMode mode = FanMode::FanIn,
                       const std::string& nonlinearity = "leaky_relu",
                       std::optional<Generator> generator = std::nullopt);
/// @brief Uniform in ±gain*sqrt(6/(fan_in+fan_out)) (Glorot & Bengio; PyTorch's `xavier_uniform_`).
Tensor xavier_uniform_(const Tensor& tensor, double gain = 1.0, std::optional<Generator> generator = std::nullopt);
/// @brief Normal with std gain*sqrt(2/(fan_in+fan_out)) (PyTorch's `xavier_normal_`).
Tensor xavier_normal_(const Tensor& tensor, double gain = 1.0, std::optional<Generator> generator = std::nullopt);

}  // namespace tiny::nn::init
