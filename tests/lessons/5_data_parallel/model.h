// Lesson 5's graded model, shared by the checker (which makes the initial
// weights) and the glue (which loads them). A Probe layer in front records the
// rows and the device of every forward pass, on whichever replica thread runs
// it, so a check can see that the batch really was split.
#pragma once

#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "tiny/tiny.h"

namespace lesson5_checks {

constexpr int64_t kFeatures = 12;
constexpr int64_t kHidden = 16;
constexpr int64_t kClasses = 4;

/// @brief The identity, remembering (device, rows) of each input; Cloneable so that DataParallel can replicate it.
struct Probe : tiny::nn::Cloneable<Probe> {
  /// @brief One forward pass of one replica.
  struct Pass {
    std::string device;
    int64_t rows;
  };
  tiny::Tensor forward(const tiny::Tensor& x) override {
    std::lock_guard<std::mutex> lock(mutex());
    passes().push_back({x.device().str(), x.size(0)});
    return x;
  }
  std::string name() const override { return "Probe"; }
  /// @brief Every pass of every replica since the last clear (shared by all copies).
  static std::vector<Pass>& passes() {
    static std::vector<Pass> p;
    return p;
  }
  static std::mutex& mutex() {
    static std::mutex m;
    return m;
  }
};

/// @brief Probe, then a 12-16-4 MLP.
inline std::shared_ptr<tiny::nn::Sequential> make_model() {
  return std::make_shared<tiny::nn::Sequential>(std::make_shared<Probe>(), std::make_shared<tiny::nn::Linear>(kFeatures, kHidden),
                                                std::make_shared<tiny::nn::ReLU>(),
                                                std::make_shared<tiny::nn::Linear>(kHidden, kClasses));
}

/// @brief The speed check's model and batch: large enough that DataParallel over
/// two modelled H100s beats one (the demo's "large" row; lessons/5_data_parallel/README.md).
constexpr int64_t kLargeWidth = 1024;
constexpr int64_t kLargeBatch = 4096;
constexpr int64_t kLargeClasses = 10;

/// @brief A 1024-1024-1024-10 MLP.
inline std::shared_ptr<tiny::nn::Sequential> make_large_model() {
  return std::make_shared<tiny::nn::Sequential>(
      std::make_shared<tiny::nn::Linear>(kLargeWidth, kLargeWidth), std::make_shared<tiny::nn::ReLU>(),
      std::make_shared<tiny::nn::Linear>(kLargeWidth, kLargeWidth), std::make_shared<tiny::nn::ReLU>(),
      std::make_shared<tiny::nn::Linear>(kLargeWidth, kLargeClasses));
}

}  // namespace lesson5_checks
