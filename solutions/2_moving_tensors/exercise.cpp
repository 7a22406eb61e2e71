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
  // BEGIN SOLUTION: relu(x @ w + b) computed on x's device and returned there, wherever w and b are
  const tiny::Device device = x.device();
  return tiny::relu(x.matmul(w.to(device)) + b.to(device));
  // END SOLUTION
}

double time_matmul_ms(const tiny::Tensor& a, const tiny::Tensor& b, int reps) {
  // BEGIN SOLUTION: warm up; time `reps` products with the clock of the device they run on; return ms per product
  a.matmul(b);  // warm-up, not timed: the first product pays one-off setup
  double total_ms = 0;
  if (a.is_cuda()) {
    // The GPU only queues the products: events, stamped by the GPU as its
    // stream reaches them, time the GPU's work (on a real GPU and the modelled
    // one alike). Record them on the stream of a's device: record() alone
    // uses the current device's, and a may be on another GPU.
    const tiny::cuda::Stream stream = tiny::cuda::current_stream(a.get_device());
    tiny::cuda::Event start(true), stop(true);
    start.record(stream);  // after the warm-up in the stream's order
    for (int i = 0; i < reps; ++i) a.matmul(b);
    stop.record(stream);
    stop.synchronize();  // the GPU has passed `stop`: only now are both times known
    total_ms = start.elapsed_time(stop);
  } else {
    // The CPU computes as it goes: this CPU's clock times it.
    using Clock = std::chrono::steady_clock;
    const Clock::time_point start = Clock::now();
    for (int i = 0; i < reps; ++i) a.matmul(b);
    total_ms = std::chrono::duration<double, std::milli>(Clock::now() - start).count();
  }
  return total_ms / reps;
  // END SOLUTION
}

}  // namespace lesson2
