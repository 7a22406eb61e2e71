// tiny::cuda::memory_snapshot: every block of the caching allocator with its
// size, state and the op that allocated it; totals that match the statistics.
#include <gtest/gtest.h>

#include <cstdint>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "core/op_scope.h"
#include "core/tensor_impl.h"
#include "gpu/device_context.h"
#include "tiny/cuda.h"
#include "tiny/nn/functional.h"
#include "tiny/nn/nn.h"
#include "tiny/ops.h"
#include "tiny/optim/optim.h"

namespace {

using tiny::cuda::BlockInfo;
using tiny::cuda::SegmentInfo;

const tiny::Device kCuda0(tiny::DeviceType::CUDA, 0);

uintptr_t address_of(const tiny::Tensor& t) { return reinterpret_cast<uintptr_t>(t.unsafe_impl()->storage->data); }

// The block that starts at `address`, or nullptr.
const BlockInfo* block_at(const std::vector<SegmentInfo>& segments, uintptr_t address) {
  for (const SegmentInfo& s : segments) {
    for (const BlockInfo& b : s.blocks) {
      if (b.address == address) return &b;
    }
  }
  return nullptr;
}

// The block whose bytes contain `address`, or nullptr.
const BlockInfo* block_containing(const std::vector<SegmentInfo>& segments, uintptr_t address) {
  for (const SegmentInfo& s : segments) {
    for (const BlockInfo& b : s.blocks) {
      if (address >= b.address && address < b.address + b.size) return &b;
    }
  }
  return nullptr;
}

void expect_totals_match_statistics(const std::vector<SegmentInfo>& segments) {
  size_t reserved = 0, allocated = 0, block_bytes = 0;
  for (const SegmentInfo& s : segments) {
    EXPECT_EQ(s.device, 0);
    reserved += s.total_size;
    size_t in_segment = 0, allocated_in_segment = 0;
    uintptr_t next = s.address;
    for (const BlockInfo& b : s.blocks) {
      EXPECT_EQ(b.address, next) << "blocks of a segment are contiguous, in address order";
      next = b.address + b.size;
      in_segment += b.size;
      if (b.state == "active_allocated") {
        allocated += b.size;
        allocated_in_segment += b.size;
        EXPECT_FALSE(b.op.empty());
        EXPECT_LE(b.requested_size, b.size);
      } else {
        EXPECT_EQ(b.requested_size, 0u);
      }
    }
    EXPECT_EQ(in_segment, s.total_size) << "the blocks tile the segment";
    EXPECT_EQ(allocated_in_segment, s.allocated_size);
    block_bytes += in_segment;
  }
  EXPECT_EQ(allocated, tiny::cuda::memory_allocated(0));
  EXPECT_EQ(reserved, tiny::cuda::memory_reserved(0));
  EXPECT_EQ(block_bytes, reserved);
}

}  // namespace

TEST(MemorySnapshot, BlocksHaveTheirSizesAndTheOpThatAllocatedThem) {
  if (!tiny::cuda::is_available()) GTEST_SKIP() << "no cuda device (TINY_EMULATED_GPUS=0)";
  const auto on_gpu = tiny::TensorOptions(tiny::kFloat32).device(kCuda0);
  tiny::Tensor noise = tiny::randn({1000, 250}, on_gpu);   // 1,000,000 bytes: small pool
  tiny::Tensor big = tiny::zeros({3, 1024, 1024}, on_gpu);  // 12 MiB: large pool
  tiny::Tensor x = tiny::ones({64, 32}, on_gpu);
  tiny::Tensor w = tiny::randn({48, 32}, on_gpu);
  tiny::Tensor b = tiny::zeros({48}, on_gpu);
  tiny::Tensor y = tiny::nn::functional::linear(x, w, b);  // [64, 48]
  tiny::Tensor host = tiny::arange(10).to(tiny::kFloat32);
  tiny::Tensor copied = host.to(kCuda0);
  // Queued work frees its temporaries when it has run: settle before comparing totals.
  tiny::cuda::synchronize(0);

  const std::vector<SegmentInfo> segments = tiny::cuda::memory_snapshot(0);
  struct Expected {
    const tiny::Tensor* tensor;
    size_t requested;
    const char* op;
  };
  const Expected expected[] = {{&noise, 1000000, "randn"}, {&big, 12u << 20, "zeros"}, {&x, 64 * 32 * 4, "ones"},
                               {&w, 48 * 32 * 4, "randn"},  {&b, 48 * 4, "zeros"},      {&y, 64 * 48 * 4, "linear"},
                               {&copied, 40, "to"}};
  for (const Expected& e : expected) {
    const BlockInfo* block = block_at(segments, address_of(*e.tensor));
    ASSERT_NE(block, nullptr) << e.op;
    EXPECT_EQ(block->state, "active_allocated") << e.op;
    EXPECT_EQ(block->requested_size, e.requested) << e.op;
    EXPECT_EQ(block->size, tiny::gpu::CachingAllocator::round_size(e.requested)) << e.op;
    EXPECT_EQ(block->op, e.op);
    EXPECT_EQ(block->stream, 0);
  }
  bool big_is_large = false;
  for (const SegmentInfo& s : segments) {
    if (s.address <= address_of(big) && address_of(big) < s.address + s.total_size) {
      big_is_large = s.segment_type == "large";
    }
  }
  EXPECT_TRUE(big_is_large);
  expect_totals_match_statistics(segments);
  // Every device's segments by default, each naming its device.
  size_t all_for_0 = 0;
  for (const SegmentInfo& s : tiny::cuda::memory_snapshot()) all_for_0 += s.device == 0 ? 1 : 0;
  EXPECT_EQ(all_for_0, segments.size());
}

TEST(MemorySnapshot, AFreedTensorsBlockTurnsInactiveAndTotalsFollow) {
  if (!tiny::cuda::is_available()) GTEST_SKIP() << "no cuda device (TINY_EMULATED_GPUS=0)";
  const auto on_gpu = tiny::TensorOptions(tiny::kFloat32).device(kCuda0);
  tiny::Tensor keep = tiny::ones({256, 256}, on_gpu);
  auto gone = std::make_unique<tiny::Tensor>(tiny::full({512, 256}, 2.0, on_gpu));
  tiny::cuda::synchronize(0);
  const uintptr_t address = address_of(*gone);
  {
    const auto before = tiny::cuda::memory_snapshot(0);
    ASSERT_NE(block_at(before, address), nullptr);
    EXPECT_EQ(block_at(before, address)->op, "full");
    expect_totals_match_statistics(before);
  }
  gone.reset();
  // The queued fill holds the storage until it has run: the block is freed then.
  tiny::cuda::synchronize(0);
  const auto after = tiny::cuda::memory_snapshot(0);
  const BlockInfo* block = block_containing(after, address);
  ASSERT_NE(block, nullptr) << "the memory stays cached in its segment";
  EXPECT_EQ(block->state, "inactive");
  EXPECT_EQ(block->op, "");
  EXPECT_EQ(block->requested_size, 0u);
  EXPECT_EQ(block_at(after, address_of(keep))->state, "active_allocated");
  expect_totals_match_statistics(after);

  tiny::cuda::empty_cache();
  expect_totals_match_statistics(tiny::cuda::memory_snapshot(0));
}

TEST(MemorySnapshot, TrainingStateIsTaggedWithBackwardAndOptimizerStep) {
  if (!tiny::cuda::is_available()) GTEST_SKIP() << "no cuda device (TINY_EMULATED_GPUS=0)";
  tiny::manual_seed(0);
  auto model = std::make_shared<tiny::nn::Linear>(128, 64);
  model->to(kCuda0);
  tiny::optim::Adam optimizer(model->parameters());
  const auto on_gpu = tiny::TensorOptions(tiny::kFloat32).device(kCuda0);
  tiny::Tensor x = tiny::randn({32, 128}, on_gpu);
  tiny::Tensor loss = (*model)(x).pow(2.0).mean();
  loss.backward();
  optimizer.step();
  tiny::cuda::synchronize(0);

  const auto segments = tiny::cuda::memory_snapshot(0);
  for (const tiny::Tensor& p : model->parameters()) {
    const BlockInfo* grad = block_at(segments, address_of(p.grad()));
    ASSERT_NE(grad, nullptr);
    EXPECT_EQ(grad->op, "backward");
  }
  size_t optimizer_bytes = 0;
  for (const SegmentInfo& s : segments) {
    for (const BlockInfo& b : s.blocks) {
      if (b.state == "active_allocated" && b.op == "optimizer.step") optimizer_bytes += b.requested_size;
    }
  }
  // exp_avg and exp_avg_sq of the weight and the bias.
  EXPECT_EQ(optimizer_bytes, 2u * (128 * 64 + 64) * 4);

  const std::string summary = tiny::cuda::memory_snapshot_summary(0);
  std::cout << summary;
  EXPECT_NE(summary.find("optimizer.step"), std::string::npos);
  EXPECT_NE(summary.find("backward"), std::string::npos);
  EXPECT_NE(summary.find("Largest live blocks"), std::string::npos);
}

TEST(MemorySnapshot, MemoryAllocatedOutsideAnyOpIsUnknown) {
  if (!tiny::cuda::is_available()) GTEST_SKIP() << "no cuda device (TINY_EMULATED_GPUS=0)";
  auto& allocator = tiny::gpu::device_allocator(0);
  void* raw = allocator.allocate(4096, tiny::gpu::current_stream(0));
  const std::vector<SegmentInfo> segments = tiny::cuda::memory_snapshot(0);  // the block points into it
  const BlockInfo* block = block_at(segments, reinterpret_cast<uintptr_t>(raw));
  ASSERT_NE(block, nullptr);
  EXPECT_EQ(block->op, "unknown");
  allocator.free(raw);
}

TEST(OpScope, TheOutermostScopeNamesTheOp) {
  EXPECT_STREQ(tiny::detail::current_op(), "unknown");
  {
    TINY_OP_SCOPE("outer");
    EXPECT_STREQ(tiny::detail::current_op(), "outer");
    {
      TINY_OP_SCOPE("inner");
      EXPECT_STREQ(tiny::detail::current_op(), "outer");
    }
    EXPECT_STREQ(tiny::detail::current_op(), "outer");
  }
  EXPECT_STREQ(tiny::detail::current_op(), "unknown");
}
