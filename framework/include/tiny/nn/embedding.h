/// @file nn/embedding.h
/// @brief `tiny::nn::Embedding`: a lookup table of learned vectors (PyTorch's `torch.nn.Embedding`).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "tiny/nn/module.h"

namespace tiny::nn {

/// @brief Maps int64 indices to rows of a [num_embeddings, embedding_dim] weight (PyTorch's `nn.Embedding`).
///
/// The weight starts standard normal (tiny's Philox generator). With a
/// `padding_idx` >= 0 that row starts at zero and never receives a gradient.
class Embedding : public Module {
 public:
  /// @brief A table of `num_embeddings` vectors of size `embedding_dim`; `padding_idx` -1 means none.
  ///
  /// Unlike PyTorch, a negative padding_idx does not count from the end: -1 is "no padding".
  Embedding(int64_t num_embeddings, int64_t embedding_dim, int64_t padding_idx = -1);
  /// @brief Draws a new normal(0, 1) weight and zeroes the padding row (PyTorch's `reset_parameters()`).
  void reset_parameters();
  /// @brief `weight[indices]`: shape `indices.shape + [embedding_dim]` (PyTorch's `F.embedding`).
  Tensor forward(const Tensor& indices) override;
  /// @brief "Embedding".
  std::string name() const override { return "Embedding"; }
  /// @brief A deep copy on `device` (or where this one is), drawing no random numbers (LibTorch's `clone`).
  std::shared_ptr<Module> clone(const std::optional<Device>& device = std::nullopt) const override;
  /// @brief "10, 3" or "10, 3, padding_idx=0".
  std::string extra_repr() const override;

  int64_t num_embeddings;  ///< rows of the table
  int64_t embedding_dim;   ///< size of each vector
  int64_t padding_idx;     ///< the row kept at zero, or -1
  Tensor weight;           ///< [num_embeddings, embedding_dim], the registered parameter "weight"
};

}  // namespace tiny::nn
