/// @file lessons/8_memory_pitfalls/exercise.h
/// @brief Lesson 8: GPU memory pitfalls: a training loop that keeps no graph
/// alive, evaluation without a graph, a batch too big for the GPU trained by
/// gradient accumulation or fitted by activation checkpointing, a step's peak
/// memory predicted from its parts, and reading the caching allocator's figures.
///
/// Implement these in exercise.cpp; `./workbook check 8` (or `ctest -R lesson_8`) checks them.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "tiny/tiny.h"

namespace lesson8 {

/// @brief What train_epoch() reports.
struct TrainLog {
  double mean_loss = 0;         ///< mean cross-entropy per example over the epoch
  std::vector<double> losses;   ///< the loss of every step, in order (the history a plot needs)
};

/// @brief One epoch of training over `batches` (already on the model's device); returns the loss history.
///
/// One ordinary step per batch (the mean cross-entropy, the optimizer's
/// update). Here every step's loss is wanted on the host, for a plot, so the
/// question is what you keep of it: a loss *tensor* kept after its step keeps
/// that step's graph alive (and its own GPU memory), step after step. The
/// check reads memory_allocated() at the start of every step: after the first
/// two it must not move. mean_loss weights each batch by its size.
///
/// PyTorch's names: `loss.item()`, and what `loss` still references (`loss.grad_fn`).
TrainLog train_epoch(tiny::nn::Module& model, tiny::optim::Optimizer& optimizer,
                     const std::vector<tiny::data::Batch>& batches);

/// @brief What evaluate() measures.
struct EvalResult {
  double loss = 0;      ///< mean cross-entropy per example
  double accuracy = 0;  ///< fraction of examples classified right, in [0, 1]
};

/// @brief The mean loss and the accuracy of `model` over `batches` (already on its device), recording no graph.
///
/// Under `tiny::NoGradGuard` (PyTorch's `with torch.no_grad():`) a forward pass
/// keeps no activations for a backward that never comes: its peak memory is
/// that of one layer at a time. Weight each batch's loss by its size.
EvalResult evaluate(tiny::nn::Module& model, const std::vector<tiny::data::Batch>& batches);

/// @brief One optimizer step on the whole batch (`inputs`, `targets`, on the
/// GPU), computed `micro_batch` rows at a time (gradient accumulation);
/// returns the batch's mean loss.
///
/// The batch's activations do not fit on the GPU at once; a micro-batch's do.
/// The step must equal one step on the whole batch: the slices (at most
/// `micro_batch` rows, the last one may be shorter) add their gradients up in
/// `.grad()`, and the sum must be the gradient of the mean loss over the whole
/// batch, while only one slice's activations are alive at a time. How much must
/// each slice's mean loss count, when the slices differ in size, and when must
/// each slice's graph be released?
double accumulate_and_step(tiny::nn::Module& model, tiny::optim::Optimizer& optimizer, const tiny::Tensor& inputs,
                           const tiny::Tensor& targets, int64_t micro_batch);

/// @brief The two figures of a GPU's caching allocator at one moment.
struct MemoryReading {
  size_t allocated = 0;  ///< bytes held by live tensors: tiny::cuda::memory_allocated
  size_t reserved = 0;   ///< bytes the allocator holds from the device, live or cached: tiny::cuda::memory_reserved
};

/// @brief The readings of free_and_measure().
struct FreeReport {
  MemoryReading before;             ///< with `tensor` alive
  MemoryReading after_free;         ///< once `tensor` is gone
  MemoryReading after_empty_cache;  ///< after tiny::cuda::empty_cache()
};

/// @brief Frees `tensor` (the only handle to it; it lives on a GPU) and reads its
/// device's memory before, after the free, and after empty_cache().
///
/// Read the figures of the tensor's own device (`tensor.device().index()`).
/// A Tensor is a shared handle: its memory goes back to the allocator when the
/// last handle goes (`tensor = tiny::Tensor();`, PyTorch's `del tensor`).
FreeReport free_and_measure(tiny::Tensor tensor);

/// @brief A training step's memory, part by part, in bytes.
struct StepMemory {
  size_t parameters = 0;        ///< the model's weights and biases
  size_t gradients = 0;         ///< their .grad() tensors, after backward()
  size_t optimizer_states = 0;  ///< what the optimizer keeps per parameter between steps
  size_t activations = 0;       ///< the tensors the forward pass saves for backward() (the batch itself not counted)
  /// @brief The sum of the four parts: the step's predicted peak of memory_allocated (above its batch).
  size_t total() const { return parameters + gradients + optimizer_states + activations; }
};

/// @brief Predicts the peak memory of one training step of `model` with
/// tiny::optim::Adam on a float32 batch of `batch_size` rows, from its parts.
///
/// `model` is a Sequential of nn::Linear layers with an nn::ReLU after each but
/// the last. Work out what each part holds, in bytes, from the model's
/// parameters (their numel() and element_size()) and its layers' widths
/// (Sequential::at<nn::Linear>(i)->weight is [out_features, in_features]):
/// what Adam keeps for each parameter (PyTorch's `optimizer.state[p]`), and
/// which tensors of the forward pass are still needed by backward() when it
/// starts. The checks compare each part with the reference and your total with
/// `max_memory_allocated` of a real step.
///
/// PyTorch: `sum(p.numel() * p.element_size() for p in model.parameters())`.
StepMemory predict_step_memory(const tiny::nn::Sequential& model, int64_t batch_size);

/// @brief The forward pass of `model` on `x` with activation checkpointing:
/// returns the logits, as `model(x)` would, keeping far fewer activations for backward.
///
/// `model` is a Sequential of blocks: a first block (Linear, ReLU), blocks of
/// four Linear+ReLU layers, then the output Linear. A batch whose activations
/// do not all fit on the GPU fits when the deep blocks keep only their input
/// and recompute the rest during backward() (tiny::utils::checkpoint, PyTorch's
/// `torch.utils.checkpoint.checkpoint`). The gradients must be exactly those of
/// `model(x)`. Think about which blocks gain from it and which cannot use it
/// (checkpoint needs an input that requires grad, as PyTorch's reentrant checkpoint does).
tiny::Tensor checkpointed_forward(tiny::nn::Sequential& model, const tiny::Tensor& x);

}  // namespace lesson8
