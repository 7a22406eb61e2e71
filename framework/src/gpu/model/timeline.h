// The modelled clocks (DESIGN.md section 4a): each host thread's, and each
// device engine's schedule. Everything here is integer nanoseconds of
// modelled time, computed on the thread that issues the work, never read from
// a real clock, so the threaded, blocking and deferred modes of the emulated
// GPU give the same times by construction.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <vector>

#include "gpu/model/cost.h"

namespace tiny::gpu::model {

// ---------------------------------------------------------------- host clocks

// The calling thread's modelled time. A thread starts at the latest time any
// thread had reached when it first reads its clock (a thread of the program's
// own: the model cannot see its parent), or adopts its parent's time
// (HostClockFork).
int64_t host_now();
// The host spends `ns` (dispatching an op, a call into the runtime).
void host_advance(int64_t ns);
// The host waits until `t` (a synchronize): its clock becomes max(now, t).
void host_wait_until(int64_t t);
// The host records an op for backward, or runs one node of backward: tiny's
// own cost per autograd node (host_autograd_ns of the emulated GPU's model;
// nothing until an emulated GPU exists).
void host_advance_autograd();
// Set by the emulated GPU when it starts, from its model.
void set_host_autograd_ns(int64_t ns);

// The allocators poll events to find blocks they may reuse; the answer depends
// on how far the emulator's workers really got, so what the polling costs must
// not reach the modelled clock (the threaded, blocking and deferred modes would
// disagree, and a run would not time the same twice). The calling thread's
// modelled clock is as it was when this scope began once it ends.
class UnmodelledHostWork {
 public:
  UnmodelledHostWork();
  ~UnmodelledHostWork();
  UnmodelledHostWork(const UnmodelledHostWork&) = delete;
  UnmodelledHostWork& operator=(const UnmodelledHostWork&) = delete;

 private:
  int64_t saved_;
};

// Threads that do GPU work for a caller (DataParallel's replicas) start at the
// caller's time, and the caller resumes at the latest of theirs when it joins
// them, as real threads would.
class HostClockFork {
 public:
  HostClockFork();     // on the caller: remembers its time
  void enter() const;  // on a worker, first: adopts the caller's time
  void leave();        // on a worker, last: reports its time
  void join() const;   // on the caller, after joining the workers: takes the latest

 private:
  int64_t start_;
  std::atomic<int64_t> latest_;
};

// ---------------------------------------------------------------- engines

struct Span {
  int64_t start = 0, end = 0;
};

// One engine of a device (its compute engine, a copy engine): work placed on
// it never overlaps. A piece of work goes in the earliest gap at or after the
// time it is ready that is long enough, so kernels of several streams fill
// each other's gaps, as on hardware (concurrent kernels are not modelled).
class Engine {
 public:
  Span place(int64_t ready, int64_t duration);
  // Time in [from, to) during which the engine was busy.
  int64_t busy_between(int64_t from, int64_t to) const;
  // Total time of everything ever placed.
  int64_t busy_total() const { return busy_total_; }
  // The end of the latest work placed.
  int64_t last_end() const { return last_end_; }

 private:
  std::vector<Span> spans_;  // sorted by start, disjoint
  // To bound memory, the oldest spans are forgotten when there are too many:
  // nothing is placed before `floor_` then, and busy_between counts their
  // busy time as spread evenly over [forgotten_from_, floor_).
  int64_t floor_ = 0;
  int64_t forgotten_from_ = 0;
  int64_t forgotten_busy_ = 0;
  int64_t busy_total_ = 0;
  int64_t last_end_ = 0;
};

// ---------------------------------------------------------------- a device

// One device's schedule, as the host issues work to it (the emulated GPU's
// runtime drives it under its lock; the calibration test drives it directly):
// an engine for kernels, one per copy direction (PCIe is full duplex), one
// for collectives (NCCL's kernels, timed by collective_cost.h), and a tail per stream (work on a stream runs in order). Times are the calling
// thread's host clock (host_now) and the engines'.
//
// A kernel starts at max(its submission + launch latency, the end of the
// stream's previous work, the earliest gap of the compute engine that fits
// it); the host pays host_launch_ns per launch, so a queue that the host
// keeps ahead of hides the latency, as on hardware.
class DeviceTimeline {
 public:
  explicit DeviceTimeline(const DeviceModel& model) : model_(&model) {}

  const DeviceModel& model() const { return *model_; }
  // A kernel queued on `stream`.
  Span launch(int64_t stream, const KernelCost& cost);
  // A copy queued on `stream`: host-to-device and device-to-host copies use
  // their direction's copy engine, device-to-device ones the compute engine.
  // From pageable memory the host is held until the copy is done (CUDA
  // stages it through a pinned buffer); into pageable memory it waits for the
  // stream as well (synchronize). Pinned copies free the host at once.
  // `peer`: a device-to-device copy between two devices, on the copy engine.
  // (The caller synchronizes after a copy into pageable memory.)
  Span copy(int64_t stream, CopyKind kind, bool pinned, int64_t bytes, bool peer = false);
  // A collective issued on `stream` (DESIGN.md 4a, "Several processes"): the
  // host pays a launch, and this rank's ready time is returned: when the
  // collective could start on this device (after the stream's previous work
  // and the issue). The caller agrees with the other ranks on the latest
  // ready time and places the collective with collective().
  int64_t collective_ready(int64_t stream);
  // Places a collective of `duration` on the collective engine, starting no
  // earlier than `ready` (the maximum over the ranks). Every rank issues the
  // same collectives in the same order and only collectives use this engine,
  // so every rank places it at the same time. The stream does not wait for it
  // (NCCL runs on a stream of its own): wait_event(stream, span.end) does.
  Span collective(int64_t ready, int64_t duration);
  // An event recorded on `stream`: the modelled time at which it completes.
  int64_t record_event(int64_t stream) const;
  // Work queued on `stream` from now on waits for an event of time `event_ns`.
  void wait_event(int64_t stream, int64_t event_ns);
  // The host waits for the stream (or, with synchronize_device, for every
  // stream and engine), and pays the synchronize's own cost.
  void synchronize(int64_t stream);
  void synchronize_device();
  // The end of everything queued so far, on one stream or on the device.
  int64_t stream_end(int64_t stream) const;
  int64_t last_end() const { return last_end_; }
  // Busy time of the compute engine in [from, to): nvidia-smi's GPU-Util over that window.
  double utilization(int64_t from, int64_t to) const;
  // Busy time of the collective engine in all.
  int64_t collective_busy() const { return collectives_.busy_total(); }

 private:
  Span schedule(Engine& engine, int64_t stream, int64_t duration);

  const DeviceModel* model_;
  Engine compute_, to_device_, to_host_, collectives_;
  std::map<int64_t, int64_t> tails_;  // stream -> end of its last work
  int64_t last_end_ = 0;
};

}  // namespace tiny::gpu::model
