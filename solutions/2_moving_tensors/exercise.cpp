// Lesson 2: make tensors on a device, move them, compute there, time it.
#include "exercise.h"

#include <chrono>

namespace lesson2 {

tiny::Tensor make_on_device(const tiny::IntArrayRef& shape, const tiny::Device& device, tiny::Generator& generator) {
  // BEGIN SOLUTION: make standard-normal values from `generator` directly on `device`
  return tiny::randn(shape, device, generator);
  // END SOLUTION
}

std::vector<tiny::Tensor> to_device(const std::vector<tiny::Tensor>& tensors, const tiny::Device& device) {
  // BEGIN SOLUTION: return each tensor moved to `device` (keep what .to() returns)
  std::vector<tiny::Tensor> moved;
  for (const tiny::Tensor& t : tensors) moved.push_back(t.to(device));
  return moved;
  // END SOLUTION
}

int where_is(const tiny::Tensor& x) {
  // BEGIN SOLUTION: return the GPU index of x, or -1 when x is on the CPU
  return x.get_device();
  // END SOLUTION
}

tiny::Tensor gpu_compute_then_cpu(const tiny::Tensor& x, const tiny::Tensor& w, const tiny::Device& device) {
  // BEGIN SOLUTION: move x and w to `device`, compute relu(x @ w) there, return the result on the CPU
  const tiny::Tensor x_dev = x.to(device);
  const tiny::Tensor w_dev = w.to(device);
  const tiny::Tensor y = tiny::relu(x_dev.matmul(w_dev));
  return y.cpu();
  // END SOLUTION
}

tiny::Tensor linear_relu(const tiny::Tensor& x, const tiny::Tensor& w, const tiny::Tensor& b) {
  // The version that broke on the GPU:  return tiny::relu(x.matmul(w) + b);
  // BEGIN SOLUTION: bring w and b to x's device, then compute relu(x @ w + b) there
  const tiny::Device device = x.device();
  return tiny::relu(x.matmul(w.to(device)) + b.to(device));
  // END SOLUTION
}

double time_matmul_ms(const tiny::Tensor& a, const tiny::Tensor& b, int reps) {
  // BEGIN SOLUTION: warm up, synchronize, time `reps` products, synchronize, read the clock; return ms per product
  using Clock = std::chrono::steady_clock;
  const int gpu = a.get_device();  // -1 on the CPU: nothing to wait for
  auto wait_for_gpu = [gpu] {
    if (gpu >= 0) tiny::cuda::synchronize(gpu);
  };
  a.matmul(b);  // warm-up, not timed
  wait_for_gpu();
  const Clock::time_point start = Clock::now();
  for (int i = 0; i < reps; ++i) a.matmul(b);  // only the time matters
  wait_for_gpu();
  const Clock::time_point stop = Clock::now();
  return std::chrono::duration<double, std::milli>(stop - start).count() / reps;
  // END SOLUTION
}

}  // namespace lesson2
