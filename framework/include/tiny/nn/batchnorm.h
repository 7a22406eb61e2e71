/// @file nn/batchnorm.h
/// @brief Batch normalization: `tiny::nn::functional::batch_norm`, `BatchNorm1d` and `BatchNorm2d`
/// (PyTorch's `F.batch_norm`, `nn.BatchNorm1d`, `nn.BatchNorm2d`).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "tiny/nn/module.h"
#include "tiny/tensor.h"

namespace tiny::nn {

namespace functional {

/// @brief Normalises each channel (dimension 1) of `input` [N, C, ...] to mean 0 and variance 1, then scales and
/// shifts (PyTorch's `F.batch_norm(input, running_mean, running_var, weight, bias, training, momentum, eps)`).
///
/// `y = (x - mean) / sqrt(var + eps) * weight + bias`, per channel. With
/// `training`, mean and var are the batch's (the biased variance, dividing by
/// the N * ... values of a channel), and `running_mean` and `running_var` (when
/// defined) are updated in place: `running = (1 - momentum) * running + momentum *
/// batch`, where the batch's variance is the unbiased one (dividing by the count
/// minus 1), as PyTorch does. Without `training` the running statistics are used
/// and must be defined. weight and bias ([C]) may be undefined. 16-bit inputs
/// are normalised in float32 and rounded once. Training with one value per
/// channel throws tiny::ValueError ("Expected more than 1 value per channel when
/// training"), as PyTorch does.
Tensor batch_norm(const Tensor& input, const Tensor& running_mean, const Tensor& running_var,
                  const Tensor& weight = Tensor(), const Tensor& bias = Tensor(), bool training = false,
                  double momentum = 0.1, double eps = 1e-5);

}  // namespace functional

/// @brief What BatchNorm1d and BatchNorm2d share (PyTorch's `_BatchNorm`); use one of those.
///
/// Parameters "weight" (ones) and "bias" (zeros) when `affine`; buffers
/// "running_mean" (zeros), "running_var" (ones) and "num_batches_tracked"
/// (int64 0) when `track_running_stats`, so a state_dict has PyTorch's keys. In
/// training mode each forward normalises with the batch's statistics and
/// updates the running ones; in eval mode (`module.eval()`) it uses the running
/// ones. `momentum` std::nullopt gives the cumulative average (PyTorch's
/// `momentum=None`: factor 1 / num_batches_tracked).
class BatchNormBase : public Module {
 public:
  /// @brief Sets the running statistics to mean 0, variance 1 and the batch count to 0 (PyTorch's `reset_running_stats()`).
  void reset_running_stats();
  /// @brief reset_running_stats(), and weight to ones and bias to zeros (PyTorch's `reset_parameters()`).
  void reset_parameters();
  /// @brief Normalises `x` after checking its rank (check_input_dim).
  Tensor forward(const Tensor& x) override;
  /// @brief "16, eps=1e-05, momentum=0.1, affine=True, track_running_stats=True".
  std::string extra_repr() const override;

  int64_t num_features;            ///< C, the channels normalised
  double eps;                      ///< added to the variance
  std::optional<double> momentum;  ///< running statistics' update factor; nullopt: cumulative average
  bool affine;                     ///< whether weight and bias exist
  bool track_running_stats;        ///< whether running statistics are kept (and used in eval mode)
  Tensor weight;                   ///< [C], "weight" (undefined without affine)
  Tensor bias;                     ///< [C], "bias" (undefined without affine)
  Tensor running_mean;             ///< [C], buffer "running_mean" (undefined without track_running_stats)
  Tensor running_var;              ///< [C], buffer "running_var" (undefined without track_running_stats)
  Tensor num_batches_tracked;      ///< int64 scalar, buffer "num_batches_tracked" (undefined without track_running_stats)

 protected:
  /// @brief Registers the parameters and buffers PyTorch's `_BatchNorm.__init__` does; num_features must be > 0.
  BatchNormBase(int64_t num_features, double eps, std::optional<double> momentum, bool affine,
                bool track_running_stats);
  /// @brief Throws tiny::ShapeError when `x` has a rank this layer does not take.
  virtual void check_input_dim(const Tensor& x) const = 0;
  /// @brief Gives `copy` this module's settings and state.
  void clone_into(BatchNormBase& copy, const std::optional<Device>& device) const;
};

/// @brief Batch normalization over [N, C] or [N, C, L] inputs (PyTorch's `nn.BatchNorm1d`).
class BatchNorm1d : public BatchNormBase {
 public:
  /// @brief `nn.BatchNorm1d(num_features, eps=1e-5, momentum=0.1, affine=True, track_running_stats=True)`.
  explicit BatchNorm1d(int64_t num_features, double eps = 1e-5, std::optional<double> momentum = 0.1,
                       bool affine = true, bool track_running_stats = true)
      : BatchNormBase(num_features, eps, momentum, affine, track_running_stats) {}
  /// @brief "BatchNorm1d".
  std::string name() const override { return "BatchNorm1d"; }
  /// @brief A deep copy on `device` (or where this one is).
  std::shared_ptr<Module> clone(const std::optional<Device>& device = std::nullopt) const override;

 protected:
  void check_input_dim(const Tensor& x) const override;
};

/// @brief Batch normalization over [N, C, H, W] inputs, per channel (PyTorch's `nn.BatchNorm2d`).
class BatchNorm2d : public BatchNormBase {
 public:
  /// @brief `nn.BatchNorm2d(num_features, eps=1e-5, momentum=0.1, affine=True, track_running_stats=True)`.
  explicit BatchNorm2d(int64_t num_features, double eps = 1e-5, std::optional<double> momentum = 0.1,
                       bool affine = true, bool track_running_stats = true)
      : BatchNormBase(num_features, eps, momentum, affine, track_running_stats) {}
  /// @brief "BatchNorm2d".
  std::string name() const override { return "BatchNorm2d"; }
  /// @brief A deep copy on `device` (or where this one is).
  std::shared_ptr<Module> clone(const std::optional<Device>& device = std::nullopt) const override;

 protected:
  void check_input_dim(const Tensor& x) const override;
};

}  // namespace tiny::nn
