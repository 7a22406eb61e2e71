#include "gpu/model/trace.h"

#include <atomic>
#include <mutex>

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

void start_trace() {
  std::lock_guard<std::mutex> lock(g_mutex);
  TINY_CHECK(!g_tracing.load(), Error, "a tiny::profiler::profile is already recording: profiles cannot nest or "
             "overlap (torch.profiler's neither); stop() the first one, or let it go out of scope, before opening "
             "another");
  g_events.clear();
  g_tracing.store(true);
}

std::vector<TraceEvent> stop_trace() {
  std::lock_guard<std::mutex> lock(g_mutex);
  g_tracing.store(false);
  return std::move(g_events);
}

}  // namespace tiny::gpu::model
