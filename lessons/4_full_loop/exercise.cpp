// Lesson 4: the full training loop: loader, copies to the GPU, one epoch, evaluation.
#include "exercise.h"

namespace lesson4 {

namespace F = tiny::nn::functional;
using tiny::data::Batch;

std::unique_ptr<tiny::data::DataLoader> make_loader(std::shared_ptr<tiny::data::Dataset> dataset,
                                                    int64_t batch_size, bool shuffle, bool pin_memory,
                                                    int num_workers, tiny::Generator generator) {
  TINY_TODO("lesson 4: a loader with these settings: batch size, order, pinned batches, workers, generator");
}

Batch to_device(const Batch& batch, const tiny::Device& device, bool non_blocking) {
  TINY_TODO("lesson 4: the features and the labels on the device, non_blocking passed on");
}

tiny::Tensor train_step(tiny::nn::Module& model, const Batch& batch, tiny::optim::Optimizer& optimizer,
                        const tiny::Device& device) {
  TINY_TODO("lesson 4: one step on one batch; the loss comes back as it is on the device, without its graph");
}

double train_one_epoch(tiny::nn::Module& model, tiny::data::DataLoader& loader, tiny::optim::Optimizer& optimizer,
                       const tiny::Device& device) {
  TINY_TODO("lesson 4: every batch once; the mean loss per example, read from the device once, at the end");
}

EvalResult evaluate(tiny::nn::Module& model, tiny::data::DataLoader& loader, const tiny::Device& device) {
  TINY_TODO("lesson 4: eval mode, no graph, sums kept on the device; train mode again at the end");
}

}  // namespace lesson4
