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
/// Use `tiny::distributed::all_reduce` (it works in place, and every rank must
/// call it, in the same order) and `tiny::distributed::get_world_size()`.
/// Skip parameters without a gradient. The check compares one step taken
/// after your average with DDP's step on the same data, and counts your
/// collectives: each gradient crosses the network once (one all-reduce per
/// parameter; flattening them all into one buffer first, as DDP's buckets do,
/// is also fine: fewer calls, the same bytes), and nothing else does.
///
/// PyTorch: the same function, with `dist.all_reduce(p.grad)` (see README.md).
void average_gradients(tiny::nn::Module& model);

/// @brief Joins the process group and returns the device this rank trains on.
///
/// - `tiny::distributed::init_process_group(backend)`: the rank, the world size
///   and the rendezvous address come from the environment tinyrun set;
/// - the device is `cuda:LOCAL_RANK` (`tiny::distributed::local_rank()`), the
///   rank's index on its own machine, not its global rank: on the second of two
///   machines with 2 GPUs each, rank 2 uses cuda:0. Make it the current device
///   too (`tiny::cuda::set_device`);
/// - with no GPU at all (`!tiny::cuda::is_available()`), the CPU.
///
/// PyTorch:
/// ```python
/// dist.init_process_group(backend)
/// local_rank = int(os.environ["LOCAL_RANK"])
/// torch.cuda.set_device(local_rank)
/// device = torch.device("cuda", local_rank)
/// ```
tiny::Device setup(const std::string& backend);

/// @brief A DataLoader over this rank's share of the data, and the sampler that decides the share.
struct ShardedLoader {
  std::shared_ptr<tiny::data::DistributedSampler> sampler;  ///< the sampler the loader uses (set_epoch goes here)
  std::unique_ptr<tiny::data::DataLoader> loader;           ///< batches of this rank's examples only
};

/// @brief This rank's loader: a DistributedSampler over `dataset`, and a DataLoader that uses it.
///
/// - the sampler: `dataset->size()` examples shared among
///   `tiny::distributed::get_world_size()` replicas, this one being
///   `tiny::distributed::get_rank()`, shuffled, with `seed` (the same on every
///   rank, so that the ranks agree on one permutation and take disjoint parts of it);
/// - the loader: `batch_size` examples per batch, the sampler in
///   `DataLoaderOptions::sampler` (not `shuffle`: the sampler shuffles);
/// - return both: the training loop calls `sampler->set_epoch(epoch)`.
///
/// PyTorch:
/// ```python
/// sampler = DistributedSampler(dataset, num_replicas=world, rank=rank, shuffle=True, seed=seed)
/// loader = DataLoader(dataset, batch_size=batch_size, sampler=sampler)
/// ```
ShardedLoader make_loader(std::shared_ptr<tiny::data::Dataset> dataset, int64_t batch_size, uint64_t seed);

/// @brief One epoch of this rank's share; returns this rank's mean loss per example.
///
/// - first `data.sampler->set_epoch(epoch)`: the shuffle is seeded with
///   seed + epoch, so without it every epoch repeats the same order;
/// - for each batch: to `device`, zero_grad, forward through `model` (the DDP
///   wrapper: calling it is what makes backward average the gradients),
///   cross-entropy (mean), backward, step. DDP has already averaged the
///   gradients over the ranks when backward returns: do not all-reduce them yourself;
/// - return (sum over batches of loss * batch size) / (examples seen by this rank).
///
/// PyTorch:
/// ```python
/// sampler.set_epoch(epoch)
/// for x, y in loader:
///     x, y = x.to(device), y.to(device)
///     optimizer.zero_grad()
///     loss = F.cross_entropy(ddp(x), y)
///     loss.backward()          # all-reduces the gradients, bucket by bucket
///     optimizer.step()
/// ```
double train_one_epoch(tiny::nn::parallel::DistributedDataParallel& model, ShardedLoader& data,
                       tiny::optim::Optimizer& optimizer, const tiny::Device& device, int epoch);

/// @brief One optimizer step from several micro-batches (gradient accumulation), synchronizing once.
///
/// The step must equal one step on all the micro-batches at once: the
/// gradients of the micro-batches add up in `.grad()` (no zero_grad between
/// them), each micro-batch's mean loss weighted so that the sum is the mean
/// over all of them (they have the same size), then one `optimizer.step()`.
/// Start with `optimizer.zero_grad()`.
///
/// With DDP, every backward all-reduces the gradients, but only the last one
/// needs to: run the earlier micro-batches inside `model.no_sync()` (a guard:
/// synchronization is off while it lives, and it must cover the forward as
/// well as the backward). The check counts the all-reduces of a step: DDP's
/// buckets once, not once per micro-batch.
///
/// Returns the step's loss: the mean over the micro-batches of their losses.
///
/// PyTorch:
/// ```python
/// optimizer.zero_grad()
/// for i, (x, y) in enumerate(micro_batches):
///     ctx = ddp.no_sync() if i < len(micro_batches) - 1 else contextlib.nullcontext()
///     with ctx:
///         ...                  # forward, loss, backward
/// optimizer.step()
/// ```
double accumulation_step(tiny::nn::parallel::DistributedDataParallel& model,
                         const std::vector<tiny::data::Batch>& micro_batches, tiny::optim::Optimizer& optimizer,
                         const tiny::Device& device);

/// @brief The mean of `value` over every rank, returned on every rank.
///
/// Put the value in a one-element tensor on `device`, `tiny::distributed::all_reduce`
/// it (a sum), and divide by the world size (or all-reduce with `ReduceOp::AVG`).
/// Every rank must call it: a collective waits for all of them.
///
/// PyTorch:
/// ```python
/// t = torch.tensor([value], device=device)
/// dist.all_reduce(t)                       # SUM
/// return (t / dist.get_world_size()).item()
/// ```
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
/// In order:
/// 1. `setup(options.backend)` for the device;
/// 2. `options.make_model()`, moved to the device, then wrapped in a
///    `tiny::nn::parallel::DistributedDataParallel` (it copies rank 0's weights
///    to every rank), and a `tiny::optim::SGD` over its parameters with `options.lr`;
/// 3. make_loader(options.dataset, options.batch_size, options.seed);
/// 4. for each epoch 0..epochs-1: train_one_epoch, then all_reduce_mean of its
///    loss (every rank calls it); only rank 0 prints a line with the epoch and
///    that mean (the other ranks print nothing);
/// 5. only rank 0 saves the plain model's weights (`model->state_dict()`, or
///    `ddp->module()->state_dict()`, not the wrapper's "module."-prefixed keys)
///    with `tiny::save` to `options.checkpoint`: every rank holds the same
///    weights, and several processes writing one file would corrupt it;
/// 6. `tiny::distributed::destroy_process_group()` before returning.
///
/// PyTorch: the body of the function you give `torchrun` (see README.md).
std::vector<double> train(const TrainOptions& options);

}  // namespace lesson6
