/// @file nn/linear.h
/// @brief `tiny::nn::Linear`: a fully connected layer (PyTorch's `torch.nn.Linear`).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "tiny/nn/module.h"

namespace tiny::nn {

/// @brief `y = x @ weight.T + bias` (PyTorch's `nn.Linear`).
///
/// weight is [out_features, in_features] and bias [out_features], both
/// initialised uniform in ±1/sqrt(in_features) from tiny's default generator
/// (PyTorch's `kaiming_uniform_(a=sqrt(5))`): `tiny::manual_seed` makes them reproducible.
class Linear : public Module {
 public:
  /// @brief A layer from `in_features` inputs to `out_features` outputs, with or without a bias.
  Linear(int64_t in_features, int64_t out_features, bool bias = true);
  /// @brief Draws new initial values, as the constructor does (PyTorch's `reset_parameters()`).
  void reset_parameters();
  /// @brief `x @ weight.T + bias` over the last dimension of `x` (PyTorch's `F.linear`).
  Tensor forward(const Tensor& x) override;
  /// @brief "Linear".
  std::string name() const override { return "Linear"; }
  /// @brief A deep copy on `device` (or where this one is), drawing no random numbers (LibTorch's `clone`).
  std::shared_ptr<Module> clone(const std::optional<Device>& device = std::nullopt) const override;
  /// @brief "in_features=784, out_features=512, bias=True".
  std::string extra_repr() const override;

  int64_t in_features;   ///< size of each input sample
  int64_t out_features;  ///< size of each output sample
  Tensor weight;         ///< [out_features, in_features], the registered parameter "weight"
  Tensor bias;           ///< [out_features], the registered parameter "bias"; undefined without a bias
};

}  // namespace tiny::nn
