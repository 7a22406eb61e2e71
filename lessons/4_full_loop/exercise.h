/// @file lessons/4_full_loop/exercise.h
/// @brief Lesson 4: the full training loop on a GPU: a DataLoader with pinned
/// memory and workers, batches copied with non_blocking, one epoch of training
/// that waits for the GPU once, and evaluation.
///
/// Implement these in exercise.cpp; `./workbook check 4` (or `ctest -R lesson_4`) checks them.
#pragma once

#include <cstdint>
#include <memory>

#include "tiny/tiny.h"

namespace lesson4 {

/// @brief A DataLoader over `dataset` with the settings asked for.
///
/// - `batch_size` examples per batch, the last batch may be shorter (no drop_last);
/// - `shuffle`: a new order every epoch, drawn from `generator` (so a run can be repeated);
/// - `pin_memory`: batches arrive in pinned (page-locked) host memory, so that
///   `.to(device, non_blocking=true)` can copy them without the host waiting;
/// - `num_workers`: threads that prepare the next batches while the loop trains
///   on this one (0: the loop prepares each batch itself, and the GPU waits).
///
/// PyTorch: `torch.utils.data.DataLoader` and its keyword arguments; tiny's
/// takes them as a `tiny::data::DataLoaderOptions` (tiny/data/dataloader.h).
/// tiny's DataLoader cannot be copied, so return it in a `std::unique_ptr`.
std::unique_ptr<tiny::data::DataLoader> make_loader(std::shared_ptr<tiny::data::Dataset> dataset,
                                                    int64_t batch_size, bool shuffle, bool pin_memory,
                                                    int num_workers, tiny::Generator generator);

/// @brief The batch with both its features (`batch.data`) and its labels (`batch.target`) on `device`.
///
/// Pass `non_blocking` on to each copy: from pinned memory the copy is then queued
/// on the GPU and the host goes on at once (the GPU runs the work in order, so the
/// model sees the data in time).
///
/// PyTorch's names: `Tensor.to(device, non_blocking=...)`; tiny's `to` takes the
/// flag as its second argument.
tiny::data::Batch to_device(const tiny::data::Batch& batch, const tiny::Device& device, bool non_blocking);

/// @brief One optimisation step on one batch; returns the batch's loss, still on the device.
///
/// The model and the optimizer's parameters are already on `device`; the batch is
/// still where the loader made it (the CPU): your to_device moves it, without
/// making the host wait when the loader pinned it. The model arrives with the
/// previous step's gradients still in `.grad()`, and backward adds to what is
/// there. The loss is the cross-entropy averaged over the batch; the optimizer
/// updates once.
///
/// Return the loss as a tensor on `device`, without its autograd graph: reading
/// it as a number here (`.item()`) would make the host wait for the GPU at every
/// step, and a loss that keeps its graph, added to the epoch's sum, makes the sum
/// hold every step's graph until the epoch ends.
///
/// PyTorch: the five lines of every training loop (`to`, `zero_grad`,
/// `cross_entropy`, `backward`, `step`); what to return is this lesson's question.
tiny::Tensor train_step(tiny::nn::Module& model, const tiny::data::Batch& batch, tiny::optim::Optimizer& optimizer,
                        const tiny::Device& device);

/// @brief One pass over `loader` with train_step on every batch; returns the mean loss per example.
///
/// The mean must weight each batch's loss by its number of examples: the last
/// batch of an epoch is usually shorter, and must count for what it holds.
/// (sum over batches of loss * batch size) / (number of examples).
///
/// The host may wait for the GPU once in the whole epoch, at the end: the
/// running sum must grow every step without becoming a number on the host
/// (no `.item()` or `.cpu()` in the loop, nor PyTorch's `float(loss)`).
double train_one_epoch(tiny::nn::Module& model, tiny::data::DataLoader& loader, tiny::optim::Optimizer& optimizer,
                       const tiny::Device& device);

/// @brief What evaluate() measures over a whole data set.
struct EvalResult {
  double loss = 0;      ///< mean cross-entropy per example
  double accuracy = 0;  ///< fraction of examples classified right, in [0, 1]
};

/// @brief The mean loss and the accuracy of `model` over `loader`, without training.
///
/// - evaluation mode (`model.eval()`: dropout keeps every unit) while measuring,
///   and training mode again (`model.train()`) before returning;
/// - no autograd graph: nothing here calls backward(), so record nothing
///   (`tiny::NoGradGuard`, PyTorch's `with torch.no_grad():`);
/// - the loss is weighted by batch size, as in train_one_epoch; the prediction is
///   the class with the largest logit (PyTorch's `argmax`, tiny's too);
/// - as in train_one_epoch, the host does not wait for the GPU inside the loop:
///   both sums (the loss and the right predictions) stay on the device and are
///   read as numbers after it (the reference waits twice, once per sum; never once per batch).
EvalResult evaluate(tiny::nn::Module& model, tiny::data::DataLoader& loader, const tiny::Device& device);

}  // namespace lesson4
