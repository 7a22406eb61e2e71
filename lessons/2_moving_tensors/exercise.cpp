// Lesson 2: make tensors on a device, move them, compute there, time it.
#include "exercise.h"

#include <chrono>

namespace lesson2 {

tiny::Tensor make_on_device(const tiny::IntArrayRef& shape, const tiny::Device& device, tiny::Generator& generator) {
  TINY_TODO("lesson 2: make standard-normal values from `generator` directly on `device`");
}

std::vector<tiny::Tensor> to_device(const std::vector<tiny::Tensor>& tensors, const tiny::Device& device) {
  TINY_TODO("lesson 2: return each tensor moved to `device` (keep what .to() returns)");
}

int where_is(const tiny::Tensor& x) {
  TINY_TODO("lesson 2: return the GPU index of x, or -1 when x is on the CPU");
}

tiny::Tensor gpu_compute_then_cpu(const tiny::Tensor& x, const tiny::Tensor& w, const tiny::Device& device) {
  TINY_TODO("lesson 2: move x and w to `device`, compute relu(x @ w) there, return the result on the CPU");
}

tiny::Tensor linear_relu(const tiny::Tensor& x, const tiny::Tensor& w, const tiny::Tensor& b) {
  // The version that broke on the GPU:  return tiny::relu(x.matmul(w) + b);
  TINY_TODO("lesson 2: relu(x @ w + b) computed on x's device and returned there, wherever w and b are");
}

double time_matmul_ms(const tiny::Tensor& a, const tiny::Tensor& b, int reps) {
  TINY_TODO("lesson 2: warm up; time `reps` products with the clock of the device they run on; return ms per product");
}

}  // namespace lesson2
