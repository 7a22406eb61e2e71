/// @file lessons/3_model_to_gpu/exercise.h
/// @brief Lesson 3: move a model to the GPU, and make sure every piece of it went there.
///
/// Implement these in exercise.cpp; `./workbook check 3` (or `ctest -R lesson_3`) checks them.
#pragma once

#include <string>
#include <vector>

#include "tiny/tiny.h"

namespace lesson3 {

/// @brief The names of every parameter and buffer of `model` that is NOT on `device`.
///
/// An empty list means the whole model is there. Names are the dotted ones of
/// named_parameters() and named_buffers() ("fc1.weight", "norm.mean"); the order
/// does not matter. Every buffer counts, also the non-persistent ones that
/// state_dict() leaves out: `.to()` moves them and forward() uses them.
/// A tensor on another GPU (cuda:1 when `device` is cuda:0) is not on `device`.
///
/// PyTorch's names: `model.named_parameters()`, `model.named_buffers()` (tiny:
/// the same, as (name, tensor) pairs), `t.device` (tiny: `t.device()`, a Device
/// that compares type and index).
std::vector<std::string> left_behind(const tiny::nn::Module& model, const tiny::Device& device);

/// @brief Standardises features with fixed statistics: `(x - mean) / stddev` (a preprocessing layer).
///
/// `mean` and `stddev` are not trained, but they belong to the model: they must
/// move with `model.to(device)` and be saved in its state_dict(). That is what
/// a buffer is (PyTorch's `register_buffer`; a running mean of BatchNorm is one).
/// A tensor kept as a plain member is invisible to both.
class Normalizer : public tiny::nn::Module {
 public:
  /// @brief A layer with these statistics, both shaped [features].
  ///
  /// TODO: make both statistics part of the module under the names "mean" and
  /// "stddev" (saved in state_dict()), so that the members forward() reads see
  /// a `model.to(device)`. PyTorch's register_buffer sets `self.mean` for you; C++
  /// cannot, so the members are yours to set. What matters: each member must be a
  /// handle to the very tensor the module registered (a Tensor is a shared handle,
  /// and Module::to moves each registered tensor in place, so every handle to it
  /// sees the move). A member never set stays undefined; one holding another
  /// tensor stays behind. See what register_buffer returns (tiny/nn/module.h).
  /// The arguments hide the members of the same name.
  Normalizer(const tiny::Tensor& mean, const tiny::Tensor& stddev);
  /// @brief `(x - mean) / stddev` over the last dimension of `x` (given: nothing to do here).
  tiny::Tensor forward(const tiny::Tensor& x) override;
  /// @brief "Normalizer".
  std::string name() const override { return "Normalizer"; }

  tiny::Tensor mean;    ///< [features], the buffer "mean"
  tiny::Tensor stddev;  ///< [features], the buffer "stddev"
};

/// @brief A toy positional encoding: adds `scale * i` to position i of every sequence.
///
/// For `x` shaped [batch, length]: `out[b, i] = x[b, i] + scale * i`. It has no
/// parameters or buffers: the positions are made fresh in forward(), so
/// `.to(device)` cannot move them. Make them where `x` is, with `x`'s dtype:
/// a tensor made with the factories' defaults lands on the CPU (and arange's
/// default dtype is int64, as `torch.arange(n)`'s), where a GPU `x` cannot meet it.
///
/// PyTorch's names: `torch.arange` and its `device=` and `dtype=` (tiny:
/// `tiny::arange` and `tiny::TensorOptions`, tiny/ops.h).
class PositionalOffset : public tiny::nn::Module {
 public:
  /// @brief Adds `scale * i` at position i.
  explicit PositionalOffset(double scale) : scale(scale) {}
  /// @brief TODO: `x + scale * positions`, the positions 0, 1, ..., length-1 made on x's device with x's dtype.
  tiny::Tensor forward(const tiny::Tensor& x) override;
  /// @brief "PositionalOffset".
  std::string name() const override { return "PositionalOffset"; }
  /// @brief "scale=0.1".
  std::string extra_repr() const override { return "scale=" + tiny::nn::detail::python_float_repr(scale); }

  double scale;  ///< how much each position adds
};

/// @brief Runs `model` on `inputs` (on the CPU) wherever the model lives, and returns its outputs on the CPU.
///
/// - The model's device is the device of its first parameter (or, with no
///   parameters, of its first buffer; the CPU when it has neither).
/// - Move the inputs to the model, not the model to the inputs: the caller's
///   model must stay where it is.
/// - Run without recording a graph: nothing calls backward(), and the outputs
///   do not require grad.
/// - Return the outputs on the CPU, ready to print or save.
///
/// PyTorch's names: `model.parameters()`, `model.buffers()`, `torch.no_grad()`
/// (tiny: `tiny::NoGradGuard`), `Tensor.to`, `.cpu()`.
tiny::Tensor predict(tiny::nn::Module& model, const tiny::Tensor& inputs);

/// @brief Writes the model's parameters and buffers to `path` (a safetensors file), wherever the model lives.
///
/// The model stays where it is (it is const: no `.cpu()` on it). tiny::save copies
/// GPU tensors to the CPU on the way to the file.
///
/// PyTorch's names: `model.state_dict()` (the name-to-tensor map a checkpoint
/// holds), `torch.save` or safetensors' `save_file` (tiny: `tiny::save`, tiny/serialize.h).
void save_checkpoint(const tiny::nn::Module& model, const std::string& path);

/// @brief Loads the checkpoint at `path` into `model`, and leaves the whole model on `device`.
///
/// tiny::load gives CPU tensors, whatever device the model was saved from (as
/// PyTorch's `map_location="cpu"`; without it, torch.load puts each tensor back
/// on the device it was saved from). `model` has the same architecture as the
/// saved one and may start anywhere (a fresh model on the CPU, or one on a GPU):
/// when this returns, its values are the file's and every parameter and buffer
/// is on `device`.
///
/// PyTorch's names: `torch.load` (tiny: `tiny::load`), `model.load_state_dict`,
/// `model.to` (in place).
void load_checkpoint(tiny::nn::Module& model, const std::string& path, const tiny::Device& device);

}  // namespace lesson3
