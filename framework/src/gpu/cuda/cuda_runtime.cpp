// gpu::Runtime on the CUDA runtime API (see cuda_runtime.h for the mapping).
// Plain C++: only the kernels need nvcc, so this file is compiled by the host
// compiler with tiny's warnings on.
#include "gpu/cuda/cuda_runtime.h"

#include <cuda_runtime_api.h>
#include <dlfcn.h>

#include <cstring>

#include "tiny/error.h"

namespace tiny::gpu {

std::string cudart_directory() {
  Dl_info info{};
  if (dladdr(reinterpret_cast<void*>(&cudaGetDeviceCount), &info) == 0 || info.dli_fname == nullptr) return "";
  const std::string path = info.dli_fname;
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? "" : path.substr(0, slash + 1);
}

std::string cuda_error_message(cudaError_t error, const std::string& call, int device) {
  std::string where = call;
  if (device >= 0) where += " on cuda:" + std::to_string(device);
  return "CUDA error: " + std::string(cudaGetErrorString(error)) + " (" + where + ")";
}

void throw_cuda_error(cudaError_t error, const std::string& call, int device) {
  // Clear the error CUDA keeps for cudaGetLastError, so the next unrelated call
  // does not report it again. (Sticky errors, a kernel fault, stay: they are
  // reported by every later call, as on CUDA itself.)
  (void)cudaGetLastError();
  const std::string message = cuda_error_message(error, call, device);
  if (error == cudaErrorMemoryAllocation) throw OutOfMemoryError(message);
  throw Error(message);
}

namespace {

// Calls CUDA and turns a failure into a tiny::Error naming the call and the device.
void check(cudaError_t error, const char* call, int device) {
  if (error != cudaSuccess) throw_cuda_error(error, call, device);
}

using DeviceGuard = CudaDeviceGuard;

}  // namespace

CudaDeviceGuard::CudaDeviceGuard(int device) {
  check(cudaGetDevice(&previous_), "cudaGetDevice", device);
  if (previous_ != device) check(cudaSetDevice(device), "cudaSetDevice", device);
}

CudaDeviceGuard::~CudaDeviceGuard() {
  int current = previous_;
  if (cudaGetDevice(&current) == cudaSuccess && current != previous_) (void)cudaSetDevice(previous_);
}

// ---- the instance --------------------------------------------------------------

CudaRuntime* CudaRuntime::instance() {
  // Never destroyed: streams and events must not be torn down after the CUDA
  // runtime itself has shut down at exit (the emulator lives as long, too).
  static CudaRuntime* const runtime = []() -> CudaRuntime* {
    // Without a driver cudaGetDeviceCount fails with cudaErrorInsufficientDriver
    // and leaves the count untouched: start from 0 and clear the error.
    int count = 0;
    if (cudaGetDeviceCount(&count) != cudaSuccess) {
      (void)cudaGetLastError();
      return nullptr;
    }
    return count > 0 ? new CudaRuntime(count) : nullptr;
  }();
  return runtime;
}

Runtime* cuda_runtime() { return CudaRuntime::instance(); }

CudaRuntime::CudaRuntime(int device_count) : device_count_(device_count) {
  devices_.reserve(static_cast<size_t>(device_count));
  for (int d = 0; d < device_count; ++d) devices_.push_back(std::make_unique<DeviceState>());
}

void CudaRuntime::check_device(int device) const {
  TINY_CHECK(device >= 0 && device < device_count_, DeviceError, "Invalid device cuda:", device, ": this machine has ",
             device_count_, " CUDA device", device_count_ == 1 ? "" : "s", " (cuda:0 to cuda:", device_count_ - 1,
             ")");
}

DeviceProperties CudaRuntime::properties(int device) const {
  check_device(device);
  cudaDeviceProp prop{};
  check(cudaGetDeviceProperties(&prop, device), "cudaGetDeviceProperties", device);
  DeviceProperties p;
  p.name = prop.name;
  p.total_memory = prop.totalGlobalMem;
  p.multiprocessor_count = prop.multiProcessorCount;
  p.major = prop.major;
  p.minor = prop.minor;
  p.emulated = false;
  return p;
}

// ---- device memory --------------------------------------------------------------

void* CudaRuntime::raw_malloc(int device, size_t nbytes) {
  check_device(device);
  DeviceGuard guard(device);
  void* ptr = nullptr;
  const cudaError_t err = cudaMalloc(&ptr, nbytes);
  if (err == cudaErrorMemoryAllocation) {
    // Not an error for the caller: the caching allocator frees its cache and retries.
    (void)cudaGetLastError();
    return nullptr;
  }
  check(err, "cudaMalloc", device);
  devices_[device]->counters.raw_mallocs.fetch_add(1, std::memory_order_relaxed);
  return ptr;
}

void CudaRuntime::raw_free(int device, void* ptr) {
  check_device(device);
  if (ptr == nullptr) return;
  DeviceGuard guard(device);
  check(cudaFree(ptr), "cudaFree", device);
  devices_[device]->counters.raw_frees.fetch_add(1, std::memory_order_relaxed);
}

size_t CudaRuntime::free_memory(int device) const {
  check_device(device);
  DeviceGuard guard(device);
  size_t free_bytes = 0, total_bytes = 0;
  check(cudaMemGetInfo(&free_bytes, &total_bytes), "cudaMemGetInfo", device);
  return free_bytes;
}

// ---- pinned host memory ----------------------------------------------------------

void* CudaRuntime::pinned_malloc(size_t nbytes) {
  int device = -1;
  (void)cudaGetDevice(&device);
  void* ptr = nullptr;
  // Portable: page-locked for every device, not just the current one.
  check(cudaHostAlloc(&ptr, nbytes, cudaHostAllocPortable), "cudaHostAlloc", device);
  if (ptr != nullptr) {
    std::lock_guard<std::mutex> lock(mutex_);
    pinned_[reinterpret_cast<uintptr_t>(ptr)] = nbytes;
  }
  return ptr;
}

void CudaRuntime::pinned_free(void* ptr) {
  if (ptr == nullptr) return;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    const auto it = pinned_.find(reinterpret_cast<uintptr_t>(ptr));
    TINY_CHECK(it != pinned_.end(), ValueError, "pinned_free: ", ptr,
               " was not returned by pinned_malloc (or was freed already)");
    pinned_.erase(it);
  }
  int device = -1;
  (void)cudaGetDevice(&device);
  check(cudaFreeHost(ptr), "cudaFreeHost", device);
}

bool CudaRuntime::is_pinned(const void* ptr) const {
  // A tensor may start inside a pinned block (a slice of pinned storage), so
  // look for the block that contains the address, not just its start.
  const uintptr_t p = reinterpret_cast<uintptr_t>(ptr);
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = pinned_.upper_bound(p);
  if (it == pinned_.begin()) return false;
  --it;
  return p < it->first + it->second || (p == it->first);
}

// ---- streams -------------------------------------------------------------------

cudaStream_t CudaRuntime::lookup_stream(Stream stream) {
  check_device(stream.device);
  std::lock_guard<std::mutex> lock(mutex_);
  auto& streams = devices_[stream.device]->streams;
  const auto it = streams.find(stream.id);
  if (it != streams.end()) return it->second;
  TINY_CHECK(stream.id == 0, ValueError, "unknown stream ", stream.id, " on cuda:", stream.device,
             " (never created, or destroyed already)");
  // The default stream: non-blocking, so it does not synchronize with other
  // streams the way CUDA's legacy default stream would.
  DeviceGuard guard(stream.device);
  cudaStream_t s = nullptr;
  check(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "cudaStreamCreateWithFlags", stream.device);
  streams.emplace(0, s);
  return s;
}

cudaStream_t CudaRuntime::native_stream(Stream stream) { return lookup_stream(stream); }

Stream CudaRuntime::default_stream(int device) {
  check_device(device);
  return Stream{device, 0};
}

Stream CudaRuntime::create_stream(int device) {
  check_device(device);
  DeviceGuard guard(device);
  cudaStream_t s = nullptr;
  check(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "cudaStreamCreateWithFlags", device);
  std::lock_guard<std::mutex> lock(mutex_);
  DeviceState& state = *devices_[device];
  const int64_t id = state.next_stream_id++;
  state.streams.emplace(id, s);
  return Stream{device, id};
}

void CudaRuntime::destroy_stream(Stream stream) {
  check_device(stream.device);
  TINY_CHECK(stream.id != 0, ValueError, "cannot destroy the default stream of cuda:", stream.device);
  cudaStream_t s = nullptr;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    auto& streams = devices_[stream.device]->streams;
    const auto it = streams.find(stream.id);
    TINY_CHECK(it != streams.end(), ValueError, "unknown stream ", stream.id, " on cuda:", stream.device,
               " (never created, or destroyed already)");
    s = it->second;
    streams.erase(it);
  }
  DeviceGuard guard(stream.device);
  // Work still queued on it completes first; CUDA releases the stream after.
  check(cudaStreamDestroy(s), "cudaStreamDestroy", stream.device);
}

bool CudaRuntime::stream_query(Stream stream) {
  cudaStream_t s = lookup_stream(stream);
  DeviceGuard guard(stream.device);
  const cudaError_t err = cudaStreamQuery(s);
  if (err == cudaErrorNotReady) return false;
  check(err, "cudaStreamQuery", stream.device);
  return true;
}

void CudaRuntime::stream_synchronize(Stream stream) {
  cudaStream_t s = lookup_stream(stream);
  DeviceGuard guard(stream.device);
  devices_[stream.device]->counters.synchronizations.fetch_add(1, std::memory_order_relaxed);
  check(cudaStreamSynchronize(s), "cudaStreamSynchronize", stream.device);
  raise_pending_error(stream.device);
}

void CudaRuntime::device_synchronize(int device) {
  check_device(device);
  DeviceGuard guard(device);
  devices_[device]->counters.synchronizations.fetch_add(1, std::memory_order_relaxed);
  check(cudaDeviceSynchronize(), "cudaDeviceSynchronize", device);
  raise_pending_error(device);
}

// ---- copies --------------------------------------------------------------------

void CudaRuntime::memcpy_async(void* dst, const void* src, size_t nbytes, CopyKind kind, Stream stream) {
  cudaStream_t s = lookup_stream(stream);
  if (nbytes == 0) return;
  DeviceGuard guard(stream.device);
  AtomicCounters& counters = devices_[stream.device]->counters;
  switch (kind) {
    case CopyKind::HostToDevice: {
      // From pageable memory CUDA copies the source into a staging buffer
      // before returning: the caller may overwrite it at once (runtime.h).
      const bool pinned = is_pinned(src);
      check(cudaMemcpyAsync(dst, src, nbytes, cudaMemcpyHostToDevice, s), "cudaMemcpyAsync host to device",
            stream.device);
      (pinned ? counters.bytes_host_to_device_pinned : counters.bytes_host_to_device_pageable)
          .fetch_add(nbytes, std::memory_order_relaxed);
      return;
    }
    case CopyKind::DeviceToHost: {
      const bool pinned = is_pinned(dst);
      check(cudaMemcpyAsync(dst, src, nbytes, cudaMemcpyDeviceToHost, s), "cudaMemcpyAsync device to host",
            stream.device);
      if (pinned) {
        counters.bytes_device_to_host_pinned.fetch_add(nbytes, std::memory_order_relaxed);
        return;
      }
      // Into pageable memory the caller reads the result as soon as we return:
      // wait for the stream (CUDA mostly does, but does not promise it).
      counters.bytes_device_to_host_pageable.fetch_add(nbytes, std::memory_order_relaxed);
      counters.synchronizations.fetch_add(1, std::memory_order_relaxed);
      check(cudaStreamSynchronize(s), "cudaStreamSynchronize after a copy to pageable memory", stream.device);
      raise_pending_error(stream.device);
      return;
    }
    case CopyKind::DeviceToDevice:
      // cudaMemcpyDefault: with unified addressing CUDA finds each pointer's
      // device, so a copy between two GPUs goes peer to peer (or staged).
      check(cudaMemcpyAsync(dst, src, nbytes, cudaMemcpyDefault, s), "cudaMemcpyAsync device to device",
            stream.device);
      counters.bytes_device_to_device.fetch_add(nbytes, std::memory_order_relaxed);
      return;
    case CopyKind::HostToHost:
      check(cudaMemcpyAsync(dst, src, nbytes, cudaMemcpyHostToHost, s), "cudaMemcpyAsync host to host",
            stream.device);
      if (!is_pinned(dst)) {
        counters.synchronizations.fetch_add(1, std::memory_order_relaxed);
        check(cudaStreamSynchronize(s), "cudaStreamSynchronize after a copy to pageable memory", stream.device);
      }
      return;
  }
  TINY_THROW(ValueError, "memcpy_async: unknown copy kind ", static_cast<int>(kind));
}

void CudaRuntime::memset_async(void* dst, int value, size_t nbytes, Stream stream) {
  cudaStream_t s = lookup_stream(stream);
  if (nbytes == 0) return;
  DeviceGuard guard(stream.device);
  check(cudaMemsetAsync(dst, value, nbytes, s), "cudaMemsetAsync", stream.device);
}

// ---- events --------------------------------------------------------------------

CudaRuntime::EventEntry CudaRuntime::lookup_event(Event event, const char* call) const {
  std::lock_guard<std::mutex> lock(mutex_);
  const auto it = events_.find(event.id);
  TINY_CHECK(it != events_.end(), ValueError, call, ": unknown event ", event.id,
             " (never created, or destroyed already)");
  return it->second;
}

Event CudaRuntime::create_event(int device, bool enable_timing) {
  check_device(device);
  DeviceGuard guard(device);
  cudaEvent_t e = nullptr;
  // Timing costs a timestamp on every record; events used only for ordering skip it.
  check(cudaEventCreateWithFlags(&e, enable_timing ? cudaEventDefault : cudaEventDisableTiming),
        "cudaEventCreateWithFlags", device);
  std::lock_guard<std::mutex> lock(mutex_);
  const int64_t id = next_event_id_++;
  events_.emplace(id, EventEntry{e, device, enable_timing});
  return Event{id};
}

void CudaRuntime::destroy_event(Event event) {
  if (!event.valid()) return;
  EventEntry entry;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    const auto it = events_.find(event.id);
    TINY_CHECK(it != events_.end(), ValueError, "destroy_event: unknown event ", event.id,
               " (never created, or destroyed already)");
    entry = it->second;
    events_.erase(it);
  }
  DeviceGuard guard(entry.device);
  check(cudaEventDestroy(entry.event), "cudaEventDestroy", entry.device);
}

void CudaRuntime::record_event(Event event, Stream stream) {
  const EventEntry entry = lookup_event(event, "record_event");
  TINY_CHECK(entry.device == stream.device, DeviceError, "record_event: the event belongs to cuda:", entry.device,
             " but the stream to cuda:", stream.device, " (record an event created on the stream's device)");
  cudaStream_t s = lookup_stream(stream);
  DeviceGuard guard(stream.device);
  check(cudaEventRecord(entry.event, s), "cudaEventRecord", stream.device);
}

bool CudaRuntime::event_query(Event event) {
  const EventEntry entry = lookup_event(event, "event_query");
  DeviceGuard guard(entry.device);
  const cudaError_t err = cudaEventQuery(entry.event);
  if (err == cudaErrorNotReady) return false;
  check(err, "cudaEventQuery", entry.device);
  return true;
}

void CudaRuntime::event_synchronize(Event event) {
  const EventEntry entry = lookup_event(event, "event_synchronize");
  DeviceGuard guard(entry.device);
  devices_[entry.device]->counters.synchronizations.fetch_add(1, std::memory_order_relaxed);
  check(cudaEventSynchronize(entry.event), "cudaEventSynchronize", entry.device);
  raise_pending_error(entry.device);
}

void CudaRuntime::stream_wait_event(Stream stream, Event event) {
  // The event may come from another device: that is how two GPUs are ordered.
  const EventEntry entry = lookup_event(event, "stream_wait_event");
  cudaStream_t s = lookup_stream(stream);
  DeviceGuard guard(stream.device);
  check(cudaStreamWaitEvent(s, entry.event, 0), "cudaStreamWaitEvent", stream.device);
}

float CudaRuntime::event_elapsed_ms(Event start, Event end) {
  const EventEntry a = lookup_event(start, "event_elapsed_ms");
  const EventEntry b = lookup_event(end, "event_elapsed_ms");
  TINY_CHECK(a.timing && b.timing, ValueError,
             "event_elapsed_ms: both events must be created with enable_timing=true (as "
             "torch.cuda.Event(enable_timing=True))");
  DeviceGuard guard(a.device);
  float ms = 0.0f;
  check(cudaEventElapsedTime(&ms, a.event, b.event), "cudaEventElapsedTime", a.device);
  return ms;
}

// ---- counters ------------------------------------------------------------------

Counters CudaRuntime::counters(int device) const {
  check_device(device);
  const AtomicCounters& a = devices_[device]->counters;
  const auto load = [](const std::atomic<uint64_t>& v) { return v.load(std::memory_order_relaxed); };
  Counters c;
  c.synchronizations = load(a.synchronizations);
  c.kernel_launches = load(a.kernel_launches);
  c.bytes_host_to_device_pageable = load(a.bytes_host_to_device_pageable);
  c.bytes_host_to_device_pinned = load(a.bytes_host_to_device_pinned);
  c.bytes_device_to_host_pageable = load(a.bytes_device_to_host_pageable);
  c.bytes_device_to_host_pinned = load(a.bytes_device_to_host_pinned);
  c.bytes_device_to_device = load(a.bytes_device_to_device);
  c.device_mallocs = load(a.raw_mallocs);
  c.raw_frees = load(a.raw_frees);
  c.gemms_float32 = load(a.gemms_float32);
  c.gemms_tf32 = load(a.gemms_tf32);
  c.gemms_float16 = load(a.gemms_float16);
  c.gemms_bfloat16 = load(a.gemms_bfloat16);
  c.gemms_other = load(a.gemms_other);
  return c;
}

void CudaRuntime::reset_counters(int device) {
  check_device(device);
  AtomicCounters& c = devices_[device]->counters;
  for (std::atomic<uint64_t>* a : {&c.synchronizations, &c.kernel_launches, &c.bytes_host_to_device_pageable,
                                   &c.bytes_host_to_device_pinned, &c.bytes_device_to_host_pageable,
                                   &c.bytes_device_to_host_pinned, &c.bytes_device_to_device, &c.raw_mallocs,
                                   &c.raw_frees, &c.gemms_float32, &c.gemms_tf32, &c.gemms_float16,
                                   &c.gemms_bfloat16, &c.gemms_other}) {
    a->store(0, std::memory_order_relaxed);
  }
}

void CudaRuntime::note_kernel_launch(int device) {
  if (device < 0 || device >= device_count_) return;
  devices_[device]->counters.kernel_launches.fetch_add(1, std::memory_order_relaxed);
}

void CudaRuntime::note_gemm(int device, Dtype dtype, bool tf32) {
  if (device < 0 || device >= device_count_) return;
  AtomicCounters& c = devices_[device]->counters;
  switch (dtype) {
    case Dtype::Float32: (tf32 ? c.gemms_tf32 : c.gemms_float32).fetch_add(1, std::memory_order_relaxed); break;
    case Dtype::Float16: c.gemms_float16.fetch_add(1, std::memory_order_relaxed); break;
    case Dtype::BFloat16: c.gemms_bfloat16.fetch_add(1, std::memory_order_relaxed); break;
    default: c.gemms_other.fetch_add(1, std::memory_order_relaxed); break;
  }
}

// ---- kernel errors ---------------------------------------------------------------

DeviceErrorTarget CudaRuntime::device_error_target(int device) {
  check_device(device);
  std::lock_guard<std::mutex> lock(mutex_);
  DeviceState& state = *devices_[device];
  if (state.error_device != nullptr) return DeviceErrorTarget{state.error_lock, state.error_device};
  DeviceGuard guard(device);
  // The record in mapped pinned memory: kernels write it directly, the host
  // reads it after a synchronization without a copy (checking costs a load,
  // not a transfer).
  void* host = nullptr;
  check(cudaHostAlloc(&host, sizeof(DeviceErrorRecord), cudaHostAllocMapped | cudaHostAllocPortable),
        "cudaHostAlloc of the device error record", device);
  std::memset(host, 0, sizeof(DeviceErrorRecord));
  void* dev = nullptr;
  check(cudaHostGetDevicePointer(&dev, host, 0), "cudaHostGetDevicePointer of the device error record", device);
  // The lock word in device memory, where atomicCAS is atomic for sure.
  void* lock_word = nullptr;
  check(cudaMalloc(&lock_word, sizeof(int32_t)), "cudaMalloc of the device error lock", device);
  check(cudaMemset(lock_word, 0, sizeof(int32_t)), "cudaMemset of the device error lock", device);
  check(cudaDeviceSynchronize(), "cudaDeviceSynchronize after creating the device error record", device);
  state.error_host = static_cast<DeviceErrorRecord*>(host);
  state.error_device = static_cast<DeviceErrorRecord*>(dev);
  state.error_lock = static_cast<int32_t*>(lock_word);
  return DeviceErrorTarget{state.error_lock, state.error_device};
}

namespace {

// The message of a recorded error, worded as the CPU kernels word the same mistake.
std::string describe(const DeviceErrorRecord& r) {
  const std::string value = std::to_string(r.value), position = std::to_string(r.position);
  const std::string bound = std::to_string(r.bound), last = std::to_string(r.bound - 1);
  switch (static_cast<DeviceErrorOp>(r.op)) {
    case DeviceErrorOp::Embedding:
    case DeviceErrorOp::EmbeddingBackward:
      return "embedding: index " + value + " (at position " + position +
             " of the flattened indices) is out of range for an embedding with num_embeddings=" + bound +
             " (valid indices are 0.." + last + ")";
    case DeviceErrorOp::NllLoss:
    case DeviceErrorOp::NllLossBackward:
      return "Target " + value + " is out of bounds: sample " + position + " has class " + value +
             " but the input has " + bound + " classes (valid targets are 0.." + last +
             ", or ignore_index=" + std::to_string(r.extra) + ")";
    case DeviceErrorOp::None: break;
  }
  return "unknown error code " + std::to_string(r.op);
}

const char* op_name(int32_t op) {
  switch (static_cast<DeviceErrorOp>(op)) {
    case DeviceErrorOp::Embedding: return "embedding";
    case DeviceErrorOp::EmbeddingBackward: return "embedding_backward";
    case DeviceErrorOp::NllLoss: return "nll_loss";
    case DeviceErrorOp::NllLossBackward: return "nll_loss_backward";
    case DeviceErrorOp::None: break;
  }
  return "a kernel";
}

}  // namespace

std::string CudaRuntime::pending_error(int device) const {
  check_device(device);
  DeviceErrorRecord record{};
  {
    std::lock_guard<std::mutex> lock(mutex_);
    const DeviceErrorRecord* host = devices_[device]->error_host;
    if (host == nullptr) return "";
    // Kernels write the record while the host may read it: read the flag
    // first (volatile: not cached), and the fields only once it is set (the
    // caller synchronized, so the kernel that set it has finished).
    if (static_cast<const volatile DeviceErrorRecord*>(host)->flag == 0) return "";
    std::memcpy(&record, host, sizeof(record));
  }
  return "CUDA error: device-side assert triggered on cuda:" + std::to_string(device) + " in " +
         op_name(record.op) + ": " + describe(record) +
         ". Kernel errors are reported at the next synchronizing call; rerun with TINY_LAUNCH_BLOCKING=1 to see "
         "the op that failed. " + kStickyErrorAdvice;
}

void CudaRuntime::clear_error(int device) {
  check_device(device);
  std::lock_guard<std::mutex> lock(mutex_);
  DeviceState& state = *devices_[device];
  if (state.error_host == nullptr) return;
  // Unlock first (and wait for it: cudaMemset may return before it is done),
  // then forget the record, so the next error is recorded again.
  DeviceGuard guard(device);
  check(cudaMemset(state.error_lock, 0, sizeof(int32_t)), "cudaMemset of the device error lock", device);
  check(cudaDeviceSynchronize(), "cudaDeviceSynchronize in clear_error", device);
  std::memset(state.error_host, 0, sizeof(DeviceErrorRecord));
}

void CudaRuntime::raise_pending_error(int device) const {
  const std::string message = pending_error(device);
  if (!message.empty()) throw Error(message);
}

}  // namespace tiny::gpu
