// Pinned host memory and non_blocking copies on the emulated GPU, shown
// without clocks: a gate kernel holds the device's stream, so "the copy has
// not run yet" is a certainty, not a race (on real hardware it would be one).
#include <gtest/gtest.h>

#include <vector>

#include "core/tensor_impl.h"
#include "gpu/device_context.h"
#include "emulated_mode.h"
#include "gpu/emulated/emulated_runtime.h"
#include "tiny/tiny.h"

namespace {

const tiny::Device kGpu("cuda:0");

// Holds cuda:0's current stream until open() (or the end of the scope).
class HeldStream {
 public:
  HeldStream() {
    tiny::gpu::emulated_runtime()->launch(tiny::gpu::current_stream(0), [g = gate_] { g->wait(); }, "test_gate");
  }
  ~HeldStream() { open(); }
  void open() { gate_->open(); }

 private:
  std::shared_ptr<tiny::gpu::Gate> gate_ = std::make_shared<tiny::gpu::Gate>();
};

TEST(PinnedMemory, PinMemoryCopiesIntoPinnedMemory) {
  if (!tiny::cuda::is_available()) GTEST_SKIP() << "no cuda device (TINY_EMULATED_GPUS=0)";
  const tiny::Tensor pageable = tiny::arange(0.0, 6.0).view({2, 3});
  EXPECT_FALSE(pageable.is_pinned());
  const tiny::Tensor pinned = pageable.pin_memory();
  EXPECT_TRUE(pinned.is_pinned());
  EXPECT_TRUE(tiny::equal(pinned, pageable));
  EXPECT_TRUE(pinned.pin_memory().is_same(pinned));  // already pinned: no copy
  EXPECT_THROW((void)tiny::ones({2}, kGpu).pin_memory(), tiny::DeviceError);
}

TEST(PinnedMemory, NonBlockingCopyToAPinnedDestinationHasNotRunUntilTheStreamHas) {
  tiny_test::ThreadedMode threaded;  // observes asynchrony
  if (!tiny::cuda::is_available()) GTEST_SKIP() << "no cuda device (TINY_EMULATED_GPUS=0)";
  const tiny::Tensor on_device = tiny::full({4}, 7.0, kGpu);
  tiny::cuda::synchronize(0);
  tiny::Tensor dst = tiny::full({4}, -1.0).pin_memory();  // sentinel
  HeldStream held;
  dst.copy_(on_device, /*non_blocking=*/true);  // returns at once
  EXPECT_EQ(dst.to_vector<float>(), std::vector<float>(4, -1.0f)) << "the copy ran before the stream did";
  held.open();
  tiny::cuda::synchronize(0);
  EXPECT_EQ(dst.to_vector<float>(), std::vector<float>(4, 7.0f));
}

TEST(PinnedMemory, NonBlockingCopyFromPageableMemorySnapshotsTheSource) {
  tiny_test::ThreadedMode threaded;  // observes asynchrony
  if (!tiny::cuda::is_available()) GTEST_SKIP() << "no cuda device (TINY_EMULATED_GPUS=0)";
  tiny::Tensor src = tiny::ones({1000});
  tiny::Tensor on_device;
  {
    HeldStream held;
    on_device = src.to(kGpu, /*non_blocking=*/true);
    src.fill_(5.0);  // after the call: must not change what arrives
  }
  EXPECT_EQ(on_device.sum().item<float>(), 1000.0f);
}

TEST(PinnedMemory, NonBlockingCopyFromPinnedMemoryReadsTheSourceWhenItRuns) {
  tiny_test::ThreadedMode threaded;  // observes asynchrony
  if (!tiny::cuda::is_available()) GTEST_SKIP() << "no cuda device (TINY_EMULATED_GPUS=0)";
  // The lesson's race made repeatable: the source changes before the queued
  // copy reads it, so the device gets the new values.
  tiny::Tensor src = tiny::ones({1000}).pin_memory();
  tiny::Tensor on_device;
  {
    HeldStream held;
    on_device = src.to(kGpu, /*non_blocking=*/true);
    src.fill_(5.0);
  }
  EXPECT_EQ(on_device.sum().item<float>(), 5000.0f);
}

TEST(PinnedMemory, NonBlockingToCpuLandsInPinnedMemory) {
  if (!tiny::cuda::is_available()) GTEST_SKIP() << "no cuda device (TINY_EMULATED_GPUS=0)";
  const tiny::Tensor on_device = tiny::full({8}, 3.0, kGpu);
  const tiny::Tensor back = on_device.to(tiny::Device("cpu"), /*non_blocking=*/true);
  EXPECT_TRUE(back.is_pinned());
  tiny::cuda::synchronize(0);
  EXPECT_EQ(back.sum().item<float>(), 24.0f);
}

TEST(PinnedMemory, APinnedBlockIsNotReusedBeforeItsCopyRan) {
  tiny_test::ThreadedMode threaded;  // observes asynchrony
  if (!tiny::cuda::is_available()) GTEST_SKIP() << "no cuda device (TINY_EMULATED_GPUS=0)";
  const size_t n = 4096;
  const void* first = nullptr;
  tiny::Tensor on_device;
  HeldStream held;
  {
    tiny::Tensor src = tiny::ones({static_cast<int64_t>(n)}).pin_memory();
    first = src.unsafe_impl()->storage->data;
    on_device = src.to(kGpu, /*non_blocking=*/true);
  }  // src freed while its copy is still queued
  const tiny::Tensor again = tiny::zeros({static_cast<int64_t>(n)}).pin_memory();
  EXPECT_NE(again.unsafe_impl()->storage->data, first) << "reused a block a queued copy still reads";
  held.open();
  EXPECT_EQ(on_device.sum().item<float>(), static_cast<float>(n));
}

TEST(PinnedMemory, CountersTellPinnedFromPageableCopies) {
  if (!tiny::cuda::is_available()) GTEST_SKIP() << "no cuda device (TINY_EMULATED_GPUS=0)";
  auto* rt = tiny::gpu::device_runtime();
  rt->device_synchronize(0);
  rt->reset_counters(0);
  (void)tiny::ones({256}).to(kGpu);                // 1 KiB pageable
  (void)tiny::ones({512}).pin_memory().to(kGpu);   // 2 KiB pinned
  tiny::cuda::synchronize(0);
  const tiny::gpu::Counters c = rt->counters(0);
  EXPECT_EQ(c.bytes_host_to_device_pageable, 1024u);
  EXPECT_EQ(c.bytes_host_to_device_pinned, 2048u);
}

}  // namespace
