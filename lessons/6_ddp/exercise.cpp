// Lesson 6: one process per GPU with DistributedDataParallel.
#include "exercise.h"

#include <cstdio>

namespace lesson6 {

namespace dist = tiny::distributed;
namespace F = tiny::nn::functional;

void average_gradients(tiny::nn::Module& model) {
  TINY_TODO("lesson 6: every rank ends with the mean over the ranks of each parameter's gradient; each gradient crosses the network once");
}

tiny::Device setup(const std::string& backend) {
  TINY_TODO("lesson 6: join the group; this rank's GPU on its own machine, made current (the CPU without GPUs)");
}

ShardedLoader make_loader(std::shared_ptr<tiny::data::Dataset> dataset, int64_t batch_size, uint64_t seed) {
  TINY_TODO("lesson 6: this rank's shuffled share of the data, and the sampler that decides it (the loader uses that very sampler)");
}

double train_one_epoch(tiny::nn::parallel::DistributedDataParallel& model, ShardedLoader& data,
                       tiny::optim::Optimizer& optimizer, const tiny::Device& device, int epoch) {
  TINY_TODO("lesson 6: lesson 4's epoch through the DDP model, a new shuffle each epoch; this rank's mean loss per example");
}

double accumulation_step(tiny::nn::parallel::DistributedDataParallel& model,
                         const std::vector<tiny::data::Batch>& micro_batches, tiny::optim::Optimizer& optimizer,
                         const tiny::Device& device) {
  TINY_TODO("lesson 6: one step equal to a step on all the micro-batches at once, the gradients all-reduced once");
}

double all_reduce_mean(double value, const tiny::Device& device) {
  TINY_TODO("lesson 6: the mean of value over the ranks, on every rank (collectives move tensors, not doubles)");
}

std::vector<double> train(const TrainOptions& options) {
  TINY_TODO("lesson 6: the whole per-rank program: every rank trains, rank 0 alone prints the ranks' mean loss and saves, the group is left");
}

}  // namespace lesson6
