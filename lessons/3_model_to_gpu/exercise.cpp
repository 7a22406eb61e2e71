// Lesson 3: move a model to the GPU, and make sure every piece of it went there.
#include "exercise.h"

namespace lesson3 {

std::vector<std::string> left_behind(const tiny::nn::Module& model, const tiny::Device& device) {
  TINY_TODO("lesson 3: list the names of the parameters and buffers (all of them) whose device is not `device`");
}

Normalizer::Normalizer(const tiny::Tensor& mean, const tiny::Tensor& stddev) {
  TINY_TODO("lesson 3: make mean and stddev this module's buffers, and let the members follow them when it moves");
}

tiny::Tensor Normalizer::forward(const tiny::Tensor& x) { return (x - mean) / stddev; }

tiny::Tensor PositionalOffset::forward(const tiny::Tensor& x) {
  TINY_TODO("lesson 3: make the positions 0..length-1 on x's device with x's dtype, and return x + scale * positions");
}

tiny::Tensor predict(tiny::nn::Module& model, const tiny::Tensor& inputs) {
  TINY_TODO("lesson 3: find the model's device, move the inputs there, run the model without a graph, return the outputs on the cpu");
}

void save_checkpoint(const tiny::nn::Module& model, const std::string& path) {
  TINY_TODO("lesson 3: write the model's parameters and buffers to `path`, leaving the model where it is");
}

void load_checkpoint(tiny::nn::Module& model, const std::string& path, const tiny::Device& device) {
  TINY_TODO("lesson 3: the file's values in the model, and the whole model on `device`");
}

}  // namespace lesson3
