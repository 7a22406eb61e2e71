// Every kernel family must have an implementation for every backend that is
// built: the CPU and the emulated GPU now; the CUDA column joins this test when
// its drivers are registered.
#include <gtest/gtest.h>

#include <string>

#include "backend/dispatch.h"

namespace {

TEST(Dispatch, EveryStubHasACpuKernel) {
  tiny::ensure_kernels_registered();
  const auto& stubs = tiny::DispatchStubBase::all();
  ASSERT_GE(stubs.size(), 10u) << "the stub registry looks empty";
  std::string missing;
  for (const auto* stub : stubs) {
    if (!stub->has(tiny::Backend::CPU)) missing += std::string(" ") + stub->name;
  }
  EXPECT_TRUE(missing.empty()) << "stubs without a CPU kernel:" << missing;
}

TEST(Dispatch, EveryStubHasAnEmulatedKernel) {
  tiny::ensure_kernels_registered();
  std::string missing;
  for (const auto* stub : tiny::DispatchStubBase::all()) {
    if (!stub->has(tiny::Backend::Emulated)) missing += std::string(" ") + stub->name;
  }
  EXPECT_TRUE(missing.empty()) << "stubs without an emulated-GPU kernel:" << missing;
}

TEST(Dispatch, MissingKernelIsAClearError) {
  // The CUDA drivers are not registered yet: asking for one must be a
  // NotImplemented error naming the stub and the backend.
  try {
    (void)tiny::unary_stub(tiny::Backend::CUDA);
    if (tiny::unary_stub.has(tiny::Backend::CUDA)) GTEST_SKIP() << "the CUDA kernels are registered now";
    FAIL() << "expected tiny::NotImplemented";
  } catch (const tiny::NotImplemented& e) {
    EXPECT_NE(std::string(e.what()).find("'unary'"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("cuda"), std::string::npos) << e.what();
  }
}

}  // namespace
