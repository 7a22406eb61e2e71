/// @file optim/optimizer.h
/// @brief `tiny::optim::Optimizer`: the base of every optimizer (PyTorch's `torch.optim.Optimizer`).
///
/// An optimizer holds the parameters (Tensor handles, so it works for any
/// device the tensors are on) in param groups, each with its own
/// hyperparameters, plus a per-parameter state (momentum buffers, moment
/// estimates, step counts). `step()` updates every parameter that has a
/// gradient with one fused kernel pass per parameter.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "tiny/state_dict.h"
#include "tiny/tensor.h"

namespace tiny::optim {

/// @brief Hyperparameters by name, e.g. {"lr": 0.1, "momentum": 0.9} (the keys of a PyTorch param group dict).
///
/// Booleans are stored as 0 or 1; Adam's `betas` are "beta1" and "beta2".
using OptionMap = std::map<std::string, double>;

/// @brief Parameters that share hyperparameters (an entry of PyTorch's `optimizer.param_groups`).
class ParamGroup {
 public:
  /// @brief A group of `params` with `options` (internal: use `Optimizer::add_param_group`).
  ParamGroup(std::vector<Tensor> params, OptionMap options)
      : options(std::move(options)), params_(std::move(params)) {}
  /// @brief The parameters of the group (PyTorch's `group["params"]`); add more with `add_param_group`.
  const std::vector<Tensor>& params() const { return params_; }
  /// @brief The learning rate of this group (PyTorch's `group["lr"]`).
  double lr() const { return option("lr"); }
  /// @brief Sets this group's learning rate (PyTorch's `group["lr"] = lr`).
  void set_lr(double lr) { options["lr"] = lr; }
  /// @brief The option `name` (PyTorch's `group[name]`); throws tiny::IndexError listing the existing names.
  double option(const std::string& name) const;

  /// @brief The hyperparameters by name; changing a value takes effect at the next `step()`.
  OptionMap options;
  /// @brief The lr when the first scheduler was built on this group (PyTorch's `group["initial_lr"]`).
  ///
  /// Schedulers take it as their base lr, so a second scheduler (or SequentialLR)
  /// starts from the same value as the first; OneCycleLR sets it to max_lr / div_factor.
  std::optional<double> initial_lr;

 private:
  std::vector<Tensor> params_;
};

/// @brief What an optimizer keeps for one parameter (PyTorch's `optimizer.state[p]`).
struct ParamState {
  /// @brief State tensors by name: "momentum_buffer", "exp_avg", "exp_avg_sq", "max_exp_avg_sq".
  std::map<std::string, Tensor> buffers;
  /// @brief Updates applied so far (Adam's `state["step"]`; SGD does not count).
  int64_t step = 0;
  /// @brief True when nothing has been stored yet (PyTorch: `p not in optimizer.state`).
  bool empty() const { return buffers.empty() && step == 0; }
};

/// @brief Base class of the optimizers (PyTorch's `torch.optim.Optimizer`).
///
/// Parameters are numbered in order across groups (group 0's first, then
/// group 1's ...), as in PyTorch's `state_dict()`. `state_dict()` stores the
/// state tensors as "state.<index>.<name>" and everything else (optimizer
/// name, groups and their hyperparameters, parameter shapes, step counts) in
/// `StateDict::metadata` as strings.
class Optimizer {
 public:
  /// @brief Destroys the optimizer (the parameters live on in their owners).
  virtual ~Optimizer() = default;
  /// @brief Not copyable: two optimizers would update the same parameters (PyTorch shares them by reference).
  Optimizer(const Optimizer&) = delete;
  /// @brief Not copyable.
  Optimizer& operator=(const Optimizer&) = delete;

  /// @brief Updates every parameter that has a gradient, once (PyTorch's `optimizer.step()`).
  virtual void step() = 0;
  /// @brief The optimizer's name as PyTorch spells the class: "SGD", "Adam", "AdamW".
  virtual std::string name() const = 0;
  /// @brief Names of the per-parameter state tensors this optimizer may keep (e.g. {"momentum_buffer"}).
  virtual std::vector<std::string> state_names() const = 0;

  /// @brief Clears the gradients (PyTorch's `optimizer.zero_grad(set_to_none=True)`).
  ///
  /// With `set_to_none` (the default, as in PyTorch 2.x) every `.grad()` becomes
  /// undefined; otherwise existing gradients are detached and filled with 0.
  void zero_grad(bool set_to_none = true);

  /// @brief Adds a group of parameters (PyTorch's `optimizer.add_param_group({"params": ..., **options})`).
  ///
  /// Options not given take the optimizer's defaults; an unknown option name,
  /// an invalid value, an empty list, a tensor that does not require grad or
  /// one already in the optimizer throw tiny::ValueError.
  void add_param_group(std::vector<Tensor> params, const OptionMap& options = {});
  /// @brief The param groups (PyTorch's `optimizer.param_groups`).
  std::vector<ParamGroup>& param_groups() { return groups_; }
  /// @brief The param groups (PyTorch's `optimizer.param_groups`).
  const std::vector<ParamGroup>& param_groups() const { return groups_; }
  /// @brief The options given at construction, used for groups added later (PyTorch's `optimizer.defaults`).
  const OptionMap& defaults() const { return defaults_; }

  /// @brief The learning rate shared by all groups (throws tiny::ValueError if the groups differ; PyTorch: `group["lr"]`).
  double lr() const;
  /// @brief Sets the learning rate of every group (PyTorch: `for g in opt.param_groups: g["lr"] = lr`).
  void set_lr(double lr);

  /// @brief Every parameter, in state_dict order (group 0's first).
  std::vector<Tensor> parameters() const;
  /// @brief Number of parameters over all groups.
  size_t num_params() const { return state_.size(); }
  /// @brief The state of parameter `index` (in `parameters()` order; PyTorch's `optimizer.state[p]`).
  const ParamState& state(size_t index) const;

  /// @brief A snapshot of the state (PyTorch's `optimizer.state_dict()`, but copies, not references).
  ///
  /// Tensors: "state.<i>.momentum_buffer", "state.<i>.exp_avg",
  /// "state.<i>.exp_avg_sq", "state.<i>.max_exp_avg_sq". Metadata: "optimizer",
  /// "num_params", "param_groups", "param_groups.<g>.params" ("0,1,2"),
  /// "param_groups.<g>.<option>", "params.<i>.shape" ("[3, 4]") and
  /// "state.<i>.step".
  StateDict state_dict() const;
  /// @brief Restores a `state_dict()` (PyTorch's `optimizer.load_state_dict`).
  ///
  /// Checks, before changing anything, that the optimizer type, the number of
  /// groups and parameters, every parameter's shape, the option names and the
  /// state tensors' names and shapes match, and throws tiny::ValueError saying
  /// what differs. State tensors are copied to each parameter's device and dtype.
  void load_state_dict(const StateDict& state_dict);

 protected:
  /// @brief Called by the derived constructors with already validated defaults.
  Optimizer(std::vector<Tensor> params, OptionMap defaults);
  /// @brief Throws tiny::ValueError (PyTorch's message) for an invalid set of options.
  virtual void check_options(const OptionMap& options) const = 0;
  /// @brief The mutable state of parameter `index` (for the derived `step()`).
  ParamState& mutable_state(size_t index) { return state_.at(index); }

 private:
  void check_new_params(const std::vector<Tensor>& params) const;

  std::vector<ParamGroup> groups_;
  OptionMap defaults_;
  std::vector<ParamState> state_;  // one per parameter, in parameters() order
};

}  // namespace tiny::optim
