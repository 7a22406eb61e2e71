#include "gpu/model/trace.h"

#include <atomic>
#include <chrono>
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
std::atomic<const RealGpuTracing*> g_real_gpu{nullptr};  // set while a recording on a real GPU is open
std::atomic<uint64_t> g_next_op_id{0};
thread_local int t_thread = -1;
// The open outermost op on this thread, on a real GPU: its id, and the hooks
// that pushed it (kept, so that the op pops what it pushed even when the
// recording stops while it runs).
thread_local uint64_t t_op_id = 0;
thread_local const RealGpuTracing* t_pushed = nullptr;
// The open outermost op's inputs on this thread (record_shapes): only the
// outermost scope reports, so one is enough.
thread_local std::vector<std::vector<int64_t>> t_input_dims;
thread_local std::vector<const char*> t_input_types;
// The open outermost op's start on the host's steady clock.
thread_local int64_t t_real_entered = 0;
}  // namespace

bool tracing() { return g_tracing.load(std::memory_order_relaxed); }

int64_t real_host_ns() {
  using clock = std::chrono::steady_clock;
  static const clock::time_point origin = clock::now();
  return std::chrono::duration_cast<std::chrono::nanoseconds>(clock::now() - origin).count();
}

int64_t trace_now() {
  return g_real_gpu.load(std::memory_order_relaxed) != nullptr ? real_host_ns() : host_now();
}

HostStamp host_stamp() { return {trace_now(), real_host_ns()}; }

void end_host_range(TraceEvent& e, const HostStamp& start) {
  e.host_start_ns = start.trace_ns;
  e.real_start_ns = start.real_ns;
  e.host_end_ns = trace_now();
  e.real_end_ns = real_host_ns();
}

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
    case Dtype::Int32: return "int";
    case Dtype::UInt8: return "unsigned char";
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
  const RealGpuTracing* real = g_real_gpu.load(std::memory_order_relaxed);
  t_real_entered = real_host_ns();
  if (real == nullptr) return host_now();
  t_op_id = g_next_op_id.fetch_add(1) + 1;
  if (real->push_op != nullptr) {
    real->push_op(t_op_id);
    t_pushed = real;
  }
  return real_host_ns();
}

void op_exited(const char* name, int64_t entered) {
  TraceEvent e;
  e.kind = TraceEvent::Kind::cpu_op;
  e.name = e.op = name;
  end_host_range(e, {entered, t_real_entered});
  e.correlation = t_op_id;
  t_op_id = 0;
  if (t_pushed != nullptr) {
    t_pushed->pop_op();
    t_pushed = nullptr;
  }
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

void start_trace(bool record_shapes, const RealGpuTracing* real_gpu) {
  std::lock_guard<std::mutex> lock(g_mutex);
  TINY_CHECK(!g_tracing.load(), Error, "a tiny::profiler::profile is already recording: profiles cannot nest or "
             "overlap (nor can torch.profiler's); stop() the first one, or let it go out of scope, before opening "
             "another");
  g_events.clear();
  g_record_shapes.store(record_shapes);
  g_real_gpu.store(real_gpu);
  g_tracing.store(true);
  tiny::detail::op_trace_hooks.store(&g_op_hooks);
}

std::vector<TraceEvent> stop_trace() {
  std::lock_guard<std::mutex> lock(g_mutex);
  tiny::detail::op_trace_hooks.store(nullptr);
  g_tracing.store(false);
  g_real_gpu.store(nullptr);
  return std::move(g_events);
}

}  // namespace tiny::gpu::model
