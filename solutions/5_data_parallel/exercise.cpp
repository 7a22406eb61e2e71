// Lesson 5: scatter and gather by hand, then training with DataParallel.
#include "exercise.h"

namespace lesson5 {

namespace F = tiny::nn::functional;

std::vector<tiny::Tensor> scatter(const tiny::Tensor& batch, const std::vector<tiny::Device>& devices) {
  // BEGIN SOLUTION: one piece of the batch's rows on each device, in order; too few rows is an error that says so
  const auto n = static_cast<int64_t>(devices.size());
  const int64_t rows = batch.size(0);
  TINY_CHECK(rows >= n, ValueError, "scatter: cannot split ", rows, " samples across ", n,
             " devices: each device needs at least one");
  std::vector<tiny::Tensor> pieces;
  int64_t start = 0;
  for (int64_t i = 0; i < n; ++i) {
    const int64_t length = rows / n + (i < rows % n ? 1 : 0);  // the first rows % n pieces get one more
    pieces.push_back(batch.narrow(0, start, length).to(devices[static_cast<size_t>(i)]));
    start += length;
  }
  return pieces;
  // END SOLUTION
}

tiny::Tensor gather(const std::vector<tiny::Tensor>& pieces, const tiny::Device& output_device) {
  // BEGIN SOLUTION: the pieces joined, in order, into one tensor on output_device
  std::vector<tiny::Tensor> moved;
  for (const tiny::Tensor& piece : pieces) moved.push_back(piece.to(output_device));
  return tiny::cat(moved, 0);
  // END SOLUTION
}

std::shared_ptr<tiny::nn::DataParallel> wrap(std::shared_ptr<tiny::nn::Module> model,
                                             const std::vector<int>& device_ids) {
  // BEGIN SOLUTION: a DataParallel over device_ids, with the model where DataParallel expects to find it
  model->to(tiny::Device(tiny::kCUDA, device_ids.at(0)));  // replicas are copied from here every step
  return std::make_shared<tiny::nn::DataParallel>(model, device_ids);
  // END SOLUTION
}

double train_step(tiny::nn::DataParallel& model, const tiny::data::Batch& batch, tiny::optim::Optimizer& optimizer) {
  // BEGIN SOLUTION: lesson 4's step through the DataParallel, the batch as the loader made it; the loss as a number
  optimizer.zero_grad();
  const tiny::Tensor logits = model(batch.data);  // scattered from the CPU, gathered on the output device
  const tiny::Tensor loss = F::cross_entropy(logits, batch.target.to(model.output_device()));
  loss.backward();  // every replica's gradients are summed into the wrapped module's parameters
  optimizer.step();
  return loss.item<double>();
  // END SOLUTION
}

}  // namespace lesson5
