// Tests that need a real NVIDIA GPU. Without one they skip and say why, so a
// green run on a laptop never pretends the GPU path was checked.
//
// What runs everywhere: the probe never fails, gpu::cuda_runtime() is nullptr
// exactly when there is no GPU, and CUDA errors are worded as tiny promises.
// Everything else (docs/gpu_testing.md) needs a GPU and skips without one.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <numeric>
#include <string>
#include <vector>

#include "backend/cuda/probe.h"
#include "gpu/cuda/cuda_runtime.h"
#include "gpu/runtime.h"
#include "tiny/error.h"

namespace {

using tiny::gpu::CopyKind;
using tiny::gpu::Event;
using tiny::gpu::Runtime;
using tiny::gpu::Stream;

#define REQUIRE_GPU()                                                                                    \
  do {                                                                                                   \
    if (tiny::cuda_backend::real_device_count() == 0)                                                    \
      GTEST_SKIP() << "no NVIDIA GPU (cudaGetDeviceCount found none): run ./workbook test --gpu on a GPU " \
                      "machine";                                                                         \
  } while (0)

// The runtime, or a skip with the reason.
#define GPU_RUNTIME(name)                                                           \
  REQUIRE_GPU();                                                                    \
  Runtime* const name = tiny::gpu::cuda_runtime();                                  \
  ASSERT_NE(name, nullptr) << "a GPU is present but gpu::cuda_runtime() is nullptr"

// Device memory of `n` floats, freed at scope exit.
struct DeviceBuffer {
  Runtime* rt;
  int device;
  void* ptr;
  DeviceBuffer(Runtime* r, int d, size_t nbytes) : rt(r), device(d), ptr(r->raw_malloc(d, nbytes)) {}
  ~DeviceBuffer() { rt->raw_free(device, ptr); }
  float* f() const { return static_cast<float*>(ptr); }
};

// Pinned host memory, freed at scope exit.
struct PinnedBuffer {
  Runtime* rt;
  void* ptr;
  PinnedBuffer(Runtime* r, size_t nbytes) : rt(r), ptr(r->pinned_malloc(nbytes)) {}
  ~PinnedBuffer() { rt->pinned_free(ptr); }
  float* f() const { return static_cast<float*>(ptr); }
};

std::vector<float> iota_floats(size_t n, float start = 1.0f) {
  std::vector<float> v(n);
  std::iota(v.begin(), v.end(), start);
  return v;
}

// ---- everywhere -----------------------------------------------------------------

TEST(CudaRuntime, ProbeNeverFailsWithoutAGpu) {
  // Must return a count (0 here) rather than throw or abort, with or without a driver.
  const int count = tiny::cuda_backend::real_device_count();
  EXPECT_GE(count, 0);
  // Asking twice gives the same answer: the first failure was cleared.
  EXPECT_EQ(count, tiny::cuda_backend::real_device_count());
}

TEST(CudaRuntime, RuntimeExistsExactlyWhenAGpuDoes) {
  Runtime* rt = tiny::gpu::cuda_runtime();
  if (tiny::cuda_backend::real_device_count() == 0) {
    // (Without a driver every CUDA call, cudaGetLastError included, keeps
    // answering cudaErrorInsufficientDriver: there is nothing to clear.)
    EXPECT_EQ(rt, nullptr);
  } else {
    ASSERT_NE(rt, nullptr);
    EXPECT_EQ(rt->device_count(), tiny::cuda_backend::real_device_count());
    EXPECT_EQ(cudaGetLastError(), cudaSuccess) << "creating the runtime left an error behind";
  }
  EXPECT_EQ(rt, tiny::gpu::cuda_runtime());  // one instance
}

TEST(CudaRuntime, ErrorMessageNamesErrorCallAndDevice) {
  // cudaGetErrorString needs no driver, so the wording is checked everywhere.
  EXPECT_EQ(tiny::gpu::cuda_error_message(cudaErrorMemoryAllocation, "cudaMalloc", 0),
            "CUDA error: out of memory (cudaMalloc on cuda:0)");
  try {
    tiny::gpu::throw_cuda_error(cudaErrorMemoryAllocation, "cudaMalloc", 1);
    FAIL() << "throw_cuda_error returned";
  } catch (const tiny::OutOfMemoryError& e) {
    EXPECT_STREQ(e.what(), "CUDA error: out of memory (cudaMalloc on cuda:1)");
  }
  try {
    tiny::gpu::throw_cuda_error(cudaErrorInvalidValue, "cudaMemcpyAsync host to device", 0);
    FAIL() << "throw_cuda_error returned";
  } catch (const tiny::OutOfMemoryError&) {
    FAIL() << "an invalid argument is not an out-of-memory error";
  } catch (const tiny::Error& e) {
    EXPECT_STREQ(e.what(), "CUDA error: invalid argument (cudaMemcpyAsync host to device on cuda:0)");
  }
}

// ---- with a GPU -----------------------------------------------------------------

TEST(CudaRuntime, SeesAtLeastOneGpu) {
  REQUIRE_GPU();
  EXPECT_GE(tiny::cuda_backend::real_device_count(), 1);
}

TEST(CudaRuntime, DeviceCountAndProperties) {
  GPU_RUNTIME(rt);
  EXPECT_STREQ(rt->kind(), "cuda");
  ASSERT_GE(rt->device_count(), 1);
  for (int d = 0; d < rt->device_count(); ++d) {
    const tiny::gpu::DeviceProperties p = rt->properties(d);
    EXPECT_FALSE(p.name.empty());
    EXPECT_GT(p.total_memory, size_t{1} << 30) << p.name;
    EXPECT_GT(p.multiprocessor_count, 0);
    EXPECT_GE(p.major, 7) << "tiny is compiled for sm_75 and newer";
    EXPECT_FALSE(p.emulated);
    const size_t free_bytes = rt->free_memory(d);
    EXPECT_GT(free_bytes, size_t{0});
    EXPECT_LE(free_bytes, p.total_memory);
  }
  const int bad = rt->device_count();
  try {
    rt->properties(bad);
    FAIL() << "properties(" << bad << ") did not throw";
  } catch (const tiny::DeviceError& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("cuda:" + std::to_string(bad)), std::string::npos) << msg;
    EXPECT_NE(msg.find("cuda:0 to cuda:" + std::to_string(bad - 1)), std::string::npos) << msg;
  }
}

TEST(CudaRuntime, MallocFreeAreCounted) {
  GPU_RUNTIME(rt);
  rt->reset_counters(0);
  void* p = rt->raw_malloc(0, 1 << 20);
  ASSERT_NE(p, nullptr);
  cudaPointerAttributes attr{};
  ASSERT_EQ(cudaPointerGetAttributes(&attr, p), cudaSuccess);
  EXPECT_EQ(attr.type, cudaMemoryTypeDevice);
  EXPECT_EQ(attr.device, 0);
  rt->raw_free(0, p);
  rt->raw_free(0, nullptr);  // a no-op, as cudaFree(nullptr)
  const tiny::gpu::Counters c = rt->counters(0);
  EXPECT_EQ(c.device_mallocs, 1u);
  EXPECT_EQ(c.raw_frees, 1u);
}

TEST(CudaRuntime, AllocationsLandOnTheRequestedDeviceAndLeaveTheCurrentOne) {
  GPU_RUNTIME(rt);
  int before = -1;
  ASSERT_EQ(cudaGetDevice(&before), cudaSuccess);
  const int last = rt->device_count() - 1;
  void* p = rt->raw_malloc(last, 4096);
  ASSERT_NE(p, nullptr);
  cudaPointerAttributes attr{};
  ASSERT_EQ(cudaPointerGetAttributes(&attr, p), cudaSuccess);
  EXPECT_EQ(attr.device, last);
  rt->raw_free(last, p);
  int after = -1;
  ASSERT_EQ(cudaGetDevice(&after), cudaSuccess);
  EXPECT_EQ(after, before) << "the runtime must restore the caller's current device";
}

TEST(CudaRuntime, HostDeviceRoundTripThroughPageableMemory) {
  GPU_RUNTIME(rt);
  const size_t n = 1 << 16, bytes = n * sizeof(float);
  const std::vector<float> src = iota_floats(n);
  std::vector<float> back(n, -1.0f);
  DeviceBuffer dev(rt, 0, bytes);
  ASSERT_NE(dev.ptr, nullptr);
  rt->reset_counters(0);
  const Stream s = rt->default_stream(0);
  rt->memcpy_async(dev.ptr, src.data(), bytes, CopyKind::HostToDevice, s);
  // Into pageable memory the copy has finished when the call returns: no synchronize here.
  rt->memcpy_async(back.data(), dev.ptr, bytes, CopyKind::DeviceToHost, s);
  EXPECT_EQ(back, src);
  const tiny::gpu::Counters c = rt->counters(0);
  EXPECT_EQ(c.bytes_host_to_device_pageable, bytes);
  EXPECT_EQ(c.bytes_device_to_host_pageable, bytes);
  EXPECT_EQ(c.bytes_host_to_device_pinned, 0u);
  EXPECT_EQ(c.synchronizations, 1u) << "a copy into pageable memory waits for its stream";
}

TEST(CudaRuntime, PageableSourceIsCapturedBeforeTheCallReturns) {
  GPU_RUNTIME(rt);
  const size_t n = 1 << 20, bytes = n * sizeof(float);
  std::vector<float> src = iota_floats(n);
  const std::vector<float> expected = src;
  DeviceBuffer dev(rt, 0, bytes);
  ASSERT_NE(dev.ptr, nullptr);
  const Stream s = rt->create_stream(0);
  rt->memcpy_async(dev.ptr, src.data(), bytes, CopyKind::HostToDevice, s);
  std::fill(src.begin(), src.end(), 0.0f);  // allowed at once: CUDA staged the source
  std::vector<float> back(n);
  rt->memcpy_async(back.data(), dev.ptr, bytes, CopyKind::DeviceToHost, s);
  EXPECT_EQ(back, expected);
  rt->destroy_stream(s);
}

TEST(CudaRuntime, PinnedAsyncCopiesCompleteAtSynchronize) {
  GPU_RUNTIME(rt);
  const size_t n = 1 << 20, bytes = n * sizeof(float);
  PinnedBuffer host_in(rt, bytes), host_out(rt, bytes);
  ASSERT_NE(host_in.ptr, nullptr);
  EXPECT_TRUE(rt->is_pinned(host_in.ptr));
  EXPECT_TRUE(rt->is_pinned(host_in.f() + 100)) << "a pointer inside a pinned block is pinned";
  const void* freed = nullptr;
  {
    PinnedBuffer scratch(rt, 4096);
    freed = scratch.ptr;
    EXPECT_TRUE(rt->is_pinned(freed));
  }
  EXPECT_FALSE(rt->is_pinned(freed)) << "a freed pinned block is no longer pinned";
  std::vector<float> pageable(4);
  EXPECT_FALSE(rt->is_pinned(pageable.data()));
  for (size_t i = 0; i < n; ++i) host_in.f()[i] = static_cast<float>(i) * 0.5f;
  std::memset(host_out.ptr, 0, bytes);

  DeviceBuffer dev(rt, 0, bytes);
  ASSERT_NE(dev.ptr, nullptr);
  const Stream s = rt->create_stream(0);
  rt->reset_counters(0);
  rt->memcpy_async(dev.ptr, host_in.ptr, bytes, CopyKind::HostToDevice, s);
  rt->memcpy_async(host_out.ptr, dev.ptr, bytes, CopyKind::DeviceToHost, s);
  EXPECT_EQ(rt->counters(0).synchronizations, 0u) << "copies into pinned memory must not wait";
  rt->stream_synchronize(s);
  EXPECT_TRUE(rt->stream_query(s));
  EXPECT_EQ(std::memcmp(host_out.ptr, host_in.ptr, bytes), 0);
  const tiny::gpu::Counters c = rt->counters(0);
  EXPECT_EQ(c.bytes_host_to_device_pinned, bytes);
  EXPECT_EQ(c.bytes_device_to_host_pinned, bytes);
  EXPECT_EQ(c.bytes_host_to_device_pageable, 0u);
  EXPECT_EQ(c.synchronizations, 1u);
  rt->destroy_stream(s);
}

TEST(CudaRuntime, MemsetAndDeviceToDeviceCopy) {
  GPU_RUNTIME(rt);
  const size_t bytes = 1 << 16;
  DeviceBuffer a(rt, 0, bytes), b(rt, 0, bytes);
  const Stream s = rt->default_stream(0);
  rt->reset_counters(0);
  rt->memset_async(a.ptr, 0xAB, bytes, s);
  rt->memcpy_async(b.ptr, a.ptr, bytes, CopyKind::DeviceToDevice, s);
  std::vector<unsigned char> back(bytes);
  rt->memcpy_async(back.data(), b.ptr, bytes, CopyKind::DeviceToHost, s);
  for (size_t i = 0; i < bytes; ++i) ASSERT_EQ(back[i], 0xAB) << "byte " << i;
  EXPECT_EQ(rt->counters(0).bytes_device_to_device, bytes);
}

TEST(CudaRuntime, DefaultStreamIsNotTheLegacyStream) {
  GPU_RUNTIME(rt);
  auto* cuda = static_cast<tiny::gpu::CudaRuntime*>(rt);
  cudaStream_t s = cuda->native_stream(rt->default_stream(0));
  ASSERT_NE(s, nullptr) << "stream 0 must be a stream tiny created, not CUDA's legacy default stream";
  unsigned int flags = 0;
  ASSERT_EQ(cudaStreamGetFlags(s, &flags), cudaSuccess);
  EXPECT_EQ(flags & cudaStreamNonBlocking, cudaStreamNonBlocking);
  EXPECT_EQ(cuda->native_stream(rt->default_stream(0)), s) << "one default stream per device";
  const Stream other = rt->create_stream(0);
  EXPECT_NE(other, rt->default_stream(0));
  EXPECT_NE(cuda->native_stream(other), s);
  rt->destroy_stream(other);
  EXPECT_THROW(cuda->native_stream(other), tiny::ValueError) << "a destroyed stream is unknown";
  EXPECT_THROW(rt->destroy_stream(rt->default_stream(0)), tiny::ValueError);
}

TEST(CudaRuntime, StreamWaitEventOrdersTwoStreams) {
  GPU_RUNTIME(rt);
  // s1 fills `a` (slowly: many large memsets), records an event; s2 waits for
  // the event and copies a -> b. Without the wait s2 could copy stale bytes.
  const size_t bytes = size_t{64} << 20;
  DeviceBuffer a(rt, 0, bytes), b(rt, 0, bytes);
  ASSERT_NE(a.ptr, nullptr);
  ASSERT_NE(b.ptr, nullptr);
  const Stream s1 = rt->create_stream(0), s2 = rt->create_stream(0);
  rt->memset_async(a.ptr, 0, bytes, rt->default_stream(0));
  rt->memset_async(b.ptr, 0, bytes, rt->default_stream(0));
  rt->device_synchronize(0);

  const Event done = rt->create_event(0, /*enable_timing=*/false);
  for (int i = 0; i < 20; ++i) rt->memset_async(a.ptr, i, bytes, s1);
  rt->memset_async(a.ptr, 0x5A, bytes, s1);
  rt->record_event(done, s1);
  rt->stream_wait_event(s2, done);
  rt->memcpy_async(b.ptr, a.ptr, bytes, CopyKind::DeviceToDevice, s2);
  rt->stream_synchronize(s2);
  EXPECT_TRUE(rt->event_query(done)) << "s2 finished after waiting for the event, so the event completed";

  std::vector<unsigned char> back(bytes);
  rt->memcpy_async(back.data(), b.ptr, bytes, CopyKind::DeviceToHost, s2);
  size_t wrong = 0;
  for (unsigned char v : back) wrong += v != 0x5A;
  EXPECT_EQ(wrong, 0u) << "s2 copied before s1's work reached the event";

  rt->event_synchronize(done);
  rt->destroy_event(done);
  rt->destroy_stream(s1);
  rt->destroy_stream(s2);
}

TEST(CudaRuntime, ElapsedTimeBetweenTimingEvents) {
  GPU_RUNTIME(rt);
  const size_t bytes = size_t{64} << 20;
  DeviceBuffer a(rt, 0, bytes);
  const Stream s = rt->create_stream(0);
  const Event start = rt->create_event(0, true), end = rt->create_event(0, true);
  rt->record_event(start, s);
  for (int i = 0; i < 10; ++i) rt->memset_async(a.ptr, i, bytes, s);
  rt->record_event(end, s);
  rt->event_synchronize(end);
  const float ms = rt->event_elapsed_ms(start, end);
  EXPECT_GT(ms, 0.0f);
  EXPECT_LT(ms, 10000.0f);

  const Event plain = rt->create_event(0, false);
  rt->record_event(plain, s);
  rt->stream_synchronize(s);
  EXPECT_THROW(rt->event_elapsed_ms(start, plain), tiny::ValueError)
      << "an event created without timing cannot be timed";
  for (Event e : {start, end, plain}) rt->destroy_event(e);
  rt->destroy_stream(s);
}

TEST(CudaRuntime, OutOfMemoryReturnsNullptrAndLeavesNoError) {
  GPU_RUNTIME(rt);
  rt->reset_counters(0);
  EXPECT_EQ(rt->raw_malloc(0, size_t{1} << 60), nullptr) << "an absurd size is out of memory, not an exception";
  EXPECT_EQ(cudaGetLastError(), cudaSuccess) << "the allocation failure must be cleared";
  void* p = rt->raw_malloc(0, 1024);
  EXPECT_NE(p, nullptr) << "the next allocation works";
  rt->raw_free(0, p);
  EXPECT_EQ(rt->counters(0).device_mallocs, 1u) << "a failed cudaMalloc is not counted";
}

TEST(CudaRuntime, CudaErrorsBecomeTinyErrorsWithCallAndDevice) {
  GPU_RUNTIME(rt);
  int on_stack = 0;
  try {
    rt->raw_free(0, &on_stack);  // not device memory
    FAIL() << "cudaFree of a host pointer did not throw";
  } catch (const tiny::Error& e) {
    const std::string msg = e.what();
    EXPECT_EQ(msg.rfind("CUDA error: ", 0), 0u) << msg;
    EXPECT_NE(msg.find("(cudaFree on cuda:0)"), std::string::npos) << msg;
  }
  EXPECT_EQ(cudaGetLastError(), cudaSuccess) << "the error was cleared when it was raised";
  EXPECT_THROW(rt->raw_malloc(rt->device_count(), 16), tiny::DeviceError);
  EXPECT_THROW(rt->pinned_free(&on_stack), tiny::ValueError);
  EXPECT_THROW(rt->record_event(Event{123456789}, rt->default_stream(0)), tiny::ValueError);
}

TEST(CudaRuntime, DeviceErrorRecordIsRaisedAtSynchronizeUntilCleared) {
  GPU_RUNTIME(rt);
  auto* cuda = static_cast<tiny::gpu::CudaRuntime*>(rt);
  const tiny::gpu::DeviceErrorTarget target = cuda->device_error_target(0);
  ASSERT_NE(target.record, nullptr);
  ASSERT_NE(target.lock, nullptr);
  EXPECT_EQ(cuda->device_error_target(0).record, target.record) << "one record per device";
  EXPECT_EQ(cuda->pending_error(0), "");
  // What a kernel does on a bad index (take the lock, fill the record, set
  // the flag), done here with copies queued on the stream.
  const tiny::gpu::DeviceErrorRecord seen{1, static_cast<int32_t>(tiny::gpu::DeviceErrorOp::Embedding), 7, 2, 5, 0};
  const int32_t locked = 1;
  const Stream s = rt->default_stream(0);
  ASSERT_EQ(cudaMemcpyAsync(target.lock, &locked, sizeof(locked), cudaMemcpyHostToDevice, cuda->native_stream(s)),
            cudaSuccess);
  ASSERT_EQ(cudaMemcpyAsync(target.record, &seen, sizeof(seen), cudaMemcpyDefault, cuda->native_stream(s)),
            cudaSuccess);
  try {
    rt->stream_synchronize(s);
    FAIL() << "stream_synchronize did not raise the recorded error";
  } catch (const tiny::Error& e) {
    EXPECT_EQ(std::string(e.what()),
                 "CUDA error: device-side assert triggered on cuda:0 in embedding: embedding: index 7 (at position 2 "
                 "of the flattened indices) is out of range for an embedding with num_embeddings=5 (valid indices "
                 "are 0..4). Kernel errors are reported at the next synchronizing call; rerun with "
                 "TINY_LAUNCH_BLOCKING=1 to see the op that failed. " + std::string(tiny::gpu::kStickyErrorAdvice));
  }
  EXPECT_THROW(rt->device_synchronize(0), tiny::Error) << "sticky";
  std::vector<float> host(4);
  DeviceBuffer dev(rt, 0, sizeof(float) * 4);
  EXPECT_THROW(rt->memcpy_async(host.data(), dev.ptr, sizeof(float) * 4, CopyKind::DeviceToHost, s), tiny::Error)
      << "a copy into pageable memory synchronizes, so it raises too";
  cuda->clear_error(0);
  EXPECT_EQ(cuda->pending_error(0), "");
  EXPECT_NO_THROW(rt->device_synchronize(0));
}

}  // namespace
