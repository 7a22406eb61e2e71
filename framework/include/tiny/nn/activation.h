/// @file nn/activation.h
/// @brief Layers without parameters: activations, Dropout and Flatten (PyTorch's `nn.ReLU`, `nn.Dropout`, ...).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "tiny/nn/module.h"

namespace tiny::nn {

/// @brief `max(x, 0)` (PyTorch's `nn.ReLU(inplace=False)`).
///
/// With `inplace`, forward overwrites its input (x.relu_()) and returns it:
/// no new activation memory. Autograd records it; backward raises "modified by
/// an inplace operation" when the op before saved that input for its own
/// backward (a sigmoid's or a ReLU's output, an input of mul); after a Linear,
/// a Conv2d or an add it is fine, as in PyTorch.
class ReLU : public Module {
 public:
  /// @brief `inplace`: overwrite the input instead of allocating the output.
  explicit ReLU(bool inplace_ = false) : inplace(inplace_) {}
  /// @brief Applies relu (in place when `inplace`).
  Tensor forward(const Tensor& x) override;
  /// @brief "ReLU".
  std::string name() const override { return "ReLU"; }
  /// @brief "inplace=True" when in place, else nothing (PyTorch prints `ReLU()` and `ReLU(inplace=True)`).
  std::string extra_repr() const override { return inplace ? "inplace=True" : ""; }
  bool inplace;  ///< overwrite the input
  /// @brief A deep copy on `device` (or where this one is), drawing no random numbers (LibTorch's `clone`).
  std::shared_ptr<Module> clone(const std::optional<Device>& device = std::nullopt) const override;
};

/// @brief SiLU (swish), x * sigmoid(x) (PyTorch's `nn.SiLU`).
class SiLU : public Module {
 public:
  /// @brief Applies silu.
  Tensor forward(const Tensor& x) override;
  /// @brief "SiLU".
  std::string name() const override { return "SiLU"; }
  /// @brief A deep copy on `device` (or where this one is) (LibTorch's `clone`).
  std::shared_ptr<Module> clone(const std::optional<Device>& device = std::nullopt) const override;
};

/// @brief x for x > 0, else negative_slope * x (PyTorch's `nn.LeakyReLU(negative_slope=0.01)`).
class LeakyReLU : public Module {
 public:
  /// @brief The slope for negative inputs; `inplace` overwrites the input (PyTorch's `inplace=True`).
  explicit LeakyReLU(double negative_slope_ = 0.01, bool inplace_ = false)
      : negative_slope(negative_slope_), inplace(inplace_) {}
  /// @brief Applies leaky_relu.
  Tensor forward(const Tensor& x) override;
  /// @brief "LeakyReLU".
  std::string name() const override { return "LeakyReLU"; }
  /// @brief A deep copy on `device` (or where this one is) (LibTorch's `clone`).
  std::shared_ptr<Module> clone(const std::optional<Device>& device = std::nullopt) const override;
  double negative_slope;  ///< slope for x <= 0
  bool inplace;           ///< overwrite the input
};

/// @brief GELU, exact (erf) or with the tanh approximation (PyTorch's `nn.GELU`).
class GELU : public Module {
 public:
  /// @brief `approximate` is "none" (exact) or "tanh" (throws tiny::ValueError otherwise).
  explicit GELU(std::string approximate = "none");
  /// @brief Applies gelu.
  Tensor forward(const Tensor& x) override;
  /// @brief "GELU".
  std::string name() const override { return "GELU"; }
  /// @brief A deep copy on `device` (or where this one is), drawing no random numbers (LibTorch's `clone`).
  std::shared_ptr<Module> clone(const std::optional<Device>& device = std::nullopt) const override;
  /// @brief "approximate='none'".
  std::string extra_repr() const override;

  std::string approximate;  ///< "none" or "tanh"
};

/// @brief A smooth relu, `log(1 + exp(beta * x)) / beta`, linear above `threshold` (PyTorch's `nn.Softplus`).
class Softplus : public Module {
 public:
  /// @brief PyTorch's defaults: beta 1, threshold 20.
  explicit Softplus(double beta_ = 1.0, double threshold_ = 20.0) : beta(beta_), threshold(threshold_) {}
  /// @brief Applies softplus.
  Tensor forward(const Tensor& x) override;
  /// @brief "Softplus".
  std::string name() const override { return "Softplus"; }
  /// @brief "beta=1.0, threshold=20.0".
  std::string extra_repr() const override;
  /// @brief A deep copy on `device` (or where this one is) (LibTorch's `clone`).
  std::shared_ptr<Module> clone(const std::optional<Device>& device = std::nullopt) const override;
  double beta;       ///< the sharpness
  double threshold;  ///< above beta * x > threshold the output is x
};

/// @brief Softmax along `dim` (PyTorch's `nn.Softmax(dim)`); give the dim, as PyTorch warns when it is implicit.
class Softmax : public Module {
 public:
  /// @brief The dim the probabilities sum to 1 along.
  explicit Softmax(int64_t dim_) : dim(dim_) {}
  /// @brief Applies softmax.
  Tensor forward(const Tensor& x) override;
  /// @brief "Softmax".
  std::string name() const override { return "Softmax"; }
  /// @brief "dim=1".
  std::string extra_repr() const override;
  /// @brief A deep copy on `device` (or where this one is) (LibTorch's `clone`).
  std::shared_ptr<Module> clone(const std::optional<Device>& device = std::nullopt) const override;
  int64_t dim;  ///< the dim normalised
};

/// @brief Log-softmax along `dim` (PyTorch's `nn.LogSoftmax(dim)`), the input NLLLoss expects.
class LogSoftmax : public Module {
 public:
  /// @brief The dim normalised.
  explicit LogSoftmax(int64_t dim_) : dim(dim_) {}
  /// @brief Applies log_softmax.
  Tensor forward(const Tensor& x) override;
  /// @brief "LogSoftmax".
  std::string name() const override { return "LogSoftmax"; }
  /// @brief "dim=1".
  std::string extra_repr() const override;
  /// @brief A deep copy on `device` (or where this one is) (LibTorch's `clone`).
  std::shared_ptr<Module> clone(const std::optional<Device>& device = std::nullopt) const override;
  int64_t dim;  ///< the dim normalised
};

/// @brief Hyperbolic tangent (PyTorch's `nn.Tanh`).
class Tanh : public Module {
 public:
  /// @brief Applies tanh.
  Tensor forward(const Tensor& x) override;
  /// @brief "Tanh".
  std::string name() const override { return "Tanh"; }
  /// @brief A deep copy on `device` (or where this one is), drawing no random numbers (LibTorch's `clone`).
  std::shared_ptr<Module> clone(const std::optional<Device>& device = std::nullopt) const override;
};

/// @brief Logistic sigmoid (PyTorch's `nn.Sigmoid`).
class Sigmoid : public Module {
 public:
  /// @brief Applies sigmoid.
  Tensor forward(const Tensor& x) override;
  /// @brief "Sigmoid".
  std::string name() const override { return "Sigmoid"; }
  /// @brief A deep copy on `device` (or where this one is), drawing no random numbers (LibTorch's `clone`).
  std::shared_ptr<Module> clone(const std::optional<Device>& device = std::nullopt) const override;
};

/// @brief Zeroes elements with probability p in training mode, the identity in eval mode (PyTorch's `nn.Dropout`).
class Dropout : public Module {
 public:
  /// @brief Dropout with probability `p` in [0, 1] (throws tiny::ValueError otherwise); `inplace` multiplies the input by the mask in place.
  explicit Dropout(double p = 0.5, bool inplace = false);
  /// @brief `F::dropout(x, p, is_training(), {}, inplace)`, drawing from the default generator.
  Tensor forward(const Tensor& x) override;
  /// @brief "Dropout".
  std::string name() const override { return "Dropout"; }
  /// @brief A deep copy on `device` (or where this one is), drawing no random numbers (LibTorch's `clone`).
  std::shared_ptr<Module> clone(const std::optional<Device>& device = std::nullopt) const override;
  /// @brief "p=0.5, inplace=False", as PyTorch prints it.
  std::string extra_repr() const override;

  double p;  ///< probability of zeroing an element
  bool inplace = false;  ///< multiply the input by the mask in place
};

/// @brief Merges dimensions start_dim..end_dim into one (PyTorch's `nn.Flatten`).
class Flatten : public Module {
 public:
  /// @brief Keeps dimension 0 (the batch) by default.
  explicit Flatten(int64_t start_dim = 1, int64_t end_dim = -1);
  /// @brief `x.flatten(start_dim, end_dim)`.
  Tensor forward(const Tensor& x) override;
  /// @brief "Flatten".
  std::string name() const override { return "Flatten"; }
  /// @brief A deep copy on `device` (or where this one is), drawing no random numbers (LibTorch's `clone`).
  std::shared_ptr<Module> clone(const std::optional<Device>& device = std::nullopt) const override;
  /// @brief "start_dim=1, end_dim=-1".
  std::string extra_repr() const override;

  int64_t start_dim;  ///< first dimension merged
  int64_t end_dim;    ///< last dimension merged
};

}  // namespace tiny::nn
