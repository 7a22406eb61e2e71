// Lesson 6: one process per GPU with DistributedDataParallel.
#include "exercise.h"

#include <cstdio>

namespace lesson6 {

namespace dist = tiny::distributed;
namespace F = tiny::nn::functional;

void average_gradients(tiny::nn::Module& model) {
  // BEGIN SOLUTION: every rank ends with the mean over the ranks of each parameter's gradient; each gradient crosses the network once
  const double world = dist::get_world_size();
  tiny::NoGradGuard no_grad;
  for (const tiny::Tensor& p : model.parameters()) {
    if (!p.grad().defined()) continue;
    dist::all_reduce(p.grad());  // in place: every rank now holds the sum
    p.grad().div_(world);        // the sum over the ranks becomes their mean
  }
  // END SOLUTION
}

tiny::Device setup(const std::string& backend) {
  // BEGIN SOLUTION: join the group; this rank's GPU on its own machine, made current (the CPU without GPUs)
  dist::init_process_group(backend);  // RANK, WORLD_SIZE, MASTER_ADDR/PORT from tinyrun
  if (!tiny::cuda::is_available()) return tiny::Device("cpu");
  const int local = dist::local_rank();  // this machine's GPU, not the global rank
  tiny::cuda::set_device(local);
  return tiny::Device(tiny::kCUDA, local);
  // END SOLUTION
}

ShardedLoader make_loader(std::shared_ptr<tiny::data::Dataset> dataset, int64_t batch_size, uint64_t seed) {
  // BEGIN SOLUTION: this rank's shuffled share of the data, and the sampler that decides it (the loader uses that very sampler)
  ShardedLoader data;
  data.sampler = std::make_shared<tiny::data::DistributedSampler>(dataset->size(), dist::get_world_size(),
                                                                  dist::get_rank(), /*shuffle=*/true, seed);
  tiny::data::DataLoaderOptions options;
  options.batch_size = batch_size;
  options.sampler = data.sampler;
  data.loader = std::make_unique<tiny::data::DataLoader>(dataset, options);
  return data;
  // END SOLUTION
}

double train_one_epoch(tiny::nn::parallel::DistributedDataParallel& model, ShardedLoader& data,
                       tiny::optim::Optimizer& optimizer, const tiny::Device& device, int epoch) {
  // BEGIN SOLUTION: lesson 4's epoch through the DDP model, a new shuffle each epoch; this rank's mean loss per example
  data.sampler->set_epoch(static_cast<uint64_t>(epoch));  // a new shuffle every epoch
  double sum = 0;
  int64_t examples = 0;
  for (const tiny::data::Batch& batch : *data.loader) {
    const tiny::Tensor x = batch.data.to(device), y = batch.target.to(device);
    optimizer.zero_grad();
    const tiny::Tensor loss = F::cross_entropy(model(x), y);
    loss.backward();  // DDP averages the gradients over the ranks here
    optimizer.step();
    sum += loss.item<double>() * static_cast<double>(x.size(0));
    examples += x.size(0);
  }
  return examples > 0 ? sum / static_cast<double>(examples) : 0.0;
  // END SOLUTION
}

double accumulation_step(tiny::nn::parallel::DistributedDataParallel& model,
                         const std::vector<tiny::data::Batch>& micro_batches, tiny::optim::Optimizer& optimizer,
                         const tiny::Device& device) {
  // BEGIN SOLUTION: one step equal to a step on all the micro-batches at once, the gradients all-reduced once
  optimizer.zero_grad();
  const double count = static_cast<double>(micro_batches.size());
  double total = 0;
  for (size_t i = 0; i < micro_batches.size(); ++i) {
    const tiny::Tensor x = micro_batches[i].data.to(device), y = micro_batches[i].target.to(device);
    auto forward_backward = [&] {
      const tiny::Tensor loss = F::cross_entropy(model(x), y).div(count);  // the mean over all micro-batches
      loss.backward();
      total += loss.item<double>();
    };
    if (i + 1 < micro_batches.size()) {
      auto guard = model.no_sync();  // forward and backward inside: gradients add up locally
      forward_backward();
    } else {
      forward_backward();  // outside no_sync: this backward all-reduces the accumulated gradients
    }
  }
  optimizer.step();
  return total;
  // END SOLUTION
}

double all_reduce_mean(double value, const tiny::Device& device) {
  // BEGIN SOLUTION: the mean of value over the ranks, on every rank (collectives move tensors, not doubles)
  const tiny::Tensor t = tiny::full({1}, value, tiny::kFloat64).to(device);
  dist::all_reduce(t);  // ReduceOp::SUM
  return t.item<double>() / dist::get_world_size();
  // END SOLUTION
}

std::vector<double> train(const TrainOptions& options) {
  // BEGIN SOLUTION: the whole per-rank program: every rank trains, rank 0 alone prints the ranks' mean loss and saves, the group is left
  const tiny::Device device = setup(options.backend);
  const int rank = dist::get_rank();
  std::shared_ptr<tiny::nn::Module> model = options.make_model();
  model->to(device);
  auto ddp = std::make_shared<tiny::nn::parallel::DistributedDataParallel>(model);
  tiny::optim::SGD optimizer(ddp->parameters(), {options.lr});
  ShardedLoader data = make_loader(options.dataset, options.batch_size, options.seed);

  std::vector<double> losses;
  for (int epoch = 0; epoch < options.epochs; ++epoch) {
    const double local = train_one_epoch(*ddp, data, optimizer, device, epoch);
    const double mean = all_reduce_mean(local, device);  // every rank takes part
    losses.push_back(mean);
    if (rank == 0) {
      std::printf("epoch %d  loss %.5f\n", epoch + 1, mean);
      std::fflush(stdout);
    }
  }
  if (rank == 0) tiny::save(model->state_dict(), options.checkpoint);  // one writer
  dist::destroy_process_group();
  return losses;
  // END SOLUTION
}

}  // namespace lesson6
