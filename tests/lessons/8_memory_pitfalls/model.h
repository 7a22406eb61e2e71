// Lesson 8's graded model, shared by the checker (which makes the initial
// weights) and the glue (which loads them and watches the memory around each
// forward pass of the student's loops).
#pragma once

#include <memory>
#include <vector>

#include "tiny/tiny.h"

namespace lesson8_checks {

constexpr int64_t kFeatures = 128;
constexpr int64_t kHidden = 1024;  // 4 KiB of activation per example: 256 rows fill the small pool's 1 MiB blocks
constexpr int64_t kHidden2 = 128;   // every weight stays at or under 1 MiB (the small pool)
constexpr int64_t kClasses = 10;

/// @brief 128-1024-128-10 MLP that records, for every forward pass, the memory
/// around it and a weak handle on the graph it made.
struct ProbedMLP : tiny::nn::Module {
  /// @brief What one forward pass saw.
  struct Call {
    bool grad_enabled = false;        ///< tiny::is_grad_enabled() during the pass
    bool requires_grad = false;       ///< the output's requires_grad (a graph was recorded)
    int64_t rows = 0;                 ///< examples in the input
    size_t allocated_before = 0;      ///< memory_allocated at the start of the pass
    size_t held_after = 0;            ///< memory_allocated after it, less the output and what was there before
    size_t older_graphs_alive = 0;    ///< graphs of passes before the previous one still alive at its start
    std::weak_ptr<tiny::autograd::Node> graph;  ///< the output's grad_fn, not kept alive
  };

  ProbedMLP() {
    fc1 = register_module("fc1", std::make_shared<tiny::nn::Linear>(kFeatures, kHidden));
    fc2 = register_module("fc2", std::make_shared<tiny::nn::Linear>(kHidden, kHidden2));
    fc3 = register_module("fc3", std::make_shared<tiny::nn::Linear>(kHidden2, kClasses));
  }

  static size_t allocated(const tiny::Tensor& x) {
    if (!x.device().is_cuda()) return 0;
    tiny::cuda::synchronize(x.device().index());  // queued work may still hold tensors
    return tiny::cuda::memory_allocated(x.device().index());
  }

  tiny::Tensor forward(const tiny::Tensor& x) override {
    Call call;
    if (timeline != nullptr && timeline->is_recording()) timeline->mark("step " + std::to_string(calls.size() + 1));
    call.grad_enabled = tiny::is_grad_enabled();
    call.rows = x.size(0);
    call.allocated_before = allocated(x);
    for (size_t k = 0; k + 1 < calls.size(); ++k) call.older_graphs_alive += calls[k].graph.expired() ? 0 : 1;
    tiny::Tensor h = tiny::relu((*fc1)(x));
    h = tiny::relu((*fc2)(h));
    tiny::Tensor y = (*fc3)(h);
    h = tiny::Tensor();
    call.requires_grad = y.requires_grad();
    call.graph = y.grad_fn();
    const size_t after = allocated(x), output = static_cast<size_t>(y.numel()) * 4;
    call.held_after = after > call.allocated_before + output ? after - call.allocated_before - output : 0;
    calls.push_back(call);
    return y;
  }
  std::string name() const override { return "MLP"; }

  std::shared_ptr<tiny::nn::Linear> fc1, fc2, fc3;
  std::vector<Call> calls;
  tiny::cuda::MemoryTimeline* timeline = nullptr;  ///< when set and recording: a marker at each forward pass
};

// The MLP whose step memory predict_step_memory() predicts: 256-1024-1024-1024-10.
// With a batch of 1024, its parameters (9.1 MiB, and as much again for the
// gradients, twice for Adam) and its activations (12 MiB) are each far above
// the prediction's tolerance, so a part left out always shows.
constexpr int64_t kPredictFeatures = 256, kPredictHidden = 1024, kPredictLayers = 3, kPredictBatch = 1024;

/// @brief Linear+ReLU layers then the output Linear, as predict_step_memory()
/// expects; `hidden` wide (the check's second, unannounced case is narrower).
inline std::shared_ptr<tiny::nn::Sequential> make_predict_mlp(int64_t hidden = kPredictHidden) {
  auto model = std::make_shared<tiny::nn::Sequential>();
  int64_t width = kPredictFeatures;
  for (int64_t l = 0; l < kPredictLayers; ++l) {
    model->push_back(std::make_shared<tiny::nn::Linear>(width, hidden));
    model->push_back(std::make_shared<tiny::nn::ReLU>());
    width = hidden;
  }
  model->push_back(std::make_shared<tiny::nn::Linear>(width, kClasses));
  return model;
}

// The MLP checkpointed_forward() runs: a first block (Linear, ReLU), three
// blocks of four Linear+ReLU layers of 256, the output Linear. With a batch of
// 2048 each activation is 2 MiB (a large-pool block): without checkpointing a
// step reserves 48 MiB, with the three deep blocks checkpointed 28 MiB.
constexpr int64_t kCheckpointFeatures = 128, kCheckpointWidth = 256, kCheckpointBlocks = 3, kCheckpointDepth = 4;
constexpr int64_t kCheckpointBatch = 2048;

/// @brief The Sequential of blocks that checkpointed_forward() expects.
inline std::shared_ptr<tiny::nn::Sequential> make_checkpoint_mlp() {
  using tiny::nn::Linear;
  using tiny::nn::ReLU;
  auto model = std::make_shared<tiny::nn::Sequential>();
  model->push_back(std::make_shared<tiny::nn::Sequential>(std::make_shared<Linear>(kCheckpointFeatures, kCheckpointWidth),
                                                          std::make_shared<ReLU>()));
  for (int64_t b = 0; b < kCheckpointBlocks; ++b) {
    auto block = std::make_shared<tiny::nn::Sequential>();
    for (int64_t d = 0; d < kCheckpointDepth; ++d) {
      block->push_back(std::make_shared<Linear>(kCheckpointWidth, kCheckpointWidth));
      block->push_back(std::make_shared<ReLU>());
    }
    model->push_back(block);
  }
  model->push_back(std::make_shared<Linear>(kCheckpointWidth, kClasses));
  return model;
}

}  // namespace lesson8_checks
