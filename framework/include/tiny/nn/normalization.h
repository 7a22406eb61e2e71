/// @file nn/normalization.h
/// @brief `tiny::nn::LayerNorm` (PyTorch's `torch.nn.LayerNorm`).
#pragma once

#include <cstdint>
#include <initializer_list>
#include <memory>
#include <optional>
#include <string>

#include "tiny/nn/module.h"

namespace tiny::nn {

/// @brief Normalises over the last dimensions to mean 0 and variance 1, then scales and shifts (PyTorch's `nn.LayerNorm`).
///
/// `y = (x - mean) / sqrt(var + eps) * weight + bias`, with the biased variance,
/// over the trailing dimensions given by `normalized_shape`.
class LayerNorm : public Module {
 public:
  /// @brief Normalises over trailing dimensions of shape `normalized_shape`; weight=1 and bias=0 when affine.
  explicit LayerNorm(IntArrayRef normalized_shape, double eps = 1e-5, bool elementwise_affine = true);
  /// @brief Same, from a braced shape: `LayerNorm({4, 5})`.
  explicit LayerNorm(std::initializer_list<int64_t> normalized_shape, double eps = 1e-5,
                     bool elementwise_affine = true)
      : LayerNorm(IntArrayRef(normalized_shape), eps, elementwise_affine) {}
  /// @brief Normalises over the last dimension, of size `normalized_size`: `LayerNorm(512)`.
  explicit LayerNorm(int64_t normalized_size, double eps = 1e-5, bool elementwise_affine = true);
  /// @brief Sets weight to ones and bias to zeros (PyTorch's `reset_parameters()`).
  void reset_parameters();
  /// @brief Applies `F::layer_norm`.
  Tensor forward(const Tensor& x) override;
  /// @brief "LayerNorm".
  std::string name() const override { return "LayerNorm"; }
  /// @brief A deep copy on `device` (or where this one is), drawing no random numbers (LibTorch's `clone`).
  std::shared_ptr<Module> clone(const std::optional<Device>& device = std::nullopt) const override;
  /// @brief "(5,), eps=1e-05, elementwise_affine=True".
  std::string extra_repr() const override;

  IntArrayRef normalized_shape;  ///< the trailing shape normalised over
  double eps;                    ///< added to the variance
  bool elementwise_affine;       ///< whether weight and bias exist
  Tensor weight;                 ///< shaped normalized_shape, "weight" (undefined without affine)
  Tensor bias;                   ///< shaped normalized_shape, "bias" (undefined without affine)
};

}  // namespace tiny::nn
