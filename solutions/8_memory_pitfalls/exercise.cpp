// Lesson 8: GPU memory pitfalls: no graph kept alive, evaluation without a graph,
// gradient accumulation, a step's memory from its parts, activation
// checkpointing, and the caching allocator's figures.
#include "exercise.h"

#include <algorithm>

namespace lesson8 {

namespace F = tiny::nn::functional;
using tiny::data::Batch;

TrainLog train_epoch(tiny::nn::Module& model, tiny::optim::Optimizer& optimizer, const std::vector<Batch>& batches) {
  // BEGIN SOLUTION: one step per batch; each step's loss kept as a number, nothing that holds its graph
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
  // BEGIN SOLUTION: the mean loss per example and the accuracy, with no autograd graph recorded
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
  // BEGIN SOLUTION: one step equal to a step on the whole batch, from slices of micro_batch rows (the last may be shorter)
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

StepMemory predict_step_memory(const tiny::nn::Sequential& model, int64_t batch_size) {
  // BEGIN SOLUTION: add up, in bytes, the parameters, their gradients, what Adam keeps per parameter, and the activations backward() will need
  StepMemory m;
  for (const tiny::Tensor& p : model.parameters()) m.parameters += static_cast<size_t>(p.numel()) * p.element_size();
  m.gradients = m.parameters;             // one .grad() the size of each parameter
  m.optimizer_states = 2 * m.parameters;  // Adam: exp_avg and exp_avg_sq per parameter
  // Each ReLU's output is saved for backward (by the ReLU and by the next
  // Linear, one tensor); a Linear's output before its ReLU is gone once the
  // ReLU has run, and the logits are batch x classes, next to nothing.
  for (size_t i = 0; i + 1 < model.size(); ++i) {
    if (const auto linear = std::dynamic_pointer_cast<tiny::nn::Linear>(model[static_cast<int64_t>(i)])) {
      m.activations += static_cast<size_t>(batch_size * linear->out_features) * sizeof(float);
    }
  }
  return m;
  // END SOLUTION
}

tiny::Tensor checkpointed_forward(tiny::nn::Sequential& model, const tiny::Tensor& x) {
  // BEGIN SOLUTION: run the model's blocks in order, checkpointing (tiny::utils::checkpoint) those where it saves memory and can reach the parameters
  const int64_t last = static_cast<int64_t>(model.size()) - 1;
  tiny::Tensor h = (*model[0])(x);  // x requires no grad: checkpoint could not reach this block's parameters
  for (int64_t i = 1; i < last; ++i) {
    const std::shared_ptr<tiny::nn::Module> block = model[i];
    // Keeps only h; backward runs the block again, recording, and back-propagates through it.
    h = tiny::utils::checkpoint([block](const tiny::Tensor& input) { return (*block)(input); }, h);
  }
  return (*model[last])(h);  // the logits are needed right away: nothing to save
  // END SOLUTION
}

}  // namespace lesson8
