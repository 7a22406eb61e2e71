// tiny::utils::checkpoint: lower peak memory, the same gradients (dropout
// included, through the preserved RNG state).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <memory>
#include <vector>

#include "gpu/emulated/emulated_runtime.h"
#include "gpu/runtime.h"
#include "tiny/autograd.h"
#include "tiny/cuda.h"
#include "tiny/nn/functional.h"
#include "tiny/nn/nn.h"
#include "tiny/ops.h"
#include "tiny/utils/checkpoint.h"

namespace {

const tiny::Device kCuda0(tiny::DeviceType::CUDA, 0);
constexpr int64_t kWidth = 256;
constexpr int64_t kBatch = 2048;

// 8 x (Linear, ReLU, Dropout): activations (kBatch x kWidth floats = 2 MiB
// each; a layer keeps three: the ReLU output, the mask and the dropout
// output) dwarf the weights (256 KiB each).
std::shared_ptr<tiny::nn::Sequential> make_mlp() {
  auto seq = std::make_shared<tiny::nn::Sequential>();
  for (int layer = 0; layer < 8; ++layer) {
    seq->push_back(std::make_shared<tiny::nn::Linear>(kWidth, kWidth));
    seq->push_back(std::make_shared<tiny::nn::ReLU>());
    seq->push_back(std::make_shared<tiny::nn::Dropout>(0.1));
  }
  return seq;
}

struct PassResult {
  size_t peak_bytes;            // max_memory_allocated during forward + backward
  size_t peak_above_start;      // the same minus what was allocated before the forward
  std::vector<tiny::Tensor> grads;  // on the CPU
};

// One forward + backward from the same RNG state; segments 0 means no checkpointing.
PassResult forward_backward(tiny::nn::Sequential& model, const tiny::Tensor& x, int segments) {
  model.zero_grad();
  tiny::cuda::synchronize(0);
  tiny::cuda::reset_peak_memory_stats(0);
  const size_t start = tiny::cuda::memory_allocated(0);
  tiny::manual_seed(123);  // the same dropout masks for every run
  {
    tiny::Tensor out = segments == 0 ? model(x) : tiny::utils::checkpoint_sequential(model, segments, x);
    out.pow(2.0).mean().backward();
  }
  tiny::cuda::synchronize(0);
  PassResult run{tiny::cuda::max_memory_allocated(0), tiny::cuda::max_memory_allocated(0) - start, {}};
  for (const tiny::Tensor& p : model.parameters()) {
    EXPECT_TRUE(p.grad().defined());
    run.grads.push_back(p.grad().defined() ? p.grad().cpu() : tiny::Tensor());
  }
  return run;
}

// Largest absolute difference; true when bitwise equal.
bool same_grads(const std::vector<tiny::Tensor>& a, const std::vector<tiny::Tensor>& b, double* max_diff) {
  bool bitwise = true;
  *max_diff = 0.0;
  for (size_t i = 0; i < a.size(); ++i) {
    if (!a[i].defined() || !b[i].defined()) return false;
    const float* pa = a[i].data_ptr<float>();
    const float* pb = b[i].data_ptr<float>();
    for (int64_t k = 0; k < a[i].numel(); ++k) {
      *max_diff = std::max(*max_diff, static_cast<double>(std::abs(pa[k] - pb[k])));
      bitwise = bitwise && std::memcmp(&pa[k], &pb[k], sizeof(float)) == 0;
    }
  }
  return bitwise;
}

}  // namespace

TEST(Checkpoint, CheckpointSequentialLowersPeakMemoryAndKeepsTheGradients) {
  if (!tiny::cuda::is_available()) GTEST_SKIP() << "no cuda device (TINY_EMULATED_GPUS=0)";
  tiny::gpu::EmulatedRuntime* emulator = tiny::gpu::emulated_runtime();
  if (emulator == nullptr) GTEST_SKIP() << "cuda:0 is not the emulated GPU";
  // The emulator's queued kernels hold their tensors until they have run, so
  // with the host running ahead the peak would count every temporary still
  // queued (how far the host got), not what the graph keeps. In blocking mode
  // each op has run when it returns, as on a GPU whose caching allocator
  // reuses a freed block at once.
  struct BlockingMode {
    tiny::gpu::EmulatedRuntime* rt;
    tiny::gpu::EmulatedRuntime::Mode previous;
    ~BlockingMode() { rt->set_mode(previous); }
  } blocking{emulator, emulator->mode()};
  emulator->set_mode(tiny::gpu::EmulatedRuntime::Mode::blocking);
  tiny::manual_seed(0);
  auto model = make_mlp();
  model->to(kCuda0);
  model->train();
  const tiny::Tensor x = tiny::randn({kBatch, kWidth}, tiny::TensorOptions().device(kCuda0));

  const PassResult plain = forward_backward(*model, x, 0);
  double previous_ratio = 1.0;
  for (int segments : {2, 4}) {
    const PassResult checkpointed = forward_backward(*model, x, segments);
    const double ratio = static_cast<double>(checkpointed.peak_above_start) / plain.peak_above_start;
    std::printf("peak memory during forward+backward: without checkpointing %.2f MiB (%.2f MiB above the start), "
                "checkpoint_sequential(%d segments) %.2f MiB (%.2f MiB above the start): ratio %.3f\n",
                plain.peak_bytes / 1048576.0, plain.peak_above_start / 1048576.0, segments,
                checkpointed.peak_bytes / 1048576.0, checkpointed.peak_above_start / 1048576.0, ratio);
    EXPECT_LT(ratio, 0.7) << segments << " segments";
    // Shorter segments recompute less at a time: here 4 beat 2 (n = 8 layers, sqrt(n) ~ 3).
    EXPECT_LT(ratio, previous_ratio) << segments << " segments";
    previous_ratio = ratio;
    double max_diff = 0.0;
    const bool bitwise = same_grads(plain.grads, checkpointed.grads, &max_diff);
    std::printf("gradients with %d segments: %s (largest difference %g)\n", segments,
                bitwise ? "bitwise equal" : "not bitwise equal", max_diff);
    EXPECT_LE(max_diff, 1e-6);
  }
}

TEST(Checkpoint, TheRngStateIsWhatMakesDropoutMasksRepeat) {
  if (!tiny::cuda::is_available()) GTEST_SKIP() << "no cuda device (TINY_EMULATED_GPUS=0)";
  tiny::manual_seed(0);
  auto layer = std::make_shared<tiny::nn::Linear>(64, 64);
  layer->to(kCuda0);
  auto fn = [layer](const tiny::Tensor& h) { return tiny::nn::functional::dropout((*layer)(h), 0.5, true); };
  const tiny::Tensor x0 = tiny::randn({32, 64}, tiny::TensorOptions().device(kCuda0));

  auto grads = [&](int mode) {  // 0: plain, 1: checkpoint, 2: checkpoint without the RNG state
    layer->zero_grad();
    tiny::Tensor x = x0.detach().requires_grad_(true);
    tiny::manual_seed(7);
    tiny::Tensor out = mode == 0 ? fn(x) : tiny::utils::checkpoint(fn, x, /*preserve_rng_state=*/mode == 1);
    out.sum().backward();
    std::vector<tiny::Tensor> g{x.grad().cpu()};
    for (const tiny::Tensor& p : layer->parameters()) g.push_back(p.grad().cpu());
    return g;
  };
  const auto plain = grads(0);
  double max_diff = 0.0;
  EXPECT_TRUE(same_grads(plain, grads(1), &max_diff)) << max_diff;
  EXPECT_GT((same_grads(plain, grads(2), &max_diff), max_diff), 1e-3)
      << "without the preserved RNG state the recomputation draws another dropout mask";
  // The generator ends where the plain run leaves it: checkpointing draws no extra numbers.
  tiny::manual_seed(7);
  grads(0);
  const auto after_plain = tiny::default_generator(kCuda0).get_state();
  grads(1);  // reseeds to 7 itself
  const auto after_checkpoint = tiny::default_generator(kCuda0).get_state();
  EXPECT_EQ(after_plain.offset, after_checkpoint.offset);
}

TEST(Checkpoint, AnInputThatNeedsNoGradientRunsWithoutCheckpointingAndParametersStillLearn) {
  tiny::manual_seed(0);
  auto layer = std::make_shared<tiny::nn::Linear>(8, 4);
  const tiny::Tensor x = tiny::randn({3, 8});
  tiny::Tensor out = tiny::utils::checkpoint([layer](const tiny::Tensor& h) { return (*layer)(h); }, x);
  EXPECT_TRUE(out.requires_grad());
  EXPECT_EQ(out.grad_fn()->name(), "AddmmBackward0") << "fn ran as it is";
  out.sum().backward();
  EXPECT_TRUE(layer->parameters()[0].grad().defined());

  // checkpoint_sequential knows the parameters: it checkpoints even then.
  tiny::nn::Sequential seq(std::make_shared<tiny::nn::Linear>(8, 8), std::make_shared<tiny::nn::ReLU>(),
                           std::make_shared<tiny::nn::Linear>(8, 4));
  tiny::Tensor y = tiny::utils::checkpoint_sequential(seq, 2, x);
  y.sum().backward();
  for (const tiny::Tensor& p : seq.parameters()) EXPECT_TRUE(p.grad().defined());

  // Under no_grad there is nothing to checkpoint.
  tiny::NoGradGuard no_grad;
  EXPECT_FALSE(tiny::utils::checkpoint_sequential(seq, 2, x).requires_grad());
}

TEST(Checkpoint, BadSegmentCountsAreValueErrors) {
  tiny::nn::Sequential seq(std::make_shared<tiny::nn::Linear>(4, 4), std::make_shared<tiny::nn::ReLU>());
  const tiny::Tensor x = tiny::randn({2, 4});
  EXPECT_THROW(tiny::utils::checkpoint_sequential(seq, 0, x), tiny::ValueError);
  EXPECT_THROW(tiny::utils::checkpoint_sequential(seq, 3, x), tiny::ValueError);
  tiny::nn::Sequential empty;
  EXPECT_THROW(tiny::utils::checkpoint_sequential(empty, 1, x), tiny::ValueError);
}
