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
/// PyTorch:
/// `[n for n, t in [*model.named_parameters(), *model.named_buffers()] if t.device != device]`.
std::vector<std::string> left_behind(const tiny::nn::Module& model, const tiny::Device& device);

/// @brief Standardises features with fixed statistics: `(x - mean) / stddev` (a preprocessing layer).
///
/// `mean` and `stddev` are not trained, but they belong to the model: they must
/// move with `model.to(device)` and be saved in its state_dict(). That is what
/// a buffer is.
///
/// PyTorch:
/// @code
/// class Normalizer(nn.Module):
///     def __init__(self, mean, std):
///         super().__init__()
///         self.register_buffer("mean", mean)
///         self.register_buffer("stddev", std)
///     def forward(self, x):
///         return (x - self.mean) / self.stddev
/// @endcode
class Normalizer : public tiny::nn::Module {
 public:
  /// @brief A layer with these statistics, both shaped [features].
  ///
  /// TODO: register both as persistent buffers named "mean" and "stddev", and
  /// keep the handles register_buffer returns in the members below (a Tensor is
  /// a shared handle: `.to()` updates what the registered one points to, and so
  /// the member sees the move too). The arguments hide the members of the same
  /// name: write `this->mean = ...`.
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
/// `.to(device)` cannot move them. Make them where `x` is, with `x`'s dtype.
///
/// PyTorch:
/// @code
/// def forward(self, x):
///     positions = torch.arange(x.shape[-1], device=x.device, dtype=x.dtype)
///     return x + self.scale * positions
/// @endcode
class PositionalOffset : public tiny::nn::Module {
 public:
  /// @brief Adds `scale * i` at position i.
  explicit PositionalOffset(double scale) : scale(scale) {}
  /// @brief TODO: `x + scale * positions`, the positions 0, 1, ..., length-1 made on x.device() with x.dtype().
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
/// - Run without recording a graph (tiny::NoGradGuard): the outputs do not require grad.
/// - Return the outputs on the CPU, ready to print or save.
///
/// PyTorch:
/// @code
/// device = next(model.parameters()).device
/// with torch.no_grad():
///     return model(inputs.to(device)).cpu()
/// @endcode
tiny::Tensor predict(tiny::nn::Module& model, const tiny::Tensor& inputs);

/// @brief Writes the model's parameters and buffers to `path` (a safetensors file), wherever the model lives.
///
/// The model stays where it is (it is const: no `.cpu()` on it). tiny::save copies
/// GPU tensors to the CPU on the way to the file.
///
/// PyTorch: `safetensors.torch.save_file(model.state_dict(), path)` (or `torch.save(model.state_dict(), path)`).
void save_checkpoint(const tiny::nn::Module& model, const std::string& path);

/// @brief Loads the checkpoint at `path` into `model`, and leaves the whole model on `device`.
///
/// tiny::load gives CPU tensors, whatever device the model was saved from (as
/// PyTorch's `map_location="cpu"`; without it, torch.load puts each tensor back
/// on the device it was saved from). `model` has the same architecture as the
/// saved one and may start anywhere (a fresh model on the CPU, or one on a GPU).
///
/// PyTorch:
/// @code
/// model.load_state_dict(torch.load(path, map_location="cpu"))
/// model.to(device)
/// @endcode
void load_checkpoint(tiny::nn::Module& model, const std::string& path, const tiny::Device& device);

}  // namespace lesson3
