/// @file lessons/6_ddp/exercise.h
/// @brief Lesson 6: DistributedDataParallel: one process per GPU, each training
/// on its own share of the data, the gradients averaged between them.
///
/// Every function here runs inside one rank of a run that `tinyrun` started
/// (`tinyrun --nproc-per-node 2 ./program`), which set RANK, LOCAL_RANK,
/// WORLD_SIZE, MASTER_ADDR and MASTER_PORT for it.
///
/// Implement these in exercise.cpp; `./workbook check 6` (or `ctest -R lesson_6`) checks them.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "tiny/tiny.h"

namespace lesson6 {

/// @brief Averages every parameter's gradient over the ranks, in place: what DDP does for you, by hand.
///
/// Each rank has just run backward on its own share of the batch, so each holds
/// different gradients. When this returns, every rank must hold the same
/// gradients: for each parameter, the mean over the ranks of their gradients
/// (the gradient of the whole batch, as one process would have computed it).
/// Then the same optimizer step on every rank keeps the replicas equal.
///
/// The tools: `tiny::distributed::all_reduce` (a collective: it works in place,
/// every rank must call it, in the same order, and it sums by default) and
/// `tiny::distributed::get_world_size()`. A parameter without a gradient has
/// nothing to average. The check compares one step taken after your average
/// with DDP's step on the same data, and counts your collectives: each gradient
/// crosses the network once (one all-reduce per parameter; flattening them all
/// into one buffer first, as DDP's buckets do, is also fine: fewer calls, the
/// same bytes), and nothing else does.
///
/// PyTorch: `dist.all_reduce(tensor)` and `dist.get_world_size()`; what you
/// reduce, and what a sum over N ranks needs to become a mean, is the exercise.
void average_gradients(tiny::nn::Module& model);

/// @brief Joins the process group and returns the device this rank trains on.
///
/// When it returns, this process is a member of the group (`backend` given;
/// the rank, the world size and where the ranks meet come from the environment
/// tinyrun set), and it trains on its own GPU, which is also the current device,
/// so that code saying only "cuda" lands there too. Which GPU: each machine
/// numbers its GPUs from 0, so the index is the rank's place on its own machine,
/// not its place in the whole run (on the second of two machines with 2 GPUs
/// each, global rank 2 uses cuda:0). With no GPU at all, the CPU.
/// The device returned carries that index, as `torch.device("cuda", local_rank)`
/// does: a bare "cuda" means whichever GPU is current, not this rank's.
///
/// PyTorch's names: `dist.init_process_group`, the `LOCAL_RANK` and `RANK`
/// environment variables (tiny: `tiny::distributed::local_rank()`, `get_rank()`),
/// `torch.cuda.set_device`, `torch.cuda.is_available()`.
tiny::Device setup(const std::string& backend);

/// @brief A DataLoader over this rank's share of the data, and the sampler that decides the share.
struct ShardedLoader {
  std::shared_ptr<tiny::data::DistributedSampler> sampler;  ///< the sampler the loader uses (set_epoch goes here)
  std::unique_ptr<tiny::data::DataLoader> loader;           ///< batches of this rank's examples only
};

/// @brief This rank's loader: batches of `batch_size` from this rank's share of `dataset`.
///
/// What must hold: over an epoch the ranks together see every example once,
/// each rank a disjoint part of about the same size; the order is shuffled,
/// and the same `seed` on every rank is what makes the ranks agree on one
/// permutation before they split it. The sampler that decides the share is
/// returned too: the training loop must reach it at each epoch (set_epoch), so
/// the loader must use that very object, and shuffling belongs to it, not to
/// the loader.
///
/// PyTorch's names: `DistributedSampler(dataset, num_replicas, rank, shuffle, seed)`
/// and `DataLoader(..., sampler=...)`; tiny's sampler counts examples
/// (`dataset->size()`) and goes in `DataLoaderOptions::sampler`.
ShardedLoader make_loader(std::shared_ptr<tiny::data::Dataset> dataset, int64_t batch_size, uint64_t seed);

/// @brief One epoch of this rank's share; returns this rank's mean loss per example.
///
/// Lesson 4's epoch (cross-entropy, SGD), with two things that only DDP needs:
/// - a new order every epoch: the sampler seeds its shuffle with seed + epoch,
///   and only the loop knows the epoch (PyTorch's `sampler.set_epoch`);
///   without it every epoch repeats the first one's order;
/// - the model is the DDP wrapper, and calling it (not the module inside) is
///   what makes the next backward average the gradients over the ranks, so
///   that when backward returns they are already the mean. Anything your loop
///   adds to them is a second average (the check counts the collectives).
///
/// The value returned is the mean loss per example, as in lesson 4: each
/// batch's mean loss weighted by its number of examples, over the examples this
/// rank saw (its last batch may be short).
double train_one_epoch(tiny::nn::parallel::DistributedDataParallel& model, ShardedLoader& data,
                       tiny::optim::Optimizer& optimizer, const tiny::Device& device, int epoch);

/// @brief One optimizer step from several micro-batches (gradient accumulation), synchronizing once.
///
/// The step must equal one step on all the micro-batches at once (they have
/// the same size). Their gradients add up in `.grad()`, so each micro-batch's
/// loss must count for its share of the mean over all of them, and nothing left
/// in `.grad()` by an earlier step may count at all; the weights move once.
///
/// With DDP, every backward all-reduces the gradients, but the sum only needs
/// averaging once, when it is complete. `model.no_sync()` (PyTorch's
/// `with ddp.no_sync():`, here a guard: synchronization is off while it lives)
/// keeps a backward local; DDP decides during the forward whether the coming
/// backward synchronizes. Which micro-batches belong under it, and which one
/// must not? The check counts the all-reduces of a step: DDP's buckets once,
/// not once per micro-batch.
///
/// Returns the step's loss: the mean over the micro-batches of their losses.
double accumulation_step(tiny::nn::parallel::DistributedDataParallel& model,
                         const std::vector<tiny::data::Batch>& micro_batches, tiny::optim::Optimizer& optimizer,
                         const tiny::Device& device);

/// @brief The mean of `value` over every rank, returned on every rank.
///
/// Each rank's epoch loss covers only its own share; the number worth printing
/// is the mean over the ranks. average_gradients for one number: collectives
/// move tensors, not doubles, and with NCCL the tensor must be on this rank's
/// GPU (`device`). Keep the precision of a double. Every rank must call it: a
/// collective waits for all of them, and a rank that skips it leaves the
/// others hanging.
///
/// PyTorch's names: `torch.tensor(..., device=device)`, `dist.all_reduce`
/// (`op=ReduceOp.SUM` by default; tiny has `ReduceOp::AVG` too), `.item()`.
double all_reduce_mean(double value, const tiny::Device& device);

/// @brief What train() needs; the same on every rank.
struct TrainOptions {
  std::shared_ptr<tiny::data::Dataset> dataset;                   ///< the whole training set
  std::function<std::shared_ptr<tiny::nn::Module>()> make_model;  ///< builds a fresh model (on the CPU)
  int epochs = 1;                                                 ///< passes over the data
  int64_t batch_size = 32;                                        ///< examples per batch on each rank
  double lr = 0.1;                                                ///< SGD learning rate
  uint64_t seed = 0;                                              ///< the sampler's shuffle seed
  std::string checkpoint;                                         ///< where rank 0 saves the final weights
  std::string backend = "gloo";                                   ///< the process group's backend
};

/// @brief The per-rank training program; returns the mean loss over all ranks of every epoch.
///
/// Your functions above, put together: what the run must do and leave behind.
/// - Every rank trains the same model on its own GPU: a fresh
///   `options.make_model()` on the device, wrapped in
///   `tiny::nn::parallel::DistributedDataParallel` (which copies rank 0's weights
///   to every rank when it is made), SGD with `options.lr` over its parameters.
/// - `options.epochs` epochs of the rank's share of `options.dataset`
///   (`options.batch_size`, `options.seed`). Each epoch's loss, averaged over
///   the ranks, goes in the returned vector on every rank, and one line per
///   epoch (the epoch and that loss) is printed by rank 0 alone.
/// - One file at `options.checkpoint`, written by rank 0 alone with `tiny::save`:
///   every rank holds the same weights, and several processes writing one file
///   would corrupt it. It holds the plain model's state_dict, whose keys load
///   into a model without DDP (the wrapper's own keys start with "module.").
/// - The process leaves the group before returning.
///
/// PyTorch: the function you give `torchrun`; README.md shows its skeleton.
std::vector<double> train(const TrainOptions& options);

}  // namespace lesson6
