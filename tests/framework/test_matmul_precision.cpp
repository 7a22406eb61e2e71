// tiny::set_float32_matmul_precision (torch.set_float32_matmul_precision): TF32
// tensor cores for float32 products on the modelled GPU where it has them (an
// H100, not a T4), the GEMM counters that say which math a product ran in,
// and the emulator's float32 numerics, which the setting does not change.
// (tests/gpu/test_matmul_precision.cpp checks cuBLAS's TF32 mode on a real GPU.)
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

#include "gpu/model/cost.h"
#include "gpu/model/device_model.h"
#include "tiny/tiny.h"

namespace {

using namespace tiny::gpu::model;
using tiny::Dtype;

// Puts "highest" back whatever a test did: the setting is process-wide.
struct PrecisionGuard {
  ~PrecisionGuard() { tiny::set_float32_matmul_precision("highest"); }
};

TEST(MatmulPrecision, TheSettingRoundTripsAndAnUnknownOneIsNamed) {
  PrecisionGuard restore;
  EXPECT_EQ(tiny::get_float32_matmul_precision(), "highest") << "PyTorch's default";
  for (const char* p : {"high", "medium", "highest"}) {
    tiny::set_float32_matmul_precision(p);
    EXPECT_EQ(tiny::get_float32_matmul_precision(), p);
  }
  try {
    tiny::set_float32_matmul_precision("tf32");
    ADD_FAILURE() << "an unknown precision was accepted";
  } catch (const tiny::ValueError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("\"tf32\""), std::string::npos) << what;
    EXPECT_NE(what.find("\"high\""), std::string::npos) << what;
  }
  EXPECT_EQ(tiny::get_float32_matmul_precision(), "highest") << "a refused value changes nothing";
}

TEST(MatmulPrecision, Tf32RunsOnTensorCoresOnlyWhereTheGpuHasThem) {
  const DeviceModel h100 = load_model("h100-sxm"), t4 = load_model("t4");
  const auto ns = [](const DeviceModel& m, Dtype d, bool tf32) {
    return kernel_ns(m, gemm_cost(d, 4096, 4096, 4096, false, tf32));
  };
  EXPECT_STREQ(gemm_math(h100, Dtype::Float32, true), "tf32_tensor");
  EXPECT_STREQ(gemm_math(h100, Dtype::Float32, false), "float32");
  EXPECT_STREQ(gemm_math(t4, Dtype::Float32, true), "float32") << "Turing has no TF32";
  EXPECT_STREQ(gemm_math(h100, Dtype::Float16, true), "float16_tensor") << "TF32 concerns float32 products only";
  EXPECT_GT(ns(h100, Dtype::Float32, false), 4 * ns(h100, Dtype::Float32, true))
      << "H100: 67 TFLOP/s float32 against 495 TF32";
  EXPECT_GT(ns(h100, Dtype::Float32, true), ns(h100, Dtype::Float16, false)) << "TF32's peak is half float16's";
  EXPECT_EQ(ns(t4, Dtype::Float32, true), ns(t4, Dtype::Float32, false)) << "on a T4 the setting changes nothing";
}

// The model's TF32 products against the H100's (PyTorch, allow_tf32) measured
// in data/gpu_measurements/, printed with the mean error. No TF32 row was
// fitted (the tiles' efficiencies come from float32 and 16-bit rows), so
// these are predictions. Asserted: a mean error under 30%, and within 10% for
// the aligned products of 2048^3 and larger. Between, the model is too
// optimistic: the H100 took 14.8 us for a 1024^3 TF32 product, the model says
// 10.1 (lesson 7's README says so beside its TF32 figures). Small products'
// measurements spread widely (64x512x256 took 6.9 to 25.3 us), and the
// unaligned 4095^3 product is 58% slower than modelled.
TEST(MatmulPrecision, Tf32AgainstTheH100sMeasuredProducts) {
  const std::string path = std::string(TINY_SOURCE_DIR) + "/data/gpu_measurements/h100-sxm-2026-11-25.json";
  nlohmann::json measured;
  std::ifstream(path) >> measured;
  ASSERT_TRUE(measured.contains("rows")) << path;
  const DeviceModel m = load_model("h100-sxm");
  int rows = 0;
  double sum = 0, worst_large = 0;
  std::printf("%-34s %12s %12s %8s\n", "TF32 product (H100)", "measured us", "modelled us", "error");
  for (const auto& [name, row] : measured["rows"].items()) {
    if (name.rfind("torch/Gemm/tf32/", 0) != 0) continue;
    int64_t mm = 0, n = 0, k = 0;
    ASSERT_EQ(std::sscanf(name.c_str(), "torch/Gemm/tf32/%ld/%ld/%ld", &mm, &n, &k), 3) << name;
    const double want = row["median"].get<double>();
    const double got = kernel_ns(m, gemm_cost(Dtype::Float32, mm, n, k, false, true)) * 1e-3;
    const double error = std::fabs(got - want) / want;
    std::printf("%-34s %12.2f %12.2f %7.1f%%\n", name.c_str(), want, got, 100 * error);
    sum += error;
    ++rows;
    if (2.0 * mm * n * k >= 1.6e10 && mm % 8 == 0 && n % 8 == 0 && k % 8 == 0) {
      worst_large = std::max(worst_large, error);
    }
  }
  ASSERT_GT(rows, 0) << "no torch/Gemm/tf32 rows in " << path;
  std::printf("TF32 rows: %d, mean error %.1f%%, worst aligned product of 2048^3 or more %.1f%%\n", rows, 100 * sum / rows,
              100 * worst_large);
  EXPECT_LT(sum / rows, 0.30) << "the model's TF32 products are far from the H100's";
  EXPECT_LT(worst_large, 0.10) << "a large TF32 product is far from the H100's";
}

TEST(MatmulPrecision, GemmCountersSayWhichMathEachProductRanIn) {
  if (!tiny::cuda::is_available() || !tiny::cuda::is_emulated(0)) GTEST_SKIP() << "needs the emulated GPU";
  PrecisionGuard restore;
  const tiny::Device gpu("cuda:0");
  const bool has_tf32 = selected_model().peak_of("tf32_tensor") > 0;
  const tiny::Tensor a = tiny::randn({64, 32}, {}, tiny::Generator(1)).to(gpu);
  const tiny::Tensor b = tiny::randn({32, 16}, {}, tiny::Generator(2)).to(gpu);
  tiny::cuda::synchronize(0);
  tiny::cuda::reset_device_counters(0);
  const tiny::Tensor full = tiny::mm(a, b);
  tiny::set_float32_matmul_precision("high");
  const tiny::Tensor tf32 = tiny::mm(a, b);
  tiny::set_float32_matmul_precision("highest");
  (void)tiny::mm(a.to(tiny::kFloat16), b.to(tiny::kFloat16));
  (void)tiny::mm(a.to(tiny::kBFloat16), b.to(tiny::kBFloat16));
  (void)tiny::mm(a.to(tiny::kFloat64), b.to(tiny::kFloat64));
  const tiny::cuda::DeviceCounters c = tiny::cuda::device_counters(0);
  EXPECT_EQ(c.gemms_float32, has_tf32 ? 1u : 2u);
  EXPECT_EQ(c.gemms_tf32, has_tf32 ? 1u : 0u) << "TF32 only where the modelled GPU has it";
  EXPECT_EQ(c.gemms_float16, 1u);
  EXPECT_EQ(c.gemms_bfloat16, 1u);
  EXPECT_EQ(c.gemms_other, 1u);
  // The emulator computes TF32 products in float32, as the documentation says.
  EXPECT_EQ(full.cpu().to_vector<float>(), tf32.cpu().to_vector<float>());
}

TEST(MatmulPrecision, Tf32ShortensAModelledProduct) {
  if (!tiny::cuda::is_available() || !tiny::cuda::is_emulated(0)) GTEST_SKIP() << "needs the emulated GPU";
  PrecisionGuard restore;
  const tiny::Device gpu("cuda:0");
  const tiny::Tensor a = tiny::randn({512, 512}, {}, tiny::Generator(1)).to(gpu);
  const auto modelled_ms = [&] {
    tiny::cuda::synchronize(0);
    const double start = tiny::cuda::host_time();
    (void)tiny::mm(a, a);
    tiny::cuda::synchronize(0);
    return (tiny::cuda::host_time() - start) * 1e3;
  };
  const double full = modelled_ms();
  tiny::set_float32_matmul_precision("medium");
  const double tf32 = modelled_ms();
  if (selected_model().peak_of("tf32_tensor") > 0) {
    EXPECT_LT(tf32, 0.8 * full) << "float32 " << full << " ms, TF32 " << tf32 << " ms";
  } else {
    EXPECT_NEAR(tf32, full, 1e-6) << "no TF32 tensor cores on the modelled GPU (the same integer ns)";
  }
}

}  // namespace
