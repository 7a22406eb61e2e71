// The host-emulated GPU. See emulated_runtime.h for what it emulates.
//
// How a stream works here: a StreamState holds a FIFO queue of WorkItems and
// four counters that only grow:
//   enqueued   items ever put on the queue
//   released   items the worker may run (== enqueued, except in deferred mode,
//              where it catches up only at synchronization points)
//   taken      items the worker has taken off the queue
//   completed  items that have finished
// A host wait for "everything queued so far" remembers `enqueued` and sleeps
// until `completed` reaches it. Events are markers in the queue: when the
// worker reaches one it stamps the event with the host time. stream_wait_event
// queues an item that sleeps until the event's marker has run. So ordering
// between streams comes only from events, as on a GPU.
//
// Each stream has its own worker thread, started when work is first queued on
// it: a stream blocked on a gate or an event never holds up another stream.
#include "gpu/emulated/emulated_runtime.h"

#include <pthread.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <exception>
#include <fstream>
#include <map>
#include <string>
#include <system_error>
#include <thread>
#include <utility>

#include "core/fault_injection.h"
#include "gpu/emulated/device_memory.h"
#include "gpu/model/timeline.h"
#include "gpu/model/trace.h"
#include "core/op_scope.h"
#include "runtime/cpu_allocator.h"
#include "runtime/fork.h"
#include "runtime/spin.h"
#include "runtime/thread_pool.h"
#include "tiny/error.h"
#include "tiny/distributed/store.h"

namespace tiny::gpu {
namespace emulated {

using Clock = std::chrono::steady_clock;

struct EventState {
  int device = 0;
  bool timing = false;
  uint64_t recorded = 0;   // how many times record_event was called
  uint64_t completed = 0;  // the highest record number whose marker has run
  Clock::time_point time;  // when the marker of record `completed` ran (host time)
  int64_t modelled_ns = 0;  // when the latest record completes in modelled time
};

enum class ItemKind { kernel, record_event, wait_event };

struct WorkItem {
  ItemKind kind = ItemKind::kernel;
  std::function<void()> work;  // kernel: an emulated kernel or a copy
  const char* name = "";       // kernel: the op, for error messages
  bool collective = false;     // kernel: a collective (its failure is the communicator's, not a device fault)
  std::shared_ptr<EventState> event;
  uint64_t record = 0;  // record_event: the record number to mark; wait_event: the one to wait for
};

struct StreamState {
  int device = 0;
  int64_t id = 0;
  std::deque<WorkItem> queue;
  uint64_t enqueued = 0, released = 0, taken = 0, completed = 0;
  bool worker_running = false;
  bool worker_started = false;  // the worker reached worker_loop (see enqueue)
  bool destroyed = false;      // by destroy_stream: the worker drains the queue and exits
  std::condition_variable cv;  // the worker sleeps here until work is released
  // Read without the lock by a thread polling before it sleeps (runtime/spin.h):
  // bumped at every notify of cv, and `completed` as last stored.
  std::atomic<uint64_t> notified{0};
  std::atomic<uint64_t> completed_seen{0};
  // The smallest `completed` a thread sleeping in wait_stream_locked waits
  // for: the worker wakes the waiters when it gets there, not after every item
  // (a futex wake-up per kernel cost a context switch per kernel).
  uint64_t wake_at = UINT64_MAX;

  void wake_worker() {
    notified.fetch_add(1, std::memory_order_release);
    cv.notify_all();
  }
};

struct DeviceState {
  int index = 0;
  std::unique_ptr<DeviceMemory> memory;
  // Items queued on the device's streams and not yet completed: while there
  // are some, the pool's idle workers keep polling (more kernels are coming).
  std::atomic<int64_t> queued{0};
  // The device's threads (its share of the cores, or more while the other
  // devices are idle: runtime::ThreadPool's group): its stream workers are bound to it.
  std::unique_ptr<runtime::ThreadPool> pool;
  // Modelled time (DESIGN.md section 4a), guarded by EmulatedRuntime::mutex_:
  // the schedule of the device's engines and streams, and where the window of
  // utilization() starts (reset_counters).
  std::unique_ptr<model::DeviceTimeline> timeline;
  int64_t window_start_ns = 0;

  // Guarded by EmulatedRuntime::mutex_. A destroyed stream stays here until
  // its worker has run everything queued on it (device_synchronize waits for it).
  std::map<int64_t, std::shared_ptr<StreamState>> streams;
  int64_t next_stream_id = 1;

  mutable std::mutex counters_mutex;
  Counters counters;

  // The sticky error: the first one recorded, kept until clear_error.
  mutable std::mutex error_mutex;
  bool has_error = false;
  bool error_from_collective = false;  // a collective failed (a peer missing or disagreeing), not a kernel
  std::string error_op, error_message;

  template <typename F>
  void count(F&& update) {
    std::lock_guard<std::mutex> lock(counters_mutex);
    update(counters);
  }
};

}  // namespace emulated

using emulated::DeviceState;
using emulated::EventState;
using emulated::ItemKind;
using emulated::StreamState;
using emulated::WorkItem;

namespace {

constexpr int kMaxEmulatedGpus = 64;
constexpr size_t kMiB = size_t{1} << 20;
constexpr size_t kGiB = size_t{1} << 30;

// Which device and stream the calling thread is the worker of (none on the host).
thread_local int t_worker_device = -1;
thread_local const StreamState* t_worker_stream = nullptr;

const char* env_or_null(const char* name) {
  const char* value = std::getenv(name);
  return value != nullptr && value[0] != '\0' ? value : nullptr;  // VAR= counts as unset
}

int parse_device_count() {
  const char* env = env_or_null(kEmulatedGpusVariable);
  if (env == nullptr) return 2;
  const std::string value = env;
  const bool digits = value.size() <= 3 && std::all_of(value.begin(), value.end(), [](char c) {
                        return c >= '0' && c <= '9';
                      });
  const int n = digits ? std::atoi(value.c_str()) : -1;
  TINY_CHECK(n >= 0 && n <= kMaxEmulatedGpus, ValueError, kEmulatedGpusVariable, "=\"", value,
             "\" is not a valid number of emulated GPUs: expected a whole number from 0 to ", kMaxEmulatedGpus,
             " (0 turns the emulated GPU off), or leave it unset for 2");
  return n;
}

// Reads a cgroup memory limit file ("max" or a number of bytes); 0 if none.
size_t read_cgroup_limit(const char* path) {
  std::ifstream file(path);
  std::string text;
  const auto is_digit = [](char c) { return c >= '0' && c <= '9'; };
  if (!(file >> text) || !std::all_of(text.begin(), text.end(), is_digit)) return 0;  // "max": no limit
  return static_cast<size_t>(std::strtoull(text.c_str(), nullptr, 10));
}

// The host memory this process may use: physical memory, or a container's
// limit when that is lower (so the default capacity cannot invite the OOM killer).
size_t host_memory_bytes() {
  const long pages = sysconf(_SC_PHYS_PAGES);
  const long page = sysconf(_SC_PAGESIZE);
  size_t total = pages > 0 && page > 0 ? static_cast<size_t>(pages) * static_cast<size_t>(page) : 8 * kGiB;
  for (const char* path : {"/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"}) {
    const size_t limit = read_cgroup_limit(path);
    if (limit > 0 && limit < total) total = limit;
  }
  return total;
}

size_t parse_capacity(int devices) {
  const char* env = env_or_null(kEmulatedGpuMemoryVariable);
  if (env == nullptr) {
    const size_t share = host_memory_bytes() / 4 / static_cast<size_t>(devices);
    return std::max(kMiB, std::min(4 * kGiB, share) / kMiB * kMiB);
  }
  const size_t bytes = runtime::parse_byte_size(kEmulatedGpuMemoryVariable, env);
  TINY_CHECK(bytes > 0, ValueError, kEmulatedGpuMemoryVariable, "=\"", env,
             "\" gives the emulated GPUs no memory: use a size such as 2GiB or 512MiB, or leave it unset");
  return bytes;
}

// TINY_LAUNCH_BLOCKING=1 (as CUDA_LAUNCH_BLOCKING) or TINY_EMULATED_GPU_MODE
// (threaded, blocking or deferred); setting both to different modes is an error.
EmulatedRuntime::Mode parse_mode() {
  using Mode = EmulatedRuntime::Mode;
  Mode mode = Mode::threaded;
  const char* env = env_or_null(kLaunchBlockingVariable);
  if (env != nullptr && std::strcmp(env, "0") != 0) {
    TINY_CHECK(std::strcmp(env, "1") == 0, ValueError, kLaunchBlockingVariable, "=\"", env,
               "\" is not valid: use 1 to run every GPU operation before the call returns (for debugging), "
               "or 0 / unset for asynchronous execution");
    mode = Mode::blocking;
  }
  const char* name = env_or_null(kEmulatedGpuModeVariable);
  if (name == nullptr) return mode;
  Mode named = Mode::threaded;
  if (std::strcmp(name, "blocking") == 0) {
    named = Mode::blocking;
  } else if (std::strcmp(name, "deferred") == 0) {
    named = Mode::deferred;
  } else {
    TINY_CHECK(std::strcmp(name, "threaded") == 0, ValueError, kEmulatedGpuModeVariable, "=\"", name,
               "\" is not a mode of the emulated GPU: use threaded (the default, asynchronous like hardware), "
               "blocking (every operation finishes before the call returns) or deferred (queued work runs "
               "only when the host synchronizes)");
  }
  TINY_CHECK(mode == Mode::threaded || named == mode, ValueError, kLaunchBlockingVariable,
             "=1 asks for blocking mode but ", kEmulatedGpuModeVariable, "=\"", name,
             "\" asks for another one: unset one of them");
  return named;
}

// TINY_EMULATED_GPU_CLOCK: "modelled" (the default: events time the modelled
// GPU) or "host" (events stamp the host's clock when their marker runs: what
// the emulator's work took on this CPU, for exploring, never for grading).
bool parse_event_clock() {
  const char* value = env_or_null(kEmulatedGpuClockVariable);
  if (value == nullptr || std::strcmp(value, "modelled") == 0) return false;
  TINY_CHECK(std::strcmp(value, "host") == 0, ValueError, kEmulatedGpuClockVariable, "=\"", value,
             "\" is not a clock of the emulated GPU: use modelled (the default: events time the modelled GPU, "
             "TINY_EMULATED_GPU_MODEL) or host (events time this CPU's work)");
  return true;
}

// Tells the profiler (when one records) about work just scheduled.
void trace_work(model::TraceEvent::Kind kind, const char* name, Stream stream, model::Span span,
                int64_t host_start, int64_t bytes, double flops, bool pinned) {
  if (!model::tracing()) return;
  model::TraceEvent e;
  e.kind = kind;
  e.name = name;
  e.op = tiny::detail::current_op_name != nullptr ? tiny::detail::current_op_name : "";
  e.device = stream.device;
  e.stream = stream.id;
  e.start_ns = span.start;
  e.end_ns = span.end;
  e.host_start_ns = host_start;
  e.host_end_ns = model::host_now();
  e.bytes = bytes;
  e.flops = flops;
  e.pinned = pinned;
  model::trace(e);
}

// A synchronizing call: the host's wait, from the call to its return.
void trace_sync(const char* name, int device, int64_t stream, int64_t host_start) {
  if (!model::tracing()) return;
  model::TraceEvent e;
  e.kind = model::TraceEvent::Kind::synchronize;
  e.name = name;
  e.device = device;
  e.stream = stream;
  e.start_ns = e.host_start_ns = host_start;
  e.end_ns = e.host_end_ns = model::host_now();
  model::trace(e);
}

const char* copy_kind_name(CopyKind kind) {
  switch (kind) {
    case CopyKind::HostToDevice: return "HostToDevice";
    case CopyKind::DeviceToHost: return "DeviceToHost";
    case CopyKind::DeviceToDevice: return "DeviceToDevice";
    case CopyKind::HostToHost: return "HostToHost";
  }
  return "?";
}

}  // namespace

// Pinned host blocks: ordinary page-aligned host memory, remembered so that
// copies know they may skip the staging (and the waiting) of pageable memory.
// (Real pinned memory is also locked into RAM so the GPU's DMA engine can
// read it; an emulated device does not need that.)
struct EmulatedRuntime::PinnedRegistry {
  mutable std::mutex mutex;
  std::map<uintptr_t, size_t> blocks;  // start -> size
};

// ---------------------------------------------------------------- lifetime

EmulatedRuntime::EmulatedRuntime()
    : mode_(parse_mode()),
      host_clock_events_(parse_event_clock()),
      creator_generation_(runtime::fork_generation()),
      pinned_(std::make_unique<PinnedRegistry>()) {
  const int count = parse_device_count();
  TINY_CHECK(count > 0, Error, kEmulatedGpusVariable, "=0 turns the emulated GPU off: no EmulatedRuntime can be made");
  const size_t capacity = parse_capacity(count);
  model::set_host_autograd_ns(model::selected_model().host_autograd_ns);
  for (int i = 0; i < count; ++i) {
    auto device = std::make_unique<DeviceState>();
    device->index = i;
    device->memory = std::make_unique<emulated::DeviceMemory>(i, capacity);
    device->pool = std::make_unique<runtime::ThreadPool>(count, "tiny-gpu" + std::to_string(i), &pools_running_,
                                                          &device->queued);
    device->timeline = std::make_unique<model::DeviceTimeline>(model::selected_model());
    auto stream = std::make_shared<StreamState>();
    stream->device = i;
    stream->id = 0;
    device->streams.emplace(0, std::move(stream));
    devices_.push_back(std::move(device));
  }
}

EmulatedRuntime::~EmulatedRuntime() {
  // Only runtimes made by tests get here. Let every worker finish its queue
  // and exit, so that none touches this object afterwards.
  std::unique_lock<std::mutex> lock(mutex_);
  release_all_locked();
  for (auto& device : devices_) {
    for (auto& [id, stream] : device->streams) {
      stream->destroyed = true;
      stream->wake_worker();
    }
  }
  done_cv_.wait(lock, [&] {
    for (auto& device : devices_) {
      for (auto& [id, stream] : device->streams) {
        if (stream->worker_running) return false;
      }
    }
    return true;
  });
  lock.unlock();
  std::lock_guard<std::mutex> pinned_lock(pinned_->mutex);
  for (auto& [start, size] : pinned_->blocks) std::free(reinterpret_cast<void*>(start));
}

// ---------------------------------------------------------------- devices

int EmulatedRuntime::device_count() const { return static_cast<int>(devices_.size()); }

DeviceState& EmulatedRuntime::device(int index, const char* what) const {
  const int count = device_count();
  TINY_CHECK(index >= 0 && index < count, DeviceError, what, ": invalid device index ", index,
             ": the emulated GPU has ", count, " device(s), so the valid indices are 0 to ", count - 1,
             " (cuda:0 to cuda:", count - 1, ")");
  return *devices_[index];
}

DeviceProperties EmulatedRuntime::properties(int index) const {
  const DeviceState& d = device(index, "properties");
  DeviceProperties p;
  p.name = "tiny emulated GPU " + std::to_string(index) + " (EMULATED on your CPU)";
  p.total_memory = d.memory->capacity();
  // Each device owns an equal share of the cores tiny uses (its thread pool's
  // fair share), the way each GPU owns its own streaming multiprocessors.
  p.multiprocessor_count = d.pool->size();
  p.major = 8;  // an A100's compute capability: what the lessons' CUDA build targets
  p.minor = 0;
  p.emulated = true;
  p.modelled_gpu = model::selected_model().display_name;
  p.modelled_memory_gb = model::selected_model().memory_gb;
  return p;
}

// ---------------------------------------------------------------- memory

void* EmulatedRuntime::raw_malloc(int index, size_t nbytes) {
  DeviceState& d = device(index, "raw_malloc");
  if (nbytes == 0) return nullptr;
  d.count([](Counters& c) { ++c.device_mallocs; });
  if (fault::device_malloc_fails()) return nullptr;  // a planned out-of-memory (TINY_FAULT_INJECT)
  return d.memory->allocate(nbytes);
}

void EmulatedRuntime::raw_free(int index, void* ptr) {
  DeviceState& d = device(index, "raw_free");
  if (ptr == nullptr) return;
  TINY_CHECK(d.memory->free(ptr, /*give_back_pages=*/!in_forked_child()), Error, "raw_free: ", ptr,
             " is not memory that raw_malloc of cuda:", index, " handed out (or it was freed already)");
  if (!in_forked_child()) {
    // cudaFree waits for the device. Not in a forked child, which frees what
    // it inherited: a worker of the parent may have held mutex_ at the fork.
    std::lock_guard<std::mutex> lock(mutex_);
    d.timeline->synchronize_device();
  }
  d.count([](Counters& c) { ++c.raw_frees; });
}

size_t EmulatedRuntime::free_memory(int index) const {
  const DeviceState& d = device(index, "free_memory");
  return d.memory->capacity() - d.memory->used();
}

void* EmulatedRuntime::worker_address(const void* ptr) const {
  const int index = device_of(ptr);
  TINY_CHECK(index >= 0, Error, "worker_address: ", ptr, " is not emulated device memory");
  return devices_[index]->memory->worker_address(ptr);
}

bool EmulatedRuntime::is_device_pointer(const void* ptr) const { return device_of(ptr) >= 0; }

int EmulatedRuntime::device_of(const void* ptr) const {
  for (const auto& d : devices_) {
    if (d->memory->contains(ptr)) return d->index;
  }
  return -1;
}

runtime::ThreadPool& EmulatedRuntime::thread_pool(int index) const { return *device(index, "thread_pool").pool; }

int EmulatedRuntime::current_worker_device() { return t_worker_device; }

void EmulatedRuntime::check_device_range(const void* ptr, size_t nbytes, const char* what, const char* which) const {
  const int index = device_of(ptr);
  TINY_CHECK(index >= 0, Error, what, ": ", which, " ", ptr, " is not device memory");
  TINY_CHECK(devices_[index]->memory->is_allocated_range(ptr, nbytes), Error, "CUDA error: an illegal memory access ",
             "was encountered in ", what, ": ", which, " [", ptr, ", +", nbytes, " bytes) is not inside one live ",
             "allocation of cuda:", index);
}

void* EmulatedRuntime::pinned_malloc(size_t nbytes) {
  if (nbytes == 0) return nullptr;
  void* ptr = nullptr;
  if (posix_memalign(&ptr, 4096, nbytes) != 0) return nullptr;
  std::lock_guard<std::mutex> lock(pinned_->mutex);
  pinned_->blocks.emplace(reinterpret_cast<uintptr_t>(ptr), nbytes);
  return ptr;
}

void EmulatedRuntime::pinned_free(void* ptr) {
  if (ptr == nullptr) return;
  {
    std::lock_guard<std::mutex> lock(pinned_->mutex);
    const auto it = pinned_->blocks.find(reinterpret_cast<uintptr_t>(ptr));
    TINY_CHECK(it != pinned_->blocks.end(), Error, "pinned_free: ", ptr,
               " is not a block from pinned_malloc (or it was freed already)");
    pinned_->blocks.erase(it);
  }
  std::free(ptr);
}

bool EmulatedRuntime::is_pinned(const void* ptr) const {
  const auto p = reinterpret_cast<uintptr_t>(ptr);
  std::lock_guard<std::mutex> lock(pinned_->mutex);
  auto it = pinned_->blocks.upper_bound(p);  // the first block starting after ptr
  if (it == pinned_->blocks.begin()) return false;
  --it;
  return p - it->first < it->second;
}

// ---------------------------------------------------------------- streams

Stream EmulatedRuntime::default_stream(int index) {
  device(index, "default_stream");
  return Stream{index, 0};
}

Stream EmulatedRuntime::create_stream(int index) {
  DeviceState& d = device(index, "create_stream");
  auto stream = std::make_shared<StreamState>();
  stream->device = index;
  std::lock_guard<std::mutex> lock(mutex_);
  stream->id = d.next_stream_id++;
  d.streams.emplace(stream->id, stream);
  return Stream{index, stream->id};
}

void EmulatedRuntime::destroy_stream(Stream stream) {
  TINY_CHECK(stream.id != 0, Error, "destroy_stream: the default stream of cuda:", stream.device,
             " cannot be destroyed");
  std::lock_guard<std::mutex> lock(mutex_);
  const std::shared_ptr<StreamState> s = stream_state(stream, "destroy_stream");
  s->destroyed = true;
  if (s->worker_running) {
    s->wake_worker();  // the worker exits once the queue is empty, and forgets the stream
  } else {
    devices_[stream.device]->streams.erase(stream.id);  // nothing was ever queued
  }
}

std::shared_ptr<StreamState> EmulatedRuntime::stream_state(Stream stream, const char* what) const {
  const DeviceState& d = device(stream.device, what);
  const auto it = d.streams.find(stream.id);
  TINY_CHECK(it != d.streams.end() && !it->second->destroyed, Error, "CUDA error: invalid resource handle in ",
             what, ": stream ", stream.id, " of cuda:", stream.device, " does not exist (destroyed or never created)");
  return it->second;
}

void EmulatedRuntime::check_stream(Stream stream, const char* what) const {
  std::lock_guard<std::mutex> lock(mutex_);
  stream_state(stream, what);
}

bool EmulatedRuntime::in_forked_child() const { return runtime::fork_generation() != creator_generation_; }

bool EmulatedRuntime::stream_query(Stream stream) {
  std::lock_guard<std::mutex> lock(mutex_);
  const std::shared_ptr<StreamState> s = stream_state(stream, "stream_query");
  // Done when the work has really run (never run here, whatever the mode) and
  // the modelled clock has passed it; each query costs the host a little, so
  // a polling loop advances.
  model::DeviceTimeline& t = *devices_[stream.device]->timeline;
  model::host_advance(t.model().sync_ns);
  return s->completed == s->enqueued && model::host_now() >= t.stream_end(stream.id);
}

void EmulatedRuntime::stream_synchronize(Stream stream) {
  {
    std::unique_lock<std::mutex> lock(mutex_);
    const std::shared_ptr<StreamState> s = stream_state(stream, "stream_synchronize");
    wait_stream_locked(lock, s);
    const int64_t host_start = model::host_now();
    devices_[stream.device]->timeline->synchronize(stream.id);
    trace_sync("cudaStreamSynchronize", stream.device, stream.id, host_start);
  }
  devices_[stream.device]->count([](Counters& c) { ++c.synchronizations; });
  raise_pending_error(stream.device);
}

void EmulatedRuntime::device_synchronize(int index) {
  DeviceState& d = device(index, "device_synchronize");
  {
    std::unique_lock<std::mutex> lock(mutex_);
    std::vector<std::shared_ptr<StreamState>> streams;
    for (auto& [id, s] : d.streams) streams.push_back(s);
    for (auto& s : streams) wait_stream_locked(lock, s);
    const int64_t host_start = model::host_now();
    d.timeline->synchronize_device();
    trace_sync("cudaDeviceSynchronize", index, -1, host_start);
  }
  d.count([](Counters& c) { ++c.synchronizations; });
  raise_pending_error(index);
}

void EmulatedRuntime::wait_stream_locked(std::unique_lock<std::mutex>& lock, const std::shared_ptr<StreamState>& s) {
  if (s->completed == s->enqueued) return;
  TINY_CHECK(!in_forked_child(), Error, "CUDA error: initialization error: a forked child process waited for "
             "emulated GPU work queued by its parent, which has no workers in the child; use threads, or start a "
             "fresh process");
  TINY_CHECK(t_worker_stream != s.get(), Error, "an emulated kernel waited for its own stream (cuda:", s->device,
             ", stream ", s->id, "): that can never finish");
  if (mode_ == Mode::deferred) release_all_locked();  // a synchronization point: queued work runs now
  const uint64_t target = s->enqueued;
  if (s->completed < target) {
    lock.unlock();
    runtime::spin_until([&] { return s->completed_seen.load(std::memory_order_acquire) >= target; });
    lock.lock();
  }
  while (s->completed < target) {
    s->wake_at = std::min(s->wake_at, target);
    done_cv_.wait(lock);
  }
}

void EmulatedRuntime::release_all_locked() {
  // Every stream of every device, not only the one waited for: the waited-for
  // work may depend (through stream_wait_event) on work queued elsewhere.
  for (auto& d : devices_) {
    for (auto& [id, s] : d->streams) {
      if (s->released != s->enqueued) {
        s->released = s->enqueued;
        s->wake_worker();
        d->pool->warm_up();
      }
    }
  }
}

// ---------------------------------------------------------------- work

void EmulatedRuntime::check_not_forked(const char* what) const {
  TINY_CHECK(!in_forked_child(), Error, "CUDA error: initialization error in ", what,
             ": the emulated GPU cannot be used in a forked child process (nor can CUDA: 'Cannot re-initialize "
             "CUDA in forked subprocess'); use threads, or start a fresh process");
}

void EmulatedRuntime::enqueue(Stream stream, WorkItem item, const char* what) {
  check_not_forked(what);
  std::unique_lock<std::mutex> lock(mutex_);
  const std::shared_ptr<StreamState> s = stream_state(stream, what);
  if (!s->worker_running) {
    // The worker is started on first use (a device that is never used costs
    // no thread) and detached: it is never joined, so exit cannot hang on it.
    try {
      std::thread([this, s] { worker_loop(s); }).detach();
    } catch (const std::system_error& e) {
      TINY_THROW(Error, "could not start the worker thread of stream ", stream.id, " of emulated cuda:",
                 stream.device, " (", e.what(), "); use fewer streams");
    }
    s->worker_running = true;
    // Wait until the new thread runs our code: one still being started holds
    // locks of the C library (or of a sanitizer's runtime) that a fork() would
    // copy held, and a DataLoader worker forked then could hang on them. Once
    // per stream.
    done_cv_.wait(lock, [&] { return s->worker_started; });
  }
  s->queue.push_back(std::move(item));
  ++s->enqueued;
  // A device that was idle gets work: its pool's workers start polling now,
  // not at the kernel's first parallel loop (a sleeping one would join late).
  DeviceState& d = *devices_[s->device];
  if (d.queued.fetch_add(1, std::memory_order_relaxed) == 0 && mode_ != Mode::deferred) d.pool->warm_up();
  if (mode_ != Mode::deferred) {
    s->released = s->enqueued;
    s->wake_worker();
  }
  if (mode_ == Mode::blocking) {
    // Like CUDA_LAUNCH_BLOCKING=1: the work has run when the call returns, so
    // an error it found is raised by the call that queued it.
    wait_stream_locked(lock, s);
    lock.unlock();
    raise_pending_error(stream.device);
  }
}

void EmulatedRuntime::worker_loop(std::shared_ptr<StreamState> s) {
  t_worker_device = s->device;
  t_worker_stream = s.get();
  // The device's kernels run their parallel_for on the device's own threads.
  // (devices_ and the pools outlive every worker: see ~EmulatedRuntime.)
  runtime::bind_thread_pool(devices_[s->device]->pool.get());
  const std::string name = "tiny-gpu" + std::to_string(s->device) + "-s" + std::to_string(s->id);
  pthread_setname_np(pthread_self(), name.substr(0, 15).c_str());  // shows in top -H and gdb

  std::unique_lock<std::mutex> lock(mutex_);
  s->worker_started = true;
  done_cv_.notify_all();  // enqueue waits for this
  const auto ready = [&] { return !exiting_ && (s->taken < s->released || (s->destroyed && s->queue.empty())); };
  for (;;) {
    if (!ready()) {
      // The host queues the next kernel within microseconds, mostly: poll before sleeping.
      const uint64_t seen = s->notified.load(std::memory_order_acquire);
      lock.unlock();
      runtime::spin_until([&] { return s->notified.load(std::memory_order_acquire) != seen; });
      lock.lock();
    }
    s->cv.wait(lock, ready);
    if (s->taken == s->released) {  // destroyed and drained: forget the stream and exit
      devices_[s->device]->streams.erase(s->id);
      s->worker_running = false;
      done_cv_.notify_all();
      return;
    }
    WorkItem item = std::move(s->queue.front());
    s->queue.pop_front();
    ++s->taken;
    switch (item.kind) {
      case ItemKind::record_event:
        // The event's position in the stream is reached now: stamp it with
        // host time (a GPU stamps it with its own clock).
        if (item.record > item.event->completed) {
          item.event->completed = item.record;
          item.event->time = emulated::Clock::now();
        }
        break;
      case ItemKind::wait_event:
        done_cv_.wait(lock, [&] { return item.event->completed >= item.record; });
        break;
      case ItemKind::kernel:
        // Runs without the lock: kernels take as long as they take, and other
        // streams, the host and other kernels must not wait for them.
        ++kernels_running_;
        lock.unlock();
        try {
          item.work();
        } catch (const std::exception& e) {
          // A throwing kernel must not terminate the program from a worker
          // thread: it becomes the device's sticky error, as a GPU fault does.
          record_error(s->device, item.name, e.what(), item.collective);
        } catch (...) {
          record_error(s->device, item.name, "unknown exception", item.collective);
        }
        // Destroyed here, not under the lock: what the closure captured
        // (a tensor, a snapshot) may call back into the runtime when freed.
        item = WorkItem{};
        lock.lock();
        --kernels_running_;
        break;
    }
    ++s->completed;
    s->completed_seen.store(s->completed, std::memory_order_release);
    devices_[s->device]->queued.fetch_sub(1, std::memory_order_relaxed);
    // Wake the threads that wait for this: a host waiting for the stream (wake_at),
    // an event's waiters (record_event), stop_workers_for_exit (exiting_).
    if (s->completed >= s->wake_at || item.kind == ItemKind::record_event || exiting_) {
      s->wake_at = UINT64_MAX;
      done_cv_.notify_all();
    }
  }
}

void EmulatedRuntime::launch(Stream stream, std::function<void()> work, const char* name) {
  launch(stream, std::move(work), name, model::KernelCost{});
}

void EmulatedRuntime::launch(Stream stream, std::function<void()> work, const char* name,
                             const model::KernelCost& cost) {
  DeviceState& d = device(stream.device, "launch");
  WorkItem item;
  item.work = std::move(work);
  item.name = name != nullptr ? name : "kernel";
  const char* op = item.name;
  // Before any lock: a worker of the parent may have held one at the fork.
  check_not_forked(op);
  int64_t busy = 0;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stream_state(stream, op);  // count and time only launches that are queued
    const int64_t host_start = model::host_now();
    const model::Span span = d.timeline->launch(stream.id, cost);
    busy = span.end - span.start;
    trace_work(model::TraceEvent::Kind::kernel, op, stream, span, host_start, cost.bytes, cost.flops, false);
  }
  // A GEMM counts by the math the model timed it in (TF32 only where the modelled GPU has it).
  uint64_t Counters::*gemms = nullptr;
  if (cost.work == model::Work::gemm) {
    const char* math = model::gemm_math(d.timeline->model(), cost.dtype, cost.allow_tf32);
    gemms = gemm_counter(cost.dtype, std::strcmp(math, "tf32_tensor") == 0);
  }
  d.count([busy, gemms](Counters& c) {
    ++c.kernel_launches;
    c.modelled_kernel_ns += static_cast<uint64_t>(busy);
    if (gemms != nullptr) ++(c.*gemms);
  });
  enqueue(stream, std::move(item), op);
}

int64_t EmulatedRuntime::collective_ready(Stream stream) {
  DeviceState& d = device(stream.device, "collective");
  std::lock_guard<std::mutex> lock(mutex_);
  stream_state(stream, "collective");
  return d.timeline->collective_ready(stream.id);
}

model::Span EmulatedRuntime::collective(Stream stream, int64_t ready, int64_t duration, const char* name,
                                        int64_t bytes, std::function<void()> work) {
  DeviceState& d = device(stream.device, "collective");
  check_not_forked(name);
  WorkItem item;
  item.work = std::move(work);
  item.name = name;
  item.collective = true;
  model::Span span;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stream_state(stream, name);
    const int64_t host_start = model::host_now();
    span = d.timeline->collective(ready, duration);
    if (model::tracing()) {
      model::TraceEvent e;
      e.kind = model::TraceEvent::Kind::collective;
      e.name = name;
      e.op = tiny::detail::current_op_name != nullptr ? tiny::detail::current_op_name : "";
      e.device = stream.device;
      e.stream = stream.id;
      e.start_ns = span.start;
      e.end_ns = span.end;
      e.host_start_ns = host_start - d.timeline->model().host_launch_ns;  // the launch collective_ready paid
      e.host_end_ns = host_start;
      e.bytes = bytes;
      model::trace(e);
    }
  }
  d.count([&](Counters& c) {
    ++c.kernel_launches;
    c.modelled_kernel_ns += static_cast<uint64_t>(span.end - span.start);
  });
  enqueue(stream, std::move(item), name);
  std::lock_guard<std::mutex> lock(mutex_);
  if (mode_ == Mode::deferred) release_all_locked();
  return span;
}

void EmulatedRuntime::stream_wait_until(Stream stream, int64_t t) {
  DeviceState& d = device(stream.device, "stream_wait_until");
  std::lock_guard<std::mutex> lock(mutex_);
  stream_state(stream, "stream_wait_until");
  d.timeline->wait_event(stream.id, t);
}

void EmulatedRuntime::host_wait_until(int index, int64_t t) {
  DeviceState& d = device(index, "host_wait_until");
  std::lock_guard<std::mutex> lock(mutex_);
  const int64_t host_start = model::host_now();
  model::host_wait_until(t);
  model::host_advance(d.timeline->model().sync_ns);
  trace_sync("ncclWork.synchronize", index, -1, host_start);
}

void EmulatedRuntime::schedule_copy(Stream stream, CopyKind kind, bool pinned, size_t nbytes, bool peer) {
  DeviceState& d = device(stream.device, "memcpy_async");
  check_not_forked("memcpy_async");  // before any lock (see launch)
  int64_t busy = 0;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    const int64_t host_start = model::host_now();
    const model::Span span = d.timeline->copy(stream.id, kind, pinned, static_cast<int64_t>(nbytes), peer);
    busy = span.end - span.start;
    using Kind = model::TraceEvent::Kind;
    trace_work(kind == CopyKind::HostToDevice   ? Kind::memcpy_to_device
               : kind == CopyKind::DeviceToHost ? Kind::memcpy_to_host
                                                : Kind::memcpy_device,
               copy_kind_name(kind), stream, span, host_start, static_cast<int64_t>(nbytes), 0, pinned);
  }
  d.count([busy](Counters& c) { c.modelled_copy_ns += static_cast<uint64_t>(busy); });
}

void EmulatedRuntime::memcpy_async(void* dst, const void* src, size_t nbytes, CopyKind kind, Stream stream) {
  DeviceState& d = device(stream.device, "memcpy_async");
  check_stream(stream, "memcpy_async");
  if (nbytes == 0) return;
  const char* what = "memcpy_async";
  WorkItem item;
  item.name = "memcpy_async";
  bool wait_for_copy = false;  // a copy into pageable host memory returns only once done
  switch (kind) {
    case CopyKind::HostToDevice: {
      check_device_range(dst, nbytes, what, "dst");
      TINY_CHECK(!is_device_pointer(src), Error, what, ": HostToDevice copy, but src ", src, " is device memory");
      void* to = worker_address(dst);
      if (is_pinned(src)) {
        // Read when the copy runs: writing the source before synchronizing changes what is copied.
        item.work = [to, src, nbytes] { std::memcpy(to, src, nbytes); };
        d.count([&](Counters& c) { c.bytes_host_to_device_pinned += nbytes; });
      } else {
        // CUDA stages pageable memory through a pinned buffer before the call
        // returns, so the caller may reuse the source at once. Same here.
        auto snapshot = std::shared_ptr<char[]>(new char[nbytes]);
        std::memcpy(snapshot.get(), src, nbytes);
        item.work = [to, snapshot, nbytes] { std::memcpy(to, snapshot.get(), nbytes); };
        d.count([&](Counters& c) { c.bytes_host_to_device_pageable += nbytes; });
      }
      break;
    }
    case CopyKind::DeviceToHost: {
      check_device_range(src, nbytes, what, "src");
      TINY_CHECK(!is_device_pointer(dst), Error, what, ": DeviceToHost copy, but dst ", dst, " is device memory");
      const void* from = worker_address(src);
      item.work = [dst, from, nbytes] { std::memcpy(dst, from, nbytes); };
      if (is_pinned(dst)) {
        d.count([&](Counters& c) { c.bytes_device_to_host_pinned += nbytes; });
      } else {
        wait_for_copy = true;
        d.count([&](Counters& c) { c.bytes_device_to_host_pageable += nbytes; });
      }
      break;
    }
    case CopyKind::DeviceToDevice: {
      check_device_range(src, nbytes, what, "src");
      check_device_range(dst, nbytes, what, "dst");
      void* to = worker_address(dst);
      const void* from = worker_address(src);
      item.work = [to, from, nbytes] { std::memmove(to, from, nbytes); };
      d.count([&](Counters& c) { c.bytes_device_to_device += nbytes; });
      break;
    }
    case CopyKind::HostToHost: {
      TINY_CHECK(!is_device_pointer(src) && !is_device_pointer(dst), Error, what,
                 ": HostToHost copy, but src or dst is device memory");
      if (is_pinned(src)) {
        item.work = [dst, src, nbytes] { std::memmove(dst, src, nbytes); };
      } else {
        auto snapshot = std::shared_ptr<char[]>(new char[nbytes]);
        std::memcpy(snapshot.get(), src, nbytes);
        item.work = [dst, snapshot, nbytes] { std::memcpy(dst, snapshot.get(), nbytes); };
      }
      wait_for_copy = !is_pinned(dst);
      break;
    }
    default:
      TINY_THROW(ValueError, what, ": unknown copy kind ", static_cast<int>(kind));
  }
  if (kind == CopyKind::HostToDevice || kind == CopyKind::DeviceToHost) {
    schedule_copy(stream, kind, is_pinned(kind == CopyKind::HostToDevice ? src : dst), nbytes, false);
  } else if (kind == CopyKind::DeviceToDevice) {
    schedule_copy(stream, kind, true, nbytes, device_of(src) != device_of(dst));
  }  // a host-to-host copy is host code: free in modelled time
  enqueue(stream, std::move(item), copy_kind_name(kind));
  if (wait_for_copy) {
    // The caller reads the destination right after the call (.cpu(), .item()):
    // this waits for everything queued on the stream before the copy, too.
    // It is a synchronization, and it is counted as one.
    stream_synchronize(stream);
  }
}

void EmulatedRuntime::memset_async(void* dst, int value, size_t nbytes, Stream stream) {
  check_stream(stream, "memset_async");
  if (nbytes == 0) return;
  check_device_range(dst, nbytes, "memset_async", "dst");
  void* to = worker_address(dst);
  WorkItem item;
  item.name = "memset_async";
  item.work = [to, value, nbytes] { std::memset(to, value, nbytes); };
  check_not_forked("memset_async");  // before any lock (see launch)
  {
    std::lock_guard<std::mutex> lock(mutex_);
    model::KernelCost cost;
    cost.work = model::Work::memset;
    cost.bytes = static_cast<int64_t>(nbytes);
    const int64_t host_start = model::host_now();
    const model::Span span = devices_[stream.device]->timeline->launch(stream.id, cost);
    trace_work(model::TraceEvent::Kind::memset, "memset", stream, span, host_start, cost.bytes, 0, false);
  }
  enqueue(stream, std::move(item), "memset_async");
}

// ---------------------------------------------------------------- events

Event EmulatedRuntime::create_event(int index, bool enable_timing) {
  device(index, "create_event");
  auto event = std::make_shared<EventState>();
  event->device = index;
  event->timing = enable_timing;
  std::lock_guard<std::mutex> lock(mutex_);
  events_.push_back(std::move(event));
  return Event{next_event_id_++};
}

void EmulatedRuntime::destroy_event(Event event) {
  std::lock_guard<std::mutex> lock(mutex_);
  event_state(event, "destroy_event");
  // Markers and waits already queued keep the state alive (shared_ptr).
  events_[event.id].reset();
}

std::shared_ptr<EventState> EmulatedRuntime::event_state(Event event, const char* what) const {
  TINY_CHECK(event.id >= 0 && event.id < static_cast<int64_t>(events_.size()) && events_[event.id] != nullptr, Error,
             "CUDA error: invalid resource handle in ", what, ": event ", event.id,
             " does not exist (destroyed or never created)");
  return events_[event.id];
}

void EmulatedRuntime::record_event(Event event, Stream stream) {
  WorkItem item;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    item.event = event_state(event, "record_event");
    TINY_CHECK(item.event->device == stream.device, DeviceError, "record_event: event ", event.id,
               " belongs to cuda:", item.event->device, " but the stream is on cuda:", stream.device);
    item.kind = ItemKind::record_event;
    item.record = ++item.event->recorded;  // from now on, queries are about this record
    stream_state(stream, "record_event");
    item.event->modelled_ns = devices_[stream.device]->timeline->record_event(stream.id);
  }
  enqueue(stream, std::move(item), "record_event");
}

bool EmulatedRuntime::event_query(Event event) {
  std::lock_guard<std::mutex> lock(mutex_);
  const std::shared_ptr<EventState> e = event_state(event, "event_query");
  // As stream_query: really run (never run here) and passed in modelled time.
  model::host_advance(devices_[e->device]->timeline->model().sync_ns);
  return e->completed >= e->recorded && model::host_now() >= e->modelled_ns;
}

void EmulatedRuntime::event_synchronize(Event event) {
  int index;
  {
    std::unique_lock<std::mutex> lock(mutex_);
    const std::shared_ptr<EventState> e = event_state(event, "event_synchronize");
    index = e->device;
    if (e->completed < e->recorded) {
      TINY_CHECK(!in_forked_child(), Error, "CUDA error: initialization error: a forked child process waited for "
                 "an event recorded by its parent, which has no workers in the child");
      if (mode_ == Mode::deferred) release_all_locked();
      const uint64_t target = e->recorded;
      done_cv_.wait(lock, [&] { return e->completed >= target; });
    }
    const int64_t host_start = model::host_now();
    model::host_wait_until(e->modelled_ns);
    model::host_advance(devices_[index]->timeline->model().sync_ns);
    trace_sync("cudaEventSynchronize", index, -1, host_start);
  }
  devices_[index]->count([](Counters& c) { ++c.synchronizations; });
  raise_pending_error(index);
}

void EmulatedRuntime::stream_wait_event(Stream stream, Event event) {
  WorkItem item;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    item.event = event_state(event, "stream_wait_event");
    // As in CUDA: waiting for an event that was never recorded waits for nothing.
    if (item.event->recorded == 0) return;
    item.kind = ItemKind::wait_event;
    item.record = item.event->recorded;  // the latest record, not any later one
    stream_state(stream, "stream_wait_event");
    devices_[stream.device]->timeline->wait_event(stream.id, item.event->modelled_ns);
  }
  enqueue(stream, std::move(item), "stream_wait_event");
}

float EmulatedRuntime::event_elapsed_ms(Event start, Event end) {
  std::lock_guard<std::mutex> lock(mutex_);
  const std::shared_ptr<EventState> a = event_state(start, "event_elapsed_ms");
  const std::shared_ptr<EventState> b = event_state(end, "event_elapsed_ms");
  TINY_CHECK(a->timing && b->timing, Error,
             "CUDA error: invalid resource handle in event_elapsed_ms: both events must be created with "
             "enable_timing=true");
  TINY_CHECK(a->recorded > 0 && b->recorded > 0, Error,
             "CUDA error: invalid resource handle in event_elapsed_ms: both events must be recorded first");
  TINY_CHECK(a->completed >= a->recorded && b->completed >= b->recorded, Error,
             "CUDA error: device not ready in event_elapsed_ms: an event has not completed yet; "
             "call event_synchronize on the end event first");
  if (host_clock_events_) return std::chrono::duration<float, std::milli>(b->time - a->time).count();
  return static_cast<float>(static_cast<double>(b->modelled_ns - a->modelled_ns) * 1e-6);
}

// ---------------------------------------------------------------- errors

void EmulatedRuntime::record_error(int index, std::string op, std::string message, bool collective) {
  DeviceState& d = device(index, "record_error");
  std::lock_guard<std::mutex> lock(d.error_mutex);
  if (d.has_error) return;  // the first error is the one that explains the others
  d.has_error = true;
  d.error_from_collective = collective;
  d.error_op = std::move(op);
  d.error_message = std::move(message);
}

void EmulatedRuntime::clear_error(int index) {
  DeviceState& d = device(index, "clear_error");
  std::lock_guard<std::mutex> lock(d.error_mutex);
  d.has_error = false;
  d.error_from_collective = false;
  d.error_op.clear();
  d.error_message.clear();
}

std::string EmulatedRuntime::pending_error(int index) const {
  const DeviceState& d = device(index, "pending_error");
  const bool blocking = mode() == Mode::blocking;  // read before taking error_mutex: one lock at a time
  std::lock_guard<std::mutex> lock(d.error_mutex);
  if (!d.has_error) return "";
  if (d.error_from_collective) {
    // No kernel faulted: the communicator could not complete a collective (a
    // rank missing, or calling another collective or size). PyTorch raises
    // this as a DistBackendError from the process group, not as a CUDA error,
    // and TINY_LAUNCH_BLOCKING would not help: the message names the ranks.
    return "NCCL collective " + d.error_op + " failed on cuda:" + std::to_string(index) + " (emulated): " +
           d.error_message;
  }
  std::string text = "CUDA error: device-side assert triggered on cuda:" + std::to_string(index) +
                     " (emulated) in " + d.error_op + ": " + d.error_message + ". ";
  if (blocking) {
    text += "TINY_LAUNCH_BLOCKING=1 is set, so this was raised by the call that queued the failing op.";
  } else {
    text += "Kernel errors are reported at the next synchronizing call; rerun with TINY_LAUNCH_BLOCKING=1 "
            "to see the op that failed.";
  }
  return text + " " + gpu::kStickyErrorAdvice;
}

void EmulatedRuntime::raise_pending_error(int index) const {
  const std::string message = pending_error(index);
  if (message.empty()) return;
  bool collective = false;
  {
    const DeviceState& d = device(index, "raise_pending_error");
    std::lock_guard<std::mutex> lock(d.error_mutex);
    collective = d.error_from_collective;
  }
  if (collective) throw distributed::DistributedError(message);
  throw Error(message);
}

// ---------------------------------------------------------------- modes, counters

EmulatedRuntime::Mode EmulatedRuntime::mode() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return mode_;
}

void EmulatedRuntime::set_mode(Mode mode) {
  std::lock_guard<std::mutex> lock(mutex_);
  mode_ = mode;
  if (mode != Mode::deferred) release_all_locked();  // held work may run now
}

Counters EmulatedRuntime::counters(int index) const {
  const DeviceState& d = device(index, "counters");
  std::lock_guard<std::mutex> lock(d.counters_mutex);
  return d.counters;
}

void EmulatedRuntime::reset_counters(int index) {
  DeviceState& d = device(index, "reset_counters");
  if (!in_forked_child()) {  // (see raw_free)
    std::lock_guard<std::mutex> lock(mutex_);
    d.window_start_ns = model::host_now();
  }
  std::lock_guard<std::mutex> lock(d.counters_mutex);
  d.counters = Counters{};
}

double EmulatedRuntime::utilization(int index) const {
  const DeviceState& d = device(index, "utilization");
  std::lock_guard<std::mutex> lock(mutex_);
  return d.timeline->utilization(d.window_start_ns, model::host_now());
}

const model::DeviceModel& EmulatedRuntime::model() const { return model::selected_model(); }

// ---------------------------------------------------------------- Gate

void Gate::open() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    open_ = true;
  }
  cv_.notify_all();
}

void Gate::wait() {
  std::unique_lock<std::mutex> lock(mutex_);
  cv_.wait(lock, [&] { return open_; });
}

bool Gate::is_open() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return open_;
}

// ---------------------------------------------------------------- the process-wide runtime

namespace {
std::mutex g_runtime_mutex;
std::atomic<EmulatedRuntime*> g_runtime{nullptr};
bool g_disabled = false;  // TINY_EMULATED_GPUS=0; guarded by g_runtime_mutex
}  // namespace

void EmulatedRuntime::stop_workers_for_exit(std::chrono::milliseconds bound) {
  // A forked child has no workers (and may hold a copy of a lock taken at the fork); a worker
  // that calls exit cannot wait for its own kernel.
  if (in_forked_child() || t_worker_device >= 0) return;
  std::unique_lock<std::mutex> lock(mutex_);
  exiting_ = true;
  done_cv_.wait_for(lock, bound, [&] { return kernels_running_ == 0; });
}

EmulatedRuntime* emulated_runtime() {
  EmulatedRuntime* runtime = g_runtime.load(std::memory_order_acquire);
  if (runtime != nullptr) return runtime;
  std::lock_guard<std::mutex> lock(g_runtime_mutex);
  runtime = g_runtime.load(std::memory_order_relaxed);
  if (runtime != nullptr || g_disabled) return runtime;
  if (parse_device_count() == 0) {  // a bad value throws here, on every call until fixed
    g_disabled = true;
    return nullptr;
  }
  // Never destroyed: tensors freed during exit must still find it, and its
  // workers are never joined. If construction throws, the next call retries.
  runtime = new EmulatedRuntime();
  g_runtime.store(runtime, std::memory_order_release);
  // exit() runs this before the static objects made before now are destroyed and before
  // OpenBLAS is unloaded (that comes after every atexit handler). The bound keeps a hung
  // kernel from holding exit forever.
  std::atexit([] { g_runtime.load(std::memory_order_acquire)->stop_workers_for_exit(std::chrono::seconds(10)); });
  return runtime;
}

}  // namespace tiny::gpu
