// Lesson 4: the full training loop: loader, copies to the GPU, one epoch, evaluation.
#include "exercise.h"

namespace lesson4 {

namespace F = tiny::nn::functional;
using tiny::data::Batch;

std::unique_ptr<tiny::data::DataLoader> make_loader(std::shared_ptr<tiny::data::Dataset> dataset,
                                                    int64_t batch_size, bool shuffle, bool pin_memory,
                                                    tiny::Generator generator) {
  TINY_TODO("lesson 4: fill a tiny::data::DataLoaderOptions (batch_size, shuffle, pin_memory, generator) and make the loader");
}

Batch to_device(const Batch& batch, const tiny::Device& device, bool non_blocking) {
  TINY_TODO("lesson 4: copy both batch.data and batch.target to the device, passing non_blocking on");
}

double train_step(tiny::nn::Module& model, const Batch& batch, tiny::optim::Optimizer& optimizer,
                  const tiny::Device& device) {
  TINY_TODO("lesson 4: move the batch (non_blocking), zero_grad, forward, cross_entropy, backward, step; return loss.item()");
}

double train_one_epoch(tiny::nn::Module& model, tiny::data::DataLoader& loader, tiny::optim::Optimizer& optimizer,
                       const tiny::Device& device) {
  TINY_TODO("lesson 4: train_step on every batch; return sum(loss * batch size) / number of examples");
}

EvalResult evaluate(tiny::nn::Module& model, tiny::data::DataLoader& loader, const tiny::Device& device) {
  TINY_TODO("lesson 4: eval mode and NoGradGuard; sum loss * batch size and correct predictions; train mode again");
}

}  // namespace lesson4
