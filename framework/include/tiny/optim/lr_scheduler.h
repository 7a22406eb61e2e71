/// @file optim/lr_scheduler.h
/// @brief Learning-rate schedules (PyTorch's `torch.optim.lr_scheduler`): StepLR, MultiStepLR,
/// CosineAnnealingLR, LambdaLR, LinearLR, OneCycleLR, SequentialLR and ReduceLROnPlateau.
///
/// As in PyTorch, building a scheduler performs its first step (epoch 0);
/// call `step()` after each epoch's (or, for OneCycleLR, each batch's)
/// `optimizer.step()`. The scheduler holds a reference to the optimizer, which
/// must outlive it. Each scheduler's base lr is the group's `initial_lr`, set
/// by the first scheduler built on the group (PyTorch's
/// `group.setdefault("initial_lr", group["lr"])`).
///
/// `state_dict()` / `load_state_dict()` save and restore the scheduler's
/// progress (epoch, base and last lrs, and what each scheduler counts) as
/// metadata strings. As in PyTorch, the schedules are chainable (they read the
/// group's current lr), so restore the optimizer's state dict too, and build
/// the scheduler with the same arguments: those are not stored.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "tiny/state_dict.h"

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
  virtual void step();
  /// @brief The class name as PyTorch spells it ("StepLR", "OneCycleLR", ...).
  virtual std::string name() const = 0;
  /// @brief The scheduler's progress as metadata (PyTorch's `scheduler.state_dict()`, less the constructor arguments).
  virtual StateDict state_dict() const;
  /// @brief Restores a `state_dict()` of the same kind of scheduler (PyTorch's `scheduler.load_state_dict`).
  ///
  /// Checks the scheduler's name and number of groups first and throws
  /// tiny::ValueError saying what differs; changes nothing then.
  virtual void load_state_dict(const StateDict& state_dict);
  /// @brief The optimizer this scheduler drives (PyTorch's `scheduler.optimizer`).
  const Optimizer& optimizer() const { return optimizer_; }
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
  /// @brief The lrs for `last_epoch()` computed from base_lrs alone, where the schedule has one
  /// (PyTorch's `_get_closed_form_lr`, used by SequentialLR's restart at a milestone).
  virtual std::optional<std::vector<double>> closed_form_lr() const { return std::nullopt; }
  /// @brief Extra state of a derived scheduler, written with the keys' prefix `prefix`.
  virtual void save_extra(StateDict& /*sd*/, const std::string& /*prefix*/) const {}
  /// @brief Checks (check_only) or restores the extra state written by save_extra.
  virtual void load_extra(const StateDict& /*sd*/, const std::string& /*prefix*/, bool /*check_only*/) {}
  /// @brief Writes the base state under `prefix` (SequentialLR nests its schedulers' under "schedulers.<i>.").
  void save_to(StateDict& sd, const std::string& prefix) const;
  /// @brief Reads the base state from under `prefix`; with check_only, only validates.
  void load_from(const StateDict& sd, const std::string& prefix, bool check_only);
  /// @brief Sets last_epoch to `epoch` and the lrs from the closed form (PyTorch's deprecated `step(epoch)`).
  void step_to(int64_t epoch);
  /// @brief Sets the groups' lrs to `lrs` and records them as the last lrs.
  void apply(std::vector<double> lrs);
  /// @brief The optimizer driven.
  Optimizer& optimizer_;

 private:
  friend class SequentialLR;
  friend class OneCycleLR;
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
  /// @brief "StepLR".
  std::string name() const override { return "StepLR"; }

 protected:
  /// @brief PyTorch's `StepLR.get_lr()`.
  std::vector<double> get_lr() const override;
  /// @brief base_lr * gamma^(epoch / step_size).
  std::optional<std::vector<double>> closed_form_lr() const override;

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
  /// @brief "CosineAnnealingLR".
  std::string name() const override { return "CosineAnnealingLR"; }

 protected:
  /// @brief PyTorch's `CosineAnnealingLR.get_lr()`.
  std::vector<double> get_lr() const override;
  /// @brief eta_min + (base_lr - eta_min) * (1 + cos(pi * epoch / T_max)) / 2.
  std::optional<std::vector<double>> closed_form_lr() const override;

 private:
  int64_t T_max_;
  double eta_min_;
};

/// @brief Decays the lr by `gamma` at each milestone epoch (PyTorch's `MultiStepLR`).
///
/// A milestone listed k times decays by gamma^k there (PyTorch counts them
/// with a `Counter`); the milestones need not be sorted.
class MultiStepLR : public LRScheduler {
 public:
  /// @brief PyTorch's `MultiStepLR(optimizer, milestones, gamma=0.1)`.
  MultiStepLR(Optimizer& optimizer, std::vector<int64_t> milestones, double gamma = 0.1);
  /// @brief "MultiStepLR".
  std::string name() const override { return "MultiStepLR"; }

 protected:
  /// @brief PyTorch's `MultiStepLR.get_lr()`.
  std::vector<double> get_lr() const override;
  /// @brief base_lr * gamma^(number of milestones <= epoch).
  std::optional<std::vector<double>> closed_form_lr() const override;

 private:
  std::vector<int64_t> milestones_;
  double gamma_;
};

/// @brief A function of the epoch giving the factor applied to the base lr (PyTorch's `lr_lambda`).
using LrLambda = std::function<double(int64_t epoch)>;

/// @brief lr = base_lr * lr_lambda(epoch), one function for all groups or one per group (PyTorch's `LambdaLR`).
class LambdaLR : public LRScheduler {
 public:
  /// @brief PyTorch's `LambdaLR(optimizer, lr_lambda)`: the same function for every group.
  LambdaLR(Optimizer& optimizer, LrLambda lr_lambda);
  /// @brief PyTorch's `LambdaLR(optimizer, [f0, f1, ...])`: one function per param group.
  LambdaLR(Optimizer& optimizer, std::vector<LrLambda> lr_lambdas);
  /// @brief "LambdaLR".
  std::string name() const override { return "LambdaLR"; }

 protected:
  /// @brief PyTorch's `LambdaLR.get_lr()`: base_lr * lr_lambda(last_epoch).
  std::vector<double> get_lr() const override;

 private:
  std::vector<LrLambda> lr_lambdas_;
};

/// @brief Multiplies the lr by a factor going linearly from start_factor to end_factor over total_iters epochs
/// (PyTorch's `LinearLR`, the usual warmup).
///
/// lr(epoch) = base_lr * (start_factor + (end_factor - start_factor) * min(epoch, total_iters) / total_iters),
/// computed with PyTorch's chainable recursion.
class LinearLR : public LRScheduler {
 public:
  /// @brief PyTorch's `LinearLR(optimizer, start_factor=1/3, end_factor=1.0, total_iters=5)`.
  ///
  /// start_factor must be in (0, 1], end_factor in [0, 1] and total_iters >= 1.
  LinearLR(Optimizer& optimizer, double start_factor = 1.0 / 3, double end_factor = 1.0, int64_t total_iters = 5);
  /// @brief "LinearLR".
  std::string name() const override { return "LinearLR"; }

 protected:
  /// @brief PyTorch's `LinearLR.get_lr()`.
  std::vector<double> get_lr() const override;
  /// @brief PyTorch's `LinearLR._get_closed_form_lr()`.
  std::optional<std::vector<double>> closed_form_lr() const override;

 private:
  double start_factor_, end_factor_;
  int64_t total_iters_;
};

/// @brief Options of OneCycleLR (the keyword arguments of PyTorch's `OneCycleLR`).
///
/// Give either `total_steps`, or `epochs` and `steps_per_epoch` (then total_steps = epochs * steps_per_epoch).
struct OneCycleLROptions {
  int64_t total_steps = 0;       ///< the number of scheduler steps in the cycle (PyTorch's `total_steps`; 0: not given)
  int64_t epochs = 0;            ///< with steps_per_epoch, the alternative to total_steps (0: not given)
  int64_t steps_per_epoch = 0;   ///< batches per epoch (0: not given)
  double pct_start = 0.3;        ///< fraction of the cycle spent raising the lr, in [0, 1]
  std::string anneal_strategy = "cos";  ///< "cos" or "linear"
  bool cycle_momentum = true;    ///< cycles SGD/RMSprop's momentum or Adam's beta1 inversely to the lr
  double base_momentum = 0.85;   ///< the lowest momentum (at the peak lr)
  double max_momentum = 0.95;    ///< the highest momentum (at the start and the end)
  double div_factor = 25.0;      ///< initial_lr = max_lr / div_factor
  double final_div_factor = 1e4; ///< min_lr = initial_lr / final_div_factor
  bool three_phase = false;      ///< adds a third phase that anneals from initial_lr down to min_lr
};

/// @brief The 1cycle policy: the lr rises from max_lr / div_factor to max_lr, then anneals to a minimum
/// (PyTorch's `OneCycleLR`). Step it after every batch.
///
/// With `cycle_momentum`, the optimizer's momentum ("momentum" of SGD and RMSprop,
/// "beta1" of Adam and AdamW) moves from max_momentum to base_momentum and back,
/// opposite to the lr. Stepping more than total_steps times throws, as in PyTorch.
class OneCycleLR : public LRScheduler {
 public:
  /// @brief PyTorch's `OneCycleLR(optimizer, max_lr, total_steps=..., ...)` with one max_lr for all groups.
  OneCycleLR(Optimizer& optimizer, double max_lr, const OneCycleLROptions& options);
  /// @brief PyTorch's `OneCycleLR(optimizer, [max_lr0, max_lr1, ...], ...)`: one max_lr per group.
  OneCycleLR(Optimizer& optimizer, std::vector<double> max_lrs, const OneCycleLROptions& options);
  /// @brief "OneCycleLR".
  std::string name() const override { return "OneCycleLR"; }
  /// @brief Advances one step (batch); throws tiny::ValueError past total_steps.
  void step() override;
  /// @brief The number of steps in the cycle.
  int64_t total_steps() const { return total_steps_; }

 protected:
  /// @brief PyTorch's `OneCycleLR.get_lr()` (also sets the momentum when cycle_momentum; hence not const-pure).
  std::vector<double> get_lr() const override;

 private:
  struct Phase {
    double end_step;
    int start_lr, end_lr, start_momentum, end_momentum;  // indices into a group's {initial, max, min} lr or {max, base} momentum
  };
  double anneal(double start, double end, double pct) const;
  OneCycleLROptions options_;
  int64_t total_steps_ = 0;
  std::vector<Phase> phases_;
  std::vector<double> initial_lrs_, max_lrs_, min_lrs_;
  std::string momentum_key_;  // "momentum" or "beta1"; empty without cycle_momentum
};

/// @brief Runs schedulers one after another, switching at the milestone epochs (PyTorch's `SequentialLR`).
///
/// `schedulers` must all drive `optimizer` and there must be one milestone
/// fewer than schedulers. At a milestone the next scheduler restarts at its
/// epoch 0 (its closed form, as PyTorch's `scheduler.step(0)`).
class SequentialLR : public LRScheduler {
 public:
  /// @brief PyTorch's `SequentialLR(optimizer, schedulers=[...], milestones=[...])`.
  SequentialLR(Optimizer& optimizer, std::vector<std::shared_ptr<LRScheduler>> schedulers,
               std::vector<int64_t> milestones);
  /// @brief "SequentialLR".
  std::string name() const override { return "SequentialLR"; }
  /// @brief Steps the scheduler whose turn it is (PyTorch's `SequentialLR.step()`).
  void step() override;
  /// @brief Its own state and each scheduler's under "schedulers.<i>." (PyTorch's nested `_schedulers`).
  StateDict state_dict() const override;
  /// @brief Restores state_dict(), checking every nested scheduler before changing anything.
  void load_state_dict(const StateDict& state_dict) override;

 protected:
  /// @brief The current scheduler's last lrs (SequentialLR computes nothing itself).
  std::vector<double> get_lr() const override;

 private:
  std::vector<std::shared_ptr<LRScheduler>> schedulers_;
  std::vector<int64_t> milestones_;
  int64_t epoch_ = 0;
};

/// @brief Options of ReduceLROnPlateau (the keyword arguments of PyTorch's `ReduceLROnPlateau`).
struct ReduceLROnPlateauOptions {
  std::string mode = "min";            ///< "min": the metric should fall (a loss); "max": rise (an accuracy)
  double factor = 0.1;                 ///< new_lr = lr * factor; must be < 1
  int64_t patience = 10;               ///< epochs without improvement tolerated before reducing
  double threshold = 1e-4;             ///< what counts as an improvement (see threshold_mode)
  std::string threshold_mode = "rel";  ///< "rel": beyond best * (1 -/+ threshold); "abs": beyond best -/+ threshold
  int64_t cooldown = 0;                ///< epochs to wait after a reduction before counting again
  std::vector<double> min_lr = {0.0};  ///< lower bound on the lr: one value, or one per group
  double eps = 1e-8;                   ///< a reduction smaller than this is skipped
};

/// @brief Reduces the lr by `factor` when a metric has stopped improving for `patience` epochs
/// (PyTorch's `ReduceLROnPlateau`). Call `step(metric)` once per epoch with the validation metric.
///
/// Like PyTorch's, it is not an LRScheduler (its step needs the metric).
class ReduceLROnPlateau {
 public:
  /// @brief PyTorch's `ReduceLROnPlateau(optimizer, mode="min", factor=0.1, patience=10, ...)`.
  explicit ReduceLROnPlateau(Optimizer& optimizer, const ReduceLROnPlateauOptions& options = {});
  /// @brief Not copyable (it drives one optimizer).
  ReduceLROnPlateau(const ReduceLROnPlateau&) = delete;
  /// @brief Not copyable.
  ReduceLROnPlateau& operator=(const ReduceLROnPlateau&) = delete;

  /// @brief Records this epoch's metric and reduces the lr after `patience` bad epochs (PyTorch's `step(metrics)`).
  void step(double metric);
  /// @brief Throws tiny::ValueError: ReduceLROnPlateau needs the metric (PyTorch: step() missing 'metrics').
  void step();
  /// @brief The groups' lrs after the last step (PyTorch's `scheduler._last_lr`).
  const std::vector<double>& get_last_lr() const { return last_lr_; }
  /// @brief Epochs stepped so far (PyTorch's `last_epoch`).
  int64_t last_epoch() const { return last_epoch_; }
  /// @brief The best metric so far (inf for "min", -inf for "max" before any step).
  double best() const { return best_; }
  /// @brief Consecutive epochs without improvement (PyTorch's `num_bad_epochs`).
  int64_t num_bad_epochs() const { return num_bad_epochs_; }
  /// @brief Epochs of cooldown left (PyTorch's `cooldown_counter`).
  int64_t cooldown_counter() const { return cooldown_counter_; }
  /// @brief "ReduceLROnPlateau".
  std::string name() const { return "ReduceLROnPlateau"; }
  /// @brief The counters and best value as metadata (PyTorch's `state_dict()`, less the constructor arguments).
  StateDict state_dict() const;
  /// @brief Restores state_dict() (tiny::ValueError for another scheduler's or a malformed one).
  void load_state_dict(const StateDict& state_dict);

 private:
  bool is_better(double a, double best) const;
  Optimizer& optimizer_;
  ReduceLROnPlateauOptions options_;
  std::vector<double> min_lrs_;
  std::vector<double> last_lr_;
  double best_ = 0.0;
  int64_t num_bad_epochs_ = 0;
  int64_t cooldown_counter_ = 0;
  int64_t last_epoch_ = 0;
};

}  // namespace tiny::optim
