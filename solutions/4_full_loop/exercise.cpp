// Lesson 4: the full training loop: loader, copies to the GPU, one epoch, evaluation.
#include "exercise.h"

namespace lesson4 {

namespace F = tiny::nn::functional;
using tiny::data::Batch;

std::unique_ptr<tiny::data::DataLoader> make_loader(std::shared_ptr<tiny::data::Dataset> dataset,
                                                    int64_t batch_size, bool shuffle, bool pin_memory,
                                                    tiny::Generator generator) {
  // BEGIN SOLUTION: fill a tiny::data::DataLoaderOptions (batch_size, shuffle, pin_memory, generator) and make the loader
  tiny::data::DataLoaderOptions options;
  options.batch_size = batch_size;
  options.shuffle = shuffle;
  options.pin_memory = pin_memory;
  options.generator = generator;
  return std::make_unique<tiny::data::DataLoader>(std::move(dataset), options);
  // END SOLUTION
}

Batch to_device(const Batch& batch, const tiny::Device& device, bool non_blocking) {
  // BEGIN SOLUTION: copy both batch.data and batch.target to the device, passing non_blocking on
  return {batch.data.to(device, non_blocking), batch.target.to(device, non_blocking)};
  // END SOLUTION
}

double train_step(tiny::nn::Module& model, const Batch& batch, tiny::optim::Optimizer& optimizer,
                  const tiny::Device& device) {
  // BEGIN SOLUTION: move the batch (non_blocking), zero_grad, forward, cross_entropy, backward, step; return loss.item()
  const Batch on_device = to_device(batch, device, /*non_blocking=*/true);
  optimizer.zero_grad();  // the gradients of the previous step are still there
  const tiny::Tensor loss = F::cross_entropy(model(on_device.data), on_device.target);
  loss.backward();
  optimizer.step();
  return loss.item<double>();  // a number: keeping the tensor would keep its graph alive
  // END SOLUTION
}

double train_one_epoch(tiny::nn::Module& model, tiny::data::DataLoader& loader, tiny::optim::Optimizer& optimizer,
                       const tiny::Device& device) {
  // BEGIN SOLUTION: train_step on every batch; return sum(loss * batch size) / number of examples
  double loss_sum = 0.0;
  int64_t examples = 0;
  for (const Batch& batch : loader) {
    const int64_t n = batch.target.size(0);  // the last batch may be short
    loss_sum += train_step(model, batch, optimizer, device) * static_cast<double>(n);
    examples += n;
  }
  return examples == 0 ? 0.0 : loss_sum / static_cast<double>(examples);
  // END SOLUTION
}

EvalResult evaluate(tiny::nn::Module& model, tiny::data::DataLoader& loader, const tiny::Device& device) {
  // BEGIN SOLUTION: eval mode and NoGradGuard; sum loss * batch size and correct predictions; train mode again
  tiny::NoGradGuard no_grad;  // nothing here calls backward(): record no graph
  model.eval();               // dropout keeps every unit
  double loss_sum = 0.0;
  int64_t correct = 0, examples = 0;
  for (const Batch& batch : loader) {
    const Batch on_device = to_device(batch, device, /*non_blocking=*/true);
    const tiny::Tensor logits = model(on_device.data);
    const int64_t n = on_device.target.size(0);
    loss_sum += F::cross_entropy(logits, on_device.target).item<double>() * static_cast<double>(n);
    correct += (logits.argmax(1) == on_device.target).sum().item<int64_t>();
    examples += n;
  }
  model.train();  // back to training mode for the next epoch
  if (examples == 0) return {};
  return {loss_sum / static_cast<double>(examples), static_cast<double>(correct) / static_cast<double>(examples)};
  // END SOLUTION
}

}  // namespace lesson4
