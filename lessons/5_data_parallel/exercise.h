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
///   devices are 4, 3, 3 (`batch.size(0) / n`, plus one for the first
///   `batch.size(0) % n` pieces);
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
/// at every forward pass, so the module must be there first: move it to
/// `cuda:<device_ids[0]>`, then wrap it. Outputs are gathered on that same device.
///
/// PyTorch: `model.to(f"cuda:{device_ids[0]}"); dp = nn.DataParallel(model, device_ids=device_ids)`.
std::shared_ptr<tiny::nn::DataParallel> wrap(std::shared_ptr<tiny::nn::Module> model,
                                             const std::vector<int>& device_ids);

/// @brief One SGD step of the DataParallel `model` on a CPU batch; returns the loss as a plain number.
///
/// Give `batch.data` to the model as it is, on the CPU: DataParallel scatters
/// it to the GPUs itself, so each GPU receives only its own rows (moving the
/// batch to cuda:0 first sends everything through one GPU). The output comes
/// back on `model.output_device()`: the labels must be there too for the loss.
/// In order: zero_grad, forward, cross-entropy (mean), backward, step. The
/// gradients of all replicas arrive in the wrapped module's parameters, which
/// the optimizer holds.
///
/// PyTorch:
/// ```python
/// optimizer.zero_grad()
/// out = dp(x)
/// loss = F.cross_entropy(out, y.to(dp.output_device))
/// loss.backward()
/// optimizer.step()
/// return loss.item()
/// ```
double train_step(tiny::nn::DataParallel& model, const tiny::data::Batch& batch, tiny::optim::Optimizer& optimizer);

}  // namespace lesson5
