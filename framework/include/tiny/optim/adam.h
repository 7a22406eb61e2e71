/// @file optim/adam.h
/// @brief `tiny::optim::Adam` and `AdamW` (PyTorch's `torch.optim.Adam` and `torch.optim.AdamW`).
#pragma once

#include <type_traits>
#include <utility>
#include <vector>

#include "tiny/optim/optimizer.h"

namespace tiny::optim {

/// @brief Adam's hyperparameters (the keyword arguments of PyTorch's `torch.optim.Adam`).
struct AdamOptions {
  /// @brief Learning rate (PyTorch's `lr`).
  double lr = 1e-3;
  /// @brief Decay rates of the first and second moment estimates (PyTorch's `betas`).
  std::pair<double, double> betas = {0.9, 0.999};
  /// @brief Added to the denominator for numerical stability (PyTorch's `eps`).
  double eps = 1e-8;
  /// @brief L2 penalty added to the gradient (PyTorch's `weight_decay`).
  double weight_decay = 0.0;
  /// @brief Uses the maximum of past second moments (PyTorch's `amsgrad`).
  bool amsgrad = false;
  /// @brief Maximises the objective instead of minimising it (PyTorch's `maximize`).
  bool maximize = false;
};

/// @brief AdamW's hyperparameters (PyTorch's `torch.optim.AdamW`: as Adam's, but weight_decay defaults to 1e-2).
struct AdamWOptions {
  /// @brief Learning rate (PyTorch's `lr`).
  double lr = 1e-3;
  /// @brief Decay rates of the first and second moment estimates (PyTorch's `betas`).
  std::pair<double, double> betas = {0.9, 0.999};
  /// @brief Added to the denominator for numerical stability (PyTorch's `eps`).
  double eps = 1e-8;
  /// @brief Decoupled weight decay: p *= 1 - lr * weight_decay each step (PyTorch's `weight_decay`).
  double weight_decay = 1e-2;
  /// @brief Uses the maximum of past second moments (PyTorch's `amsgrad`).
  bool amsgrad = false;
  /// @brief Maximises the objective instead of minimising it (PyTorch's `maximize`).
  bool maximize = false;
};

/// @brief Adam (PyTorch's `torch.optim.Adam`).
///
/// For each parameter p with gradient g, after step t += 1 (torch.optim 1.13):
/// g = -g if maximize; g += weight_decay * p;
/// m = beta1 * m + (1 - beta1) * g; v = beta2 * v + (1 - beta2) * g * g;
/// v_max = max(v_max, v) with amsgrad; step_size = lr / (1 - beta1^t);
/// denom = sqrt(v or v_max) / sqrt(1 - beta2^t) + eps; p -= step_size * m / denom.
class Adam : public Optimizer {
 public:
  /// @brief An Adam over `params` (PyTorch's `torch.optim.Adam(params, lr=1e-3, ...)`).
  explicit Adam(std::vector<Tensor> params, const AdamOptions& options = {});
  /// @brief An Adam with learning rate `lr` and PyTorch's other defaults: `Adam(model->parameters(), 3e-4)`.
  template <class Lr, std::enable_if_t<std::is_arithmetic_v<Lr>, int> = 0>
  Adam(std::vector<Tensor> params, Lr lr) : Adam(std::move(params), AdamOptions{static_cast<double>(lr)}) {}
  /// @brief Adds a group with its own options (PyTorch's `add_param_group`).
  void add_param_group(std::vector<Tensor> params, const AdamOptions& options);
  using Optimizer::add_param_group;
  /// @brief The options of group `group` (PyTorch's `optimizer.param_groups[group]`).
  AdamOptions options(size_t group = 0) const;

  /// @brief One update of every parameter that has a gradient (PyTorch's `optimizer.step()`).
  void step() override;
  /// @brief "Adam".
  std::string name() const override { return "Adam"; }
  /// @brief {"exp_avg", "exp_avg_sq", "max_exp_avg_sq"}.
  std::vector<std::string> state_names() const override { return {"exp_avg", "exp_avg_sq", "max_exp_avg_sq"}; }

 protected:
  /// @brief Used by AdamW: the same update with the weight decay decoupled from the gradient.
  Adam(std::vector<Tensor> params, const OptionMap& options, bool decoupled_weight_decay);
  /// @brief PyTorch's checks: lr, eps, weight_decay >= 0 and betas in [0, 1).
  void check_options(const OptionMap& options) const override;

 private:
  bool decoupled_weight_decay_ = false;
};

/// @brief Adam with decoupled weight decay (PyTorch's `torch.optim.AdamW`).
///
/// Each step first shrinks the parameter, p *= 1 - lr * weight_decay, then
/// applies Adam's update without adding weight_decay * p to the gradient.
class AdamW : public Adam {
 public:
  /// @brief An AdamW over `params` (PyTorch's `torch.optim.AdamW(params, lr=1e-3, weight_decay=1e-2, ...)`).
  explicit AdamW(std::vector<Tensor> params, const AdamWOptions& options = {});
  /// @brief An AdamW with learning rate `lr` and PyTorch's other defaults: `AdamW(model->parameters(), 3e-4)`.
  template <class Lr, std::enable_if_t<std::is_arithmetic_v<Lr>, int> = 0>
  AdamW(std::vector<Tensor> params, Lr lr) : AdamW(std::move(params), AdamWOptions{static_cast<double>(lr)}) {}
  /// @brief Adds a group with its own options (PyTorch's `add_param_group`).
  void add_param_group(std::vector<Tensor> params, const AdamWOptions& options);
  using Optimizer::add_param_group;
  /// @brief The options of group `group` (PyTorch's `optimizer.param_groups[group]`).
  AdamWOptions options(size_t group = 0) const;
  /// @brief "AdamW".
  std::string name() const override { return "AdamW"; }
};

/// @brief AdamOptions as an OptionMap ("lr", "beta1", "beta2", "eps", "weight_decay", "amsgrad", "maximize").
OptionMap to_option_map(const AdamOptions& options);
/// @brief AdamWOptions as an OptionMap (the same names as Adam's).
OptionMap to_option_map(const AdamWOptions& options);

}  // namespace tiny::optim
