// Lesson 6: one process per GPU with DistributedDataParallel.
#include "exercise.h"

#include <cstdio>

namespace lesson6 {

namespace dist = tiny::distributed;
namespace F = tiny::nn::functional;

void average_gradients(tiny::nn::Module& model) {
  TINY_TODO("lesson 6: every parameter's gradient summed over the ranks (all_reduce), then divided by the world size");
}

tiny::Device setup(const std::string& backend) {
  TINY_TODO("lesson 6: init_process_group(backend), then cuda:local_rank() (set it as the current device), or the CPU without GPUs");
}

ShardedLoader make_loader(std::shared_ptr<tiny::data::Dataset> dataset, int64_t batch_size, uint64_t seed) {
  TINY_TODO("lesson 6: a DistributedSampler(size, world size, rank, shuffle, seed), and a DataLoader with it as options.sampler");
}

double train_one_epoch(tiny::nn::parallel::DistributedDataParallel& model, ShardedLoader& data,
                       tiny::optim::Optimizer& optimizer, const tiny::Device& device, int epoch) {
  TINY_TODO("lesson 6: sampler->set_epoch(epoch); then per batch: to device, zero_grad, forward, cross_entropy, backward, step; return the mean loss per example");
}

double accumulation_step(tiny::nn::parallel::DistributedDataParallel& model,
                         const std::vector<tiny::data::Batch>& micro_batches, tiny::optim::Optimizer& optimizer,
                         const tiny::Device& device) {
  TINY_TODO("lesson 6: zero_grad; each micro-batch's loss / their count, backward; all but the last inside no_sync(); one step");
}

double all_reduce_mean(double value, const tiny::Device& device) {
  TINY_TODO("lesson 6: put value in a float64 tensor on device, all_reduce it (a sum), divide by get_world_size()");
}

std::vector<double> train(const TrainOptions& options) {
  TINY_TODO("lesson 6: setup, model to device, DDP, SGD, make_loader; per epoch train_one_epoch + all_reduce_mean (rank 0 prints); rank 0 saves; destroy_process_group");
}

}  // namespace lesson6
