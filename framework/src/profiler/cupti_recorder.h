// The GPU's side of a tiny::profiler::profile on a real GPU: CUPTI's Activity
// API (kernels, memcpys, memsets, the runtime and driver calls that queued
// them, and the external correlation that ties each call to tiny's op).
//
// libcupti is loaded with dlopen when the first profile on a real GPU opens,
// never at startup and never linked, so that no binary needs it to start.
// Where it looks: TINY_CUPTI_LIBRARY when set (only there); else the soname
// (libcupti.so.13 for CUDA 13) through the loader's path, then the folder of
// libcudart (CUDA 13 ships CUPTI there), then the folder CMake found CUPTI in.
// A build without cupti.h compiles the stub half of cupti_recorder.cpp, which
// says so at run time.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "gpu/model/trace.h"
#include "profiler/gpu_activity.h"

namespace tiny::profiler::detail {

/// @brief The environment variable that names the CUPTI library to load.
constexpr const char* kCuptiLibraryVariable = "TINY_CUPTI_LIBRARY";

// Starts recording the GPU's work: "" when CUPTI records, else why it does
// not and how to fix that (for stderr and the trace). Call with no recording
// open. The first call loads libcupti.
std::string cupti_start();

// What one recording gathered.
struct CuptiRecording {
  GpuActivities activities;
  ClockMap clock;
  std::string error;  // non-empty: the GPU's rows are missing, and why
};

// Stops recording: waits for every GPU (cudaDeviceSynchronize, uncounted, so
// that the work queued inside the profile has run), flushes CUPTI's buffers
// and returns their records.
CuptiRecording cupti_stop();

// The hooks that push each op's id as CUPTI's external correlation (they do
// nothing while CUPTI does not record).
const gpu::model::RealGpuTracing* cupti_op_hooks();

// Loads `library` as CUPTI and resolves its entry points: "" when it can be
// used, else the message a profile would give. For tests and diagnostics.
std::string cupti_try_load(const std::string& library);

// Whether this build has the CUPTI half (cupti.h was found at configure time).
bool cupti_built();

// Tests only (profiler.cpp): profiles opened from now on act as on a real GPU
// (`pretend`) whatever the device runtime is, and the once-per-process
// message about missing GPU rows may be printed again.
void pretend_real_gpu_for_testing(bool pretend);
// Tests only: while set, a profile on a (pretended) real GPU takes the GPU's
// records from `fake` (given the host's recording, so that it can link its
// calls to the ops' ids) instead of CUPTI. An empty function restores CUPTI.
using FakeGpuRecorder = std::function<CuptiRecording(const std::vector<gpu::model::TraceEvent>& host)>;
void fake_gpu_recorder_for_testing(FakeGpuRecorder fake);

}  // namespace tiny::profiler::detail
