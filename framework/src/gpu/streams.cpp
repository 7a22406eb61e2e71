// tiny::cuda streams and events (torch.cuda.Stream / Event / stream / set_stream,
// Tensor.record_stream), over gpu::device_runtime(), the thread's current
// stream kept by gpu/device_context.cpp, and the per-device caching allocators.
//
// Decisions:
// - Streams come from a per-device pool of kStreamPoolSize runtime streams,
//   created on first use and handed out round robin, as PyTorch's
//   torch.cuda.Stream() does. Runtime streams are never destroyed: the caching
//   allocator keeps per-stream pools and records record_stream events on them,
//   and other threads may hold them as their current stream, so a stream that
//   vanished with its last handle would turn a later free() into an "invalid
//   resource handle" error. The pool bounds what that costs (the emulator
//   starts a worker thread per stream on its first use).
// - An Event's runtime event is created at its first record, on the recording
//   stream's device (PyTorch creates it lazily too), and destroyed when the
//   last copy of the handle goes. Markers and waits already queued keep
//   working after that (the runtimes allow destroying a pending event).
#include <memory>
#include <mutex>
#include <utility>
#include <vector>

#include "core/tensor_impl.h"
#include "gpu/device_context.h"
#include "tiny/cuda.h"
#include "tiny/error.h"
#include "tiny/tensor.h"

namespace tiny::cuda {

namespace {

constexpr size_t kStreamPoolSize = 32;  // PyTorch's kStreamsPerPool

int resolve(int index) {
  return gpu::resolve_index(index < 0 ? Device(DeviceType::CUDA) : Device(DeviceType::CUDA, index));
}

gpu::Stream native(const Stream& s) { return gpu::Stream{s.device(), s.id()}; }

// The id of the next pooled stream of `device` (already resolved).
int64_t next_pooled_stream(int device) {
  struct Pool {
    std::mutex mutex;
    std::vector<std::vector<int64_t>> ids;  // per device: the streams created so far
    std::vector<size_t> next;               // per device: how many were handed out
  };
  static auto* pool = new Pool();  // never destroyed: handles may be used during exit
  std::lock_guard<std::mutex> lock(pool->mutex);
  if (pool->ids.empty()) {
    pool->ids.resize(static_cast<size_t>(gpu::device_count()));
    pool->next.resize(pool->ids.size(), 0);
  }
  auto& ids = pool->ids[static_cast<size_t>(device)];
  const size_t k = pool->next[static_cast<size_t>(device)]++ % kStreamPoolSize;
  if (k == ids.size()) ids.push_back(gpu::device_runtime()->create_stream(device).id);
  return ids[k];
}

}  // namespace

// ---------------------------------------------------------------- Stream

Stream::Stream(int device) : device_(resolve(device)), id_(next_pooled_stream(device_)) {}

Stream Stream::default_stream(int device) {
  const int index = resolve(device);
  return Stream(index, gpu::device_runtime()->default_stream(index).id, true);
}

Stream Stream::unsafe_from_id(int device, int64_t id) { return Stream(resolve(device), id, true); }

bool Stream::query() const { return gpu::device_runtime()->stream_query(native(*this)); }

void Stream::synchronize() const { gpu::device_runtime()->stream_synchronize(native(*this)); }

void Stream::wait_stream(const Stream& other) const {
  if (other == *this) return;  // a stream is ordered with itself
  Event marker;
  marker.record(other);
  wait_event(marker);
}

void Stream::wait_event(const Event& event) const { event.wait(*this); }

Event Stream::record_event() const {
  Event event;
  event.record(*this);
  return event;
}

Event Stream::record_event(const Event& event) const {
  Event shared = event;  // the same underlying event
  shared.record(*this);
  return shared;
}

Stream current_stream(int device) {
  const int index = resolve(device);
  return Stream::unsafe_from_id(index, gpu::current_stream(index).id);
}

Stream default_stream(int device) { return Stream::default_stream(device); }

void set_stream(const Stream& stream) {
  gpu::set_current_device(stream.device());
  gpu::set_current_stream(native(stream));
}

StreamGuard::StreamGuard(const Stream& stream)
    : previous_device_(gpu::current_device()), previous_stream_(current_stream(stream.device())) {
  set_stream(stream);
}

StreamGuard::~StreamGuard() {
  gpu::set_current_stream(native(previous_stream_));
  gpu::set_current_device(previous_device_);
}

// ---------------------------------------------------------------- Event

struct Event::State {
  explicit State(bool timing) : enable_timing(timing) {}
  ~State() {
    if (!event.valid()) return;
    try {
      gpu::device_runtime()->destroy_event(event);
    } catch (...) {
      // A destructor must not throw; the runtime outlives every handle, so
      // this is not expected.
    }
  }
  State(const State&) = delete;
  State& operator=(const State&) = delete;

  // The runtime event and its device, or an invalid event and -1 before the
  // first record.
  std::pair<int, gpu::Event> snapshot() const {
    std::lock_guard<std::mutex> lock(mutex);
    return {device, event};
  }

  const bool enable_timing;
  mutable std::mutex mutex;  // guards device and event
  int device = -1;
  gpu::Event event;
};

Event::Event(bool enable_timing) : state_(std::make_shared<State>(enable_timing)) {}

void Event::record() { record(current_stream()); }

void Event::record(const Stream& stream) {
  gpu::Runtime* rt = gpu::device_runtime();
  std::lock_guard<std::mutex> lock(state_->mutex);
  if (!state_->event.valid()) {
    state_->event = rt->create_event(stream.device(), state_->enable_timing);
    state_->device = stream.device();
  }
  TINY_CHECK(state_->device == stream.device(), DeviceError, "Event device cuda:", state_->device,
             " does not match recording stream's device cuda:", stream.device(),
             " (an event is recorded on one device only; use one event per device)");
  rt->record_event(state_->event, native(stream));
}

bool Event::query() const {
  const gpu::Event event = state_->snapshot().second;
  return !event.valid() || gpu::device_runtime()->event_query(event);
}

void Event::synchronize() const {
  const gpu::Event event = state_->snapshot().second;
  if (event.valid()) gpu::device_runtime()->event_synchronize(event);
}

float Event::elapsed_time(const Event& end) const {
  TINY_CHECK(state_->enable_timing && end.state_->enable_timing, Error,
             "elapsed_time: both events must be created with argument 'enable_timing=True' "
             "(tiny::cuda::Event(true))");
  const auto [start_device, start_event] = state_->snapshot();
  const auto [end_device, end_event] = end.state_->snapshot();
  TINY_CHECK(start_event.valid() && end_event.valid(), Error, "elapsed_time: ",
             !start_event.valid() && !end_event.valid() ? "neither event was"
             : !start_event.valid()                     ? "the start event (the one elapsed_time is called on) was"
                                                        : "the end event (the argument) was",
             " never recorded; call start.record() before the work you time and end.record() after it, as with "
             "torch.cuda.Event");
  TINY_CHECK(start_device == end_device, DeviceError, "elapsed_time: the events were recorded on different devices (cuda:",
             start_device, " and cuda:", end_device, ")");
  // The end first: on one stream it completes last, and synchronizing on it is the usual fix.
  const bool end_done = gpu::device_runtime()->event_query(end_event);
  const char* waiting = !end_done ? "end" : gpu::device_runtime()->event_query(start_event) ? nullptr : "start";
  TINY_CHECK(waiting == nullptr, Error, "elapsed_time: CUDA error: device not ready: the ", waiting,
             " event has not completed yet (the GPU is still running the work queued before it); call ", waiting,
             ".synchronize() first, as torch.cuda.Event needs too");
  return gpu::device_runtime()->event_elapsed_ms(start_event, end_event);
}

void Event::wait() const { wait(current_stream()); }

void Event::wait(const Stream& stream) const {
  const gpu::Event event = state_->snapshot().second;
  if (event.valid()) gpu::device_runtime()->stream_wait_event(native(stream), event);
}

bool Event::is_recorded() const { return state_->snapshot().second.valid(); }

int Event::device() const { return state_->snapshot().first; }

// ---------------------------------------------------------------- record_stream

void record_stream(const Tensor& tensor, const Stream& stream) {
  TINY_CHECK(tensor.defined(), DeviceError, "record_stream: the tensor is undefined");
  TINY_CHECK(tensor.is_cuda(), DeviceError, "record_stream: expected a CUDA tensor, got one on ", tensor.device(),
             " (only GPU memory is stream-ordered)");
  const int index = gpu::resolve_index(tensor.device());
  // The block the allocator handed out: the owning storage, not an alias of it.
  const Storage* storage = tensor.unsafe_impl()->storage.get();
  while (storage->base != nullptr) storage = storage->base.get();
  gpu::device_allocator(index).record_stream(storage->data, native(stream));
}

}  // namespace tiny::cuda
