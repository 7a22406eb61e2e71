// The GPU runtime interface: what tiny needs from a GPU, implemented twice —
// by the real CUDA runtime (gpu/cuda/, compiled only with a CUDA toolkit) and
// by the host-emulated GPU (gpu/emulated/), which behaves the same in every
// way a lesson can observe (DESIGN.md section 4). The caching allocator
// (gpu/caching_allocator.h) and the kernels' launchers sit above it.
//
// Conventions, as in CUDA:
// - device indices run from 0 to device_count() - 1;
// - work is queued on streams; stream 0 of a device is its default stream,
//   which (unlike CUDA's legacy default stream) is an ordinary stream here:
//   ordering between streams comes only from events;
// - calls ending in _async return before the work runs; `synchronize`
//   calls wait, and they are where errors found by queued work are raised
//   (sticky until handled, as CUDA faults are).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>

#include "tiny/cuda.h"
#include "tiny/dtype.h"

namespace tiny::gpu {

// The end of every device-side assert's message: the error sticks, as CUDA's does.
inline constexpr const char* kStickyErrorAdvice =
    "The error sticks, as in CUDA: every later call on the device raises it again, even unrelated ones, so fix "
    "the cause and restart the program.";

// A queue of work on one device. id 0 is the device's default stream.
struct Stream {
  int device = 0;
  int64_t id = 0;
  bool operator==(const Stream& o) const { return device == o.device && id == o.id; }
  bool operator!=(const Stream& o) const { return !(*this == o); }
};

// A marker recorded on a stream; completes when the work queued before it has run.
struct Event {
  int64_t id = -1;  // -1: never created
  bool valid() const { return id >= 0; }
};

enum class CopyKind : uint8_t { HostToDevice, DeviceToHost, DeviceToDevice, HostToHost };

struct DeviceProperties {
  std::string name;                 // says "emulated" for the emulator
  size_t total_memory = 0;          // bytes
  int multiprocessor_count = 0;     // the emulator: its share of host cores
  int major = 0, minor = 0;         // compute capability
  bool emulated = false;
  std::string modelled_gpu;         // the emulator: the real GPU its clock models (docs/performance_model.md)
  double modelled_memory_gb = 0;    // the emulator: that GPU's memory (the datasheet's GB), beside total_memory here
};

// Counters that make performance habits checkable without clocks (DESIGN.md
// section 4). The real runtime counts what passes through tiny's own calls.
// What is counted is defined once, by the public tiny::cuda::DeviceCounters
// (tiny/cuda.h), which device_counters() returns as a copy of this struct's
// base; a new counter is a field there. Only the runtime's own bookkeeping is
// added here. The modelled times are summed in exact nanoseconds below; the
// base's millisecond fields stay 0 here and are filled from them when read.
struct Counters : tiny::cuda::DeviceCounters {
  uint64_t raw_frees = 0;
  uint64_t modelled_kernel_ns = 0;  // the emulator: modelled time its kernels ran (0 on a real GPU)
  uint64_t modelled_copy_ns = 0;    // ... and its copies to and from the host
};

// Which GEMM counter a product of `dtype` adds to; `tf32`: a float32 one ran on TF32 tensor cores.
inline uint64_t Counters::* gemm_counter(Dtype dtype, bool tf32) {
  switch (dtype) {
    case Dtype::Float32: return tf32 ? &Counters::gemms_tf32 : &Counters::gemms_float32;
    case Dtype::Float16: return &Counters::gemms_float16;
    case Dtype::BFloat16: return &Counters::gemms_bfloat16;
    default: return &Counters::gemms_other;
  }
}

class Runtime {
 public:
  virtual ~Runtime() = default;

  // "cuda" or "emulated".
  virtual const char* kind() const = 0;
  virtual int device_count() const = 0;
  // Throws tiny::DeviceError naming the valid range for a bad index.
  virtual DeviceProperties properties(int device) const = 0;

  // Raw device memory. Returns nullptr when the device cannot provide it
  // (the caching allocator then frees cached blocks, retries, and raises
  // tiny::OutOfMemoryError). Never throws for out-of-memory.
  virtual void* raw_malloc(int device, size_t nbytes) = 0;
  virtual void raw_free(int device, void* ptr) = 0;
  // Bytes the device could still hand out (cudaMemGetInfo's free).
  virtual size_t free_memory(int device) const = 0;

  // Page-locked host memory (cudaHostAlloc): copies from/to it may be asynchronous.
  virtual void* pinned_malloc(size_t nbytes) = 0;
  virtual void pinned_free(void* ptr) = 0;
  virtual bool is_pinned(const void* ptr) const = 0;

  virtual Stream default_stream(int device) = 0;
  virtual Stream create_stream(int device) = 0;
  virtual void destroy_stream(Stream stream) = 0;
  // True when all work queued on the stream has run.
  virtual bool stream_query(Stream stream) = 0;
  virtual void stream_synchronize(Stream stream) = 0;
  virtual void device_synchronize(int device) = 0;

  // Copies `nbytes`; pointers are host pointers or device pointers of this
  // runtime as `kind` says. Semantics of CUDA's cudaMemcpyAsync: from pageable
  // host memory the source is captured before returning; to pageable host
  // memory the call waits for the copy (so does every DeviceToHost copy into
  // memory that is not pinned); into or out of pinned memory it does not wait.
  virtual void memcpy_async(void* dst, const void* src, size_t nbytes, CopyKind kind, Stream stream) = 0;
  virtual void memset_async(void* dst, int value, size_t nbytes, Stream stream) = 0;

  virtual Event create_event(int device, bool enable_timing) = 0;
  virtual void destroy_event(Event event) = 0;
  virtual void record_event(Event event, Stream stream) = 0;
  virtual bool event_query(Event event) = 0;
  virtual void event_synchronize(Event event) = 0;
  // Work queued on `stream` after this call waits for `event`.
  virtual void stream_wait_event(Stream stream, Event event) = 0;
  // Milliseconds between two completed timing events (host time on the emulator).
  virtual float event_elapsed_ms(Event start, Event end) = 0;

  virtual Counters counters(int device) const = 0;
  virtual void reset_counters(int device) = 0;
};

// The real CUDA runtime, or nullptr when tiny was built without CUDA or the
// machine has no usable GPU (cudaGetDeviceCount failed or found none).
Runtime* cuda_runtime();

// The host-emulated GPU, or nullptr when TINY_EMULATED_GPUS=0. Created on
// first use and never destroyed (tensors freed during exit must not touch
// freed state).
class EmulatedRuntime;
EmulatedRuntime* emulated_runtime();

}  // namespace tiny::gpu
