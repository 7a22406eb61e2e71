// Lesson 3: move a model to the GPU, and make sure every piece of it went there.
#include "exercise.h"

namespace lesson3 {

std::vector<std::string> left_behind(const tiny::nn::Module& model, const tiny::Device& device) {
  // BEGIN SOLUTION: list the names of the parameters and buffers (all of them) whose device is not `device`
  std::vector<std::string> names;
  for (const auto& [name, tensor] : model.named_parameters()) {
    if (tensor.device() != device) names.push_back(name);
  }
  for (const auto& [name, tensor] : model.named_buffers()) {
    if (tensor.device() != device) names.push_back(name);
  }
  return names;
  // END SOLUTION
}

Normalizer::Normalizer(const tiny::Tensor& mean, const tiny::Tensor& stddev) {
  // BEGIN SOLUTION: make mean and stddev this module's buffers, and let the members follow them when it moves
  this->mean = register_buffer("mean", mean);
  this->stddev = register_buffer("stddev", stddev);
  // END SOLUTION
}

tiny::Tensor Normalizer::forward(const tiny::Tensor& x) { return (x - mean) / stddev; }

tiny::Tensor PositionalOffset::forward(const tiny::Tensor& x) {
  // BEGIN SOLUTION: make the positions 0..length-1 on x's device with x's dtype, and return x + scale * positions
  const int64_t length = x.size(-1);
  const tiny::Tensor positions = tiny::arange(length, tiny::TensorOptions(x.device()).dtype(x.dtype()));
  return x + positions * scale;
  // END SOLUTION
}

tiny::Tensor predict(tiny::nn::Module& model, const tiny::Tensor& inputs) {
  // BEGIN SOLUTION: find the model's device, move the inputs there, run the model without a graph, return the outputs on the cpu
  tiny::Device device = tiny::Device("cpu");
  const std::vector<tiny::Tensor> parameters = model.parameters();
  const std::vector<tiny::Tensor> buffers = model.buffers();
  if (!parameters.empty()) {
    device = parameters.front().device();
  } else if (!buffers.empty()) {
    device = buffers.front().device();
  }
  tiny::NoGradGuard no_grad;
  return model(inputs.to(device)).cpu();
  // END SOLUTION
}

void save_checkpoint(const tiny::nn::Module& model, const std::string& path) {
  // BEGIN SOLUTION: write the model's parameters and buffers to `path`, leaving the model where it is
  tiny::save(model.state_dict(), path);
  // END SOLUTION
}

void load_checkpoint(tiny::nn::Module& model, const std::string& path, const tiny::Device& device) {
  // BEGIN SOLUTION: the file's values in the model, and the whole model on `device`
  model.load_state_dict(tiny::load(path));
  model.to(device);
  // END SOLUTION
}

}  // namespace lesson3
