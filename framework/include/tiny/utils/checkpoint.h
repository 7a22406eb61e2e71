/// @file checkpoint.h
/// @brief Activation checkpointing (`torch.utils.checkpoint`): trade compute for memory.
///
/// A checkpointed segment runs its forward without recording the graph and
/// keeps only its input; in backward it runs the forward again, this time
/// recording, and back-propagates through that. The activations inside the
/// segment therefore live only while its backward runs, at the cost of one
/// more forward per segment. With `preserve_rng_state` the recomputation draws
/// the same random numbers (dropout masks) as the first forward, so the
/// gradients are the same as without checkpointing.
///
/// As PyTorch 1.13's default (`use_reentrant=True`), backward runs a nested
/// backward pass through the recomputed segment: the parameters used inside
/// get their `.grad()` from it. Hence, as in PyTorch, a checkpointed segment
/// works with `loss.backward()` but not with `tiny::autograd::grad()` (the
/// parameters' gradients would go to `.grad()` instead of being returned).
/// Autocast state is not replayed in the recomputation yet.
#pragma once

#include <functional>

#include "tiny/nn/container.h"
#include "tiny/tensor.h"

namespace tiny::utils {

/// @brief Runs `fn(input)` without keeping its activations; backward recomputes them
/// (`torch.utils.checkpoint.checkpoint(fn, input, preserve_rng_state=...)`).
///
/// With `preserve_rng_state` (the default) the state of the default generator of
/// `input`'s device is saved before the forward and restored for the
/// recomputation (and the generator is put back afterwards), so dropout masks
/// are identical. When grad mode is off, this is simply `fn(input)`. When
/// `input` does not require grad, checkpointing could not reach the parameters
/// inside `fn` (PyTorch 1.13 then warns "None of the inputs have
/// requires_grad=True. Gradients will be None" and the parameters get no
/// gradients); tiny warns once on stderr and runs `fn(input)` without
/// checkpointing, so gradients are right and only the memory saving is lost.
/// checkpoint_sequential() knows its parameters and checkpoints in that case too.
Tensor checkpoint(std::function<Tensor(const Tensor&)> fn, const Tensor& input, bool preserve_rng_state = true);

/// @brief Runs `seq` in `segments` pieces, checkpointing all but the last
/// (`torch.utils.checkpoint.checkpoint_sequential(seq, segments, input)`).
///
/// The modules are split into `segments` consecutive runs of (nearly) equal
/// length; each but the last runs under checkpoint() (with the RNG state
/// preserved), the last one normally, as PyTorch does. Unlike PyTorch 1.13, an
/// `input` that does not require grad is fine: the segments' parameters still
/// get their gradients. Throws tiny::ValueError when `segments` is not between
/// 1 and the number of modules.
Tensor checkpoint_sequential(nn::Sequential& seq, int segments, const Tensor& input);

}  // namespace tiny::utils
