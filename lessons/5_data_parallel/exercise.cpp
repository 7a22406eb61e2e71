// Lesson 5: scatter and gather by hand, then training with DataParallel.
#include "exercise.h"

namespace lesson5 {

namespace F = tiny::nn::functional;

std::vector<tiny::Tensor> scatter(const tiny::Tensor& batch, const std::vector<tiny::Device>& devices) {
  TINY_TODO("lesson 5: check there are at least as many rows as devices, then narrow and copy one piece per device");
}

tiny::Tensor gather(const std::vector<tiny::Tensor>& pieces, const tiny::Device& output_device) {
  TINY_TODO("lesson 5: move every piece to output_device, then tiny::cat them along dimension 0");
}

std::shared_ptr<tiny::nn::DataParallel> wrap(std::shared_ptr<tiny::nn::Module> model,
                                             const std::vector<int>& device_ids) {
  TINY_TODO("lesson 5: move the model to cuda:<device_ids[0]>, then make a tiny::nn::DataParallel over device_ids");
}

double train_step(tiny::nn::DataParallel& model, const tiny::data::Batch& batch, tiny::optim::Optimizer& optimizer) {
  TINY_TODO("lesson 5: zero_grad, forward on the CPU batch, labels to model.output_device(), cross_entropy, backward, step");
}

}  // namespace lesson5
