// set_float32_matmul_precision on a real GPU: "high" puts cuBLAS in its TF32
// tensor-op mode from compute capability 8.0 (the product's error grows from
// float32's ~1e-6 to TF32's ~1e-3, and the counters say gemms_tf32), "highest"
// puts it back; before 8.0 the setting changes nothing. Skips without a GPU.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <string>
#include <vector>

#include "backend/cuda/probe.h"
#include "gpu/device_context.h"
#include "tiny/tiny.h"

namespace {

struct PrecisionGuard {
  ~PrecisionGuard() { tiny::set_float32_matmul_precision("highest"); }
};

// rms(got - want) / rms(want): float32's products land near 1e-7, TF32's near
// 4e-4 (inputs rounded to 10 mantissa bits: about 3e-4 each, 1024 terms adding
// at random), whether the hardware rounds or truncates them.
double relative_error(const tiny::Tensor& got, const tiny::Tensor& want) {
  const std::vector<double> g = got.cpu().to(tiny::kFloat64).contiguous().to_vector<double>();
  const std::vector<double> w = want.to(tiny::kFloat64).contiguous().to_vector<double>();
  double diff = 0, scale = 0;
  for (size_t i = 0; i < w.size(); ++i) {
    diff += (g[i] - w[i]) * (g[i] - w[i]);
    scale += w[i] * w[i];
  }
  return std::sqrt(diff / scale);
}

TEST(MatmulPrecision, HighUsesTf32TensorCoresFromAmpere) {
  if (tiny::cuda_backend::real_device_count() == 0) GTEST_SKIP() << "no NVIDIA GPU";
  if (const char* forced = std::getenv(tiny::gpu::kForceEmulatedGpuVariable); forced && std::string(forced) == "1") {
    GTEST_SKIP() << "the emulated GPU is forced";
  }
  PrecisionGuard restore;
  const tiny::Device gpu("cuda:0");
  const tiny::Tensor a = tiny::randn({1024, 1024}, {}, tiny::Generator(1));
  const tiny::Tensor b = tiny::randn({1024, 1024}, {}, tiny::Generator(2));
  const tiny::Tensor want = tiny::mm(a.to(tiny::kFloat64), b.to(tiny::kFloat64));
  const tiny::Tensor ga = a.to(gpu), gb = b.to(gpu);
  tiny::cuda::synchronize(0);
  tiny::cuda::reset_device_counters(0);
  const double highest = relative_error(tiny::mm(ga, gb), want);
  tiny::set_float32_matmul_precision("high");
  const double high = relative_error(tiny::mm(ga, gb), want);
  tiny::set_float32_matmul_precision("highest");
  const double again = relative_error(tiny::mm(ga, gb), want);
  const tiny::cuda::DeviceCounters c = tiny::cuda::device_counters(0);
  const bool ampere = tiny::cuda::get_device_properties(0).major >= 8;
  std::printf("relative error: highest %.3g, high %.3g, highest again %.3g (compute capability %d)\n", highest, high,
              again, tiny::cuda::get_device_properties(0).major);
  EXPECT_LT(highest, 1e-5) << "float32 products";
  EXPECT_LT(again, 1e-5) << "\"highest\" puts cuBLAS back in float32";
  if (ampere) {
    EXPECT_GT(high, 1e-4) << "TF32 keeps 10 mantissa bits: its error is far above float32's";
    EXPECT_LT(high, 1e-2);
    EXPECT_EQ(c.gemms_tf32, 1u);
    EXPECT_EQ(c.gemms_float32, 2u);
  } else {
    EXPECT_LT(high, 1e-5) << "no TF32 before compute capability 8.0";
    EXPECT_EQ(c.gemms_tf32, 0u);
    EXPECT_EQ(c.gemms_float32, 3u);
  }
}

TEST(MatmulPrecision, SixteenBitProductsAreCountedByDtype) {
  if (tiny::cuda_backend::real_device_count() == 0) GTEST_SKIP() << "no NVIDIA GPU";
  if (const char* forced = std::getenv(tiny::gpu::kForceEmulatedGpuVariable); forced && std::string(forced) == "1") {
    GTEST_SKIP() << "the emulated GPU is forced";
  }
  const tiny::Device gpu("cuda:0");
  const tiny::Tensor a = tiny::randn({64, 64}, {}, tiny::Generator(1)).to(gpu);
  tiny::cuda::synchronize(0);
  tiny::cuda::reset_device_counters(0);
  (void)tiny::mm(a.to(tiny::kFloat16), a.to(tiny::kFloat16));
  (void)tiny::mm(a.to(tiny::kBFloat16), a.to(tiny::kBFloat16));
  (void)tiny::mm(a.to(tiny::kFloat64), a.to(tiny::kFloat64));
  tiny::cuda::synchronize(0);
  const tiny::cuda::DeviceCounters c = tiny::cuda::device_counters(0);
  EXPECT_EQ(c.gemms_float16, 1u);
  EXPECT_EQ(c.gemms_bfloat16, 1u);
  EXPECT_EQ(c.gemms_other, 1u);
  EXPECT_EQ(c.gemms_float32 + c.gemms_tf32, 0u);
}

}  // namespace
