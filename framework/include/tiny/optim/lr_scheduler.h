/// @file optim/lr_scheduler.h
/// @brief Learning-rate schedules (PyTorch's `torch.optim.lr_scheduler`): StepLR and CosineAnnealingLR.
///
/// As in PyTorch, building a scheduler performs its first step (epoch 0, the
/// optimizer's learning rates unchanged); call `step()` after each epoch's
/// `optimizer.step()`. The scheduler holds a reference to the optimizer, which
/// must outlive it.
#pragma once

#include <cstdint>
#include <vector>

#include "tiny/optim/optimizer.h"

namespace tiny::optim {

/// @brief Base class of the schedulers (PyTorch's `torch.optim.lr_scheduler._LRScheduler`).
class LRScheduler {
 public:
  /// @brief Destroys the scheduler (the optimizer keeps its last learning rates).
  virtual ~LRScheduler() = default;
  /// @brief Not copyable (it drives one optimizer).
  LRScheduler(const LRScheduler&) = delete;
  /// @brief Not copyable.
  LRScheduler& operator=(const LRScheduler&) = delete;

  /// @brief Advances one epoch and sets each group's lr (PyTorch's `scheduler.step()`).
  void step();
  /// @brief The learning rate of each group set by the last step (PyTorch's `scheduler.get_last_lr()`).
  const std::vector<double>& get_last_lr() const { return last_lr_; }
  /// @brief Each group's learning rate when the scheduler was built (PyTorch's `scheduler.base_lrs`).
  const std::vector<double>& base_lrs() const { return base_lrs_; }
  /// @brief Epochs stepped so far; 0 right after construction (PyTorch's `scheduler.last_epoch`).
  int64_t last_epoch() const { return last_epoch_; }

 protected:
  /// @brief Records the optimizer and its groups' learning rates as base_lrs.
  explicit LRScheduler(Optimizer& optimizer);
  /// @brief The first step (epoch 0); derived constructors call it last, once their members are set.
  void initial_step();
  /// @brief The learning rates for `last_epoch()`, from the groups' current ones (PyTorch's chainable `get_lr()`).
  virtual std::vector<double> get_lr() const = 0;
  /// @brief The optimizer driven.
  Optimizer& optimizer_;

 private:
  std::vector<double> base_lrs_;
  std::vector<double> last_lr_;
  int64_t last_epoch_ = -1;
};

/// @brief Multiplies the learning rate by `gamma` every `step_size` epochs (PyTorch's `StepLR`).
///
/// lr(epoch) = base_lr * gamma^(epoch / step_size) (integer division), computed
/// as PyTorch does, by multiplying the group's current lr at each boundary.
class StepLR : public LRScheduler {
 public:
  /// @brief PyTorch's `StepLR(optimizer, step_size, gamma=0.1)`; step_size must be >= 1.
  StepLR(Optimizer& optimizer, int64_t step_size, double gamma = 0.1);

 protected:
  /// @brief PyTorch's `StepLR.get_lr()`.
  std::vector<double> get_lr() const override;

 private:
  int64_t step_size_;
  double gamma_;
};

/// @brief Cosine annealing from the base lr down to `eta_min` over `T_max` epochs (PyTorch's `CosineAnnealingLR`).
///
/// Follows PyTorch's recursive form, which equals the closed form
/// eta_min + (base_lr - eta_min) * (1 + cos(pi * epoch / T_max)) / 2 when
/// nothing else changes the lr, and keeps going (back up) past T_max.
class CosineAnnealingLR : public LRScheduler {
 public:
  /// @brief PyTorch's `CosineAnnealingLR(optimizer, T_max, eta_min=0)`; T_max must be >= 1.
  CosineAnnealingLR(Optimizer& optimizer, int64_t T_max, double eta_min = 0.0);

 protected:
  /// @brief PyTorch's `CosineAnnealingLR.get_lr()`.
  std::vector<double> get_lr() const override;

 private:
  int64_t T_max_;
  double eta_min_;
};

}  // namespace tiny::optim
