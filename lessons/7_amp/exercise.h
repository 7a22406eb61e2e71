/// @file lessons/7_amp/exercise.h
/// @brief Lesson 7: mixed precision. A forward pass under float16 autocast, a
/// training step with a GradScaler (scale, backward, unscale, clip, step,
/// update), and a bfloat16 step that needs no scaler.
///
/// Implement these in exercise.cpp; `./workbook check 7` (or `ctest -R lesson_7`) checks them.
#pragma once

#include "tiny/tiny.h"

namespace lesson7 {

/// @brief The forward pass and the loss under float16 autocast; returns the loss with its graph.
///
/// Open a `tiny::amp::autocast` guard for "cuda" with `tiny::kFloat16`, run the
/// model on `x` and take `cross_entropy` of its output and `y` (the mean over
/// the batch), all inside the guard's scope. Inside it the matrix products run
/// in float16 (the weights stay float32: autocast makes float16 copies of them
/// for the products), and cross_entropy runs in float32, so the loss is a
/// float32 tensor. Return it as it is: the caller calls backward on it (no
/// `.item()`, no `.detach()`).
///
/// PyTorch:
/// ```python
/// with torch.amp.autocast("cuda", dtype=torch.float16):
///     loss = F.cross_entropy(model(x), y)
/// return loss
/// ```
tiny::Tensor amp_forward(tiny::nn::Module& model, const tiny::Tensor& x, const tiny::Tensor& y);

/// @brief One float16 mixed-precision training step with loss scaling and gradient clipping; returns the loss.
///
/// The model's weights are float32 on the GPU, and so are `x` and `y`. In order:
/// 1. clear the gradients of the previous step (`optimizer.zero_grad()`);
/// 2. the loss from `amp_forward` (autocast covers the forward pass and the loss, nothing else);
/// 3. backward on the *scaled* loss: `scaler.scale(loss).backward()`, so that small
///    gradients do not underflow to zero in float16;
/// 4. `scaler.unscale_(optimizer)`: the gradients are divided by the scale again, in place;
/// 5. clip the true (unscaled) gradients to a joint norm of `max_grad_norm`
///    (`tiny::nn::utils::clip_grad_norm_(model.parameters(), max_grad_norm)`);
/// 6. `scaler.step(optimizer)`: steps, unless a gradient is inf or NaN (then the step is skipped);
/// 7. `scaler.update()`: halves the scale after a skipped step, doubles it after
///    `growth_interval` clean steps in a row.
///
/// Return the loss as a number (`loss.item<double>()`; it is inf or NaN on a skipped step).
///
/// PyTorch:
/// ```python
/// optimizer.zero_grad()
/// with torch.amp.autocast("cuda", dtype=torch.float16):
///     loss = F.cross_entropy(model(x), y)
/// scaler.scale(loss).backward()
/// scaler.unscale_(optimizer)
/// torch.nn.utils.clip_grad_norm_(model.parameters(), max_grad_norm)
/// scaler.step(optimizer)
/// scaler.update()
/// return loss.item()
/// ```
double amp_train_step(tiny::nn::Module& model, tiny::optim::Optimizer& optimizer, tiny::amp::GradScaler& scaler,
                      const tiny::Tensor& x, const tiny::Tensor& y, double max_grad_norm);

/// @brief One bfloat16 mixed-precision training step, without a scaler; returns the loss.
///
/// bfloat16 keeps float32's exponent range (it is the top half of a float32), so
/// gradients do not underflow and no loss scaling is needed. In order: zero_grad,
/// forward and cross_entropy under `tiny::amp::autocast("cuda", tiny::kBFloat16)`
/// (the dtype must be given: the default for "cuda" is float16), then outside the
/// guard a plain `loss.backward()` and `optimizer.step()`. The weights stay float32.
///
/// PyTorch:
/// ```python
/// optimizer.zero_grad()
/// with torch.amp.autocast("cuda", dtype=torch.bfloat16):
///     loss = F.cross_entropy(model(x), y)
/// loss.backward()
/// optimizer.step()
/// return loss.item()
/// ```
double bf16_train_step(tiny::nn::Module& model, tiny::optim::Optimizer& optimizer, const tiny::Tensor& x,
                       const tiny::Tensor& y);

}  // namespace lesson7
