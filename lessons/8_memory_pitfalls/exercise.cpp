// Lesson 8: GPU memory pitfalls: no graph kept alive, evaluation without a graph,
// gradient accumulation, and the caching allocator's figures.
#include "exercise.h"

#include <algorithm>

namespace lesson8 {

namespace F = tiny::nn::functional;
using tiny::data::Batch;

TrainLog train_epoch(tiny::nn::Module& model, tiny::optim::Optimizer& optimizer, const std::vector<Batch>& batches) {
  TINY_TODO("lesson 8: for each batch: zero_grad, forward, cross_entropy, backward, step; keep the losses as numbers (loss.item<double>())");
}

EvalResult evaluate(tiny::nn::Module& model, const std::vector<Batch>& batches) {
  TINY_TODO("lesson 8: under tiny::NoGradGuard, sum loss * batch size and the correct predictions over the batches");
}

double accumulate_and_step(tiny::nn::Module& model, tiny::optim::Optimizer& optimizer, const tiny::Tensor& inputs,
                           const tiny::Tensor& targets, int64_t micro_batch) {
  TINY_TODO("lesson 8: zero_grad once; for each slice of micro_batch rows: forward, loss * (rows / batch size), backward; then one step");
}

FreeReport free_and_measure(tiny::Tensor tensor) {
  TINY_TODO("lesson 8: read allocated and reserved of the tensor's device; free the tensor; read; empty_cache; read");
}

}  // namespace lesson8
