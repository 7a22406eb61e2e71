/// @file lessons/5_data_parallel/exercise.h
/// @brief Lesson 5: data parallelism in one process: split a batch across GPUs,
/// put the pieces back together, and train with tiny::nn::DataParallel.
///
/// Implement these in exercise.cpp; `./workbook check 5` (or `ctest -R lesson_5`) checks them.
#pragma once

#include <memory>
#include <vector>

#include "tiny/tiny.h"

namespace lesson5 {

/// @brief Splits `batch` along dimension 0 into one piece per device and copies piece i to `devices[i]`.
///
/// - the pieces keep the order of the rows: piece 0 holds the first rows;
/// - their sizes differ by at most one, the larger ones first: 10 rows on 3
///   devices are 4, 3, 3 (every device as busy as the others can be);
/// - copy each piece from where the batch is, not the whole batch to every
///   device (`narrow` takes rows without copying);
/// - fewer rows than devices would leave a device without work: throw
///   `tiny::ValueError` with a message that says so (TINY_CHECK does it in one line).
///
/// PyTorch: `torch.nn.parallel.scatter(batch, device_ids)` (which uses `chunk`: 10 rows on 3 GPUs are 4, 4, 2).
std::vector<tiny::Tensor> scatter(const tiny::Tensor& batch, const std::vector<tiny::Device>& devices);

/// @brief Concatenates `pieces` (one per device, in order) along dimension 0 on `output_device`.
///
/// `tiny::cat` needs all its inputs on one device. Copy GPU to GPU: a piece that
/// stops on the host on its way has the same values, but makes the host wait and copies twice.
///
/// PyTorch: `torch.nn.parallel.gather(pieces, output_device)`.
tiny::Tensor gather(const std::vector<tiny::Tensor>& pieces, const tiny::Device& output_device);

/// @brief `model` wrapped in a tiny::nn::DataParallel over `device_ids`, ready to train.
///
/// DataParallel replicates the module from the first device in `device_ids`
/// at every forward pass, and gathers the outputs on that same device; it does
/// not move the module for you. Where must the module be before it is wrapped?
///
/// PyTorch's names: `nn.DataParallel(module, device_ids=...)`, `module.to(device)`.
std::shared_ptr<tiny::nn::DataParallel> wrap(std::shared_ptr<tiny::nn::Module> model,
                                             const std::vector<int>& device_ids);

/// @brief One SGD step of the DataParallel `model` on a CPU batch; returns the loss as a plain number.
///
/// Give `batch.data` to the model as it is, on the CPU: DataParallel scatters
/// it to the GPUs itself, so each GPU receives only its own rows (moving the
/// batch to cuda:0 first sends everything through one GPU). The output comes
/// back on `model.output_device()`, and the loss needs the labels beside it.
/// Otherwise it is lesson 4's step (mean cross-entropy, SGD): the gradients of
/// all replicas arrive in the wrapped module's parameters, which the optimizer
/// holds, so backward and step look as they do on one GPU.
///
/// PyTorch's names: `dp(x)`, `dp.output_device`, `F.cross_entropy`, `loss.item()`.
double train_step(tiny::nn::DataParallel& model, const tiny::data::Batch& batch, tiny::optim::Optimizer& optimizer);

}  // namespace lesson5
