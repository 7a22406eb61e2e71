// Tests of the host-emulated GPU (DESIGN.md section 4): devices and settings,
// separate memory that faults when host code reads it, capacity, copies with
// CUDA's pageable / pinned rules, asynchrony shown with gates (no clocks),
// independent streams, events, the three execution modes, sticky errors,
// counters, and each device's own share of the threads.
#include <gtest/gtest.h>
#include <pthread.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <mutex>
#include <set>
#include <numeric>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "emulated_mode.h"
#include "gpu/emulated/emulated_runtime.h"
#include "rendezvous.h"
#include "runtime/thread_pool.h"
#include "tiny/distributed/store.h"
#include "tiny/error.h"
#include "tiny/tiny.h"

namespace gpu = tiny::gpu;
using Mode = gpu::EmulatedRuntime::Mode;

namespace {

gpu::EmulatedRuntime& runtime() { return tiny_test::emulated_runtime_or_throw(); }
using tiny_test::ModeGuard;
using tiny_test::ThreadedMode;

// Device memory freed at the end of the scope.
class DeviceBuffer {
 public:
  DeviceBuffer(int device, size_t nbytes) : device_(device), ptr_(runtime().raw_malloc(device, nbytes)) {
    if (ptr_ == nullptr) throw std::runtime_error("raw_malloc failed");
  }
  ~DeviceBuffer() { runtime().raw_free(device_, ptr_); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  void* get() const { return ptr_; }
  float* floats() const { return static_cast<float*>(ptr_); }

 private:
  int device_;
  void* ptr_;
};

// Pinned host memory freed at the end of the scope.
class PinnedBuffer {
 public:
  explicit PinnedBuffer(size_t nbytes) : ptr_(runtime().pinned_malloc(nbytes)) {}
  ~PinnedBuffer() { runtime().pinned_free(ptr_); }
  PinnedBuffer(const PinnedBuffer&) = delete;
  PinnedBuffer& operator=(const PinnedBuffer&) = delete;
  float* floats() const { return static_cast<float*>(ptr_); }

 private:
  void* ptr_;
};

// A stream created for one test and destroyed after it.
class ScopedStream {
 public:
  explicit ScopedStream(int device) : stream_(runtime().create_stream(device)) {}
  ~ScopedStream() { runtime().destroy_stream(stream_); }
  ScopedStream(const ScopedStream&) = delete;
  ScopedStream& operator=(const ScopedStream&) = delete;
  operator gpu::Stream() const { return stream_; }

 private:
  gpu::Stream stream_;
};

// Queues a kernel that holds the stream's worker until the gate opens.
std::shared_ptr<gpu::Gate> launch_gate(gpu::Stream stream) {
  auto gate = std::make_shared<gpu::Gate>();
  runtime().launch(stream, [gate] { gate->wait(); }, "gate");
  return gate;
}

std::vector<float> iota_floats(size_t n, float start) {
  std::vector<float> v(n);
  std::iota(v.begin(), v.end(), start);
  return v;
}

// Mappings of the emulated devices' memory in /proc/self/maps.
int count_device_mappings() {
  std::ifstream maps("/proc/self/maps");
  std::string line;
  int count = 0;
  while (std::getline(maps, line)) count += line.find("tiny-emulated-gpu") != std::string::npos;
  return count;
}

}  // namespace

// ---------------------------------------------------------------- settings

// The environment is read once per process: these run in a fresh process each.
TEST(EmulatedRuntime, DefaultIsTwoDevices) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        unsetenv("TINY_EMULATED_GPUS");
        gpu::EmulatedRuntime* rt = gpu::emulated_runtime();
        std::exit(rt != nullptr && rt->device_count() == 2 && std::string(rt->kind()) == "emulated" ? 0 : 1);
      },
      testing::ExitedWithCode(0), "");
}

// A program that returns from main with GPU work still queued (no synchronize,
// as most scripts end) must exit cleanly: exit unloads OpenBLAS and runs the
// static destructors while a detached worker may still be inside a GEMM, which
// crashed about one exit in two. The runtime lets the running kernel finish and
// starts no other before exit goes on. Ten exits, each with a queue of GEMMs (without
// that, at least one of the ten crashed in about three runs in four).
TEST(EmulatedRuntime, ExitWithWorkStillQueuedIsClean) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  for (int run = 0; run < 10; ++run) {
    EXPECT_EXIT(
        {
          setenv("TINY_EMULATED_GPUS", "1", 1);
          const tiny::Tensor a = tiny::randn({1024, 1024}).to(tiny::Device("cuda:0"));
          std::vector<tiny::Tensor> queued;
          for (int k = 0; k < 16; ++k) queued.push_back(tiny::matmul(a, a));
          std::exit(0);  // with the GEMMs still running and queued
        },
        testing::ExitedWithCode(0), "")
        << "exit " << run + 1 << " of 10";
  }
}

TEST(EmulatedRuntime, EnvironmentSetsDevicesAndMemory) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        setenv("TINY_EMULATED_GPUS", "3", 1);
        setenv("TINY_EMULATED_GPU_MEMORY", "64MiB", 1);
        gpu::EmulatedRuntime* rt = gpu::emulated_runtime();
        const bool ok = rt != nullptr && rt->device_count() == 3 && rt->properties(2).total_memory == (64u << 20) &&
                        rt->free_memory(2) == (64u << 20);
        std::exit(ok ? 0 : 1);
      },
      testing::ExitedWithCode(0), "");
}

TEST(EmulatedRuntime, ZeroDevicesTurnsEmulationOff) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        setenv("TINY_EMULATED_GPUS", "0", 1);
        std::exit(gpu::emulated_runtime() == nullptr && gpu::emulated_runtime() == nullptr ? 0 : 1);
      },
      testing::ExitedWithCode(0), "");
}

TEST(EmulatedRuntime, BadSettingsThrowValueError) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  for (const char* bad : {"abc", "-1", "65", "2x"}) {
    EXPECT_EXIT(
        {
          setenv("TINY_EMULATED_GPUS", bad, 1);
          for (int attempt = 0; attempt < 2; ++attempt) {  // every call, not only the first
            try {
              gpu::emulated_runtime();
              std::exit(1);
            } catch (const tiny::ValueError& e) {
              std::fprintf(stderr, "%s\n", e.what());
            }
          }
          std::exit(0);
        },
        testing::ExitedWithCode(0), std::string("TINY_EMULATED_GPUS=\"") + bad + "\".*0 to 64");
  }
  EXPECT_EXIT(
      {
        setenv("TINY_EMULATED_GPU_MEMORY", "lots", 1);
        try {
          gpu::emulated_runtime();
          std::exit(1);
        } catch (const tiny::ValueError& e) {
          std::fprintf(stderr, "%s\n", e.what());
          std::exit(0);
        }
      },
      testing::ExitedWithCode(0), "TINY_EMULATED_GPU_MEMORY=\"lots\"");
  EXPECT_EXIT(
      {
        setenv("TINY_LAUNCH_BLOCKING", "yes", 1);
        try {
          gpu::emulated_runtime();
          std::exit(1);
        } catch (const tiny::ValueError& e) {
          std::fprintf(stderr, "%s\n", e.what());
          std::exit(0);
        }
      },
      testing::ExitedWithCode(0), "TINY_LAUNCH_BLOCKING=\"yes\"");
}

TEST(EmulatedRuntime, LaunchBlockingEnvironmentSelectsBlockingMode) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        setenv("TINY_LAUNCH_BLOCKING", "1", 1);
        std::exit(gpu::emulated_runtime()->mode() == Mode::blocking ? 0 : 1);
      },
      testing::ExitedWithCode(0), "");
}

TEST(EmulatedRuntime, Properties) {
  gpu::EmulatedRuntime& rt = runtime();
  ASSERT_GE(rt.device_count(), 1);
  for (int d = 0; d < rt.device_count(); ++d) {
    const gpu::DeviceProperties p = rt.properties(d);
    EXPECT_EQ(p.name, "tiny emulated GPU " + std::to_string(d) + " (EMULATED on your CPU)");
    EXPECT_TRUE(p.emulated);
    EXPECT_EQ(p.major, 8);
    EXPECT_EQ(p.minor, 0);
    EXPECT_GT(p.total_memory, 0u);
    EXPECT_LE(p.total_memory, size_t{4} << 30);
    EXPECT_EQ(p.multiprocessor_count, std::max(1, tiny::runtime::num_threads() / rt.device_count()));
  }
  try {
    rt.properties(rt.device_count());
    FAIL() << "expected tiny::DeviceError";
  } catch (const tiny::DeviceError& e) {
    EXPECT_NE(std::string(e.what()).find("valid indices are 0 to"), std::string::npos) << e.what();
  }
  EXPECT_THROW(rt.properties(-1), tiny::DeviceError);
}

// ---------------------------------------------------------------- memory

TEST(EmulatedRuntime, RawMallocStopsAtTheCapacity) {
  gpu::EmulatedRuntime& rt = runtime();
  const int d = rt.device_count() - 1;
  const size_t capacity = rt.properties(d).total_memory;
  EXPECT_EQ(rt.raw_malloc(d, capacity + 1), nullptr);  // never the OOM killer: a polite nullptr
  EXPECT_EQ(rt.raw_malloc(d, 0), nullptr);
  rt.raw_free(d, nullptr);  // a no-op

  // Take everything that is left: nothing more fits, not even 1 byte.
  const size_t available = rt.free_memory(d);
  ASSERT_GT(available, size_t{4} << 20);
  void* all = rt.raw_malloc(d, available);
  ASSERT_NE(all, nullptr);
  EXPECT_EQ(rt.free_memory(d), 0u);
  EXPECT_EQ(rt.raw_malloc(d, 1), nullptr);
  rt.raw_free(d, all);
  EXPECT_EQ(rt.free_memory(d), available);

  // Usable again after free; sizes are rounded up to 512 bytes.
  void* a = rt.raw_malloc(d, 1000);
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(a) % 512, 0u);
  EXPECT_EQ(rt.free_memory(d), available - 1024);
  void* b = rt.raw_malloc(d, available - 1024);
  ASSERT_NE(b, nullptr);
  rt.raw_free(d, a);
  rt.raw_free(d, b);
  EXPECT_EQ(rt.free_memory(d), available);

  EXPECT_THROW(rt.raw_free(d, a), tiny::Error);  // double free
  int host = 0;
  EXPECT_THROW(rt.raw_free(d, &host), tiny::Error);
}

TEST(EmulatedRuntime, ManySmallAllocationsReuseTheSameAddressSpace) {
  gpu::EmulatedRuntime& rt = runtime();
  const int mappings = count_device_mappings();
  EXPECT_EQ(mappings, 2 * rt.device_count());  // two views per device, nothing else
  const size_t available = rt.free_memory(0);
  std::vector<void*> held;
  for (int i = 0; i < 20000; ++i) {
    void* p = rt.raw_malloc(0, 512 + (i % 7) * 1000);
    ASSERT_NE(p, nullptr);
    held.push_back(p);
    if (held.size() == 64) {  // free in a scrambled order, so neighbours merge every which way
      for (size_t j = 0; j < held.size(); ++j) rt.raw_free(0, held[(j * 37) % held.size()]);
      held.clear();
    }
  }
  for (void* p : held) rt.raw_free(0, p);
  EXPECT_EQ(rt.free_memory(0), available);
  EXPECT_EQ(count_device_mappings(), mappings);
  // Every byte merged back: the whole remaining capacity is one allocation again.
  void* all = rt.raw_malloc(0, available);
  EXPECT_NE(all, nullptr);
  rt.raw_free(0, all);
}

TEST(EmulatedRuntime, HostCannotReadDeviceMemory) {
#if defined(__SANITIZE_THREAD__)
  GTEST_SKIP() << "ThreadSanitizer handles SIGSEGV itself; the ASan and plain builds test this";
#endif
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        void* p = runtime().raw_malloc(0, 4096);
        volatile const float* host_view = static_cast<const float*>(p);
        std::fprintf(stderr, "read %f\n", host_view[0]);  // a device pointer is not host memory
        std::exit(0);
      },
#if defined(__SANITIZE_ADDRESS__)
      // AddressSanitizer catches the SIGSEGV itself, reports it and exits 1 (or aborts, with abort_on_error=1).
      [](int status) {
        return (WIFEXITED(status) && WEXITSTATUS(status) == 1) || (WIFSIGNALED(status) && WTERMSIG(status) == SIGABRT);
      },
      "SEGV on unknown address");
#else
      testing::KilledBySignal(SIGSEGV), "");
#endif
}

TEST(EmulatedRuntime, WorkerAddressRoundTrip) {
  gpu::EmulatedRuntime& rt = runtime();
  DeviceBuffer buffer(1, 4096);
  const void* p = buffer.get();
  EXPECT_TRUE(rt.is_device_pointer(p));
  EXPECT_EQ(rt.device_of(p), 1);
  EXPECT_EQ(rt.device_of(static_cast<const char*>(p) + 4095), 1);
  void* worker = rt.worker_address(p);
  EXPECT_NE(worker, p);
  EXPECT_FALSE(rt.is_device_pointer(worker));  // the worker view is not a device pointer
  int host = 0;
  EXPECT_FALSE(rt.is_device_pointer(&host));
  EXPECT_EQ(rt.device_of(&host), -1);
  EXPECT_THROW(rt.worker_address(&host), tiny::Error);

  // A kernel writes through the worker view; the bytes come back through a copy.
  const gpu::Stream s = rt.default_stream(1);
  rt.launch(
      s,
      [&rt, p] {
        EXPECT_EQ(gpu::EmulatedRuntime::current_worker_device(), 1);
        float* out = static_cast<float*>(rt.worker_address(p));
        for (int i = 0; i < 1024; ++i) out[i] = i * 0.5f;
      },
      "fill");
  std::vector<float> back(1024);
  rt.memcpy_async(back.data(), p, 4096, gpu::CopyKind::DeviceToHost, s);  // pageable: waits
  for (int i = 0; i < 1024; ++i) ASSERT_EQ(back[i], i * 0.5f);
  EXPECT_EQ(gpu::EmulatedRuntime::current_worker_device(), -1);
}

TEST(EmulatedRuntime, CopiesKeepTheData) {
  gpu::EmulatedRuntime& rt = runtime();
  const size_t n = 100000;
  const std::vector<float> input = iota_floats(n, -7.0f);
  DeviceBuffer a(0, n * sizeof(float)), b(0, n * sizeof(float)), c(1, n * sizeof(float));
  const gpu::Stream s0 = rt.default_stream(0);
  rt.memcpy_async(a.get(), input.data(), n * sizeof(float), gpu::CopyKind::HostToDevice, s0);
  rt.memcpy_async(b.get(), a.get(), n * sizeof(float), gpu::CopyKind::DeviceToDevice, s0);
  rt.memcpy_async(c.get(), b.get(), n * sizeof(float), gpu::CopyKind::DeviceToDevice, s0);  // across devices
  rt.memset_async(a.get(), 0, n * sizeof(float), s0);
  std::vector<float> back_c(n, 1.0f), back_a(n, 1.0f);
  rt.memcpy_async(back_c.data(), c.get(), n * sizeof(float), gpu::CopyKind::DeviceToHost, s0);
  rt.memcpy_async(back_a.data(), a.get(), n * sizeof(float), gpu::CopyKind::DeviceToHost, s0);
  EXPECT_EQ(back_c, input);
  EXPECT_EQ(back_a, std::vector<float>(n, 0.0f));

  // A copy past the end of an allocation (its size rounded up to 512 bytes) is
  // refused before it is queued.
  EXPECT_THROW(rt.memcpy_async(back_a.data(), a.floats() + 1024, n * sizeof(float), gpu::CopyKind::DeviceToHost, s0),
               tiny::Error);
  // A host pointer where a device pointer belongs.
  EXPECT_THROW(rt.memcpy_async(back_a.data(), input.data(), 4, gpu::CopyKind::HostToDevice, s0), tiny::Error);
}

TEST(EmulatedRuntime, PinnedMemoryIsTracked) {
  gpu::EmulatedRuntime& rt = runtime();
  void* p = rt.pinned_malloc(1000);
  ASSERT_NE(p, nullptr);
  EXPECT_TRUE(rt.is_pinned(p));
  EXPECT_TRUE(rt.is_pinned(static_cast<char*>(p) + 999));
  EXPECT_FALSE(rt.is_pinned(static_cast<char*>(p) + 1000));
  std::vector<char> pageable(10);
  EXPECT_FALSE(rt.is_pinned(pageable.data()));
  rt.pinned_free(p);
  EXPECT_FALSE(rt.is_pinned(p));
  EXPECT_THROW(rt.pinned_free(pageable.data()), tiny::Error);
}

// ---------------------------------------------------------------- asynchrony

TEST(EmulatedRuntime, WorkRunsAfterLaunchReturns) {
  ThreadedMode threaded;  // observes asynchrony
  gpu::EmulatedRuntime& rt = runtime();
  ScopedStream s(0);
  const size_t n = 256;
  DeviceBuffer device(0, n * sizeof(float));
  const std::vector<float> input = iota_floats(n, 1.0f);
  rt.memcpy_async(device.get(), input.data(), n * sizeof(float), gpu::CopyKind::HostToDevice, s);

  auto gate = launch_gate(s);  // returns at once: the kernel has not run
  const gpu::Event done = rt.create_event(0, false);
  rt.record_event(done, s);
  PinnedBuffer out(n * sizeof(float));
  std::fill(out.floats(), out.floats() + n, -1.0f);
  rt.memcpy_async(out.floats(), device.get(), n * sizeof(float), gpu::CopyKind::DeviceToHost, s);  // non_blocking

  EXPECT_FALSE(rt.event_query(done));
  EXPECT_FALSE(rt.stream_query(s));
  // Reading a pinned destination before synchronizing shows stale data (on
  // real hardware: a race; here the gate makes it repeatable).
  EXPECT_EQ(out.floats()[0], -1.0f);
  EXPECT_EQ(out.floats()[n - 1], -1.0f);

  gate->open();
  rt.stream_synchronize(s);
  EXPECT_TRUE(rt.event_query(done));
  EXPECT_TRUE(rt.stream_query(s));
  EXPECT_EQ(std::vector<float>(out.floats(), out.floats() + n), input);
  rt.destroy_event(done);
  EXPECT_THROW(rt.event_query(done), tiny::Error);
}

TEST(EmulatedRuntime, PageableSourceIsCapturedPinnedSourceIsNot) {
  ThreadedMode threaded;  // observes asynchrony
  gpu::EmulatedRuntime& rt = runtime();
  ScopedStream s(0);
  DeviceBuffer a(0, sizeof(float)), b(0, sizeof(float));
  std::vector<float> pageable{1.0f};
  PinnedBuffer pinned(sizeof(float));
  pinned.floats()[0] = 1.0f;

  auto gate = launch_gate(s);  // neither copy can run before the writes below
  rt.memcpy_async(a.get(), pageable.data(), sizeof(float), gpu::CopyKind::HostToDevice, s);
  rt.memcpy_async(b.get(), pinned.floats(), sizeof(float), gpu::CopyKind::HostToDevice, s);
  pageable[0] = 2.0f;         // fine: CUDA staged the pageable source before returning
  pinned.floats()[0] = 2.0f;  // a bug: the copy reads the pinned source when it runs
  gate->open();

  float from_pageable = 0, from_pinned = 0;
  rt.memcpy_async(&from_pageable, a.get(), sizeof(float), gpu::CopyKind::DeviceToHost, s);
  rt.memcpy_async(&from_pinned, b.get(), sizeof(float), gpu::CopyKind::DeviceToHost, s);
  EXPECT_EQ(from_pageable, 1.0f);
  EXPECT_EQ(from_pinned, 2.0f);
}

TEST(EmulatedRuntime, StreamsAreIndependent) {
  ThreadedMode threaded;  // observes asynchrony
  gpu::EmulatedRuntime& rt = runtime();
  ScopedStream blocked(0), free_stream(0);
  auto gate = launch_gate(blocked);
  std::atomic<bool> ran{false};
  rt.launch(free_stream, [&] { ran = true; }, "set_flag");
  rt.stream_synchronize(free_stream);  // returns although `blocked` is stuck
  EXPECT_TRUE(ran.load());
  EXPECT_FALSE(rt.stream_query(blocked));
  // The default stream is an ordinary stream: it is not held up either.
  std::atomic<bool> ran_default{false};
  rt.launch(rt.default_stream(0), [&] { ran_default = true; }, "set_flag");
  rt.stream_synchronize(rt.default_stream(0));
  EXPECT_TRUE(ran_default.load());
  gate->open();
  rt.stream_synchronize(blocked);
  EXPECT_TRUE(rt.stream_query(blocked));
}

TEST(EmulatedRuntime, StreamWaitEventOrdersStreams) {
  ThreadedMode threaded;  // observes asynchrony
  gpu::EmulatedRuntime& rt = runtime();
  ScopedStream producer(0), consumer(0);
  std::atomic<int> value{0};
  int seen = -1;
  auto gate = launch_gate(producer);
  rt.launch(producer, [&] { value = 42; }, "produce");
  const gpu::Event produced = rt.create_event(0, false);
  rt.record_event(produced, producer);
  rt.stream_wait_event(consumer, produced);
  rt.launch(consumer, [&] { seen = value.load(); }, "consume");

  EXPECT_FALSE(rt.stream_query(consumer));  // waits for the producer's event
  gate->open();
  rt.stream_synchronize(consumer);
  EXPECT_EQ(seen, 42);
  EXPECT_TRUE(rt.event_query(produced));

  // Waiting for an event that was never recorded waits for nothing (as CUDA).
  const gpu::Event never = rt.create_event(0, false);
  EXPECT_TRUE(rt.event_query(never));
  rt.stream_wait_event(consumer, never);
  rt.stream_synchronize(consumer);
  rt.destroy_event(never);
  rt.destroy_event(produced);
}

TEST(EmulatedRuntime, DestroyedStreamStillRunsItsWork) {
  ThreadedMode threaded;  // observes asynchrony
  gpu::EmulatedRuntime& rt = runtime();
  const gpu::Stream s = rt.create_stream(1);
  auto gate = launch_gate(s);
  std::atomic<bool> ran{false};
  rt.launch(s, [&] { ran = true; }, "set_flag");
  rt.destroy_stream(s);  // returns at once, as cudaStreamDestroy
  EXPECT_THROW(rt.stream_query(s), tiny::Error);
  EXPECT_THROW(rt.destroy_stream(rt.default_stream(1)), tiny::Error);
  gate->open();
  rt.device_synchronize(1);  // waits for the destroyed stream's work too
  EXPECT_TRUE(ran.load());
}

// ---------------------------------------------------------------- modes

TEST(EmulatedRuntime, BlockingModeRunsWorkBeforeReturning) {
  gpu::EmulatedRuntime& rt = runtime();
  ModeGuard mode(Mode::blocking);
  ScopedStream s(0);
  bool ran = false;  // no atomics needed: the launch waits for the kernel
  rt.launch(s, [&] { ran = true; }, "set_flag");
  EXPECT_TRUE(ran);
  // The work has run, but the modelled clock has not reached its end: blocking
  // mode models the program, not CUDA_LAUNCH_BLOCKING. Each query costs the
  // host a little modelled time, so polling gets there.
  EXPECT_FALSE(rt.stream_query(s));
  int polls = 1;
  while (!rt.stream_query(s) && polls < 1000) ++polls;
  EXPECT_LT(polls, 1000);

  DeviceBuffer device(0, sizeof(float));
  PinnedBuffer pinned(sizeof(float));
  const float one = 1.0f;
  pinned.floats()[0] = 0.0f;
  rt.memcpy_async(device.get(), &one, sizeof(float), gpu::CopyKind::HostToDevice, s);
  rt.memcpy_async(pinned.floats(), device.get(), sizeof(float), gpu::CopyKind::DeviceToHost, s);
  EXPECT_EQ(pinned.floats()[0], 1.0f);  // even a non_blocking copy has run

  // The launch that fails raises its error itself.
  try {
    rt.launch(s, [&] { rt.record_error(0, "index_select", "index 7 is out of bounds for size 5"); }, "index_select");
    FAIL() << "expected the launch to raise the kernel's error";
  } catch (const tiny::Error& e) {
    EXPECT_NE(std::string(e.what()).find("index_select: index 7 is out of bounds"), std::string::npos) << e.what();
  }
  rt.clear_error(0);
}

TEST(EmulatedRuntime, DeferredModeRunsNothingUntilASynchronization) {
  gpu::EmulatedRuntime& rt = runtime();
  ModeGuard mode(Mode::deferred);
  ScopedStream s(0);
  std::atomic<int> runs{0};
  rt.launch(s, [&] { ++runs; }, "count");
  const gpu::Event e = rt.create_event(0, false);
  rt.record_event(e, s);
  std::this_thread::sleep_for(std::chrono::milliseconds(20));  // time alone changes nothing
  EXPECT_EQ(runs.load(), 0);
  EXPECT_FALSE(rt.stream_query(s));  // queries do not run work
  EXPECT_FALSE(rt.event_query(e));
  EXPECT_EQ(runs.load(), 0);

  rt.event_synchronize(e);
  EXPECT_EQ(runs.load(), 1);
  EXPECT_TRUE(rt.event_query(e));

  // A copy to pageable memory is a synchronization point: the forgotten
  // synchronize before reading a pinned destination is not.
  DeviceBuffer device(0, sizeof(float));
  PinnedBuffer pinned(sizeof(float));
  const float three = 3.0f;
  pinned.floats()[0] = 0.0f;
  rt.memcpy_async(device.get(), &three, sizeof(float), gpu::CopyKind::HostToDevice, s);
  rt.memcpy_async(pinned.floats(), device.get(), sizeof(float), gpu::CopyKind::DeviceToHost, s);
  EXPECT_EQ(pinned.floats()[0], 0.0f);  // the same stale value every run
  float pageable = 0.0f;
  rt.memcpy_async(&pageable, device.get(), sizeof(float), gpu::CopyKind::DeviceToHost, s);
  EXPECT_EQ(pageable, 3.0f);
  EXPECT_EQ(pinned.floats()[0], 3.0f);
  rt.destroy_event(e);
}

TEST(EmulatedRuntime, LeavingDeferredModeReleasesHeldWork) {
  gpu::EmulatedRuntime& rt = runtime();
  ScopedStream s(1);
  std::atomic<bool> ran{false};
  {
    ModeGuard mode(Mode::deferred);
    rt.launch(s, [&] { ran = true; }, "set_flag");
    EXPECT_FALSE(rt.stream_query(s));
  }
  rt.stream_synchronize(s);
  EXPECT_TRUE(ran.load());
}

// ---------------------------------------------------------------- errors

TEST(EmulatedRuntime, KernelErrorsAreStickyUntilCleared) {
  ThreadedMode threaded;  // observes asynchrony
  gpu::EmulatedRuntime& rt = runtime();
  ScopedStream s(0);
  rt.launch(s, [&] { rt.record_error(0, "index_select", "index 7 is out of bounds for dimension 0 with size 5"); },
            "index_select");
  rt.launch(s, [&] { rt.record_error(0, "gather", "a later error"); }, "gather");  // the first one is kept
  for (int attempt = 0; attempt < 2; ++attempt) {
    try {
      rt.stream_synchronize(s);
      FAIL() << "expected the sticky error";
    } catch (const tiny::Error& e) {
      const std::string message = e.what();
      EXPECT_NE(message.find("CUDA error: device-side assert triggered"), std::string::npos) << message;
      EXPECT_NE(message.find("in index_select: index 7 is out of bounds for dimension 0 with size 5"),
                std::string::npos)
          << message;
      EXPECT_NE(message.find("rerun with TINY_LAUNCH_BLOCKING=1"), std::string::npos) << message;
      // A learner whose later, unrelated calls fail must read why: the error sticks.
      EXPECT_NE(message.find("every later call on the device raises it again"), std::string::npos) << message;
    }
  }
  // Every synchronizing call on the device raises it...
  EXPECT_THROW(rt.device_synchronize(0), tiny::Error);
  DeviceBuffer device(0, sizeof(float));
  float host = 0;
  EXPECT_THROW(rt.memcpy_async(&host, device.get(), sizeof(float), gpu::CopyKind::DeviceToHost, s), tiny::Error);
  // ... but not those of another device.
  if (rt.device_count() > 1) rt.device_synchronize(1);
  EXPECT_FALSE(rt.pending_error(0).empty());
  rt.clear_error(0);
  rt.stream_synchronize(s);
  rt.device_synchronize(0);
}

// A collective that fails (a rank missing, or calling another collective) is
// the process group's error, as PyTorch's DistBackendError: not a fake CUDA
// device-side assert, and not advice to set TINY_LAUNCH_BLOCKING.
TEST(EmulatedRuntime, FailedCollectiveIsADistributedErrorNotADeviceSideAssert) {
  ThreadedMode threaded;
  gpu::EmulatedRuntime& rt = runtime();
  ScopedStream s(0);
  const char* why = "all_reduce failed on rank 0: rank 1 did not answer within the timeout of 1500 ms";
  rt.collective(s, rt.collective_ready(s), 1000, "ncclDevKernel_AllReduce_RING", 12,
                [why] { throw tiny::distributed::DistributedError(why); });
  try {
    rt.stream_synchronize(s);
    ADD_FAILURE() << "expected the collective's failure at the next synchronization";
  } catch (const tiny::distributed::DistributedError& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find(std::string("NCCL collective ncclDevKernel_AllReduce_RING failed on cuda:0 (emulated): ") +
                           why),
              std::string::npos)
        << message;
    EXPECT_EQ(message.find("device-side assert"), std::string::npos) << message;
    EXPECT_EQ(message.find("TINY_LAUNCH_BLOCKING"), std::string::npos) << message;
  } catch (const std::exception& e) {
    ADD_FAILURE() << "expected tiny::distributed::DistributedError, got: " << e.what();
  }
  rt.clear_error(0);
  rt.stream_synchronize(s);
}

TEST(EmulatedRuntime, ThrowingKernelBecomesTheStickyError) {
  ThreadedMode threaded;  // observes asynchrony
  gpu::EmulatedRuntime& rt = runtime();
  ScopedStream s(0);
  rt.launch(s, [] { throw tiny::IndexError("index 3 is out of bounds"); }, "embedding");
  std::atomic<bool> later_ran{false};
  rt.launch(s, [&] { later_ran = true; }, "later");  // the worker survived
  try {
    rt.stream_synchronize(s);
    FAIL() << "expected the kernel's exception as the sticky error";
  } catch (const tiny::Error& e) {
    EXPECT_NE(std::string(e.what()).find("in embedding: index 3 is out of bounds"), std::string::npos) << e.what();
  }
  EXPECT_TRUE(later_ran.load());
  rt.clear_error(0);
}

// ---------------------------------------------------------------- events and counters

// With TINY_EMULATED_GPU_CLOCK=host, events stamp this CPU's clock when their
// marker runs (exploring what the emulator's work costs here; never graded).
TEST(EmulatedRuntime, EventsMeasureHostTimeWhenAsked) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        setenv("TINY_EMULATED_GPU_CLOCK", "host", 1);
        gpu::EmulatedRuntime& rt = *gpu::emulated_runtime();
        const gpu::Stream s = rt.default_stream(0);
        const gpu::Event start = rt.create_event(0, true);
        const gpu::Event end = rt.create_event(0, true);
        rt.record_event(start, s);
        rt.launch(s, [] { std::this_thread::sleep_for(std::chrono::milliseconds(30)); }, "sleep");
        rt.record_event(end, s);
        rt.event_synchronize(end);
        std::exit(rt.event_elapsed_ms(start, end) >= 30.0f ? 0 : 1);
      },
      testing::ExitedWithCode(0), "");
  EXPECT_EXIT(
      {
        setenv("TINY_EMULATED_GPU_CLOCK", "wall", 1);
        try {
          gpu::emulated_runtime();
        } catch (const tiny::ValueError& e) {
          std::exit(std::string(e.what()).find("TINY_EMULATED_GPU_CLOCK=\"wall\"") != std::string::npos ? 0 : 2);
        }
        std::exit(1);
      },
      testing::ExitedWithCode(0), "");
}

// By default events time the modelled GPU: what the work between them would
// take there, whatever it took on this CPU.
TEST(EmulatedRuntime, EventsMeasureModelledTime) {
  ThreadedMode threaded;  // observes asynchrony
  gpu::EmulatedRuntime& rt = runtime();
  ScopedStream s(0);
  const gpu::Event start = rt.create_event(0, true), end = rt.create_event(0, true);
  const gpu::Event untimed = rt.create_event(0, false);
  const gpu::model::DeviceModel& m = rt.model();
  gpu::model::KernelCost gigabyte;
  gigabyte.bytes = int64_t{1} << 30;
  rt.record_event(start, s);
  rt.launch(s, [] { std::this_thread::sleep_for(std::chrono::milliseconds(30)); }, "sleep", gigabyte);
  rt.record_event(end, s);
  rt.record_event(untimed, s);
  rt.event_synchronize(end);
  const double expected_ms = gpu::model::kernel_ns(m, gigabyte) * 1e-6;
  EXPECT_GE(rt.event_elapsed_ms(start, end), expected_ms * 0.999) << "a 1 GiB pointwise kernel on " << m.display_name;
  EXPECT_LT(rt.event_elapsed_ms(start, end), expected_ms + 0.02) << "plus the host's launch cost at most";
  EXPECT_LT(rt.event_elapsed_ms(start, end), 30.0f) << "not the 30 ms the kernel slept on this CPU";
  EXPECT_THROW(rt.event_elapsed_ms(start, untimed), tiny::Error);

  auto gate = launch_gate(s);
  rt.record_event(end, s);  // recorded again: now pending
  try {
    rt.event_elapsed_ms(start, end);
    FAIL() << "expected 'device not ready'";
  } catch (const tiny::Error& e) {
    EXPECT_NE(std::string(e.what()).find("device not ready"), std::string::npos) << e.what();
  }
  gate->open();
  rt.event_synchronize(end);
  EXPECT_GE(rt.event_elapsed_ms(start, end), expected_ms * 0.999);
  for (gpu::Event e : {start, end, untimed}) rt.destroy_event(e);
}

TEST(EmulatedRuntime, CountersCountWhatCrossesTheBus) {
  gpu::EmulatedRuntime& rt = runtime();
  const int d = 1;
  ScopedStream s(d);
  DeviceBuffer a(d, 4096), b(d, 4096);
  PinnedBuffer pinned(4096);
  std::vector<char> pageable(4096);
  rt.reset_counters(d);

  rt.memcpy_async(a.get(), pageable.data(), 100, gpu::CopyKind::HostToDevice, s);
  rt.memcpy_async(a.get(), pinned.floats(), 200, gpu::CopyKind::HostToDevice, s);
  rt.memcpy_async(b.get(), a.get(), 50, gpu::CopyKind::DeviceToDevice, s);
  rt.launch(s, [] {}, "k1");
  rt.launch(s, [] {}, "k2");
  rt.memcpy_async(pinned.floats(), b.get(), 300, gpu::CopyKind::DeviceToHost, s);    // does not wait
  rt.memcpy_async(pageable.data(), b.get(), 400, gpu::CopyKind::DeviceToHost, s);  // waits: one sync
  rt.stream_synchronize(s);                                                        // two
  void* extra = rt.raw_malloc(d, 512);
  rt.raw_free(d, extra);

  const gpu::Counters c = rt.counters(d);
  EXPECT_EQ(c.bytes_host_to_device_pageable, 100u);
  EXPECT_EQ(c.bytes_host_to_device_pinned, 200u);
  EXPECT_EQ(c.bytes_device_to_device, 50u);
  EXPECT_EQ(c.bytes_device_to_host_pinned, 300u);
  EXPECT_EQ(c.bytes_device_to_host_pageable, 400u);
  EXPECT_EQ(c.kernel_launches, 2u);
  EXPECT_EQ(c.synchronizations, 2u);
  EXPECT_EQ(c.device_mallocs, 1u);
  EXPECT_EQ(c.raw_frees, 1u);

  rt.reset_counters(d);
  const gpu::Counters zero = rt.counters(d);
  EXPECT_EQ(zero.kernel_launches, 0u);
  EXPECT_EQ(zero.synchronizations, 0u);
  EXPECT_EQ(zero.bytes_host_to_device_pageable, 0u);
}

// ---------------------------------------------------------------- cores

namespace {

// Sets tiny's thread count for one test and puts the previous one back.
class ThreadCount {
 public:
  explicit ThreadCount(int n) : previous_(tiny::runtime::num_threads()) { tiny::runtime::set_num_threads(n); }
  ~ThreadCount() { tiny::runtime::set_num_threads(previous_); }

 private:
  int previous_;
};

}  // namespace

using tiny_test::SeenThreads;

TEST(EmulatedRuntime, EachDeviceOwnsAnEqualShareOfTheThreads) {
  gpu::EmulatedRuntime& rt = runtime();
  const int devices = rt.device_count();
  ThreadCount restore(tiny::runtime::num_threads());
  for (int n : {1, 2, 3, 4, 5, 8}) {
    tiny::runtime::set_num_threads(n);
    for (int d = 0; d < devices; ++d) {
      EXPECT_EQ(rt.thread_pool(d).size(), std::max(1, n / devices)) << "cuda:" << d << ", " << n << " threads";
      EXPECT_EQ(rt.properties(d).multiprocessor_count, rt.thread_pool(d).size());
    }
  }
  for (int d = 0; d < devices; ++d) {
    EXPECT_NE(&rt.thread_pool(d), &tiny::runtime::global_thread_pool());
    if (d > 0) {
      EXPECT_NE(&rt.thread_pool(d), &rt.thread_pool(d - 1));
    }
    // A kernel's parallel_for runs on its device's pool; the host keeps the global one.
    const tiny::runtime::ThreadPool* used = nullptr;
    ScopedStream side(d);
    for (gpu::Stream stream : {rt.default_stream(d), static_cast<gpu::Stream>(side)}) {
      rt.launch(stream, [&used] { used = &tiny::runtime::current_thread_pool(); }, "which_pool");
      rt.stream_synchronize(stream);
      EXPECT_EQ(used, &rt.thread_pool(d)) << "cuda:" << d << " stream " << stream.id;
    }
  }
  EXPECT_EQ(&tiny::runtime::current_thread_pool(), &tiny::runtime::global_thread_pool());
  EXPECT_THROW(rt.thread_pool(devices), tiny::DeviceError);
}

// Two devices running a parallel kernel at the same time each use their own
// threads: the 4 chunks below (2 per device) must all be running at once,
// which one shared pool (one call at a time, the other device inline) cannot
// do. Each device launches from its own host thread, so this holds in
// blocking mode too.
TEST(EmulatedRuntime, TwoDevicesRunParallelKernelsOnTheirOwnThreads) {
  gpu::EmulatedRuntime& rt = runtime();
  if (rt.device_count() < 2) GTEST_SKIP() << "needs 2 emulated GPUs";
  ThreadCount count(2 * rt.device_count());  // 2 threads per device
  ASSERT_EQ(rt.thread_pool(0).size(), 2);
  tiny_test::Rendezvous all(4);
  std::atomic<int> met{0};
  SeenThreads seen[2];
  std::thread::id stream_worker[2];
  auto use_device = [&](int d) {
    const gpu::Stream stream = rt.default_stream(d);
    rt.launch(stream, [&, d] {
      stream_worker[d] = std::this_thread::get_id();
      tiny::runtime::parallel_for(0, 2, 1, [&, d](int64_t, int64_t) {
        seen[d].add();
        if (all.arrive_and_wait()) ++met;
      });
    }, "rendezvous");
    rt.stream_synchronize(stream);
  };
  std::thread host0(use_device, 0), host1(use_device, 1);
  host0.join();
  host1.join();
  EXPECT_EQ(met.load(), 4) << "the 4 chunks never ran at the same time: " << met.load()
                           << " saw all 4 arrive within the timeout";
  for (int d = 0; d < 2; ++d) {
    EXPECT_EQ(seen[d].ids.size(), 2u) << "cuda:" << d;
    EXPECT_EQ(seen[d].ids.count(stream_worker[d]), 1u) << "cuda:" << d << ": the stream worker takes part";
    // Its pool's workers are tiny-gpuD-1, -2, ...; its stream's worker is tiny-gpuD-s0.
    const std::string own = "tiny-gpu" + std::to_string(d) + "-";
    const auto pool_worker = [&](const std::string& name) {
      return name.rfind(own, 0) == 0 && std::isdigit(static_cast<unsigned char>(name[own.size()]));
    };
    EXPECT_EQ(std::count_if(seen[d].names.begin(), seen[d].names.end(), pool_worker), 1)
        << "cuda:" << d << ": the other chunk ran on one of the device's own pool workers";
  }
  for (const auto& id : seen[0].ids) EXPECT_EQ(seen[1].ids.count(id), 0u) << "a thread ran chunks of both devices";
}

// A device whose kernels run while the others are idle is not held to its
// share: it borrows their threads (issue 23 item 6: one emulated GPU of two
// within 1.3x of the CPU's step).
TEST(EmulatedRuntime, ADeviceRunningAloneUsesEveryThread) {
  gpu::EmulatedRuntime& rt = runtime();
  if (rt.device_count() < 2) GTEST_SKIP() << "needs 2 emulated GPUs";
  ThreadCount count(2 * rt.device_count());
  ASSERT_EQ(rt.thread_pool(0).size(), 2) << "its fair share";
  const int threads = tiny::runtime::num_threads();
  tiny_test::Rendezvous all(threads);
  std::atomic<int> met{0};
  SeenThreads seen;
  const gpu::Stream stream = rt.default_stream(0);
  rt.launch(stream, [&] {
    tiny::runtime::parallel_for(0, threads, 1, [&](int64_t, int64_t) {
      seen.add();
      if (all.arrive_and_wait()) ++met;
    });
  }, "rendezvous");
  rt.stream_synchronize(stream);
  EXPECT_EQ(met.load(), threads) << "the " << threads << " chunks never ran at once: the device kept to its share";
  EXPECT_EQ(seen.ids.size(), static_cast<size_t>(threads));
}

// The device pools are as fork-safe as the global one: a child (a DataLoader
// worker) that uses one gets fresh workers instead of waiting for the
// parent's, which do not exist there.
TEST(EmulatedRuntime, DevicePoolsWorkInAForkedChild) {
  gpu::EmulatedRuntime& rt = runtime();
  ThreadCount count(2 * rt.device_count());
  const gpu::Stream stream = rt.default_stream(0);
  rt.launch(stream, [] { tiny::runtime::parallel_for(0, 8, 1, [](int64_t, int64_t) {}); }, "start_workers");
  rt.stream_synchronize(stream);
  const pid_t child = fork();
  ASSERT_NE(child, -1);
  if (child == 0) {
    tiny::runtime::bind_thread_pool(&rt.thread_pool(0));
    tiny_test::Rendezvous both(2);
    std::atomic<int> met{0};
    tiny::runtime::parallel_for(0, 2, 1, [&](int64_t, int64_t) {
      if (both.arrive_and_wait(std::chrono::seconds(10))) ++met;
    });
    _exit(met.load() == 2 ? 0 : 1);
  }
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0);
}

// The first launch on a stream starts its worker thread, and returns only
// once that thread runs (it has named itself), as a parallel_for does with
// its pool's workers: a fork() right after (a DataLoader worker) must not copy
// a thread still being started.
TEST(EmulatedRuntime, StreamWorkerIsRunningWhenItsFirstLaunchReturns) {
  gpu::EmulatedRuntime& rt = runtime();
  // Every stream stays alive to the end: a thread exiting while
  // /proc/self/task is listed can hide others from the listing.
  std::vector<std::unique_ptr<ScopedStream>> streams;
  for (int round = 0; round < 20; ++round) {
    streams.push_back(std::make_unique<ScopedStream>(0));
    const gpu::Stream stream = *streams.back();
    rt.launch(stream, [] {}, "first_launch");
    const std::string name = ("tiny-gpu0-s" + std::to_string(stream.id)).substr(0, 15);
    EXPECT_EQ(tiny_test::thread_names().count(name), 1u)
        << "round " << round << ": the worker of stream " << stream.id << " was not running yet";
    rt.stream_synchronize(stream);
  }
}

// A forked child has none of the parent's workers and shares its device
// memory: queuing work there throws (CUDA refuses too) instead of hanging.
TEST(EmulatedRuntime, ForkedChildCannotQueueWork) {
  gpu::EmulatedRuntime& rt = runtime();
  rt.stream_synchronize(rt.default_stream(0));
  const pid_t child = fork();
  ASSERT_NE(child, -1);
  if (child == 0) {
    try {
      rt.launch(rt.default_stream(0), [] {}, "noop");
      _exit(1);
    } catch (const tiny::Error& e) {
      _exit(std::string(e.what()).find("forked child") != std::string::npos ? 0 : 2);
    }
  }
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0);
}

// A runtime made by a test (not the process-wide one) lets its workers finish
// before it is destroyed.
TEST(EmulatedRuntime, OwnRuntimeDrainsOnDestruction) {
  std::atomic<int> runs{0};
  {
    gpu::EmulatedRuntime own;
    for (int i = 0; i < 10; ++i) {
      own.launch(own.default_stream(i % own.device_count()), [&] {
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
        ++runs;
      }, "count");
    }
  }
  EXPECT_EQ(runs.load(), 10);
}

// A device's pool polls on (up to 500 us) while the device has kernels queued,
// so that its workers are awake for the next kernel's parallel loops; a long
// kernel without parallel loops must not keep them spinning all along.
TEST(EmulatedRuntime, PoolOfABusyDeviceStopsPollingDuringALongKernel) {
  ThreadedMode threaded;
  ScopedStream stream(0);
  std::atomic<int64_t> covered{0};
  const auto parallel_kernel = [&] {
    runtime().launch(stream, [&] {
      tiny::runtime::parallel_for(0, 1 << 12, 64, [&](int64_t b, int64_t e) { covered += e - b; });
    }, "parallel");
  };
  parallel_kernel();  // starts the device pool's workers
  runtime().stream_synchronize(stream);
  std::this_thread::sleep_for(std::chrono::milliseconds(300));  // a runtime made just now finishes starting
  parallel_kernel();
  auto gate = launch_gate(stream);  // the device stays busy while the gate is closed
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  timespec before{}, after{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &before);
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &after);
  gate->open();
  runtime().stream_synchronize(stream);
  EXPECT_EQ(covered.load(), 2 << 12);
  const double busy = (after.tv_sec - before.tv_sec) + (after.tv_nsec - before.tv_nsec) * 1e-9;
  EXPECT_LT(busy, 0.020) << "the emulated GPU used " << busy * 1000 << " ms of CPU in 200 ms of a kernel that waits";
}

// A host thread waiting for a stream is woken when the work queued before its
// call is done (not at every kernel, nor only once the stream drains).
TEST(EmulatedRuntime, SynchronizeReturnsWhenItsWorkIsDoneWhileLaterWorkWaits) {
  ThreadedMode threaded;
  ScopedStream stream(0);
  auto first = launch_gate(stream);
  std::atomic<bool> returned{false};
  std::thread waiter([&] {
    runtime().stream_synchronize(stream);  // waits for `first` only
    returned = true;
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(20));  // the waiter is inside stream_synchronize
  auto second = launch_gate(stream);
  first->open();
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (!returned && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  EXPECT_TRUE(returned.load()) << "stream_synchronize did not return after the work queued before it was done";
  EXPECT_FALSE(second->is_open());
  second->open();
  waiter.join();
  runtime().stream_synchronize(stream);
}

// A stream's worker and a synchronizing host poll for 30 us before they sleep
// (runtime/spin.h); then the worker sleeps: over 200 ms idle, the runtime uses
// almost no CPU (an unbounded poll would use all 200 ms on the worker's core).
TEST(EmulatedRuntime, IdleStreamWorkerStopsPollingAndSleeps) {
  ThreadedMode threaded;
  ScopedStream stream(0);
  std::atomic<int> ran{0};
  runtime().launch(stream, [&] { ran.fetch_add(1); }, "count");
  runtime().stream_synchronize(stream);
  // Let a runtime made just now finish starting (its devices' threads and memory).
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  for (int i = 1; i < 50; ++i) runtime().launch(stream, [&] { ran.fetch_add(1); }, "count");
  runtime().stream_synchronize(stream);
  EXPECT_EQ(ran.load(), 50);
  timespec before{}, after{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &before);
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &after);
  const double idle = (after.tv_sec - before.tv_sec) + (after.tv_nsec - before.tv_nsec) * 1e-9;
  EXPECT_LT(idle, 0.020) << "the emulated GPU used " << idle * 1000 << " ms of CPU while idle for 200 ms";
}
