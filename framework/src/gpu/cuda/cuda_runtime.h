// The real GPU runtime: gpu::Runtime implemented with the CUDA runtime API.
// Compiled only with a CUDA toolkit, into the `tiny_cuda` library; tiny
// reaches it through gpu::cuda_runtime(), which is nullptr on a machine
// without a usable GPU (and in builds without CUDA, see cuda_runtime_stub.cpp).
//
// How the interface maps onto CUDA:
// - stream id 0 of a device is a non-blocking stream this runtime creates,
//   not CUDA's legacy default stream, so that streams order nothing among
//   themselves except through events (runtime.h, as the emulator does);
// - every CUDA error becomes a tiny::Error that names the error, the call and
//   the device: "CUDA error: out of memory (cudaMalloc on cuda:0)";
// - the counters count what passes through these calls (and the kernel
//   launches that the launchers report with note_kernel_launch);
// - errors that kernels find (a bad index) go to a per-device error record
//   (gpu/cuda/device_error.h) that the synchronizing calls (stream, device
//   and event synchronize, a copy into pageable host memory) check after
//   they have waited: the first error is raised as a tiny::Error worded as
//   the emulator's, and again by every later synchronizing call on that
//   device until clear_error() (DESIGN.md section 4).
#pragma once

#include <cuda_runtime_api.h>

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "gpu/cuda/device_error.h"
#include "gpu/runtime.h"

namespace tiny::gpu {

/// @brief gpu::Runtime on real NVIDIA GPUs through the CUDA runtime API.
class CudaRuntime final : public Runtime {
 public:
  /// @brief The process-wide instance, or nullptr when no GPU is usable (same as cuda_runtime()).
  static CudaRuntime* instance();

  const char* kind() const override { return "cuda"; }
  int device_count() const override { return device_count_; }
  DeviceProperties properties(int device) const override;

  void* raw_malloc(int device, size_t nbytes) override;
  void raw_free(int device, void* ptr) override;
  size_t free_memory(int device) const override;

  void* pinned_malloc(size_t nbytes) override;
  void pinned_free(void* ptr) override;
  bool is_pinned(const void* ptr) const override;

  Stream default_stream(int device) override;
  Stream create_stream(int device) override;
  void destroy_stream(Stream stream) override;
  bool stream_query(Stream stream) override;
  void stream_synchronize(Stream stream) override;
  void device_synchronize(int device) override;

  void memcpy_async(void* dst, const void* src, size_t nbytes, CopyKind kind, Stream stream) override;
  void memset_async(void* dst, int value, size_t nbytes, Stream stream) override;

  Event create_event(int device, bool enable_timing) override;
  void destroy_event(Event event) override;
  void record_event(Event event, Stream stream) override;
  bool event_query(Event event) override;
  void event_synchronize(Event event) override;
  void stream_wait_event(Stream stream, Event event) override;
  float event_elapsed_ms(Event start, Event end) override;

  Counters counters(int device) const override;
  void reset_counters(int device) override;

  /// @brief The CUDA stream behind a tiny stream, for kernel launchers and cuBLAS.
  cudaStream_t native_stream(Stream stream);
  /// @brief Counts one kernel launch on `device` (called by check_launch after a good launch).
  void note_kernel_launch(int device);
  // A matrix product of `dtype` ran (`tf32`: a float32 one on TF32 tensor cores): the GEMM counters.
  void note_gemm(int device, Dtype dtype, bool tf32);

  /// @brief Where kernels on `device` report errors (its lock word and its
  /// record, as device addresses), created on first use.
  DeviceErrorTarget device_error_target(int device);
  /// @brief The pending kernel error of `device` as the message that will be
  /// raised ("" if none), without raising it.
  std::string pending_error(int device) const;
  /// @brief Forgets the device's pending kernel error (tests; CUDA itself
  /// would need a new process after a device-side assert).
  void clear_error(int device);

 private:
  explicit CudaRuntime(int device_count);

  struct AtomicCounters {
    std::atomic<uint64_t> synchronizations{0};
    std::atomic<uint64_t> kernel_launches{0};
    std::atomic<uint64_t> bytes_host_to_device_pageable{0};
    std::atomic<uint64_t> bytes_host_to_device_pinned{0};
    std::atomic<uint64_t> bytes_device_to_host_pageable{0};
    std::atomic<uint64_t> bytes_device_to_host_pinned{0};
    std::atomic<uint64_t> bytes_device_to_device{0};
    std::atomic<uint64_t> raw_mallocs{0};
    std::atomic<uint64_t> raw_frees{0};
    std::atomic<uint64_t> gemms_float32{0}, gemms_tf32{0}, gemms_float16{0}, gemms_bfloat16{0}, gemms_other{0};
  };
  struct DeviceState {
    std::unordered_map<int64_t, cudaStream_t> streams;  // id -> stream; id 0 created on first use
    int64_t next_stream_id = 1;
    AtomicCounters counters;
    // The error record: host and device addresses of one mapped pinned block,
    // and the lock word in device memory (nullptr until a kernel first asks).
    DeviceErrorRecord* error_host = nullptr;
    DeviceErrorRecord* error_device = nullptr;
    int32_t* error_lock = nullptr;
  };
  struct EventEntry {
    cudaEvent_t event = nullptr;
    int device = 0;
    bool timing = false;
  };

  void check_device(int device) const;
  cudaStream_t lookup_stream(Stream stream);
  EventEntry lookup_event(Event event, const char* call) const;
  // Throws the device's pending kernel error, if any (after a synchronization).
  void raise_pending_error(int device) const;

  const int device_count_;
  std::vector<std::unique_ptr<DeviceState>> devices_;
  std::unordered_map<int64_t, EventEntry> events_;
  int64_t next_event_id_ = 0;
  std::map<uintptr_t, size_t> pinned_;  // base address -> size, for is_pinned of interior pointers
  mutable std::mutex mutex_;            // guards the stream, event and pinned tables
};

/// @brief Makes `device` CUDA's current device for a scope and restores the
/// caller's after, so tiny never changes which device the user's own CUDA code sees.
class CudaDeviceGuard {
 public:
  /// @brief Switches to `device` (throws tiny::Error when CUDA refuses).
  explicit CudaDeviceGuard(int device);
  /// @brief Switches back to the device that was current before.
  ~CudaDeviceGuard();
  CudaDeviceGuard(const CudaDeviceGuard&) = delete;
  CudaDeviceGuard& operator=(const CudaDeviceGuard&) = delete;

 private:
  int previous_ = 0;
};

/// @brief Throws tiny::Error (OutOfMemoryError for an allocation failure) after
/// clearing CUDA's last error: "CUDA error: <what> (<call> on cuda:<device>)".
[[noreturn]] void throw_cuda_error(cudaError_t error, const std::string& call, int device);

/// @brief The message throw_cuda_error uses, for tests and logs.
std::string cuda_error_message(cudaError_t error, const std::string& call, int device);

/// @brief The folder libcudart was loaded from, with a trailing slash ("" if
/// unknown): the CUDA toolkit's lib folder, where cuBLAS and (since CUDA 13)
/// NCCL ship, for the dlopen fallbacks that look beside it.
std::string cudart_directory();

}  // namespace tiny::gpu
