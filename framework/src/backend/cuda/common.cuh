// What every CUDA driver of tiny shares: where a launch goes (LaunchContext),
// typed device addresses of tensors, the device side of the error record, and
// the one generic block reduction. Included only by the .cu files here.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>

#include "backend/dispatch.h"
#include "backend/dtype_dispatch.h"
#include "core/tensor_impl.h"
#include "gpu/cuda/cuda_runtime.h"
#include "gpu/cuda/device_error.h"
#include "gpu/cuda/launch.cuh"
#include "gpu/device_context.h"

namespace tiny::cuda_backend {

// Threads of a reduction block; block_reduce needs a power of two up to this.
constexpr int kReduceThreads = 256;

// True when TINY_LAUNCH_BLOCKING=1 (or CUDA's own CUDA_LAUNCH_BLOCKING=1):
// every launch then waits for its kernel and raises a kernel error at once,
// from the call that queued the failing op (as the emulator's blocking mode).
inline bool launch_blocking() {
  static const bool blocking = [] {
    for (const char* name : {"TINY_LAUNCH_BLOCKING", "CUDA_LAUNCH_BLOCKING"}) {
      const char* v = std::getenv(name);
      if (v != nullptr && std::strcmp(v, "1") == 0) return true;
    }
    return false;
  }();
  return blocking;
}

// The CUDA runtime, which a CUDA kernel cannot be asked for without.
inline gpu::CudaRuntime* checked_runtime(int device) {
  gpu::CudaRuntime* runtime = gpu::CudaRuntime::instance();
  TINY_CHECK(runtime != nullptr, DeviceError, "internal: a CUDA kernel was asked for cuda:", device,
             " but there is no CUDA runtime");
  return runtime;
}

// Where one op's kernels go: its device, made CUDA's current device for the
// scope (kernels launch on the current device, and a stream of another device
// is an error), and the calling thread's current tiny stream there.
struct LaunchContext {
  explicit LaunchContext(int device_index)
      : runtime(checked_runtime(device_index)),
        device(device_index),
        guard(device_index),
        tiny_stream(gpu::current_stream(device_index)),
        stream(runtime->native_stream(tiny_stream)) {}

  // Where a kernel reports a bad index (the device's error lock and record).
  gpu::DeviceErrorTarget errors() const { return runtime->device_error_target(device); }

  // After each launch: checks it (a bad configuration is raised here) and
  // counts it; in blocking mode also waits and raises a kernel's error.
  void launched(const char* kernel) const {
    check_launch(kernel);
    if (launch_blocking()) runtime->stream_synchronize(tiny_stream);
  }

  gpu::CudaRuntime* const runtime;
  const int device;
  const gpu::CudaDeviceGuard guard;
  const gpu::Stream tiny_stream;
  const cudaStream_t stream;
};

inline int device_of(const Tensor& t) { return t.device().index(); }

// The device address of element 0 of `t` (never dereferenced on the host).
template <typename T>
T* dev_ptr(const Tensor& t) {
  return reinterpret_cast<T*>(t.unsafe_impl()->data());
}

// Records the first error a kernel finds (later ones keep the first: it is
// the one that explains the others); the caller then skips the bad element.
// The thread that wins the lock word fills the record, makes the fields
// visible to the host, and only then sets the flag the host looks at.
__device__ __forceinline__ void report_error(gpu::DeviceErrorTarget target, gpu::DeviceErrorOp op, int64_t value,
                                             int64_t position, int64_t bound, int64_t extra) {
  if (atomicCAS(target.lock, 0, 1) != 0) return;
  volatile gpu::DeviceErrorRecord* record = target.record;
  record->op = static_cast<int32_t>(op);
  record->value = value;
  record->position = position;
  record->bound = bound;
  record->extra = extra;
  __threadfence_system();
  record->flag = 1;
  __threadfence_system();
}

// Combines one value per thread of the block with `combine` (an associative
// merge: the reduce_ops.h structs' combine) and returns the result to every
// thread. blockDim.x must be a power of two <= kReduceThreads; `shared` holds
// kReduceThreads values. Every thread of the block must call it.
template <typename Acc, typename Combine>
__device__ Acc block_reduce(Acc value, Acc* shared, const Combine& combine) {
  const int t = static_cast<int>(threadIdx.x);
  shared[t] = value;
  __syncthreads();
  for (int stride = static_cast<int>(blockDim.x) / 2; stride > 0; stride /= 2) {
    if (t < stride) shared[t] = combine(shared[t], shared[t + stride]);
    __syncthreads();
  }
  const Acc result = shared[0];
  __syncthreads();  // the caller may reuse `shared` at once
  return result;
}

// Threads for a block that reduces `n` elements: a power of two in [32, kReduceThreads].
inline int reduce_threads(int64_t n) {
  int threads = 32;
  while (threads < kReduceThreads && threads < n) threads *= 2;
  return threads;
}

}  // namespace tiny::cuda_backend
