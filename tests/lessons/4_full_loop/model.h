// Lesson 4's graded model and data set, shared by the checker (which makes the
// initial weights) and the glue (which loads them and watches what the
// student's loop does with them).
#pragma once

#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "tiny/tiny.h"

namespace lesson4_checks {

constexpr int64_t kFeatures = 64;  // 8x8 digits
constexpr int64_t kHidden = 32;
constexpr int64_t kClasses = 10;

/// @brief 64-32-10 MLP with dropout that remembers every forward pass: the grad
/// mode, the training flag, and the logits (so a loss can be recomputed).
struct ProbedMLP : tiny::nn::Module {
  /// @brief What one forward pass saw.
  struct Call {
    bool grad_enabled = false;   ///< tiny::is_grad_enabled() during the pass
    bool training = false;       ///< the module's training flag
    bool requires_grad = false;  ///< the output's requires_grad (a graph was recorded)
    std::string device;          ///< where the input was
    tiny::Tensor logits;         ///< the output, detached
    /// @brief How many earlier passes' graphs were still alive when this pass began: their output's
    /// grad_fn had an owner. Something that kept a step's loss with its graph (a running sum of
    /// attached losses) keeps every earlier step's graph alive, and this grows by one a step.
    int64_t graphs_alive = 0;
    /// @brief tiny::cuda::memory_allocated() of the input's GPU when this pass began (0 on the CPU).
    int64_t memory_allocated = 0;
  };

  ProbedMLP() {
    fc1 = register_module("fc1", std::make_shared<tiny::nn::Linear>(kFeatures, kHidden));
    dropout = register_module("dropout", std::make_shared<tiny::nn::Dropout>(0.2));
    fc2 = register_module("fc2", std::make_shared<tiny::nn::Linear>(kHidden, kClasses));
  }

  tiny::Tensor forward(const tiny::Tensor& x) override {
    int64_t alive = 0;
    for (const std::weak_ptr<tiny::autograd::Node>& node : graphs_) alive += node.expired() ? 0 : 1;
    const int64_t allocated = x.device().is_cuda() ? static_cast<int64_t>(tiny::cuda::memory_allocated(x.device().index())) : 0;
    tiny::Tensor y = (*fc2)((*dropout)(tiny::relu((*fc1)(x))));
    calls.push_back({tiny::is_grad_enabled(), is_training(), y.requires_grad(), x.device().str(), y.detach(), alive, allocated});
    graphs_.push_back(y.grad_fn());  // watched, not owned
    return y;
  }
  std::string name() const override { return "MLP"; }

  std::shared_ptr<tiny::nn::Linear> fc1, fc2;
  std::shared_ptr<tiny::nn::Dropout> dropout;
  std::vector<Call> calls;

 private:
  std::vector<std::weak_ptr<tiny::autograd::Node>> graphs_;  // each pass's output node (expired: nothing holds it)
};

/// @brief Modelled host time to produce one example of the timed epoch's data
/// set: a stand-in for real per-example CPU work (reading and augmenting an
/// image, as torchvision's transforms do), 6.4 us. A batch of 32 then costs
/// about half of the small MLP's step: hidden by 2 workers, plain without them.
constexpr int64_t kLoadNsPerExample = 6400;

/// @brief A TensorDataset that remembers which indices each batch asked for, in
/// order, and may declare a modelled cost per example (set_load_ns).
class RecordingDataset : public tiny::data::TensorDataset {
 public:
  using TensorDataset::TensorDataset;
  /// @brief Each example costs `ns` of modelled host time to load (Dataset::modelled_load_ns).
  void set_load_ns(int64_t ns) { load_ns_ = ns; }
  int64_t modelled_load_ns(const std::vector<int64_t>& indices) const override {
    return load_ns_ * static_cast<int64_t>(indices.size());
  }
  tiny::data::Batch get_batch(const std::vector<int64_t>& indices) const override {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      served_.push_back(indices);
    }
    return TensorDataset::get_batch(indices);
  }
  /// @brief The index lists of every batch served so far.
  std::vector<std::vector<int64_t>> served() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return served_;
  }

 private:
  mutable std::mutex mutex_;
  mutable std::vector<std::vector<int64_t>> served_;
  int64_t load_ns_ = 0;
};

}  // namespace lesson4_checks
