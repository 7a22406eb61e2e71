// Tests that need a real NVIDIA GPU. Without one they skip and say why, so a
// green run on a laptop never pretends the GPU path was checked.
#include <gtest/gtest.h>

#include "backend/cuda/probe.h"

namespace {

#define REQUIRE_GPU()                                                                                    \
  do {                                                                                                   \
    if (tiny::cuda_backend::real_device_count() == 0)                                                    \
      GTEST_SKIP() << "no NVIDIA GPU (cudaGetDeviceCount found none): run ./workbook test --gpu on a GPU " \
                      "machine";                                                                         \
  } while (0)

TEST(CudaRuntime, ProbeNeverFailsWithoutAGpu) {
  // Must return a count (0 here) rather than throw or abort, with or without a driver.
  const int count = tiny::cuda_backend::real_device_count();
  EXPECT_GE(count, 0);
  // Asking twice gives the same answer: the first failure was cleared.
  EXPECT_EQ(count, tiny::cuda_backend::real_device_count());
}

TEST(CudaRuntime, SeesAtLeastOneGpu) {
  REQUIRE_GPU();
  EXPECT_GE(tiny::cuda_backend::real_device_count(), 1);
}

}  // namespace
