// Lesson 4: the full training loop: loader, copies to the GPU, one epoch, evaluation.
#include "exercise.h"

namespace lesson4 {

namespace F = tiny::nn::functional;
using tiny::data::Batch;

std::unique_ptr<tiny::data::DataLoader> make_loader(std::shared_ptr<tiny::data::Dataset> dataset,
                                                    int64_t batch_size, bool shuffle, bool pin_memory,
                                                    int num_workers, tiny::Generator generator) {
  // BEGIN SOLUTION: a loader with these settings: batch size, order, pinned batches, workers, generator
  tiny::data::DataLoaderOptions options;
  options.batch_size = batch_size;
  options.shuffle = shuffle;
  options.pin_memory = pin_memory;
  options.num_workers = num_workers;  // the next batches load while the GPU trains on this one
  options.generator = generator;
  return std::make_unique<tiny::data::DataLoader>(std::move(dataset), options);
  // END SOLUTION
}

Batch to_device(const Batch& batch, const tiny::Device& device, bool non_blocking) {
  // BEGIN SOLUTION: the features and the labels on the device, non_blocking passed on
  return {batch.data.to(device, non_blocking), batch.target.to(device, non_blocking)};
  // END SOLUTION
}

tiny::Tensor train_step(tiny::nn::Module& model, const Batch& batch, tiny::optim::Optimizer& optimizer,
                        const tiny::Device& device) {
  // BEGIN SOLUTION: one step on one batch; the loss comes back as it is on the device, without its graph
  const Batch on_device = to_device(batch, device, /*non_blocking=*/true);
  optimizer.zero_grad();  // the gradients of the previous step are still there
  const tiny::Tensor loss = F::cross_entropy(model(on_device.data), on_device.target);
  loss.backward();
  optimizer.step();
  return loss.detach();  // no graph kept alive, and no .item(): reading it would make the host wait for the GPU
  // END SOLUTION
}

double train_one_epoch(tiny::nn::Module& model, tiny::data::DataLoader& loader, tiny::optim::Optimizer& optimizer,
                       const tiny::Device& device) {
  // BEGIN SOLUTION: every batch once; the mean loss per example, read from the device once, at the end
  tiny::Tensor loss_sum = tiny::zeros({}, device);  // on the device: adding to it queues work, never waits
  int64_t examples = 0;
  for (const Batch& batch : loader) {
    const int64_t n = batch.target.size(0);  // the last batch may be short
    loss_sum.add_(train_step(model, batch, optimizer, device), static_cast<double>(n));
    examples += n;
  }
  if (examples == 0) return 0.0;
  return loss_sum.item<double>() / static_cast<double>(examples);  // the epoch's one wait for the GPU
  // END SOLUTION
}

EvalResult evaluate(tiny::nn::Module& model, tiny::data::DataLoader& loader, const tiny::Device& device) {
  // BEGIN SOLUTION: eval mode, no graph, sums kept on the device; train mode again at the end
  tiny::NoGradGuard no_grad;  // nothing here calls backward(): record no graph
  model.eval();               // dropout keeps every unit
  tiny::Tensor loss_sum = tiny::zeros({}, device);
  tiny::Tensor correct = tiny::zeros({}, tiny::TensorOptions(tiny::kInt64).device(device));
  int64_t examples = 0;
  for (const Batch& batch : loader) {
    const Batch on_device = to_device(batch, device, /*non_blocking=*/true);
    const tiny::Tensor logits = model(on_device.data);
    const int64_t n = on_device.target.size(0);
    loss_sum.add_(F::cross_entropy(logits, on_device.target), static_cast<double>(n));
    correct.add_((logits.argmax(1) == on_device.target).sum());
    examples += n;
  }
  model.train();  // back to training mode for the next epoch
  if (examples == 0) return {};
  const double total = static_cast<double>(examples);
  return {loss_sum.item<double>() / total, static_cast<double>(correct.item<int64_t>()) / total};
  // END SOLUTION
}

}  // namespace lesson4
