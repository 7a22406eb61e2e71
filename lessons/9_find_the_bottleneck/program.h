/// @file lessons/9_find_the_bottleneck/program.h
/// @brief Lesson 9's training program, as given: the images, their costly
/// transform, the model and the FLOPs of one example. Read it; do not change it
/// (the checks use this very file).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "tiny/tiny.h"

namespace lesson9 {

constexpr int64_t kPixels = 784;   ///< 28 x 28 grey images, flattened
constexpr int64_t kHidden = 2048;  ///< the hidden layer's width
constexpr int64_t kClasses = 10;   ///< classes to tell apart

/// @brief What the transform (decode, random crop and flip, normalise) of one
/// image costs the CPU: 8 us, declared so that the emulated GPU's modelled
/// clock charges it as a real CPU would (docs/performance_model.md, "Data loading").
constexpr int64_t kTransformNsPerImage = 8000;

/// @brief Images whose every batch costs the host its transform (PyTorch: a
/// torchvision data set with `transform=`). The values are precomputed; the
/// cost is what the DataLoader charges, on the thread that loads the batch.
class AugmentedImages : public tiny::data::TensorDataset {
 public:
  /// @brief The images `x` [n, kPixels] and their labels `y` [n] (int64).
  AugmentedImages(tiny::Tensor x, tiny::Tensor y) : TensorDataset(std::move(x), std::move(y)) {}
  /// @brief kTransformNsPerImage for every image of the batch.
  int64_t modelled_load_ns(const std::vector<int64_t>& indices) const override {
    return kTransformNsPerImage * static_cast<int64_t>(indices.size());
  }
};

/// @brief `n` images of 10 classes, each a noisy copy of its class's pattern,
/// from `generator` (the same generator state gives the same images).
inline std::shared_ptr<AugmentedImages> make_images(int64_t n, tiny::Generator& generator) {
  const tiny::Tensor patterns = tiny::randn({kClasses, kPixels}, {}, generator);
  const tiny::Tensor labels = tiny::randint(0, kClasses, {n}, tiny::kInt64, generator);
  const tiny::Tensor noise = tiny::randn({n, kPixels}, {}, generator) * 2.0;
  return std::make_shared<AugmentedImages>(tiny::nn::functional::embedding(labels, patterns) + noise, labels);
}

/// @brief The model: 784 -> 2048 -> ReLU -> 10, float32 weights (made on the CPU).
inline std::shared_ptr<tiny::nn::Sequential> make_model() {
  return std::make_shared<tiny::nn::Sequential>(std::make_shared<tiny::nn::Linear>(kPixels, kHidden),
                                                std::make_shared<tiny::nn::ReLU>(),
                                                std::make_shared<tiny::nn::Linear>(kHidden, kClasses));
}

/// @brief FLOPs of one image's training step in the matrix products: 2 per
/// multiply-add forward, twice that backward (the input's and the weights'
/// gradients), so 6 x the weights. What "achieved TFLOP/s" divides.
constexpr double kFlopsPerImage = 6.0 * (kPixels * kHidden + kHidden * kClasses);

/// The next batch, starting a new epoch when one ends (as a training script's
/// outer loop does): the demo's and the checks' programs take their batches so.
class Feed {
 public:
  explicit Feed(tiny::data::DataLoader& loader) : loader_(loader) {}
  tiny::data::Batch next() {
    if (!it_ || *it_ == loader_.end()) it_ = loader_.begin();
    tiny::data::Batch batch = **it_;
    ++*it_;
    return batch;
  }

 private:
  tiny::data::DataLoader& loader_;
  std::optional<tiny::data::DataLoader::Iterator> it_;
};

}  // namespace lesson9
