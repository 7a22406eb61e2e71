// What the profiler records (tiny::profiler, framework/src/profiler/): the
// emulated GPU reports each kernel, copy and synchronization with its
// modelled times here while a profile is open, and each outermost op scope
// (core/op_scope.h) its host range. Cheap when none is: one
// relaxed atomic load per call.
//
// On a real GPU the same recording holds the host's side (ops, steps, the
// loader's waits) timed with the host's steady clock (trace_now()); the GPU's
// side comes from CUPTI (profiler/cupti_recorder.h) and is merged in when the
// profile stops (profiler/gpu_activity.h).
#pragma once

#include <cstdint>
#include <vector>

namespace tiny::gpu::model {

struct TraceEvent {
  // cpu_op: a user-facing op's time on the host (host_start_ns to host_end_ns; name = op).
  // collective: NCCL's kernel of a collective, on the device's collective engine
  // (name: "ncclDevKernel_AllReduce_RING", op: "nccl:all_reduce", as Kineto's traces show them).
  enum class Kind : uint8_t { kernel, memcpy_to_device, memcpy_to_host, memcpy_device, memset, synchronize, cpu_op,
                              collective };
  Kind kind = Kind::kernel;
  const char* name = "";  // the kernel ("gemm", "binary") or the call; a literal
  const char* op = "";    // the user-facing op that launched it ("linear"), or ""
  int device = 0;
  int64_t stream = 0;
  int64_t start_ns = 0, end_ns = 0;            // on the device (a synchronize: the host's wait)
  int64_t host_start_ns = 0, host_end_ns = 0;  // the runtime call on the host
  // A host range (cpu_op) on the emulated GPU: the same range on the host's
  // steady clock, which a profile that recorded no GPU work shows instead.
  int64_t real_start_ns = 0, real_end_ns = 0;
  int thread = 0;                              // the host thread, numbered from 0 in order of first use
  int64_t bytes = 0;
  double flops = 0;
  bool pinned = false;
  // Real GPU only (0 / nullptr / true on the emulated one). A cpu_op: the id
  // its launches carry as CUPTI's external correlation. Device work: CUPTI's
  // correlation id of the runtime or driver call that queued it.
  uint64_t correlation = 0;
  const char* call = nullptr;  // that call's name ("cudaLaunchKernel", "cuLaunchKernelEx"); a literal or interned
  bool launch_known = true;    // false: CUPTI reported the work but not the call (no launch slice, no arrow)
  // A cpu_op recorded with record_shapes: each input's sizes ([] for an
  // undefined tensor) and its dtype as PyTorch's traces name it ("float").
  std::vector<std::vector<int64_t>> input_dims;
  std::vector<const char*> input_types;
};

bool tracing();
void trace(TraceEvent event);  // fills in `thread`

// What a recording on a real GPU adds: each op's id is pushed as CUPTI's
// external correlation while the op runs, so the GPU work it queues can be
// traced back to it.
struct RealGpuTracing {
  void (*push_op)(uint64_t id);
  void (*pop_op)();
};
// The host's time for a trace: the calling thread's modelled clock
// (host_now()) on the emulated GPU; while a recording on a real GPU is open,
// real_host_ns().
int64_t trace_now();
// The host's steady clock (CLOCK_MONOTONIC), in nanoseconds since this
// process first read it: a real GPU's trace starts near 0, as a modelled one.
int64_t real_host_ns();
// A moment on both host clocks: the trace's and the steady one.
struct HostStamp {
  int64_t trace_ns = 0;  // trace_now()
  int64_t real_ns = 0;   // real_host_ns()
};
HostStamp host_stamp();
// Sets `e`'s host range (both clocks) from `start` to now.
void end_host_range(TraceEvent& e, const HostStamp& start);
// Starts recording (with each op's input shapes when `record_shapes`); throws
// tiny::Error when a recording is already open. With `real_gpu` the recording
// is on a real GPU: host times come from real_host_ns(), and each op calls
// push_op/pop_op around itself (both null when CUPTI is missing: the host's
// side alone is recorded). `real_gpu` must outlive the recording.
void start_trace(bool record_shapes = false, const RealGpuTracing* real_gpu = nullptr);
// Stops recording and returns what was recorded, in order of issue.
std::vector<TraceEvent> stop_trace();

}  // namespace tiny::gpu::model
