#include "gpu/model/timeline.h"

#include <algorithm>
#include <atomic>

namespace tiny::gpu::model {

namespace {
// The latest modelled time any host thread has reached. A thread the model
// was not told about (one the program starts itself; HostClockFork's workers
// adopt their caller's time) starts there: at 0, the GPU work it queued would
// land in the GPU's idle past, before work the program had already waited for.
std::atomic<int64_t> g_latest_host_ns{0};
thread_local int64_t t_host_ns = g_latest_host_ns.load(std::memory_order_relaxed);
thread_local int t_unmodelled = 0;  // inside UnmodelledHostWork: its moves are undone, so not reported
std::atomic<int64_t> g_host_autograd_ns{0};
constexpr size_t kMaxSpans = size_t{1} << 16;

// The calling thread's clock moved: the latest time reached may be later now.
void moved() {
  if (t_unmodelled > 0) return;
  int64_t seen = g_latest_host_ns.load(std::memory_order_relaxed);
  while (seen < t_host_ns && !g_latest_host_ns.compare_exchange_weak(seen, t_host_ns, std::memory_order_relaxed)) {
  }
}
}  // namespace

int64_t host_now() { return t_host_ns; }
void host_advance(int64_t ns) {
  t_host_ns += ns;
  moved();
}
void host_wait_until(int64_t t) {
  t_host_ns = std::max(t_host_ns, t);
  moved();
}
void host_advance_autograd() {
  t_host_ns += g_host_autograd_ns.load(std::memory_order_relaxed);
  moved();
}
void set_host_autograd_ns(int64_t ns) { g_host_autograd_ns.store(ns, std::memory_order_relaxed); }
UnmodelledHostWork::UnmodelledHostWork() : saved_(host_now()) { ++t_unmodelled; }
UnmodelledHostWork::~UnmodelledHostWork() {
  t_host_ns = saved_;
  --t_unmodelled;
}


HostClockFork::HostClockFork() : start_(host_now()), latest_(host_now()) {}
void HostClockFork::enter() const { t_host_ns = start_; }
void HostClockFork::leave() {
  int64_t seen = latest_.load();
  while (seen < host_now() && !latest_.compare_exchange_weak(seen, host_now())) {
  }
}
void HostClockFork::join() const { host_wait_until(latest_.load()); }

Span Engine::place(int64_t ready, int64_t duration) {
  int64_t start = std::max(ready, floor_);
  // The first span that ends after `start`; walk the gaps from there.
  auto it = std::lower_bound(spans_.begin(), spans_.end(), start,
                             [](const Span& s, int64_t t) { return s.end <= t; });
  while (it != spans_.end() && it->start < start + duration) {
    start = std::max(start, it->end);
    ++it;
  }
  const Span span{start, start + duration};
  spans_.insert(it, span);
  busy_total_ += duration;
  last_end_ = std::max(last_end_, span.end);
  if (spans_.size() > kMaxSpans) {
    const auto half = spans_.begin() + static_cast<std::ptrdiff_t>(kMaxSpans / 2);
    if (forgotten_busy_ == 0) forgotten_from_ = spans_.front().start;
    for (auto s = spans_.begin(); s != half; ++s) forgotten_busy_ += s->end - s->start;
    floor_ = std::max(floor_, (half - 1)->end);
    spans_.erase(spans_.begin(), half);
  }
  return span;
}

int64_t Engine::busy_between(int64_t from, int64_t to) const {
  int64_t busy = 0;
  for (const Span& s : spans_) {
    if (s.start >= to) break;
    busy += std::max<int64_t>(0, std::min(s.end, to) - std::max(s.start, from));
  }
  if (forgotten_busy_ > 0 && from < floor_ && floor_ > forgotten_from_) {
    const int64_t covered = std::min(floor_, to) - std::max(forgotten_from_, from);
    if (covered > 0) busy += forgotten_busy_ * covered / (floor_ - forgotten_from_);
  }
  return busy;
}

int64_t DeviceTimeline::stream_end(int64_t stream) const {
  const auto it = tails_.find(stream);
  return it == tails_.end() ? 0 : it->second;
}

Span DeviceTimeline::schedule(Engine& engine, int64_t stream, int64_t duration) {
  const int64_t ready = std::max(host_now() + model_->launch_latency_ns, stream_end(stream));
  const Span span = engine.place(ready, duration);
  tails_[stream] = span.end;
  last_end_ = std::max(last_end_, span.end);
  return span;
}

Span DeviceTimeline::launch(int64_t stream, const KernelCost& cost) {
  host_advance(model_->host_launch_ns + (cost.work == Work::gemm ? model_->host_gemm_ns : 0));
  return schedule(compute_, stream, kernel_ns(*model_, cost));
}

Span DeviceTimeline::copy(int64_t stream, CopyKind kind, bool pinned, int64_t bytes, bool peer) {
  host_advance(model_->host_copy_ns);
  const int64_t duration = copy_ns(*model_, kind, pinned, bytes, peer);
  Engine& engine = kind == CopyKind::DeviceToHost                  ? to_host_
                   : kind == CopyKind::HostToDevice || peer         ? to_device_
                                                                    : compute_;
  const Span span = schedule(engine, stream, duration);
  if (!pinned && kind == CopyKind::HostToDevice) host_wait_until(span.end);
  return span;
}

int64_t DeviceTimeline::collective_ready(int64_t stream) {
  host_advance(model_->host_launch_ns);
  return std::max(host_now() + model_->launch_latency_ns, stream_end(stream));
}

Span DeviceTimeline::collective(int64_t ready, int64_t duration) {
  const Span span = collectives_.place(ready, duration);
  last_end_ = std::max(last_end_, span.end);
  return span;
}

int64_t DeviceTimeline::record_event(int64_t stream) const {
  return std::max(host_now() + model_->launch_latency_ns, stream_end(stream));
}

void DeviceTimeline::wait_event(int64_t stream, int64_t event_ns) { tails_[stream] = std::max(stream_end(stream), event_ns); }

void DeviceTimeline::synchronize(int64_t stream) {
  host_wait_until(stream_end(stream));
  host_advance(model_->sync_ns);
}

void DeviceTimeline::synchronize_device() {
  host_wait_until(last_end_);
  host_advance(model_->sync_ns);
}

double DeviceTimeline::utilization(int64_t from, int64_t to) const {
  return to > from ? static_cast<double>(compute_.busy_between(from, to)) / static_cast<double>(to - from) : 0.0;
}

}  // namespace tiny::gpu::model
