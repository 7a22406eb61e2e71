// Collectives between the emulated GPUs of one process (torch.cuda.comm):
// broadcast, reduce_add, all_reduce, scatter and gather give the right values
// and move exactly the bytes they should (the emulator's peer-copy counters).
#include <gtest/gtest.h>

#include <vector>

#include "test_util.h"
#include "tiny/tiny.h"

namespace {

using tiny::Device;
using tiny::Tensor;
namespace comm = tiny::nn::parallel::comm;

bool have_two_gpus() { return tiny::cuda::device_count() >= 2; }
#define REQUIRE_TWO_GPUS() \
  if (!have_two_gpus()) GTEST_SKIP() << "needs 2 GPUs (TINY_EMULATED_GPUS >= 2)"

const Device kGpu0("cuda:0");
const Device kGpu1("cuda:1");

uint64_t d2d(int device) { return tiny::cuda::device_counters(device).bytes_device_to_device; }
void reset_counters() {
  tiny::cuda::synchronize(0);
  tiny::cuda::synchronize(1);
  tiny::cuda::reset_device_counters(0);
  tiny::cuda::reset_device_counters(1);
}

TEST(Comm, SplitSizesAreAsEqualAsPossibleLargerFirst) {
  EXPECT_EQ(comm::split_sizes(10, 3), (std::vector<int64_t>{4, 3, 3}));
  EXPECT_EQ(comm::split_sizes(5, 2), (std::vector<int64_t>{3, 2}));
  EXPECT_EQ(comm::split_sizes(4, 4), (std::vector<int64_t>{1, 1, 1, 1}));
  tiny_test::expect_error<tiny::ValueError>([] { comm::split_sizes(1, 2); },
                                            {"cannot split 1 sample across 2 devices", "at least 2 samples"});
}

TEST(Comm, BroadcastCopiesToEveryDeviceOnceAndKeepsTheSource) {
  REQUIRE_TWO_GPUS();
  const Tensor x = tiny::randn({3, 5}).to(kGpu0);
  reset_counters();
  const std::vector<Tensor> out = comm::broadcast(x, {0, 1});
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[0].device(), kGpu0);
  EXPECT_EQ(out[1].device(), kGpu1);
  EXPECT_TRUE(tiny::equal(out[1].cpu(), x.cpu()));
  EXPECT_EQ(d2d(0), 3u * 5u * 4u) << "one peer copy of 60 bytes, counted on the source";
  EXPECT_EQ(d2d(1), 0u);
  EXPECT_FALSE(out[1].requires_grad());
  // The source device's result is the tensor itself (shared memory), as in PyTorch.
  tiny::NoGradGuard no_grad;
  out[0].fill_(7.0);
  EXPECT_TRUE(tiny::equal(x.cpu(), tiny::full({3, 5}, 7.0)));
}

TEST(Comm, ReduceAddSumsOntoTheDestinationWithOneCopyPerOtherDevice) {
  REQUIRE_TWO_GPUS();
  const Tensor a = tiny::randn({4, 2});
  const Tensor b = tiny::randn({4, 2});
  const Tensor a0 = a.to(kGpu0);
  const Tensor b1 = b.to(kGpu1);
  reset_counters();
  const Tensor sum = comm::reduce_add({a0, b1}, kGpu0);
  EXPECT_EQ(sum.device(), kGpu0);
  EXPECT_TRUE(tiny::allclose(sum.cpu(), a + b));
  EXPECT_EQ(d2d(1), 4u * 2u * 4u) << "cuda:1's tensor is copied to cuda:0 once";
  EXPECT_TRUE(tiny::equal(a0.cpu(), a)) << "the inputs must not change";
  // Onto the CPU, and onto a device that holds none of them.
  EXPECT_TRUE(tiny::allclose(comm::reduce_add({a0, b1}, Device("cpu")), a + b));
  EXPECT_TRUE(tiny::allclose(comm::reduce_add({a0, b1}, kGpu1).cpu(), a + b));
}

TEST(Comm, AllReduceLeavesTheSumOnEveryDevice) {
  REQUIRE_TWO_GPUS();
  const Tensor a = tiny::randn({6});
  const Tensor b = tiny::randn({6});
  const Tensor a0 = a.to(kGpu0);
  const Tensor b1 = b.to(kGpu1);
  reset_counters();
  comm::all_reduce({a0, b1});
  EXPECT_TRUE(tiny::allclose(a0.cpu(), a + b));
  EXPECT_TRUE(tiny::allclose(b1.cpu(), a + b));
  // Reduce (cuda:1 -> cuda:0) then broadcast back (cuda:0 -> cuda:1): 24 bytes out of each device.
  EXPECT_GE(d2d(0), 6u * 4u);
  EXPECT_EQ(d2d(1), 6u * 4u);
}

TEST(Comm, ScatterAndGatherRoundTripWithUnevenPieces) {
  REQUIRE_TWO_GPUS();
  const Tensor x = tiny::randn({5, 3});
  reset_counters();
  const std::vector<Tensor> pieces = comm::scatter(x, {0, 1});
  ASSERT_EQ(pieces.size(), 2u);
  EXPECT_EQ(pieces[0].sizes(), (tiny::IntArrayRef{3, 3}));
  EXPECT_EQ(pieces[1].sizes(), (tiny::IntArrayRef{2, 3}));
  EXPECT_EQ(pieces[0].device(), kGpu0);
  EXPECT_EQ(pieces[1].device(), kGpu1);
  EXPECT_EQ(tiny::cuda::device_counters(0).bytes_host_to_device_pageable, 3u * 3u * 4u);
  EXPECT_EQ(tiny::cuda::device_counters(1).bytes_host_to_device_pageable, 2u * 3u * 4u);
  EXPECT_TRUE(tiny::equal(comm::gather(pieces, 0, Device("cpu")), x));
  // Explicit sizes, along another dimension.
  const std::vector<Tensor> cols = comm::scatter(x, {1, 0}, {1, 2}, 1);
  EXPECT_EQ(cols[0].device(), kGpu1);
  EXPECT_EQ(cols[1].sizes(), (tiny::IntArrayRef{5, 2}));
  EXPECT_TRUE(tiny::equal(comm::gather(cols, -1, kGpu0).cpu(), x));
}

TEST(Comm, BadArgumentsSayWhatIsWrong) {
  REQUIRE_TWO_GPUS();
  const Tensor a0 = tiny::zeros({2, 2}, kGpu0);
  const Tensor b1 = tiny::zeros({3}, kGpu1);
  tiny_test::expect_error<tiny::ValueError>([&] { comm::broadcast(a0, {0, 0}); }, {"cuda:0 appears more than once"});
  tiny_test::expect_error<tiny::DeviceError>([&] { comm::broadcast(a0, {0, 7}); }, {"cuda:7 does not exist"});
  tiny_test::expect_error<tiny::ShapeError>([&] { comm::reduce_add({a0, b1}); }, {"one shape", "[2, 2]", "[3]"});
  tiny_test::expect_error<tiny::DeviceError>([&] { comm::all_reduce({a0, tiny::zeros({2, 2})}); },
                                             {"tensor 1 is on cpu"});
  tiny_test::expect_error<tiny::ValueError>([&] { comm::all_reduce({a0, a0}); }, {"more than once"});
  tiny_test::expect_error<tiny::ValueError>([&] { comm::scatter(tiny::zeros({1, 4}), {0, 1}); },
                                            {"cannot split 1 sample across 2 devices"});
  tiny_test::expect_error<tiny::ValueError>([&] { comm::scatter(tiny::zeros({4}), {0, 1}, {1, 2}); },
                                            {"add up to 3", "4 elements"});
}

}  // namespace
