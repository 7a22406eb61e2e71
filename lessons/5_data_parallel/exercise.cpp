// Lesson 5: scatter and gather by hand, then training with DataParallel.
#include "exercise.h"

namespace lesson5 {

namespace F = tiny::nn::functional;

std::vector<tiny::Tensor> scatter(const tiny::Tensor& batch, const std::vector<tiny::Device>& devices) {
  TINY_TODO("lesson 5: one piece of the batch's rows on each device, in order; too few rows is an error that says so");
}

tiny::Tensor gather(const std::vector<tiny::Tensor>& pieces, const tiny::Device& output_device) {
  TINY_TODO("lesson 5: the pieces joined, in order, into one tensor on output_device");
}

std::shared_ptr<tiny::nn::DataParallel> wrap(std::shared_ptr<tiny::nn::Module> model,
                                             const std::vector<int>& device_ids) {
  TINY_TODO("lesson 5: a DataParallel over device_ids, with the model where DataParallel expects to find it");
}

double train_step(tiny::nn::DataParallel& model, const tiny::data::Batch& batch, tiny::optim::Optimizer& optimizer) {
  TINY_TODO("lesson 5: lesson 4's step through the DataParallel, the batch as the loader made it; the loss as a number");
}

}  // namespace lesson5
