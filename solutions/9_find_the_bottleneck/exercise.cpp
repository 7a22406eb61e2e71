// Lesson 9: measure a training program on the GPU's clock, and the fixes of its bottlenecks.
#include "exercise.h"

namespace lesson9 {

namespace F = tiny::nn::functional;

Measurement measure(const std::function<void()>& step, int warmup, int steps, double flops_per_step, int device) {
  // BEGIN SOLUTION: time the timed steps' work on the GPU, and only theirs (exercise.h says what to return)
  for (int i = 0; i < warmup; ++i) step();  // one-off costs: workers starting, first allocations
  tiny::cuda::synchronize(device);          // the warm-up's GPU work is not ours to time
  const double start_s = tiny::cuda::host_time();
  const double kernels_before_ms = tiny::cuda::device_counters(device).modelled_kernel_ms;
  for (int i = 0; i < steps; ++i) step();
  tiny::cuda::synchronize(device);  // the host's clock now includes the GPU's work
  const double elapsed_s = tiny::cuda::host_time() - start_s;
  const double kernels_ms = tiny::cuda::device_counters(device).modelled_kernel_ms - kernels_before_ms;
  Measurement m;
  m.step_ms = elapsed_s * 1e3 / steps;
  m.utilization = kernels_ms / (elapsed_s * 1e3);  // GPU-Util: the share of the time any kernel ran
  m.tflops = flops_per_step * steps / elapsed_s / 1e12;
  return m;
  // END SOLUTION
}

std::unique_ptr<tiny::data::DataLoader> make_loader(std::shared_ptr<tiny::data::Dataset> dataset,
                                                    tiny::Generator generator) {
  // BEGIN SOLUTION: choose batch_size, num_workers and pin_memory that keep the GPU busy; shuffle with the generator
  tiny::data::DataLoaderOptions options;
  options.batch_size = 1024;  // enough work per launch that the GPU, not the host, sets the pace
  options.num_workers = 12;  // 1024 images x 8 us = 8.2 ms a batch; 12 workers deliver one every 0.68 ms
  options.pin_memory = true; // pinned batches: the copies can be non_blocking
  options.shuffle = true;
  options.generator = generator;
  return std::make_unique<tiny::data::DataLoader>(std::move(dataset), options);
  // END SOLUTION
}

void train_step(tiny::nn::Module& model, const tiny::data::Batch& batch, tiny::optim::Optimizer& optimizer,
                const tiny::Device& device, tiny::Tensor& loss_sum) {
  // BEGIN SOLUTION: a step in which the host never waits, the products run in bfloat16, the loss adds up on the GPU
  const tiny::Tensor x = batch.data.to(device, /*non_blocking=*/true);  // pinned: the host does not wait
  const tiny::Tensor y = batch.target.to(device, /*non_blocking=*/true);
  optimizer.zero_grad();
  tiny::Tensor loss;
  {
    tiny::amp::autocast guard("cuda", tiny::kBFloat16);  // the products on the tensor cores
    loss = F::cross_entropy(model(x), y);
  }
  loss.backward();
  optimizer.step();
  loss_sum.add_(loss.detach());  // stays on the GPU: nobody waits for it now
  // END SOLUTION
}

double train_epoch(tiny::nn::Module& model, tiny::data::DataLoader& loader, tiny::optim::Optimizer& optimizer,
                   const tiny::Device& device) {
  // BEGIN SOLUTION: train_step on every batch; the mean loss per batch, with as few waits as an epoch allows
  tiny::Tensor loss_sum = tiny::zeros({}, device);
  int64_t batches = 0;
  for (const tiny::data::Batch& batch : loader) {
    train_step(model, batch, optimizer, device, loss_sum);
    ++batches;
  }
  return batches == 0 ? 0.0 : loss_sum.item<double>() / static_cast<double>(batches);  // the epoch's one wait
  // END SOLUTION
}

}  // namespace lesson9
