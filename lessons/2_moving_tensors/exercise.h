/// @file lessons/2_moving_tensors/exercise.h
/// @brief Lesson 2: make tensors on a device, move them, find where they live,
/// compute on the GPU and bring the answer back, and time GPU work honestly.
///
/// Implement these in exercise.cpp; `./workbook check 2` (or `ctest -R lesson_2`) checks them.
#pragma once

#include <vector>

#include "tiny/tiny.h"

namespace lesson2 {

/// @brief A tensor of standard-normal values of the given shape, made directly on `device`.
///
/// Draw the values from `generator` (the checks give you one, so your numbers
/// can be compared with the reference's). Make the tensor where it will be
/// used: creating it on the CPU and copying it over gives the same numbers but
/// costs a host-to-device copy.
///
/// PyTorch: the factory functions (`torch.randn`, `torch.zeros`, ...) take
/// `device=` and `generator=`; tiny's take a TensorOptions (a Device converts to
/// one) and a generator (tiny/ops.h).
tiny::Tensor make_on_device(const tiny::IntArrayRef& shape, const tiny::Device& device, tiny::Generator& generator);

/// @brief Copies of `tensors`, in the same order, each moved to `device`.
///
/// The inputs stay where they are (a tensor on `device` already is returned as is).
///
/// PyTorch and tiny: `Tensor.to(device)` returns a new tensor and leaves the old
/// one alone; a handle you assign to inside a loop may be a copy of the one in the vector.
std::vector<tiny::Tensor> to_device(const std::vector<tiny::Tensor>& tensors, const tiny::Device& device);

/// @brief Where `x` lives as a number: the GPU's index (0 for cuda:0, 1 for cuda:1), or -1 on the CPU.
///
/// PyTorch: `x.device` is a `torch.device` (its `.type` and `.index`), and one
/// Tensor method gives this number directly; tiny's Tensor has it under the same
/// name (tiny/tensor.h).
int where_is(const tiny::Tensor& x);

/// @brief `relu(x @ w)` computed on `device`, returned on the CPU.
///
/// `x` (batch x in) and `w` (in x out) are CPU tensors, and the caller wants
/// to read the answer. Three stages: the inputs go to `device`, the work runs
/// there, the answer comes back. `device` may also be the CPU (then nothing moves).
///
/// PyTorch's names: `.to(device)`, `torch.relu`, `@` (tiny: `matmul`), `.cpu()`.
tiny::Tensor gpu_compute_then_cpu(const tiny::Tensor& x, const tiny::Tensor& w, const tiny::Device& device);

/// @brief `relu(x @ w + b)`, computed where `x` lives, returned there.
///
/// This function was written and tested on the CPU, and broke the day `x`
/// came from the GPU while the parameters `w` (in x out) and `b` (out) did
/// not: `tiny::relu(x.matmul(w) + b)` throws "Expected all tensors to be on
/// the same device". Repair it: the work and the result belong on x's device,
/// whatever device `w` and `b` are on (each may be on the CPU or on a GPU).
/// It must keep working when `x` is on cuda:1, not only on the current GPU.
///
/// PyTorch's names: `x.device` (tiny: `x.device()`), `Tensor.to`.
tiny::Tensor linear_relu(const tiny::Tensor& x, const tiny::Tensor& w, const tiny::Tensor& b);

/// @brief Milliseconds per `a.matmul(b)`: the mean over `reps` timed products,
/// on the clock of the device the products run on.
///
/// `a` and `b` already live on the device to time (the CPU or a GPU); `reps` >= 1.
/// - Warm up first: one product that is not timed (the first call pays for
///   one-off setup).
/// - Time only the `reps` products: nothing queued before them (the warm-up
///   included), nothing after them (no copy back).
/// - On a GPU the products are only queued: the time is known only once the
///   GPU has run them, and it must be read on a clock that is right on a real
///   GPU and on the emulated one. `std::chrono` reads this CPU's real time,
///   which on the emulated GPU is the time your CPU took to emulate it.
///   The work runs on a's device, which need not be the current one.
/// - On the CPU there is no GPU to wait for (maybe none on the machine):
///   time it with this CPU's clock.
/// - Return the elapsed milliseconds divided by `reps`.
///
/// The clocks (README, "Timing GPU work"): CUDA events (`torch.cuda.Event`,
/// tiny: `tiny::cuda::Event`), the host's clock after a wait
/// (`tiny::cuda::host_time()`, `tiny::cuda::synchronize`), `std::chrono::steady_clock`.
double time_matmul_ms(const tiny::Tensor& a, const tiny::Tensor& b, int reps);

}  // namespace lesson2
