// What lesson 6's checks train, shared by the checker and the glue: the model,
// the sizes, and a data set that records which examples each rank asked for.
#pragma once

#include <memory>
#include <mutex>
#include <vector>

#include "tiny/tiny.h"

namespace lesson6_checks {

constexpr int64_t kFeatures = 6, kHidden = 16, kClasses = 3;
/// Examples of the training checks: divisible by the 2 ranks, so that no rank
/// trains on a padded (repeated) example and DDP equals one full batch.
constexpr int64_t kExamples = 16;
constexpr int kWorld = 2;
/// The model's parameter tensors (two Linear layers: weight and bias each).
constexpr size_t kParameterTensors = 4;

/// @brief A small MLP without dropout (DDP's result then matches one process exactly).
inline std::shared_ptr<tiny::nn::Sequential> make_model() {
  return std::make_shared<tiny::nn::Sequential>(std::make_shared<tiny::nn::Linear>(kFeatures, kHidden),
                                                std::make_shared<tiny::nn::Tanh>(),
                                                std::make_shared<tiny::nn::Linear>(kHidden, kClasses));
}

/// @brief A TensorDataset that remembers the indices of every batch it served, in order.
class RecordingDataset : public tiny::data::TensorDataset {
 public:
  using TensorDataset::TensorDataset;
  tiny::data::Batch get_batch(const std::vector<int64_t>& indices) const override {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      served_.insert(served_.end(), indices.begin(), indices.end());
      sizes_.push_back(static_cast<int64_t>(indices.size()));
    }
    return TensorDataset::get_batch(indices);
  }
  /// @brief Every index served since the last take(), in order, and forgets them.
  std::vector<int64_t> take() const {
    std::lock_guard<std::mutex> lock(mutex_);
    std::vector<int64_t> out;
    out.swap(served_);
    return out;
  }
  /// @brief The size of every batch served so far.
  std::vector<int64_t> batch_sizes() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return sizes_;
  }

 private:
  mutable std::mutex mutex_;
  mutable std::vector<int64_t> served_;
  mutable std::vector<int64_t> sizes_;
};

}  // namespace lesson6_checks
