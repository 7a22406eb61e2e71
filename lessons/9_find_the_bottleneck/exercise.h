/// @file lessons/9_find_the_bottleneck/exercise.h
/// @brief Lesson 9: find what keeps the GPU waiting in a training program
/// (the profiler, GPU utilization, achieved TFLOP/s), and fix it one
/// bottleneck at a time: DataLoader workers, no `.item()` per step, pinned
/// memory with non_blocking copies, bfloat16, a batch that fills the GPU.
///
/// Implement these in exercise.cpp; `./workbook check 9` (or `ctest -R lesson_9`) checks them.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>

#include "program.h"
#include "tiny/tiny.h"

namespace lesson9 {

/// @brief What a stretch of training cost on the GPU's clock.
struct Measurement {
  double step_ms = 0;      ///< milliseconds per step, on the (modelled) host clock, the GPU's work included
  double utilization = 0;  ///< GPU-Util: the share of that time in which any kernel ran, in [0, 1]
  double tflops = 0;       ///< achieved TFLOP/s: the steps' FLOPs over their time
};

/// @brief Times `steps` calls of `step` on GPU `device`, after `warmup` calls that are not timed.
///
/// - The warm-up calls pay one-off costs (the loader's workers start, memory
///   is allocated) and must not be timed, nor may their GPU work, still queued
///   when they return, be counted in your window.
/// - All of the timed calls' GPU work must be in the window.
/// - The clock is the host's, `tiny::cuda::host_time()` (seconds); the GPU's
///   busy time so far is `tiny::cuda::device_counters(device).modelled_kernel_ms`.
/// - step_ms: the window's milliseconds / steps. utilization: the kernels' time
///   in the window / the window (what nvidia-smi's GPU-Util reports).
///   tflops: flops_per_step x steps / the window's seconds / 1e12.
///
/// PyTorch: `torch.cuda.synchronize()` around `time.perf_counter()` for the
/// time; `nvidia-smi` (or `torch.cuda.utilization()`) for GPU-Util.
Measurement measure(const std::function<void()>& step, int warmup, int steps, double flops_per_step, int device);

/// @brief The DataLoader the program should have had: shuffled from `generator`,
/// with the batch size, workers and pinned memory that keep the GPU busy.
///
/// The program as given used `batch_size = 32`, no workers, pageable batches.
/// Choose: `num_workers` (each worker transforms whole batches in the
/// background; enough of them that the loop never waits for one),
/// `pin_memory = true` (so copies can be non_blocking), and a `batch_size`
/// large enough that the GPU, not the host's launches, sets the pace (at most 1024).
///
/// PyTorch: `DataLoader(dataset, batch_size=..., shuffle=True, num_workers=...,
/// pin_memory=True, generator=generator)`.
std::unique_ptr<tiny::data::DataLoader> make_loader(std::shared_ptr<tiny::data::Dataset> dataset,
                                                    tiny::Generator generator);

/// @brief One training step on `batch` (still on the host, pinned), adding its
/// loss to `loss_sum` (a float32 scalar on `device`) without waiting for the GPU.
///
/// Lesson 4's step, with three of the program's problems gone; what it must achieve:
/// - the host never waits for the GPU inside the step: nothing reads a
///   value back, and the batch's copies are queued like kernels, not held
///   until they finish (the batch is pinned; the copy must be told it may return early);
/// - the matrix products run in bfloat16 on the tensor cores, while the
///   gradients and the optimizer's update stay in float32 (which of the
///   step's parts belong inside lesson 7's guard, and which must not?);
/// - the loss still adds up, on the GPU, without keeping each step's graph alive.
///
/// PyTorch has the same three tools: `non_blocking=True`, `torch.autocast`, and
/// a tensor accumulator with `.detach()` in place of `.item()`.
void train_step(tiny::nn::Module& model, const tiny::data::Batch& batch, tiny::optim::Optimizer& optimizer,
                const tiny::Device& device, tiny::Tensor& loss_sum);

/// @brief One pass over `loader` with train_step; returns the mean loss per
/// batch, read from the GPU once, at the end.
///
/// Per batch, not per example as in lessons 4 and 6: train_step adds each
/// batch's mean loss to `loss_sum` as it is (the PyTorch tutorials'
/// `running_loss += loss.item()`, without the wait), so the sum counts batches.
/// With batches of one size, as here (320 examples in 5 batches of 64), the two
/// means are equal; with a short last batch only lesson 4's weighted mean is the
/// mean over the examples.
///
/// Where, in the whole epoch, must the host wait for the GPU, and how many
/// times? PyTorch: the accumulator made on the device, the loop, one read.
double train_epoch(tiny::nn::Module& model, tiny::data::DataLoader& loader, tiny::optim::Optimizer& optimizer,
                   const tiny::Device& device);

}  // namespace lesson9
