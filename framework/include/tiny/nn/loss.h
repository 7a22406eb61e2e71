/// @file nn/loss.h
/// @brief Loss modules (PyTorch's `nn.CrossEntropyLoss`, `nn.NLLLoss`, `nn.MSELoss`, `nn.L1Loss`,
/// `nn.SmoothL1Loss`, `nn.HuberLoss`, `nn.BCEWithLogitsLoss`, `nn.KLDivLoss`).
#pragma once

#include <cstdint>
#include <string>
#include <utility>

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

/// @brief Cross-entropy of logits [N, C, ...] against class indices or probabilities (PyTorch's `nn.CrossEntropyLoss`).
class CrossEntropyLoss : public Loss {
 public:
  using Loss::forward;
  /// @brief Reduction, ignore_index, label smoothing and class weights as in `F::cross_entropy`:
  /// `CrossEntropyLoss(CrossEntropyOptions().set_label_smoothing(0.1))`.
  explicit CrossEntropyLoss(CrossEntropyOptions options = {});
  /// @brief A weight per class [C], the other options at PyTorch's defaults (`nn.CrossEntropyLoss(weight)`).
  explicit CrossEntropyLoss(Tensor weight);
  /// @brief `F::cross_entropy(input, target, options)`.
  Tensor forward(const Tensor& input, const Tensor& target) override;
  /// @brief "CrossEntropyLoss".
  std::string name() const override { return "CrossEntropyLoss"; }

  CrossEntropyOptions options;  ///< the loss's settings
};

/// @brief A loss that combines per-element values with a `reduction` (the layout of most of PyTorch's losses).
class ReducedLoss : public Loss {
 public:
  using Loss::forward;
  Reduction reduction;  ///< how to combine elements
 protected:
  /// @brief Stores the reduction.
  explicit ReducedLoss(Reduction reduction_) : reduction(reduction_) {}
};

/// @brief Binary cross-entropy on logits (PyTorch's `nn.BCEWithLogitsLoss(weight=None, reduction='mean', pos_weight=None)`).
class BCEWithLogitsLoss : public ReducedLoss {
 public:
  using Loss::forward;
  /// @brief `weight` (broadcast to the input) and `pos_weight` (per class, last dimension) may be undefined.
  explicit BCEWithLogitsLoss(Tensor weight = Tensor(), Reduction reduction = Reduction::Mean,
                             Tensor pos_weight = Tensor());
  /// @brief `F::binary_cross_entropy_with_logits(input, target, weight, pos_weight, reduction)`.
  Tensor forward(const Tensor& input, const Tensor& target) override;
  /// @brief "BCEWithLogitsLoss".
  std::string name() const override { return "BCEWithLogitsLoss"; }
  Tensor weight;      ///< per-element weight (undefined: none)
  Tensor pos_weight;  ///< weight of the positive examples per class (undefined: none)
};

/// @brief Mean absolute error (PyTorch's `nn.L1Loss`).
class L1Loss : public ReducedLoss {
 public:
  using Loss::forward;
  /// @brief Combines |input - target| by `reduction`.
  explicit L1Loss(Reduction reduction = Reduction::Mean) : ReducedLoss(reduction) {}
  /// @brief `F::l1_loss(input, target, reduction)`.
  Tensor forward(const Tensor& input, const Tensor& target) override;
  /// @brief "L1Loss".
  std::string name() const override { return "L1Loss"; }
};

/// @brief Smooth L1 loss (PyTorch's `nn.SmoothL1Loss(reduction='mean', beta=1.0)`).
class SmoothL1Loss : public ReducedLoss {
 public:
  using Loss::forward;
  /// @brief Quadratic below `beta`, linear above.
  explicit SmoothL1Loss(Reduction reduction = Reduction::Mean, double beta_ = 1.0)
      : ReducedLoss(reduction), beta(beta_) {}
  /// @brief `F::smooth_l1_loss(input, target, reduction, beta)`.
  Tensor forward(const Tensor& input, const Tensor& target) override;
  /// @brief "SmoothL1Loss".
  std::string name() const override { return "SmoothL1Loss"; }
  double beta;  ///< where the loss turns from quadratic to linear
};

/// @brief Huber loss (PyTorch's `nn.HuberLoss(reduction='mean', delta=1.0)`).
class HuberLoss : public ReducedLoss {
 public:
  using Loss::forward;
  /// @brief Quadratic below `delta`, linear (slope delta) above.
  explicit HuberLoss(Reduction reduction = Reduction::Mean, double delta_ = 1.0)
      : ReducedLoss(reduction), delta(delta_) {}
  /// @brief `F::huber_loss(input, target, reduction, delta)`.
  Tensor forward(const Tensor& input, const Tensor& target) override;
  /// @brief "HuberLoss".
  std::string name() const override { return "HuberLoss"; }
  double delta;  ///< where the loss turns from quadratic to linear
};

/// @brief Kullback-Leibler divergence (PyTorch's `nn.KLDivLoss(reduction='mean', log_target=False)`).
class KLDivLoss : public ReducedLoss {
 public:
  using Loss::forward;
  /// @brief `input` holds log-probabilities; `target` probabilities (or log-probabilities with log_target).
  explicit KLDivLoss(Reduction reduction = Reduction::Mean, bool log_target_ = false)
      : ReducedLoss(reduction), log_target(log_target_) {}
  /// @brief `F::kl_div(input, target, reduction, log_target)`.
  Tensor forward(const Tensor& input, const Tensor& target) override;
  /// @brief "KLDivLoss".
  std::string name() const override { return "KLDivLoss"; }
  bool log_target;  ///< the target is given as log-probabilities
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
  explicit NLLLoss(Reduction reduction = Reduction::Mean, int64_t ignore_index = -100, Tensor weight = Tensor());
  /// @brief A weight per class [C] first, as PyTorch's `nn.NLLLoss(weight, reduction=..., ignore_index=...)`.
  explicit NLLLoss(Tensor weight, Reduction reduction = Reduction::Mean, int64_t ignore_index = -100)
      : NLLLoss(reduction, ignore_index, std::move(weight)) {}
  /// @brief `F::nll_loss(input, target, reduction, ignore_index, weight)`.
  Tensor forward(const Tensor& input, const Tensor& target) override;
  /// @brief "NLLLoss".
  std::string name() const override { return "NLLLoss"; }

  Reduction reduction;   ///< how to combine samples
  int64_t ignore_index;  ///< target value that adds nothing
  Tensor weight;         ///< optional [C]: a weight per class
};

}  // namespace tiny::nn
