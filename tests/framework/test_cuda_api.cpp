// tiny::cuda on the emulated GPU (the default here: 2 devices): discovery,
// the current device, and the memory statistics the memory lessons read.
#include <gtest/gtest.h>

#include <cstdlib>
#include <functional>
#include <string>

#include "tiny/tiny.h"

namespace {

namespace F = tiny::nn::functional;
const tiny::Device kGpu("cuda:0");

TEST(CudaApi, DiscoversTheEmulatedDevices) {
  if (!tiny::cuda::is_available()) GTEST_SKIP() << "no cuda device (TINY_EMULATED_GPUS=0)";
  ASSERT_TRUE(tiny::cuda::is_available());
  EXPECT_EQ(tiny::cuda::device_count(), 2);  // TINY_EMULATED_GPUS defaults to 2
  EXPECT_TRUE(tiny::cuda::is_emulated(0));
  EXPECT_NE(tiny::cuda::get_device_name(1).find("EMULATED"), std::string::npos);
  const auto props = tiny::cuda::get_device_properties(0);
  EXPECT_GT(props.total_memory, 0u);
  EXPECT_GE(props.multi_processor_count, 1);
  const std::string banner = tiny::cuda::device_banner(kGpu);
  EXPECT_EQ(banner.rfind("cuda:0 - EMULATED on your CPU (", 0), 0u) << banner;
  // The cap here and the modelled card's own memory, apart: "4.00 GiB" alone read as the H100's.
  EXPECT_NE(banner.find("iB here"), std::string::npos) << banner;
  // It says which clock events read: the modelled GPU's, unless TINY_EMULATED_GPU_CLOCK=host.
  const char* clock = std::getenv("TINY_EMULATED_GPU_CLOCK");
  const bool host = clock != nullptr && std::string(clock) == "host";
  EXPECT_NE(banner.find(host ? "events time this CPU's work"
                             : "timing modelled on the " + props.modelled_gpu + ", an estimate"),
            std::string::npos)
      << banner;
  if (!host) EXPECT_NE(banner.find(" GB on the real card)"), std::string::npos) << banner;
  EXPECT_EQ(tiny::cuda::device_banner(tiny::Device("cpu")), "cpu");
}

TEST(CudaApi, DeviceGuardSwitchesTheCurrentDeviceForAScope) {
  if (!tiny::cuda::is_available()) GTEST_SKIP() << "no cuda device (TINY_EMULATED_GPUS=0)";
  EXPECT_EQ(tiny::cuda::current_device(), 0);
  {
    tiny::cuda::DeviceGuard guard(1);
    EXPECT_EQ(tiny::cuda::current_device(), 1);
    EXPECT_EQ(tiny::zeros({2}, "cuda").device(), tiny::Device("cuda:1"));  // "cuda" is the current device
  }
  EXPECT_EQ(tiny::cuda::current_device(), 0);
  EXPECT_THROW(tiny::cuda::set_device(2), tiny::DeviceError);
}

TEST(CudaApi, MemoryAllocatedFollowsTensorsAndReservedKeepsTheCache) {
  if (!tiny::cuda::is_available()) GTEST_SKIP() << "no cuda device (TINY_EMULATED_GPUS=0)";
  tiny::cuda::synchronize(0);
  tiny::cuda::empty_cache();
  const size_t base = tiny::cuda::memory_allocated(0);
  tiny::cuda::reset_peak_memory_stats(0);
  {
    const tiny::Tensor t = tiny::empty({1000, 1000}, kGpu);  // 4,000,000 bytes, a large-pool block
    EXPECT_EQ(tiny::cuda::memory_allocated(0) - base, 4000256u);  // rounded up to 512 bytes
    EXPECT_GE(tiny::cuda::memory_reserved(0), tiny::cuda::memory_allocated(0));
  }
  // Freed: no longer allocated, still reserved (cached) until empty_cache.
  EXPECT_EQ(tiny::cuda::memory_allocated(0), base);
  EXPECT_EQ(tiny::cuda::max_memory_allocated(0) - base, 4000256u);
  EXPECT_GT(tiny::cuda::memory_reserved(0), 0u);
  tiny::cuda::empty_cache();
  if (base == 0) {
    EXPECT_EQ(tiny::cuda::memory_reserved(0), 0u);
  }
  EXPECT_NE(tiny::cuda::memory_summary(0).find("Allocated memory"), std::string::npos);
}

// empty_cache() empties every device's cache, not only the current device's
// (its documentation says so, as PyTorch's does).
TEST(CudaApi, EmptyCacheEmptiesEveryDevicesCacheNotOnlyTheCurrentOne) {
  if (!tiny::cuda::is_available() || tiny::cuda::device_count() < 2) GTEST_SKIP() << "needs two cuda devices";
  tiny::cuda::empty_cache();
  const size_t base0 = tiny::cuda::memory_reserved(0), base1 = tiny::cuda::memory_reserved(1);
  { const tiny::Tensor t = tiny::empty({1000, 1000}, tiny::Device("cuda:1")); }
  { const tiny::Tensor t = tiny::empty({1000, 1000}, tiny::Device("cuda:0")); }
  ASSERT_GT(tiny::cuda::memory_reserved(1), base1) << "the freed block should stay cached on cuda:1";
  ASSERT_EQ(tiny::cuda::current_device(), 0);
  tiny::cuda::empty_cache();
  EXPECT_EQ(tiny::cuda::memory_reserved(1), base1) << "empty_cache() with cuda:0 current left cuda:1's cache";
  EXPECT_EQ(tiny::cuda::memory_reserved(0), base0);
}

// DESIGN.md section 3: holding a tensor holds its graph. Summing losses as
// tensors keeps every step's graph (and its saved activations) alive; summing
// .item() values does not. The memory lesson is built on this.
TEST(CudaApi, AccumulatingLossTensorsKeepsGraphsAlive) {
  if (!tiny::cuda::is_available()) GTEST_SKIP() << "no cuda device (TINY_EMULATED_GPUS=0)";
  tiny::manual_seed(0);
  auto model = std::make_shared<tiny::nn::Linear>(256, 256);
  model->to(kGpu);
  const tiny::Tensor x = tiny::randn({64, 256}, kGpu);
  auto run = [&](bool keep_tensor) {
    tiny::cuda::synchronize(0);
    tiny::Tensor total = tiny::zeros({}, kGpu);
    double total_value = 0.0;
    std::vector<size_t> allocated;
    for (int step = 0; step < 5; ++step) {
      tiny::Tensor loss = F::relu((*model)(x)).pow(2).mean();
      if (keep_tensor) {
        total = total + loss;  // the classic leak: `total_loss += loss`
      } else {
        total_value += loss.item<double>();
      }
      allocated.push_back(tiny::cuda::memory_allocated(0));
    }
    return allocated;
  };
  const std::vector<size_t> leaky = run(true);
  const std::vector<size_t> flat = run(false);
  EXPECT_GT(leaky.back(), leaky.front() + 3 * 64 * 256 * sizeof(float)) << "graphs should pile up";
  EXPECT_EQ(flat.back(), flat[1]) << "with .item() the memory after a warm-up step stays flat";
}

}  // namespace

namespace {

// Without a GPU every tiny::cuda call that names a device throws the
// DeviceError that says so; none may reach the (absent) runtime first.
int device_errors_without_a_gpu() {
  setenv("TINY_EMULATED_GPUS", "0", 1);
  int caught = 0;
  const std::function<void()> calls[] = {
      [] { tiny::cuda::synchronize(); },          [] { (void)tiny::cuda::is_emulated(); },
      [] { (void)tiny::cuda::get_device_name(); }, [] { (void)tiny::cuda::get_device_properties(); },
      [] { (void)tiny::cuda::device_counters(); }, [] { tiny::cuda::reset_device_counters(); }};
  for (const auto& call : calls) {
    try {
      call();
    } catch (const tiny::DeviceError&) {
      ++caught;
    }
  }
  return caught == 6 && !tiny::cuda::is_available() ? 0 : 1;
}

// In a fresh process (threadsafe death test), so that TINY_EMULATED_GPUS=0 is read.
TEST(CudaApiDeathTest, WithoutAGpuDeviceCallsThrowInsteadOfCrashing) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(std::exit(device_errors_without_a_gpu()), testing::ExitedWithCode(0), "");
}

}  // namespace
