// What the profiler records (tiny::profiler, framework/src/profiler/): the
// emulated GPU reports each kernel, copy and synchronization with its
// modelled times here while a profile is open, and each outermost op scope
// (core/op_scope.h) its host range. Cheap when none is: one
// relaxed atomic load per call.
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
  int thread = 0;                              // the host thread, numbered from 0 in order of first use
  int64_t bytes = 0;
  double flops = 0;
  bool pinned = false;
  // A cpu_op recorded with record_shapes: each input's sizes ([] for an
  // undefined tensor) and its dtype as PyTorch's traces name it ("float").
  std::vector<std::vector<int64_t>> input_dims;
  std::vector<const char*> input_types;
};

bool tracing();
void trace(TraceEvent event);  // fills in `thread`
// Starts recording (with each op's input shapes when `record_shapes`); throws
// tiny::Error when a recording is already open.
void start_trace(bool record_shapes = false);
// Stops recording and returns what was recorded, in order of issue.
std::vector<TraceEvent> stop_trace();

}  // namespace tiny::gpu::model
