// What CUPTI reports of a real GPU's work, in tiny's words, and how it joins
// the host's side of a recording (gpu/model/trace.h) when a profile stops.
// Plain data: the CUPTI reader (cupti_recorder.cpp) only copies CUPTI's
// activity records into these structs, and this conversion is tested without
// a GPU on synthetic records (tests/framework/test_profiler_cupti.cpp).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "gpu/model/trace.h"

namespace tiny::profiler::detail {

// A kernel, memcpy or memset the GPU ran (CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL,
// _MEMCPY, _MEMSET). Times are CUPTI's timestamps (cuptiGetTimestamp's clock).
struct GpuWork {
  enum class Kind : uint8_t { kernel, memcpy_to_device, memcpy_to_host, memcpy_device, memset };
  Kind kind = Kind::kernel;
  std::string name;  // a kernel's name as CUPTI gives it (mangled); copies and memsets are named here
  int device = 0;
  uint32_t stream = 0;  // CUPTI's stream id
  uint64_t start_ns = 0, end_ns = 0;
  uint32_t correlation = 0;          // the call that queued it (runtime or driver API)
  uint32_t runtime_correlation = 0;  // a memcpy's runtime call, when the driver's differs (else 0)
  int64_t bytes = 0;                 // copies and memsets
  bool pinned = false;               // a copy from or into pinned host memory
};

// A runtime (cuda*) or driver (cu*) API call (CUPTI_ACTIVITY_KIND_RUNTIME, _DRIVER).
struct ApiCall {
  std::string name;  // "cudaLaunchKernel", "cuLaunchKernelEx", "cudaStreamSynchronize"
  bool runtime = true;
  uint64_t start_ns = 0, end_ns = 0;  // on the host, CUPTI's clock
  uint32_t thread = 0;                // CUPTI's thread id
  uint32_t correlation = 0;
};

// CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION: the call `correlation` ran while
// tiny's op `op_id` (TraceEvent::correlation of its cpu_op) was pushed.
struct ExternalLink {
  uint32_t correlation = 0;
  uint64_t op_id = 0;
};

// Everything one recording's CUPTI buffers held.
struct GpuActivities {
  std::vector<GpuWork> work;
  std::vector<ApiCall> calls;
  std::vector<ExternalLink> links;
  uint64_t dropped = 0;  // records CUPTI dropped (its buffers were full)
};

// CUPTI's clock mapped onto the host's (gpu::model::real_host_ns()). At the
// start and at the end of a recording the recorder reads the host's clock
// just before and just after cuptiGetTimestamp and takes the midpoint of the
// closest pair, so each sample is exact to within that gap (about 100 ns); a
// timestamp between them is placed by a straight line through the two
// samples, which absorbs an offset between the clocks and any drift.
struct ClockMap {
  int64_t host_start = 0;
  uint64_t cupti_start = 0;
  int64_t host_stop = 0;
  uint64_t cupti_stop = 0;
  // `cupti_ns` on the host's clock.
  int64_t to_host(uint64_t cupti_ns) const;
};

// The host's recording with the GPU's work merged in: each kernel, copy and
// memset as a TraceEvent (device times and its launching call's host range on
// the host's clock, its call's name and correlation id, the op that launched
// it from the external correlation, the host thread of that op), and the
// runtime's synchronizing calls as synchronize events, all in order of issue
// (a call before the op that made it ends, as the emulator records them).
std::vector<gpu::model::TraceEvent> merge_gpu_activities(std::vector<gpu::model::TraceEvent> host,
                                                         const GpuActivities& gpu, const ClockMap& clock);

// A C++ symbol as a person reads it ("void gemm<float>(float*, int)"), or the
// text itself when it is not a mangled name.
std::string demangle(const std::string& name);

// A copy of `text` that lives as long as the process (TraceEvent holds names
// as const char*); the same text gives the same pointer.
const char* intern(const std::string& text);

}  // namespace tiny::profiler::detail
