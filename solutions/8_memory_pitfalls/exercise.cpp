// Lesson 8: GPU memory pitfalls: no graph kept alive, evaluation without a graph,
// gradient accumulation, and the caching allocator's figures.
#include "exercise.h"

#include <algorithm>

namespace lesson8 {

namespace F = tiny::nn::functional;
using tiny::data::Batch;

TrainLog train_epoch(tiny::nn::Module& model, tiny::optim::Optimizer& optimizer, const std::vector<Batch>& batches) {
  // BEGIN SOLUTION: for each batch: zero_grad, forward, cross_entropy, backward, step; keep the losses as numbers (loss.item<double>())
  TrainLog log;
  double loss_sum = 0.0;  // a number, not a tensor: a tensor total would chain every step's graph
  int64_t examples = 0;
  for (const Batch& batch : batches) {
    optimizer.zero_grad();
    const tiny::Tensor loss = F::cross_entropy(model(batch.data), batch.target);
    loss.backward();
    optimizer.step();
    const double value = loss.item<double>();  // the number; the tensor (and its graph) goes at the end of the step
    const int64_t n = batch.target.size(0);
    loss_sum += value * static_cast<double>(n);
    examples += n;
    log.losses.push_back(value);
  }
  log.mean_loss = examples == 0 ? 0.0 : loss_sum / static_cast<double>(examples);
  return log;
  // END SOLUTION
}

EvalResult evaluate(tiny::nn::Module& model, const std::vector<Batch>& batches) {
  // BEGIN SOLUTION: under tiny::NoGradGuard, sum loss * batch size and the correct predictions over the batches
  tiny::NoGradGuard no_grad;  // no backward() will come: keep no activations for it
  double loss_sum = 0.0;
  int64_t correct = 0, examples = 0;
  for (const Batch& batch : batches) {
    const tiny::Tensor logits = model(batch.data);
    const int64_t n = batch.target.size(0);
    loss_sum += F::cross_entropy(logits, batch.target).item<double>() * static_cast<double>(n);
    correct += (logits.argmax(1) == batch.target).sum().item<int64_t>();
    examples += n;
  }
  if (examples == 0) return {};
  return {loss_sum / static_cast<double>(examples), static_cast<double>(correct) / static_cast<double>(examples)};
  // END SOLUTION
}

double accumulate_and_step(tiny::nn::Module& model, tiny::optim::Optimizer& optimizer, const tiny::Tensor& inputs,
                           const tiny::Tensor& targets, int64_t micro_batch) {
  // BEGIN SOLUTION: zero_grad once; for each slice of micro_batch rows: forward, loss * (rows / batch size), backward; then one step
  const int64_t total = inputs.size(0);
  optimizer.zero_grad();
  double loss_sum = 0.0;
  for (int64_t start = 0; start < total; start += micro_batch) {
    const int64_t rows = std::min(micro_batch, total - start);  // the last slice may be shorter
    const tiny::Tensor loss = F::cross_entropy(model(inputs.narrow(0, start, rows)), targets.narrow(0, start, rows));
    const double weight = static_cast<double>(rows) / static_cast<double>(total);
    (loss * weight).backward();  // adds this slice's share to .grad and frees its graph now
    loss_sum += loss.item<double>() * weight;
  }
  optimizer.step();
  return loss_sum;
  // END SOLUTION
}

FreeReport free_and_measure(tiny::Tensor tensor) {
  // BEGIN SOLUTION: read allocated and reserved of the tensor's device; free the tensor; read; empty_cache; read
  const int device = tensor.device().index();
  const auto read = [device] {
    return MemoryReading{tiny::cuda::memory_allocated(device), tiny::cuda::memory_reserved(device)};
  };
  FreeReport report;
  report.before = read();
  tensor = tiny::Tensor();  // the last handle: its block goes back to the allocator's cache
  report.after_free = read();
  tiny::cuda::empty_cache();  // the cache gives whole free segments back to the device
  report.after_empty_cache = read();
  return report;
  // END SOLUTION
}

}  // namespace lesson8
