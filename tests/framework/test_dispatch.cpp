// Every kernel family must have an implementation for every backend that is
// built: the CPU, the emulated GPU and, in builds with CUDA, the real GPU
// (registration only stores function pointers, so this runs without a GPU).
// Kernels register at the end of the files that define them when the library
// loads (backend/dispatch.h), so nothing here asks for registration.
#include <gtest/gtest.h>

#include <cstdlib>
#include <set>
#include <string>

#include "backend/dispatch.h"
#include "backend/stubs/pointwise.h"
#include "gpu/device_context.h"

namespace {

TEST(Dispatch, EveryStubHasACpuKernel) {
  const auto& stubs = tiny::all_stubs();
  ASSERT_GE(stubs.size(), 10u) << "the stub registry looks empty";
  std::string missing;
  for (const auto& stub : stubs) {
    if (!stub.has(tiny::Backend::CPU)) missing += std::string(" ") + stub.name;
  }
  EXPECT_TRUE(missing.empty()) << "stubs without a CPU kernel:" << missing;
}

TEST(Dispatch, EveryStubHasAnEmulatedKernel) {
  std::string missing;
  for (const auto& stub : tiny::all_stubs()) {
    if (!stub.has(tiny::Backend::Emulated)) missing += std::string(" ") + stub.name;
  }
  EXPECT_TRUE(missing.empty()) << "stubs without an emulated-GPU kernel:" << missing;
}

TEST(Dispatch, EveryStubHasACudaKernelWhenBuiltWithCuda) {
#if defined(TINY_HAVE_CUDA) && TINY_HAVE_CUDA
  std::string missing;
  for (const auto& stub : tiny::all_stubs()) {
    if (!stub.has(tiny::Backend::CUDA)) missing += std::string(" ") + stub.name;
  }
  EXPECT_TRUE(missing.empty()) << "stubs without a CUDA kernel:" << missing;
#else
  EXPECT_FALSE(tiny::unary_stub.has(tiny::Backend::CUDA)) << "a build without CUDA registered a CUDA kernel";
  GTEST_SKIP() << "tiny was built without CUDA (TINY_HAVE_CUDA off): there is no CUDA column to check";
#endif
}

TEST(Dispatch, MissingKernelIsAClearError) {
  // A stub that no backend filled (and that is not in the registry): asking
  // for its kernel must be a NotImplemented error naming the stub and the backend.
  static tiny::DispatchStub<tiny::IterFn> unfilled("test_only_unfilled");
  try {
    (void)unfilled(tiny::Backend::CUDA);
    ADD_FAILURE() << "expected tiny::NotImplemented";
  } catch (const tiny::NotImplemented& e) {
    EXPECT_NE(std::string(e.what()).find("'test_only_unfilled'"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("cuda"), std::string::npos) << e.what();
  }
}

TEST(Dispatch, EveryStubIsListedOnce) {
  // Each TINY_DEFINE_DISPATCH lists its stub once: a name listed twice would
  // be two stubs for one family (or a definition copied without renaming).
  std::set<std::string> names;
  std::string twice;
  for (const auto& stub : tiny::all_stubs()) {
    if (!names.insert(stub.name).second) twice += std::string(" ") + stub.name;
  }
  EXPECT_TRUE(twice.empty()) << "stubs listed twice:" << twice;
  EXPECT_EQ(names.count("unary"), 1u) << "the registry misses the unary stub";
}

TEST(Dispatch, CudaDevicesUseTheBackendOfTheSelectedRuntime) {
  // tiny_tests set TINY_FORCE_EMULATED_GPU=1 (tests/emulated_gpu.cpp), so
  // cuda:0 is the emulator's here even on a machine with a GPU.
  const char* forced = std::getenv("TINY_FORCE_EMULATED_GPU");
  ASSERT_NE(forced, nullptr) << "tests/emulated_gpu.cpp is not linked into tiny_tests";
  EXPECT_EQ(tiny::backend_of(tiny::Device("cpu")), tiny::Backend::CPU);
  if (tiny::gpu::device_runtime() == nullptr) GTEST_SKIP() << "no cuda device (TINY_EMULATED_GPUS=0)";
  if (std::string(forced) == "1") {
    EXPECT_FALSE(tiny::gpu::device_runtime_is_cuda());
  }
  EXPECT_EQ(tiny::backend_of(tiny::Device("cuda:0")),
            tiny::gpu::device_runtime_is_cuda() ? tiny::Backend::CUDA : tiny::Backend::Emulated);
}

}  // namespace
