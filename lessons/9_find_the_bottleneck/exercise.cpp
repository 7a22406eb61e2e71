// Lesson 9: measure a training program on the GPU's clock, and the fixes of its bottlenecks.
#include "exercise.h"

namespace lesson9 {

namespace F = tiny::nn::functional;

Measurement measure(const std::function<void()>& step, int warmup, int steps, double flops_per_step, int device) {
  TINY_TODO("lesson 9: time the timed steps' work on the GPU, and only theirs (exercise.h says what to return)");
}

std::unique_ptr<tiny::data::DataLoader> make_loader(std::shared_ptr<tiny::data::Dataset> dataset,
                                                    tiny::Generator generator) {
  TINY_TODO("lesson 9: choose batch_size, num_workers and pin_memory that keep the GPU busy; shuffle with the generator");
}

void train_step(tiny::nn::Module& model, const tiny::data::Batch& batch, tiny::optim::Optimizer& optimizer,
                const tiny::Device& device, tiny::Tensor& loss_sum) {
  TINY_TODO("lesson 9: a step in which the host never waits, the products run in bfloat16, the loss adds up on the GPU");
}

double train_epoch(tiny::nn::Module& model, tiny::data::DataLoader& loader, tiny::optim::Optimizer& optimizer,
                   const tiny::Device& device) {
  TINY_TODO("lesson 9: train_step on every batch; the mean loss per batch, with as few waits as an epoch allows");
}

}  // namespace lesson9
