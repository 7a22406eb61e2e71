// The host-emulated GPU (DESIGN.md section 4): a gpu::Runtime that runs on the
// CPU but behaves like a GPU in every way a lesson can observe.
//
// What it emulates, and how:
//
// - Separate memory. Each device owns one shared-memory file (memfd) mapped
//   twice: once read-write, reached only by the device's workers (emulated
//   kernels and copies, through worker_address()), and once PROT_NONE, whose
//   addresses are the "device pointers" the rest of the program holds. So a
//   host dereference of a device pointer faults (SIGSEGV), as it would with a
//   real GPU, while both addresses name the same bytes. raw_malloc hands out
//   512-byte aligned pieces of that range (best fit, free neighbours merge).
// - A capacity (TINY_EMULATED_GPU_MEMORY, e.g. "2GiB"; default the smaller of
//   4 GiB and a quarter of the host's memory divided among the devices).
//   raw_malloc returns nullptr past it; no host memory is used until written,
//   and freed pages go back to the system.
// - Asynchrony. A stream is a FIFO queue of host closures run, in order, by a
//   worker thread of its own; streams are independent (a blocked stream never
//   holds up another one) and ordered only by events. Waits are passive
//   (condition variables): an idle device costs no CPU.
// - Three execution modes:
//     threaded  (default) workers run queued work as soon as they can, like hardware;
//     blocking  (TINY_LAUNCH_BLOCKING=1) every launch and copy has run before
//               the call returns, and an error it found is raised right there,
//               like CUDA_LAUNCH_BLOCKING=1;
//     deferred  queued work runs only at synchronization points (stream,
//               device or event synchronize, a copy into pageable host memory),
//               so a forgotten synchronize gives the same wrong answer every time.
// - CUDA's copy rules: a copy from pageable host memory snapshots its source
//   before returning; one into or out of pinned memory does not wait (reading
//   the destination before synchronizing shows stale data; on real hardware
//   that is a race, not a repeatable result); a device-to-host copy into
//   pageable memory waits for the stream.
// - Sticky errors: a kernel that finds a bad index calls record_error(); the
//   next synchronizing call on that device throws it, and so does every one
//   after until clear_error() (a real GPU needs a new process).
// - Counters (gpu::Counters) per device, so performance habits can be checked
//   without clocks.
//
// Devices: TINY_EMULATED_GPUS (default 2; 0 turns emulation off and
// emulated_runtime() returns nullptr). Each device owns an equal share of the
// cores tiny uses (tiny::get_num_threads() / devices, at least 1), reported as
// its multiprocessor_count: a runtime::ThreadPool of its own, to which its
// stream workers are bound, so the parallel_for of its kernels runs on its
// threads. The devices' pools form one group that lends idle threads: a
// device running kernels while the others are idle uses every core (one
// emulated GPU of two is not held to half the CPU), and devices busy at once
// share the cores. The share follows tiny::set_num_threads. (OpenBLAS's
// thread count is process-wide: a GEMM may use more than the share.)
//
// The runtime is created on first use and never destroyed: tensors freed during
// program exit must still find it, and its worker threads are never joined
// (joining at exit can hang). A forked child cannot queue work on it: it
// throws, as CUDA refuses to run in a forked child.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "gpu/model/cost.h"
#include "gpu/model/device_model.h"
#include "gpu/model/timeline.h"
#include "gpu/runtime.h"
#include "runtime/thread_pool.h"

namespace tiny::gpu {

namespace emulated {
struct DeviceState;
struct StreamState;
struct EventState;
struct WorkItem;
}  // namespace emulated

class EmulatedRuntime : public Runtime {
 public:
  enum class Mode { threaded, blocking, deferred };

  // Reads TINY_EMULATED_GPUS (must be >= 1 here), TINY_EMULATED_GPU_MEMORY and
  // TINY_LAUNCH_BLOCKING; a bad value throws tiny::ValueError naming it. Use
  // emulated_runtime() rather than constructing one.
  EmulatedRuntime();
  // Never called for the process-wide runtime (it is leaked on purpose).
  ~EmulatedRuntime() override;
  EmulatedRuntime(const EmulatedRuntime&) = delete;
  EmulatedRuntime& operator=(const EmulatedRuntime&) = delete;

  // --- gpu::Runtime ---
  const char* kind() const override { return "emulated"; }
  int device_count() const override;
  DeviceProperties properties(int device) const override;

  // nullptr for 0 bytes and when the device's capacity would be exceeded.
  void* raw_malloc(int device, size_t nbytes) override;
  // nullptr is a no-op; a pointer raw_malloc did not return throws tiny::Error.
  void raw_free(int device, void* ptr) override;
  size_t free_memory(int device) const override;

  void* pinned_malloc(size_t nbytes) override;
  void pinned_free(void* ptr) override;
  // True for any address inside a live pinned block.
  bool is_pinned(const void* ptr) const override;

  Stream default_stream(int device) override;
  Stream create_stream(int device) override;
  // Returns at once; work already queued still runs (as cudaStreamDestroy).
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

  // --- What the emulated kernels and the tests need beyond gpu::Runtime ---

  // Queues an emulated kernel: `work` runs on the stream's worker after the
  // work queued before it (counted in kernel_launches). `name` (a string
  // literal: it is kept, not copied) names the op in error messages. If `work`
  // throws, its message becomes the device's sticky error.
  // `cost` is the work the kernel does, from which the performance model
  // times it (DESIGN.md section 4a); without one it costs the shortest kernel
  // (tests' own kernels).
  void launch(Stream stream, std::function<void()> work, const char* name, const model::KernelCost& cost);
  void launch(Stream stream, std::function<void()> work, const char* name);

  // --- Collectives (DESIGN.md section 4a, "Several processes"): tiny::distributed
  // on the emulated GPU times them as NCCL would while Gloo moves the bytes.

  // This rank's ready time for a collective issued on `stream`: after the
  // stream's previous work and the host's issue (the host pays a launch).
  int64_t collective_ready(Stream stream);
  // Places a collective of `duration` on the device's collective engine from
  // `ready` (the latest ready time over the ranks), tells the profiler, and
  // queues `work` (which exchanges the bytes) on `stream`. In deferred mode
  // the device's held work is released: the other ranks wait for this one's
  // bytes, so they cannot wait for its next synchronization. The stream does
  // not wait for the collective in modelled time (NCCL has a stream of its
  // own): stream_wait_until does.
  model::Span collective(Stream stream, int64_t ready, int64_t duration, const char* name, int64_t bytes,
                         std::function<void()> work);
  // Work queued on `stream` from now on starts no earlier than modelled time `t`.
  void stream_wait_until(Stream stream, int64_t t);
  // The calling thread's host waits until modelled time `t` of `device` (and pays a synchronize).
  void host_wait_until(int device, int64_t t);

  // nvidia-smi's GPU-Util in modelled time: the share of the window since the
  // device's counters were last reset (up to the calling thread's host clock)
  // in which a kernel ran.
  double utilization(int device) const;
  // The real GPU whose timing the emulator models (TINY_EMULATED_GPU_MODEL).
  const model::DeviceModel& model() const;

  // The address through which a worker reads and writes the device memory at
  // `device_ptr` (the same bytes, mapped read-write). Only kernels and copies
  // running on a worker should use it. Throws tiny::Error for an address that
  // is not device memory.
  void* worker_address(const void* device_ptr) const;
  // True for an address inside any device's memory range (allocated or not).
  bool is_device_pointer(const void* ptr) const;
  // The device whose memory range holds `ptr`, or -1.
  int device_of(const void* ptr) const;
  // The thread pool of the device's kernels: size() is the device's share of
  // the cores, max(1, runtime::num_threads() / device_count()).
  runtime::ThreadPool& thread_pool(int device) const;
  // The device whose worker is running the calling thread's code, or -1 on
  // any other thread (kernels can assert they run "on the device").
  static int current_worker_device();

  // Stores a sticky error for `device`, found by queued work (for example
  // "index 7 is out of bounds for dimension 0 with size 5" seen by
  // op "index_select"). The first error is kept until clear_error().
  // `collective`: the failing item was a collective (EmulatedRuntime::collective):
  // the error is raised as tiny::distributed::DistributedError with the
  // process group's words, not as a CUDA device-side assert.
  void record_error(int device, std::string op, std::string message, bool collective = false);
  // Forgets the device's sticky error (tests; a real GPU needs a new process).
  void clear_error(int device);
  // The pending error message ("" if none), without raising it.
  std::string pending_error(int device) const;

  // The execution mode; set_mode is for tests. Leaving deferred mode lets
  // every held item run.
  Mode mode() const;
  void set_mode(Mode mode);
  // At exit (the process-wide runtime registers it with atexit): lets the kernels now running
  // finish, at most `bound`, and keeps every worker from starting another, so that none is
  // inside OpenBLAS or a static object while exit destroys them. Queued work is dropped, as a
  // GPU's is when its process ends.
  void stop_workers_for_exit(std::chrono::milliseconds bound);

 private:
  emulated::DeviceState& device(int index, const char* what) const;
  std::shared_ptr<emulated::StreamState> stream_state(Stream stream, const char* what) const;  // mutex_ held
  std::shared_ptr<emulated::EventState> event_state(Event event, const char* what) const;      // mutex_ held
  // Puts an item on a stream (starting its worker if needed) and, in blocking
  // mode, waits for it and raises the device's error.
  void enqueue(Stream stream, emulated::WorkItem item, const char* what);
  // Throws CUDA's "initialization error" in a child made by fork(), before any lock is taken.
  void check_not_forked(const char* what) const;
  // Times a copy in modelled time (and, for pageable memory, holds the host).
  void schedule_copy(Stream stream, CopyKind kind, bool pinned, size_t nbytes, bool peer);
  void worker_loop(std::shared_ptr<emulated::StreamState> stream);
  // Runs every queued item in deferred mode (a synchronization point). mutex_ held.
  void release_all_locked();
  // Waits until the stream has run everything queued before this call. mutex_ held by `lock`.
  void wait_stream_locked(std::unique_lock<std::mutex>& lock, const std::shared_ptr<emulated::StreamState>& s);
  // Throws tiny::Error for a stream that does not exist.
  void check_stream(Stream stream, const char* what) const;
  // True in a child made by fork(): it has no workers, and the device memory
  // is shared with the parent, so the runtime refuses to queue work there.
  bool in_forked_child() const;
  // Throws the device's sticky error if there is one.
  void raise_pending_error(int device) const;
  // Checks [ptr, ptr + nbytes) is inside one live raw allocation.
  void check_device_range(const void* ptr, size_t nbytes, const char* what, const char* which) const;

  // The devices' pools' group (runtime::ThreadPool): those running a parallel_for.
  std::atomic<int> pools_running_{0};
  std::vector<std::unique_ptr<emulated::DeviceState>> devices_;
  Mode mode_;
  bool host_clock_events_;  // TINY_EMULATED_GPU_CLOCK=host: events stamp host time
  uint64_t creator_generation_;  // runtime::fork_generation() of the process that made the runtime

  // One lock for streams, queues and events: it is only ever held for a few
  // instructions (closures run without it), so one is simpler than many and
  // costs nothing measurable. Memory and errors have their own locks.
  mutable std::mutex mutex_;
  // Host waits and stream_wait_event items sleep on it; a worker notifies it
  // when what one waits for is done (a stream's wake_at, an event, exit).
  std::condition_variable done_cv_;
  bool exiting_ = false;     // set by stop_workers_for_exit: workers take no more items
  int kernels_running_ = 0;  // kernels inside item.work() now, on every stream
  int64_t next_event_id_ = 0;
  std::vector<std::shared_ptr<emulated::EventState>> events_;  // index = id; null once destroyed
  struct PinnedRegistry;
  std::unique_ptr<PinnedRegistry> pinned_;
};

// A test-only latch: a kernel that calls wait() holds its stream's worker
// until the test calls open(). It shows asynchrony without depending on
// clocks: while the gate is closed, nothing queued behind it has run.
//
//   auto gate = std::make_shared<gpu::Gate>();
//   rt->launch(stream, [gate] { gate->wait(); }, "gate");
//   ... the host sees the work pending ...
//   gate->open();
class Gate {
 public:
  void open();
  void wait();
  bool is_open() const;

 private:
  mutable std::mutex mutex_;
  std::condition_variable cv_;
  bool open_ = false;
};

// The names of the settings, for messages and tests.
inline constexpr const char* kEmulatedGpusVariable = "TINY_EMULATED_GPUS";
inline constexpr const char* kEmulatedGpuMemoryVariable = "TINY_EMULATED_GPU_MEMORY";
inline constexpr const char* kLaunchBlockingVariable = "TINY_LAUNCH_BLOCKING";
inline constexpr const char* kEmulatedGpuModeVariable = "TINY_EMULATED_GPU_MODE";
inline constexpr const char* kEmulatedGpuClockVariable = "TINY_EMULATED_GPU_CLOCK";

}  // namespace tiny::gpu
