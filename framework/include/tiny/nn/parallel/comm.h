/// @file nn/parallel/comm.h
/// @brief Collectives between the GPUs of one process (PyTorch's `torch.cuda.comm`, `torch.nn.parallel.comm`).
///
/// These move and combine tensors between devices of this process: copy one
/// tensor to several GPUs (broadcast), sum copies from several GPUs onto one
/// (reduce_add), sum in place on every GPU (all_reduce), split a batch across
/// GPUs (scatter) and put pieces back together (gather). DataParallel is built
/// on them. They are not autograd functions: their results do not require
/// gradients (nn/parallel/data_parallel.h has the differentiable versions).
///
/// Every transfer is a peer copy (Tensor::to between devices): through the
/// emulator on the emulated GPU, counted on the source device's
/// `bytes_device_to_device` (tiny::cuda::device_counters); a CUDA peer copy
/// (over NVLink or PCIe) between real GPUs. PyTorch runs these through NCCL
/// on real GPUs; for the few tensors DataParallel moves, peer copies do the
/// same job (the sums are computed on the destination GPU).
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "tiny/device.h"
#include "tiny/tensor.h"

namespace tiny::nn::parallel::comm {

/// @brief Copies `tensor` to each GPU in `devices` (PyTorch's `comm.broadcast(tensor, devices)`).
///
/// Returns one tensor per device, in the order of `devices`; where `tensor`
/// already lives, the result is `tensor` itself (detached), as in PyTorch.
/// Throws tiny::ValueError for an empty or repeated device list, and
/// tiny::DeviceError for a device that does not exist.
std::vector<Tensor> broadcast(const Tensor& tensor, const std::vector<int>& devices);

/// @brief Sums tensors of one shape and dtype from several devices onto `destination` (PyTorch's `comm.reduce_add`).
///
/// `destination` defaults to the current GPU; it may be the CPU. The inputs
/// are not changed. Throws tiny::ValueError for an empty list, tiny::ShapeError
/// and tiny::DtypeError when shapes or dtypes differ.
Tensor reduce_add(const std::vector<Tensor>& inputs, std::optional<Device> destination = std::nullopt);

/// @brief Replaces each tensor by the sum of all of them, in place (NCCL's all-reduce, PyTorch's `torch.cuda.nccl.all_reduce`).
///
/// The tensors must have one shape and dtype and sit on different GPUs, one
/// each. The sum is formed on the first tensor's device and copied back to
/// the others: (n-1) copies in and (n-1) out, as a reduce then a broadcast.
void all_reduce(const std::vector<Tensor>& tensors);

/// @brief Splits `tensor` along `dim` and copies piece i to `devices[i]` (PyTorch's `comm.scatter`).
///
/// Without `chunk_sizes` the pieces differ in size by at most one, the first
/// `size % devices` pieces one larger (`torch.tensor_split`; PyTorch's
/// `chunk` would give fewer pieces than devices for some sizes). With
/// `chunk_sizes`, one size per device, summing to the size of `dim`. Throws
/// tiny::ValueError when there are fewer elements along `dim` than devices
/// (a device would get nothing) or the sizes do not add up.
std::vector<Tensor> scatter(const Tensor& tensor, const std::vector<int>& devices,
                            const std::vector<int64_t>& chunk_sizes = {}, int64_t dim = 0);

/// @brief Concatenates tensors from several devices along `dim` on `destination` (PyTorch's `comm.gather`).
///
/// `destination` defaults to the current GPU and may be the CPU. The tensors
/// must match in every dimension but `dim` and have one dtype.
Tensor gather(const std::vector<Tensor>& tensors, int64_t dim = 0, std::optional<Device> destination = std::nullopt);

/// @brief The sizes scatter() gives each of `parts` devices for `size` elements: as equal as possible, larger first.
///
/// For example 10 over 3 devices is {4, 3, 3}. Throws tiny::ValueError when
/// `size` < `parts` (`what` names the caller in the message).
std::vector<int64_t> split_sizes(int64_t size, int64_t parts, const char* what = "scatter");

}  // namespace tiny::nn::parallel::comm
