/// @file nn/loss.h
/// @brief Loss modules (PyTorch's `nn.CrossEntropyLoss`, `nn.MSELoss`, `nn.NLLLoss`).
#pragma once

#include <cstdint>
#include <string>

#include "tiny/nn/functional.h"
#include "tiny/nn/module.h"

namespace tiny::nn {

using functional::CrossEntropyOptions;
using functional::Reduction;

/// @brief The base of losses: `loss(input, target)` (PyTorch's `nn.modules.loss._Loss`).
class Loss : public Module {
 public:
  using Module::operator();
  /// @brief Throws tiny::NotImplemented: a loss needs (input, target).
  Tensor forward(const Tensor& input) override;
  /// @brief The loss of `input` against `target`.
  virtual Tensor forward(const Tensor& input, const Tensor& target) = 0;
  /// @brief Calls forward(input, target): `criterion(logits, labels)`.
  Tensor operator()(const Tensor& input, const Tensor& target) { return forward(input, target); }
};

/// @brief Cross-entropy of logits [N, C] against int64 class indices [N] (PyTorch's `nn.CrossEntropyLoss`).
class CrossEntropyLoss : public Loss {
 public:
  using Loss::forward;
  /// @brief Reduction, ignore_index and label smoothing as in `F::cross_entropy`.
  explicit CrossEntropyLoss(CrossEntropyOptions options = {});
  /// @brief `F::cross_entropy(input, target, options)`.
  Tensor forward(const Tensor& input, const Tensor& target) override;
  /// @brief "CrossEntropyLoss".
  std::string name() const override { return "CrossEntropyLoss"; }

  CrossEntropyOptions options;  ///< the loss's settings
};

/// @brief Mean squared error (PyTorch's `nn.MSELoss`).
class MSELoss : public Loss {
 public:
  using Loss::forward;
  /// @brief Combines per-element squared errors by `reduction`.
  explicit MSELoss(Reduction reduction = Reduction::Mean);
  /// @brief `F::mse_loss(input, target, reduction)`.
  Tensor forward(const Tensor& input, const Tensor& target) override;
  /// @brief "MSELoss".
  std::string name() const override { return "MSELoss"; }

  Reduction reduction;  ///< how to combine elements
};

/// @brief Negative log-likelihood of log-probabilities [N, C] at int64 class indices [N] (PyTorch's `nn.NLLLoss`).
class NLLLoss : public Loss {
 public:
  using Loss::forward;
  /// @brief Combines samples by `reduction`; targets equal to `ignore_index` are skipped.
  explicit NLLLoss(Reduction reduction = Reduction::Mean, int64_t ignore_index = -100);
  /// @brief `F::nll_loss(input, target, reduction, ignore_index)`.
  Tensor forward(const Tensor& input, const Tensor& target) override;
  /// @brief "NLLLoss".
  std::string name() const override { return "NLLLoss"; }

  Reduction reduction;   ///< how to combine samples
  int64_t ignore_index;  ///< target value that adds nothing
};

}  // namespace tiny::nn
