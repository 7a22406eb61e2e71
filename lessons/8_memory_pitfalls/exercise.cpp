// Lesson 8: GPU memory pitfalls: no graph kept alive, evaluation without a graph,
// gradient accumulation, a step's memory from its parts, activation
// checkpointing, and the caching allocator's figures.
#include "exercise.h"

#include <algorithm>

namespace lesson8 {

namespace F = tiny::nn::functional;
using tiny::data::Batch;

TrainLog train_epoch(tiny::nn::Module& model, tiny::optim::Optimizer& optimizer, const std::vector<Batch>& batches) {
  TINY_TODO("lesson 8: one step per batch; each step's loss kept as a number, nothing that holds its graph");
}

EvalResult evaluate(tiny::nn::Module& model, const std::vector<Batch>& batches) {
  TINY_TODO("lesson 8: the mean loss per example and the accuracy, with no autograd graph recorded");
}

double accumulate_and_step(tiny::nn::Module& model, tiny::optim::Optimizer& optimizer, const tiny::Tensor& inputs,
                           const tiny::Tensor& targets, int64_t micro_batch) {
  TINY_TODO("lesson 8: one step equal to a step on the whole batch, from slices of micro_batch rows (the last may be shorter)");
}

FreeReport free_and_measure(tiny::Tensor tensor) {
  TINY_TODO("lesson 8: read allocated and reserved of the tensor's device; free the tensor; read; empty_cache; read");
}

StepMemory predict_step_memory(const tiny::nn::Sequential& model, int64_t batch_size) {
  TINY_TODO("lesson 8: add up, in bytes, the parameters, their gradients, what Adam keeps per parameter, and the activations backward() will need");
}

tiny::Tensor checkpointed_forward(tiny::nn::Sequential& model, const tiny::Tensor& x) {
  TINY_TODO("lesson 8: run the model's blocks in order, checkpointing (tiny::utils::checkpoint) those where it saves memory and can reach the parameters");
}

}  // namespace lesson8
