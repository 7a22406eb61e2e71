#include "gpu/model/trace.h"

#include <atomic>
#include <mutex>

#include "core/op_scope.h"
#include "gpu/model/timeline.h"
#include "tiny/error.h"

namespace tiny::gpu::model {

namespace {
std::atomic<bool> g_tracing{false};
std::mutex g_mutex;
std::vector<TraceEvent> g_events;  // guarded by g_mutex
std::atomic<int> g_next_thread{0};
thread_local int t_thread = -1;
}  // namespace

bool tracing() { return g_tracing.load(std::memory_order_relaxed); }

void trace(TraceEvent event) {
  if (t_thread < 0) t_thread = g_next_thread.fetch_add(1);
  event.thread = t_thread;
  std::lock_guard<std::mutex> lock(g_mutex);
  if (g_tracing.load(std::memory_order_relaxed)) g_events.push_back(event);
}

namespace {
int64_t op_entered() { return host_now(); }

void op_exited(const char* name, int64_t entered) {
  TraceEvent e;
  e.kind = TraceEvent::Kind::cpu_op;
  e.name = e.op = name;
  e.host_start_ns = entered;
  e.host_end_ns = host_now();
  trace(e);
}

const tiny::detail::OpTraceHooks g_op_hooks{op_entered, op_exited};
}  // namespace

void start_trace() {
  std::lock_guard<std::mutex> lock(g_mutex);
  TINY_CHECK(!g_tracing.load(), Error, "a tiny::profiler::profile is already recording: profiles cannot nest or "
             "overlap (torch.profiler's neither); stop() the first one, or let it go out of scope, before opening "
             "another");
  g_events.clear();
  g_tracing.store(true);
  tiny::detail::op_trace_hooks.store(&g_op_hooks);
}

std::vector<TraceEvent> stop_trace() {
  std::lock_guard<std::mutex> lock(g_mutex);
  tiny::detail::op_trace_hooks.store(nullptr);
  g_tracing.store(false);
  return std::move(g_events);
}

}  // namespace tiny::gpu::model
