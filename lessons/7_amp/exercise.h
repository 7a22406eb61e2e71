/// @file lessons/7_amp/exercise.h
/// @brief Lesson 7: mixed precision. A forward pass under float16 autocast;
/// loss scaling written by hand (the inf/NaN check and unscaling, the rule that
/// moves the scale, a step that uses them); the same step with
/// tiny::amp::GradScaler and gradient clipping; a checkpoint that carries the
/// scaler's state; and a bfloat16 step that needs no scaler.
///
/// Implement these in exercise.cpp; `./workbook check 7` (or `ctest -R lesson_7`) checks them.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tiny/tiny.h"

namespace lesson7 {

/// @brief The forward pass and the loss under float16 autocast; returns the loss with its graph.
///
/// The matrix products must run in float16 (the checks count them: the GPU's
/// GEMM counters say which dtype each product ran in), while the weights stay
/// float32 and the loss comes out float32. Return the loss as cross_entropy
/// gave it (mean over the batch): the caller calls backward on it.
///
/// PyTorch: the `torch.autocast("cuda", dtype=torch.float16)` region; tiny's is
/// a guard (README.md), alive for a scope: which lines must that scope hold?
tiny::Tensor amp_forward(tiny::nn::Module& model, const tiny::Tensor& x, const tiny::Tensor& y);

/// @brief What a dynamic loss scaler keeps: tiny::amp::GradScaler's options and its two numbers.
struct ScalerState {
  double scale = 65536.0;          ///< the loss is multiplied by this before backward
  int64_t growth_tracker = 0;      ///< clean steps in a row since the scale last changed
  double growth_factor = 2.0;      ///< the scale is multiplied by this after growth_interval clean steps
  double backoff_factor = 0.5;     ///< ... and by this after a step whose gradients had an inf or a NaN
  int64_t growth_interval = 2000;  ///< clean steps in a row before the scale grows
};

/// @brief Unscales gradients in place; returns true when any of them held an inf or a NaN.
///
/// Every defined tensor of `grads` (the `.grad()` of each parameter; an
/// undefined one is skipped) is divided by `scale` in place, so that the
/// optimizer then reads the true gradients. The answer says whether any
/// element of any of them was inf or NaN. Deciding that needs the host to read
/// a number from the GPU: read one for all the gradients, not one per
/// gradient (each read waits for the GPU). What GradScaler.unscale_ does, in
/// PyTorch's `torch._amp_foreach_non_finite_check_and_unscale_`.
bool unscale_grads_(const std::vector<tiny::Tensor>& grads, double scale);

/// @brief The scale's rule after a step (PyTorch's `torch._amp_update_scale_`).
///
/// After a step whose gradients had an inf or a NaN (`found_inf`): back off
/// the scale by `backoff_factor` and start counting clean steps again. After a
/// clean step: count it; when the count reaches `growth_interval`, grow the
/// scale by `growth_factor` and start counting again.
void update_scale(ScalerState& state, bool found_inf);

/// @brief One float16 step with your own loss scaling (no GradScaler); returns the loss.
///
/// What GradScaler does for a step, with your two functions: float16
/// gradients this small would flush to zero, so backward must run on a loss
/// made `state.scale` times larger; the optimizer must then read the true
/// gradients, and must not move the weights at all on a step where any of them
/// overflowed; the scale follows your rule afterwards. As in every step,
/// nothing from the previous step's gradients may count. Return the
/// (unscaled) loss as a number.
double scaled_train_step(tiny::nn::Module& model, tiny::optim::Optimizer& optimizer, ScalerState& state,
                         const tiny::Tensor& x, const tiny::Tensor& y);

/// @brief One float16 step with tiny::amp::GradScaler and gradient clipping; returns the loss.
///
/// The same step as scaled_train_step, with the library's scaler in place of
/// your own (PyTorch's AMP recipe: the README's "PyTorch beside tiny"), and
/// the true gradients clipped to a joint norm of `max_grad_norm`
/// (`tiny::nn::utils::clip_grad_norm_`) before the optimizer uses them.
/// Return `loss.item<double>()` (inf or NaN on a skipped step).
double amp_train_step(tiny::nn::Module& model, tiny::optim::Optimizer& optimizer, tiny::amp::GradScaler& scaler,
                      const tiny::Tensor& x, const tiny::Tensor& y, double max_grad_norm);

/// @brief Saves a float16 run's checkpoint in one file at `path`: the model's, the optimizer's and the scaler's state.
///
/// A run resumed without the scaler's state starts again from the initial
/// scale (65536 by default): it overflows, or waits thousands of steps to
/// grow, on the way back to the scale it had found. Use tiny::save, which
/// writes one StateDict (its tensors and its metadata): the three states must
/// fit in it without their names colliding.
///
/// PyTorch: `torch.save({"model": model.state_dict(), "optimizer": optimizer.state_dict(), "scaler": scaler.state_dict()}, path)`
void save_checkpoint(const std::string& path, const tiny::nn::Module& model, const tiny::optim::Optimizer& optimizer,
                     const tiny::amp::GradScaler& scaler);

/// @brief Restores a checkpoint written by save_checkpoint into `model`, `optimizer` and `scaler`.
///
/// PyTorch: `c = torch.load(path); model.load_state_dict(c["model"]); optimizer.load_state_dict(c["optimizer"]); scaler.load_state_dict(c["scaler"])`
void load_checkpoint(const std::string& path, tiny::nn::Module& model, tiny::optim::Optimizer& optimizer,
                     tiny::amp::GradScaler& scaler);

/// @brief One bfloat16 mixed-precision training step, without a scaler; returns the loss.
///
/// bfloat16 keeps float32's exponent range, so gradients do not underflow
/// and no loss scaling is needed. The products run in bfloat16, the weights
/// stay float32.
double bf16_train_step(tiny::nn::Module& model, tiny::optim::Optimizer& optimizer, const tiny::Tensor& x,
                       const tiny::Tensor& y);

}  // namespace lesson7
