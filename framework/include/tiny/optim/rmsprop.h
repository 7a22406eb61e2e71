/// @file optim/rmsprop.h
/// @brief `tiny::optim::RMSprop` (PyTorch's `torch.optim.RMSprop`).
#pragma once

#include <type_traits>
#include <utility>
#include <vector>

#include "tiny/optim/optimizer.h"

namespace tiny::optim {

/// @brief RMSprop's hyperparameters (the keyword arguments of PyTorch's `torch.optim.RMSprop`).
struct RMSpropOptions {
  /// @brief Learning rate (PyTorch's `lr`).
  double lr = 1e-2;
  /// @brief Smoothing constant of the running average of squared gradients (PyTorch's `alpha`).
  double alpha = 0.99;
  /// @brief Added to the denominator for numerical stability (PyTorch's `eps`).
  double eps = 1e-8;
  /// @brief L2 penalty added to the gradient (PyTorch's `weight_decay`).
  double weight_decay = 0.0;
  /// @brief Momentum factor (PyTorch's `momentum`).
  double momentum = 0.0;
  /// @brief Normalises by the estimated variance of the gradient instead of its second moment (PyTorch's `centered`).
  bool centered = false;
  /// @brief Maximises the objective instead of minimising it (PyTorch's `maximize`).
  bool maximize = false;
};

/// @brief RMSprop (PyTorch's `torch.optim.RMSprop`).
///
/// For each parameter p with gradient g (torch.optim 1.13's single-tensor code):
/// g = -g if maximize; g += weight_decay * p;
/// square_avg = alpha * square_avg + (1 - alpha) * g * g;
/// centered: grad_avg = alpha * grad_avg + (1 - alpha) * g and
/// avg = sqrt(square_avg - grad_avg^2) + eps, else avg = sqrt(square_avg) + eps;
/// with momentum, buf = momentum * buf + g / avg and p -= lr * buf, else
/// p -= lr * g / avg. The state ("square_avg", "momentum_buffer", "grad_avg")
/// starts at zeros.
class RMSprop : public Optimizer {
 public:
  /// @brief An RMSprop over `params` (PyTorch's `torch.optim.RMSprop(params, lr=1e-2, alpha=0.99, ...)`).
  explicit RMSprop(std::vector<Tensor> params, const RMSpropOptions& options = {});
  /// @brief An RMSprop with learning rate `lr` and PyTorch's other defaults: `RMSprop(model->parameters(), 3e-4)`.
  template <class Lr, std::enable_if_t<std::is_arithmetic_v<Lr>, int> = 0>
  RMSprop(std::vector<Tensor> params, Lr lr) : RMSprop(std::move(params), RMSpropOptions{static_cast<double>(lr)}) {}
  /// @brief Adds a group with its own options (PyTorch's `add_param_group`).
  void add_param_group(std::vector<Tensor> params, const RMSpropOptions& options);
  using Optimizer::add_param_group;
  /// @brief The options of group `group` (PyTorch's `optimizer.param_groups[group]`).
  RMSpropOptions options(size_t group = 0) const;

  /// @brief One update of every parameter that has a gradient (PyTorch's `optimizer.step()`).
  void step() override;
  /// @brief "RMSprop".
  std::string name() const override { return "RMSprop"; }
  /// @brief {"square_avg", "momentum_buffer", "grad_avg"}.
  std::vector<std::string> state_names() const override { return {"square_avg", "momentum_buffer", "grad_avg"}; }

 protected:
  /// @brief PyTorch's checks: lr, eps, momentum, weight_decay and alpha >= 0.
  void check_options(const OptionMap& options) const override;
};

/// @brief RMSpropOptions as an OptionMap ("lr", "alpha", "eps", "weight_decay", "momentum", "centered", "maximize").
OptionMap to_option_map(const RMSpropOptions& options);

}  // namespace tiny::optim
