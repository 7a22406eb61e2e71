/// @file cuda.h
/// @brief GPU devices and their memory, as `torch.cuda` (real GPUs, or the emulated GPU without one).
///
/// Without a usable NVIDIA GPU, `cuda:N` devices are emulated on the CPU
/// (`TINY_EMULATED_GPUS`, default 2): separate memory, a capacity
/// (`TINY_EMULATED_GPU_MEMORY`) and asynchronous streams behave as on a GPU;
/// speed does not.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "tiny/device.h"
#include "tiny/memory.h"

namespace tiny {
class Tensor;
}  // namespace tiny

namespace tiny::cuda {

/// @brief True when `cuda:N` tensors can be created (`torch.cuda.is_available()`).
bool is_available();
/// @brief Number of GPUs (`torch.cuda.device_count()`).
int device_count();
/// @brief True when device `index` is the emulated GPU rather than real hardware.
bool is_emulated(int index = -1);
/// @brief The device's name (`torch.cuda.get_device_name`); an emulated one says "EMULATED".
std::string get_device_name(int index = -1);

/// @brief What a device offers (`torch.cuda.get_device_properties`).
struct DeviceProperties {
  std::string name;               ///< as get_device_name
  size_t total_memory = 0;        ///< bytes
  int multi_processor_count = 0;  ///< the emulator: its share of host cores
  int major = 0;                  ///< compute capability, major
  int minor = 0;                  ///< compute capability, minor
  bool is_emulated = false;       ///< true for the emulated GPU
  std::string modelled_gpu;       ///< the emulator: the GPU its clock models ("H100 SXM"); "" on a real GPU
};
/// @brief Properties of device `index` (-1: the current device).
DeviceProperties get_device_properties(int index = -1);

/// @brief The calling thread's current device (`torch.cuda.current_device()`).
int current_device();
/// @brief Makes `index` the calling thread's current device (`torch.cuda.set_device`).
void set_device(int index);

/// @brief Makes a device current for a scope (`with torch.cuda.device(i):`).
class DeviceGuard {
 public:
  /// @brief Switches to `index`, remembering the previous device.
  explicit DeviceGuard(int index);
  /// @brief Switches back.
  ~DeviceGuard();
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;

 private:
  int previous_;
};

/// @brief Waits until all work queued on the device has run (`torch.cuda.synchronize`).
void synchronize(int index = -1);

/// @brief One line for a demo's first output, e.g. "cuda:0 - EMULATED on your CPU (timing modelled
/// on the H100 SXM, an estimate; 4.00 GiB here, 80 GB on the real card)", or the real GPU's name and memory.
std::string device_banner(const Device& device);

/// @brief Bytes held by tensors on the device (`torch.cuda.memory_allocated`).
size_t memory_allocated(int index = -1);
/// @brief Peak of memory_allocated since start or the last reset (`torch.cuda.max_memory_allocated`).
size_t max_memory_allocated(int index = -1);
/// @brief Bytes the caching allocator holds, in use or cached (`torch.cuda.memory_reserved`).
size_t memory_reserved(int index = -1);
/// @brief Peak of memory_reserved (`torch.cuda.max_memory_reserved`).
size_t max_memory_reserved(int index = -1);
/// @brief Starts the peaks again from the current values (`torch.cuda.reset_peak_memory_stats`).
void reset_peak_memory_stats(int index = -1);
/// @brief Gives the cached, unused memory of every GPU back to it (`torch.cuda.empty_cache`).
///
/// Every device's cache, not only the current device's (as PyTorch's, whose
/// caching allocator empties the cache of each device it has used): each
/// device is synchronized first, then its cached segments that hold no live
/// block are freed, so memory_reserved() drops on every device while
/// memory_allocated() does not change. A segment that still holds one live
/// block stays whole (the allocator cannot return part of a segment).
void empty_cache();
/// @brief A readable table of the allocator's statistics (`torch.cuda.memory_summary`).
///
/// For which op holds the memory, see memory_snapshot_summary() (tiny/memory.h).
std::string memory_summary(int index = -1);

/// @brief What a device has done since start or reset_device_counters: the
/// numbers that make performance habits visible without a clock.
///
/// PyTorch has no such call (a profiler shows the same facts); tiny counts them
/// on the emulated GPU and on real GPUs alike, per device. This struct is the
/// one list of what is counted: the GPU runtimes count into a struct derived
/// from it, so a new counter is a field here (and the line that counts it).
struct DeviceCounters {
  uint64_t synchronizations = 0;               ///< times the host waited for the device (synchronize, .cpu(), .item(), events)
  uint64_t kernel_launches = 0;                ///< ops queued on the device
  uint64_t bytes_host_to_device_pageable = 0;  ///< copied in from ordinary host memory
  uint64_t bytes_host_to_device_pinned = 0;    ///< copied in from pinned memory (pin_memory())
  uint64_t bytes_device_to_host_pageable = 0;  ///< copied out to ordinary host memory
  uint64_t bytes_device_to_host_pinned = 0;    ///< copied out to pinned memory
  uint64_t bytes_device_to_device = 0;         ///< copied between devices or within one
  uint64_t device_mallocs = 0;                 ///< allocations that reached the device (not served from the cache)
  double modelled_kernel_ms = 0;               ///< emulated GPU: modelled time its kernels ran (0 on a real GPU)
  double modelled_copy_ms = 0;                 ///< emulated GPU: modelled time of its copies to and from the host
  uint64_t gemms_float32 = 0;   ///< matrix products (GEMMs) in float32 on the CUDA cores
  uint64_t gemms_tf32 = 0;      ///< float32 products on TF32 tensor cores (set_float32_matmul_precision("high"))
  uint64_t gemms_float16 = 0;   ///< float16 products (tensor cores where the GPU has them)
  uint64_t gemms_bfloat16 = 0;  ///< bfloat16 products (tensor cores where the GPU has them; a T4 has none)
  uint64_t gemms_other = 0;     ///< float64 and int64 products
};
/// @brief The counters of device `index` (-1: the current device).
DeviceCounters device_counters(int index = -1);
/// @brief Starts the counters of device `index` again from zero (and the window of utilization()).
void reset_device_counters(int index = -1);

/// @brief The calling thread's clock, in seconds: modelled time when the GPU
/// is the emulated one (how long the program would have taken on the modelled
/// GPU, `TINY_EMULATED_GPU_MODEL`: see docs/performance_model.md), the host's
/// steady clock otherwise.
///
/// Time a region as on a real GPU: read it, do the work, `synchronize()`,
/// read it again (`std::chrono` reads this CPU's time, which says nothing of
/// the modelled GPU). In modelled time only what tiny launches costs the host;
/// the rest of a program's host code is free.
double host_time();

/// @brief nvidia-smi's GPU-Util of emulated device `index` (-1: the current
/// device), in [0, 1]: the share of the time since reset_device_counters (up
/// to host_time()) in which any kernel ran, in modelled time.
///
/// Like GPU-Util it says the GPU was waiting, not how much of it was used. On
/// a real GPU read nvidia-smi instead: this throws tiny::NotImplemented there.
double utilization(int index = -1);


// ---------------------------------------------------------------- streams and events

class Event;

/// @brief A queue of GPU work (`torch.cuda.Stream`): work queued on one stream
/// runs in order; different streams are independent and ordered only by events
/// (wait_stream, wait_event). A Stream is a small copyable handle.
///
/// As in PyTorch, `Stream()` takes the next stream of a per-device pool (32
/// streams, handed out round robin) rather than creating one every time: a
/// training loop that makes a stream each step costs nothing, and a stream is
/// never destroyed while tensors, events or other threads may still refer to
/// it. Two streams made one after the other are always different; after 32
/// they repeat.
class Stream {
 public:
  /// @brief The next pooled stream of `device` (-1: the current device) (`torch.cuda.Stream(device)`).
  explicit Stream(int device = -1);
  /// @brief The device's default stream, where work goes outside any StreamGuard (`torch.cuda.default_stream`).
  static Stream default_stream(int device = -1);

  /// @brief The stream's device index (`torch.cuda.Stream.device`).
  int device() const { return device_; }
  /// @brief The stream's id on its device; 0 is the default stream (`torch.cuda.Stream.stream_id`).
  int64_t id() const { return id_; }
  /// @brief True when all work queued on the stream has run; never waits (`torch.cuda.Stream.query`).
  bool query() const;
  /// @brief Waits until all work queued on the stream has run; raises the device's pending error (`torch.cuda.Stream.synchronize`).
  void synchronize() const;
  /// @brief Work queued on this stream from now on waits for the work queued on `other` so far: records an event on `other` and waits for it (`torch.cuda.Stream.wait_stream`). Does not block the host.
  void wait_stream(const Stream& other) const;
  /// @brief Work queued on this stream from now on waits for `event`'s latest record (`torch.cuda.Stream.wait_event`); a never-recorded event is not waited for.
  void wait_event(const Event& event) const;
  /// @brief Records `event` on this stream and returns it (`torch.cuda.Stream.record_event`); without an argument, a new event.
  Event record_event() const;
  /// @brief Records `event` on this stream and returns it (`torch.cuda.Stream.record_event(event)`).
  Event record_event(const Event& event) const;

  /// @brief Same device and same queue (`torch.cuda.Stream.__eq__`).
  bool operator==(const Stream& other) const { return device_ == other.device_ && id_ == other.id_; }
  /// @brief Not the same stream (`torch.cuda.Stream.__ne__`).
  bool operator!=(const Stream& other) const { return !(*this == other); }

  /// @brief The existing stream with this device and id (`torch.cuda.Stream(stream_id=..., device_index=...)`), for tiny's internals; the id is not checked.
  static Stream unsafe_from_id(int device, int64_t id);

 private:
  Stream(int device, int64_t id, bool /*tag: no pool*/) : device_(device), id_(id) {}
  int device_;
  int64_t id_;
};

/// @brief The calling thread's current stream on `device` (-1: the current device) (`torch.cuda.current_stream`).
///
/// New work on a device (ops, copies) and new device memory go to its current
/// stream. The current stream is per thread and per device: setting it on one
/// thread changes nothing for other threads, and each thread starts on the
/// default streams.
Stream current_stream(int device = -1);
/// @brief The default stream of `device` (-1: the current device) (`torch.cuda.default_stream`).
Stream default_stream(int device = -1);
/// @brief Makes `stream` the calling thread's current stream on its device, and its device the current device (`torch.cuda.set_stream`).
void set_stream(const Stream& stream);

/// @brief Makes a stream current for a scope (`with torch.cuda.stream(s):`, c10's CUDAStreamGuard).
///
/// Also makes the stream's device current for the scope, as PyTorch does; the
/// destructor restores the previous current stream of that device and the
/// previous current device.
class StreamGuard {
 public:
  /// @brief Switches to `stream` (and its device), remembering what was current.
  explicit StreamGuard(const Stream& stream);
  /// @brief Switches back.
  ~StreamGuard();
  StreamGuard(const StreamGuard&) = delete;
  StreamGuard& operator=(const StreamGuard&) = delete;

 private:
  int previous_device_;
  Stream previous_stream_;  // the previous current stream of the new stream's device
};

/// @brief A marker in a stream (`torch.cuda.Event`): it completes when the work
/// queued on the stream before it has run. Copies share one event (shared
/// ownership); the runtime's event is created at the first record (on the
/// recording stream's device) and destroyed when the last copy goes.
class Event {
 public:
  /// @brief A new event; `enable_timing` allows elapsed_time (`torch.cuda.Event(enable_timing=...)`).
  explicit Event(bool enable_timing = false);

  /// @brief Records the event on the current stream of the current device (`torch.cuda.Event.record()`).
  void record();
  /// @brief Records the event on `stream` (`torch.cuda.Event.record(stream)`); a later record replaces the earlier one. Throws tiny::DeviceError for a stream on another device than earlier records.
  void record(const Stream& stream);
  /// @brief True when the work before the latest record has run, or the event was never recorded; never waits (`torch.cuda.Event.query`).
  bool query() const;
  /// @brief Waits until the work before the latest record has run; returns at once if never recorded (`torch.cuda.Event.synchronize`).
  void synchronize() const;
  /// @brief Milliseconds from this event to `end` (`torch.cuda.Event.elapsed_time`); both need enable_timing and must have completed. On the emulated GPU, modelled time (TINY_EMULATED_GPU_CLOCK=host: this CPU's).
  float elapsed_time(const Event& end) const;
  /// @brief Work queued on the current stream from now on waits for this event (`torch.cuda.Event.wait()`).
  void wait() const;
  /// @brief Work queued on `stream` from now on waits for this event's latest record (`torch.cuda.Event.wait(stream)`); a never-recorded event is not waited for.
  void wait(const Stream& stream) const;

  /// @brief True once recorded at least once.
  bool is_recorded() const;
  /// @brief The device of the recording stream, or -1 before the first record (`torch.cuda.Event.device`).
  int device() const;
  /// @brief Same underlying event (copies of one Event).
  bool operator==(const Event& other) const { return state_ == other.state_; }
  /// @brief Not the same underlying event.
  bool operator!=(const Event& other) const { return state_ != other.state_; }

 private:
  struct State;
  std::shared_ptr<State> state_;
};

/// @brief Declares that `tensor`'s memory is used by work queued on `stream`
/// (`torch.Tensor.record_stream`), so that when the tensor is freed its block is
/// not handed out again (not even to its own stream) until the work queued on
/// `stream` so far has run.
///
/// Needed whenever a tensor allocated on one stream is used on another: the
/// caching allocator otherwise lets the allocating stream reuse the block at
/// once, while the other stream may still read or write it. Throws
/// tiny::DeviceError for a CPU or undefined tensor.
void record_stream(const Tensor& tensor, const Stream& stream);

}  // namespace tiny::cuda
