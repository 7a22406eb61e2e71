// Every kernel family must have an implementation for every backend that is
// built. Now only the CPU backend exists; the emulated and CUDA columns join
// this test when their backends land.
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

TEST(Dispatch, MissingKernelIsAClearError) {
  // No emulated backend yet: asking for it must be a NotImplemented error naming the stub.
  try {
    (void)tiny::unary_stub(tiny::Backend::Emulated);
    if (tiny::unary_stub.has(tiny::Backend::Emulated)) GTEST_SKIP() << "the emulated backend exists now";
    FAIL() << "expected tiny::NotImplemented";
  } catch (const tiny::NotImplemented& e) {
    EXPECT_NE(std::string(e.what()).find("'unary'"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("emulated"), std::string::npos) << e.what();
  }
}

}  // namespace
