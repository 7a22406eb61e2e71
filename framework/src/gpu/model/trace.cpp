#include "gpu/model/trace.h"

#include <atomic>
#include <mutex>

#include "core/op_scope.h"
#include "gpu/model/timeline.h"
#include "tiny/error.h"
#include "tiny/tensor.h"

namespace tiny::gpu::model {

namespace {
std::atomic<bool> g_tracing{false};
std::mutex g_mutex;
std::vector<TraceEvent> g_events;  // guarded by g_mutex
std::atomic<int> g_next_thread{0};
std::atomic<bool> g_record_shapes{false};
thread_local int t_thread = -1;
// The open outermost op's inputs on this thread (record_shapes): only the
// outermost scope reports, so one is enough.
thread_local std::vector<std::vector<int64_t>> t_input_dims;
thread_local std::vector<const char*> t_input_types;
}  // namespace

bool tracing() { return g_tracing.load(std::memory_order_relaxed); }

void trace(TraceEvent event) {
  if (t_thread < 0) t_thread = g_next_thread.fetch_add(1);
  event.thread = t_thread;
  std::lock_guard<std::mutex> lock(g_mutex);
  if (g_tracing.load(std::memory_order_relaxed)) g_events.push_back(std::move(event));
}

namespace {
// A dtype as PyTorch's traces write it ("Input type").
const char* trace_type_name(Dtype d) {
  switch (d) {
    case Dtype::Bool: return "bool";
    case Dtype::Int64: return "long int";
    case Dtype::Float32: return "float";
    case Dtype::Float64: return "double";
    case Dtype::Float16: return "c10::Half";
    case Dtype::BFloat16: return "c10::BFloat16";
  }
  return "unknown";
}

int64_t op_entered(const Tensor* const* inputs, size_t n) {
  if (g_record_shapes.load(std::memory_order_relaxed)) {
    t_input_dims.clear();
    t_input_types.clear();
    for (size_t i = 0; i < n; ++i) {
      const Tensor& t = *inputs[i];
      if (!t.defined()) {  // an absent bias: Kineto writes [] and ""
        t_input_dims.emplace_back();
        t_input_types.push_back("");
        continue;
      }
      t_input_dims.emplace_back(t.sizes().begin(), t.sizes().end());
      t_input_types.push_back(trace_type_name(t.dtype()));
    }
  }
  return host_now();
}

void op_exited(const char* name, int64_t entered) {
  TraceEvent e;
  e.kind = TraceEvent::Kind::cpu_op;
  e.name = e.op = name;
  e.host_start_ns = entered;
  e.host_end_ns = host_now();
  if (g_record_shapes.load(std::memory_order_relaxed)) {
    e.input_dims = std::move(t_input_dims);
    e.input_types = std::move(t_input_types);
    t_input_dims.clear();
    t_input_types.clear();
  }
  trace(std::move(e));
}

const tiny::detail::OpTraceHooks g_op_hooks{op_entered, op_exited};
}  // namespace

void start_trace(bool record_shapes) {
  std::lock_guard<std::mutex> lock(g_mutex);
  TINY_CHECK(!g_tracing.load(), Error, "a tiny::profiler::profile is already recording: profiles cannot nest or "
             "overlap (torch.profiler's neither); stop() the first one, or let it go out of scope, before opening "
             "another");
  g_events.clear();
  g_record_shapes.store(record_shapes);
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
