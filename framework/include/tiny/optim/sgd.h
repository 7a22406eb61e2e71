/// @file optim/sgd.h
/// @brief `tiny::optim::SGD`: stochastic gradient descent with momentum (PyTorch's `torch.optim.SGD`).
#pragma once

#include <limits>
#include <type_traits>
#include <utility>
#include <vector>

#include "tiny/optim/optimizer.h"

namespace tiny::optim {

/// @brief SGD's hyperparameters (the keyword arguments of PyTorch's `torch.optim.SGD`).
///
/// `SGDOptions{0.1, 0.9}` is lr 0.1 with momentum 0.9. `lr` has no default,
/// as in PyTorch: leaving it unset throws when the optimizer is built.
struct SGDOptions {
  /// @brief Learning rate (PyTorch's `lr`, required).
  double lr = std::numeric_limits<double>::quiet_NaN();
  /// @brief Momentum factor (PyTorch's `momentum`).
  double momentum = 0.0;
  /// @brief Dampening of the momentum (PyTorch's `dampening`).
  double dampening = 0.0;
  /// @brief L2 penalty added to the gradient (PyTorch's `weight_decay`).
  double weight_decay = 0.0;
  /// @brief Nesterov momentum; needs momentum > 0 and dampening 0 (PyTorch's `nesterov`).
  bool nesterov = false;
  /// @brief Maximises the objective instead of minimising it (PyTorch's `maximize`).
  bool maximize = false;
};

/// @brief Stochastic gradient descent, optionally with momentum (PyTorch's `torch.optim.SGD`).
///
/// For each parameter p with gradient g (torch.optim 1.13's formulas):
/// g = -g if maximize; g += weight_decay * p; with momentum,
/// buf = g on the first step, else buf = momentum * buf + (1 - dampening) * g,
/// and g = g + momentum * buf (nesterov) or g = buf; finally p -= lr * g.
class SGD : public Optimizer {
 public:
  /// @brief An SGD over `params` (PyTorch's `torch.optim.SGD(params, lr=..., ...)`).
  SGD(std::vector<Tensor> params, const SGDOptions& options);
  /// @brief An SGD with learning rate `lr` and PyTorch's other defaults: `SGD(model->parameters(), 1e-3)`.
  template <class Lr, std::enable_if_t<std::is_arithmetic_v<Lr>, int> = 0>
  SGD(std::vector<Tensor> params, Lr lr) : SGD(std::move(params), SGDOptions{static_cast<double>(lr)}) {}
  /// @brief Adds a group with its own options (PyTorch's `add_param_group`).
  void add_param_group(std::vector<Tensor> params, const SGDOptions& options);
  using Optimizer::add_param_group;
  /// @brief The options of group `group` (PyTorch's `optimizer.param_groups[group]`).
  SGDOptions options(size_t group = 0) const;

  /// @brief One update of every parameter that has a gradient (PyTorch's `optimizer.step()`).
  void step() override;
  /// @brief "SGD".
  std::string name() const override { return "SGD"; }
  /// @brief {"momentum_buffer"}.
  std::vector<std::string> state_names() const override { return {"momentum_buffer"}; }

 protected:
  /// @brief PyTorch's checks: lr, momentum, weight_decay >= 0; nesterov needs momentum > 0 and dampening 0.
  void check_options(const OptionMap& options) const override;
};

/// @brief SGDOptions as an OptionMap ("lr", "momentum", "dampening", "weight_decay", "nesterov", "maximize").
OptionMap to_option_map(const SGDOptions& options);

}  // namespace tiny::optim
