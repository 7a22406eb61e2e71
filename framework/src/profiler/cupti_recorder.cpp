// CUPTI's Activity API behind tiny::profiler on a real GPU (cupti_recorder.h).
//
// The shape is CUPTI's own sample (activity_trace_async) and Kineto's:
// buffers handed to CUPTI through callbacks, the kinds enabled when a profile
// opens, cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED) when it
// stops, each record copied into gpu_activity.h's plain structs as its buffer
// completes. Each op's id is pushed as an external correlation
// (CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0) while it runs, as PyTorch pushes
// its op ids, so that a kernel can be traced back to the op that launched it.
#include "profiler/cupti_recorder.h"

#ifndef TINY_HAVE_CUPTI

namespace tiny::profiler::detail {

namespace {
constexpr const char* kNotBuilt =
    "this build of tiny has no CUPTI: CMake found no cupti.h in the CUDA toolkit when it configured the build "
    "(the configure step prints 'tiny: CUPTI ...'). Install the toolkit's CUPTI (it ships with the CUDA toolkit; "
    "Debian/Ubuntu: the cuda-cupti-dev package) and configure again";
}  // namespace

std::string cupti_start() { return kNotBuilt; }
CuptiRecording cupti_stop() { return {{}, {}, kNotBuilt}; }
const gpu::model::RealGpuTracing* cupti_op_hooks() {
  static const gpu::model::RealGpuTracing none{nullptr, nullptr};
  return &none;
}
std::string cupti_try_load(const std::string&) { return kNotBuilt; }
bool cupti_built() { return false; }

}  // namespace tiny::profiler::detail

#else  // TINY_HAVE_CUPTI

#include <cuda_runtime_api.h>
#include <cupti.h>
#include <dlfcn.h>

#include <atomic>
#include <cstdlib>
#include <map>
#include <memory>
#include <mutex>
#include <type_traits>
#include <vector>

#include "gpu/cuda/cuda_runtime.h"

namespace tiny::profiler::detail {

namespace {

// The entry points of libcupti that tiny uses.
struct Cupti {
  std::string path;
  decltype(&cuptiGetVersion) get_version = nullptr;
  decltype(&cuptiGetResultString) get_result_string = nullptr;
  decltype(&cuptiGetCallbackName) get_callback_name = nullptr;
  decltype(&cuptiGetTimestamp) get_timestamp = nullptr;
  decltype(&cuptiActivityRegisterCallbacks) register_callbacks = nullptr;
  decltype(&cuptiActivityEnable) enable = nullptr;
  decltype(&cuptiActivityDisable) disable = nullptr;
  decltype(&cuptiActivityFlushAll) flush_all = nullptr;
  decltype(&cuptiActivityGetNextRecord) next_record = nullptr;
  decltype(&cuptiActivityGetNumDroppedRecords) num_dropped = nullptr;
  decltype(&cuptiActivityPushExternalCorrelationId) push_external = nullptr;
  decltype(&cuptiActivityPopExternalCorrelationId) pop_external = nullptr;
  bool callbacks_registered = false;

  std::string result(CUptiResult r) const {
    const char* text = nullptr;
    if (get_result_string(r, &text) != CUPTI_SUCCESS || text == nullptr) text = "unknown CUPTI error";
    return std::string(text) + " (CUptiResult " + std::to_string(static_cast<int>(r)) + ")";
  }
};

// "libcupti.so.13": the soname of the toolkit tiny was built with.
std::string soname() { return "libcupti.so." + std::to_string(CUDART_VERSION / 1000); }

std::string load_failure(const std::string& tried, bool from_variable, const std::string& chosen) {
  std::string fix = from_variable
                        ? std::string("Fix ") + kCuptiLibraryVariable + "='" + chosen + "' (the path of libcupti.so), or "
                              "unset it to let tiny look for " + soname()
                        : "Add the folder that holds " + soname() + " to LD_LIBRARY_PATH (CUDA 13: the toolkit's lib64, "
                              "for example /usr/local/cuda/lib64; older toolkits: extras/CUPTI/lib64), or name the file "
                              "in " + kCuptiLibraryVariable;
  return "CUPTI, the CUDA toolkit's profiling library, could not be loaded:" + tried + "\n" + fix;
}

// Opens the first of `candidates` that loads and has every entry point.
std::unique_ptr<Cupti> load(const std::vector<std::string>& candidates, bool from_variable, std::string* why) {
  std::string tried;
  for (const std::string& name : candidates) {
    void* handle = dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (handle == nullptr) {
      const char* e = dlerror();
      tried += "\n  " + (e ? std::string(e) : name + ": not found");  // dlerror names the file
      continue;
    }
    auto lib = std::make_unique<Cupti>();
    lib->path = name;
    std::string missing;
    auto resolve = [&](auto& fn, const char* symbol) {
      fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(dlsym(handle, symbol));
      if (fn == nullptr) missing += (missing.empty() ? "" : ", ") + std::string(symbol);
    };
    resolve(lib->get_version, "cuptiGetVersion");
    resolve(lib->get_result_string, "cuptiGetResultString");
    resolve(lib->get_callback_name, "cuptiGetCallbackName");
    resolve(lib->get_timestamp, "cuptiGetTimestamp");
    resolve(lib->register_callbacks, "cuptiActivityRegisterCallbacks");
    resolve(lib->enable, "cuptiActivityEnable");
    resolve(lib->disable, "cuptiActivityDisable");
    resolve(lib->flush_all, "cuptiActivityFlushAll");
    resolve(lib->next_record, "cuptiActivityGetNextRecord");
    resolve(lib->num_dropped, "cuptiActivityGetNumDroppedRecords");
    resolve(lib->push_external, "cuptiActivityPushExternalCorrelationId");
    resolve(lib->pop_external, "cuptiActivityPopExternalCorrelationId");
    if (missing.empty()) return lib;
    tried += "\n  " + name + " has no " + missing + " (not CUPTI, or older than CUDA 10)";
    dlclose(handle);
  }
  *why = load_failure(tried, from_variable, from_variable ? candidates.front() : "");
  return nullptr;
}

std::vector<std::string> default_candidates() {
  std::vector<std::string> out{soname(), "libcupti.so"};
  const std::string beside = gpu::cudart_directory();
  if (!beside.empty()) out.push_back(beside + soname());
#ifdef TINY_CUPTI_LIBRARY_DIR
  out.push_back(std::string(TINY_CUPTI_LIBRARY_DIR) + "/" + soname());
  out.push_back(std::string(TINY_CUPTI_LIBRARY_DIR) + "/libcupti.so");
#endif
  return out;
}

// The library for this process's TINY_CUPTI_LIBRARY, loaded once; a failure
// is not kept, so a fixed variable works at the next profile.
Cupti* library(std::string* why) {
  static std::mutex mutex;
  static auto* loaded = new std::map<std::string, std::unique_ptr<Cupti>>();  // never unloaded
  const char* chosen = std::getenv(kCuptiLibraryVariable);
  const std::string key = chosen != nullptr ? chosen : "";
  std::lock_guard<std::mutex> lock(mutex);
  auto found = loaded->find(key);
  if (found != loaded->end()) return found->second.get();
  std::unique_ptr<Cupti> lib = key.empty() ? load(default_candidates(), false, why) : load({key}, true, why);
  if (lib == nullptr) return nullptr;
  Cupti* kept = lib.get();
  (*loaded)[key] = std::move(lib);
  return kept;
}

// ---- the recording -------------------------------------------------------------

// The library whose buffers are being read (kept after a recording stops:
// the last buffers complete during its final flush), the one now recording
// (the op hooks push only while it is set), and what the buffers held.
std::atomic<Cupti*> g_reader{nullptr};
std::atomic<Cupti*> g_recording{nullptr};
std::mutex g_mutex;
GpuActivities g_collected;  // guarded by g_mutex
ClockMap g_clock;           // the start's sample; written by cupti_start, read by cupti_stop

constexpr size_t kBufferBytes = size_t{8} << 20;  // CUPTI's sample and Kineto use a few MiB
constexpr CUpti_ActivityKind kGpuKinds[] = {CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, CUPTI_ACTIVITY_KIND_MEMCPY,
                                            CUPTI_ACTIVITY_KIND_MEMSET};
constexpr CUpti_ActivityKind kHostKinds[] = {CUPTI_ACTIVITY_KIND_RUNTIME, CUPTI_ACTIVITY_KIND_DRIVER,
                                             CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION};

void CUPTIAPI buffer_requested(uint8_t** buffer, size_t* size, size_t* max_records) {
  *buffer = static_cast<uint8_t*>(std::aligned_alloc(8, kBufferBytes));  // records are 8-byte aligned
  *size = *buffer != nullptr ? kBufferBytes : 0;
  *max_records = 0;  // as many as fit
}

bool pinned_host(uint8_t memory_kind) { return memory_kind == CUPTI_ACTIVITY_MEMORY_KIND_PINNED; }

// Where and when a kernel, copy or memset ran: the fields every such record has, under the same names.
template <typename Record>
void place(GpuWork& w, const Record* r) {
  w.device = static_cast<int>(r->deviceId);
  w.stream = r->streamId;
  w.start_ns = r->start;
  w.end_ns = r->end;
  w.correlation = r->correlationId;
}

// One record into `out`. Only fields that sit at the same offsets in every
// version of these records since CUDA 11 (Kernel8-10, Memcpy5-6, Memset3-4)
// are read, so a newer libcupti's records read the same.
void read_record(const Cupti& lib, const CUpti_Activity* record, GpuActivities& out) {
  switch (record->kind) {
    case CUPTI_ACTIVITY_KIND_KERNEL:
    case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL: {
      const auto* k = reinterpret_cast<const CUpti_ActivityKernel10*>(record);
      GpuWork w;
      w.kind = GpuWork::Kind::kernel;
      w.name = k->name != nullptr ? k->name : "(unnamed kernel)";
      place(w, k);
      out.work.push_back(std::move(w));
      break;
    }
    case CUPTI_ACTIVITY_KIND_MEMCPY: {
      const auto* m = reinterpret_cast<const CUpti_ActivityMemcpy6*>(record);
      GpuWork w;
      switch (m->copyKind) {
        case CUPTI_ACTIVITY_MEMCPY_KIND_HTOD: w.kind = GpuWork::Kind::memcpy_to_device; break;
        case CUPTI_ACTIVITY_MEMCPY_KIND_DTOH: w.kind = GpuWork::Kind::memcpy_to_host; break;
        default: w.kind = GpuWork::Kind::memcpy_device; break;  // device to device, peer, arrays
      }
      w.pinned = m->copyKind == CUPTI_ACTIVITY_MEMCPY_KIND_HTOD   ? pinned_host(m->srcKind)
                 : m->copyKind == CUPTI_ACTIVITY_MEMCPY_KIND_DTOH ? pinned_host(m->dstKind)
                                                                  : false;
      w.bytes = static_cast<int64_t>(m->bytes);
      place(w, m);
      w.runtime_correlation = m->runtimeCorrelationId != m->correlationId ? m->runtimeCorrelationId : 0;
      out.work.push_back(std::move(w));
      break;
    }
    case CUPTI_ACTIVITY_KIND_MEMSET: {
      const auto* m = reinterpret_cast<const CUpti_ActivityMemset4*>(record);
      GpuWork w;
      w.kind = GpuWork::Kind::memset;
      w.bytes = static_cast<int64_t>(m->bytes);
      place(w, m);
      out.work.push_back(std::move(w));
      break;
    }
    case CUPTI_ACTIVITY_KIND_RUNTIME:
    case CUPTI_ACTIVITY_KIND_DRIVER: {
      const auto* a = reinterpret_cast<const CUpti_ActivityAPI*>(record);
      ApiCall c;
      c.runtime = record->kind == CUPTI_ACTIVITY_KIND_RUNTIME;
      const char* name = nullptr;
      const CUpti_CallbackDomain domain = c.runtime ? CUPTI_CB_DOMAIN_RUNTIME_API : CUPTI_CB_DOMAIN_DRIVER_API;
      if (lib.get_callback_name(domain, a->cbid, &name) != CUPTI_SUCCESS || name == nullptr) name = "";
      c.name = name;
      // CUPTI names some calls with a version suffix (cudaLaunchKernel_v7000): as the API spells them.
      const size_t suffix = c.name.find("_v");
      if (suffix != std::string::npos && suffix + 2 < c.name.size() &&
          c.name.find_first_not_of("0123456789", suffix + 2) == std::string::npos) {
        c.name.resize(suffix);
      }
      if (c.name.empty()) c.name = (c.runtime ? "cuda runtime call " : "cuda driver call ") + std::to_string(a->cbid);
      c.start_ns = a->start;
      c.end_ns = a->end;
      c.thread = a->threadId;
      c.correlation = a->correlationId;
      out.calls.push_back(std::move(c));
      break;
    }
    case CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION: {
      const auto* x = reinterpret_cast<const CUpti_ActivityExternalCorrelation*>(record);
      if (x->externalKind == CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0) out.links.push_back({x->correlationId, x->externalId});
      break;
    }
    default: break;
  }
}

void CUPTIAPI buffer_completed(CUcontext context, uint32_t stream, uint8_t* buffer, size_t, size_t valid) {
  Cupti* lib = g_reader.load();
  if (lib != nullptr && buffer != nullptr) {
    GpuActivities read;
    CUpti_Activity* record = nullptr;
    while (lib->next_record(buffer, valid, &record) == CUPTI_SUCCESS) read_record(*lib, record, read);
    size_t dropped = 0;
    if (lib->num_dropped(context, stream, &dropped) != CUPTI_SUCCESS) dropped = 0;
    std::lock_guard<std::mutex> lock(g_mutex);
    auto append = [](auto& to, auto& from) { to.insert(to.end(), std::make_move_iterator(from.begin()),
                                                       std::make_move_iterator(from.end())); };
    append(g_collected.work, read.work);
    append(g_collected.calls, read.calls);
    append(g_collected.links, read.links);
    g_collected.dropped += dropped;
  }
  std::free(buffer);
}

// The host's clock against CUPTI's (see ClockMap): the closest of a few
// (host, CUPTI, host) readings.
bool sample_clocks(const Cupti& lib, int64_t* host, uint64_t* cupti) {
  int64_t best = -1;
  for (int i = 0; i < 5; ++i) {
    uint64_t t = 0;
    const int64_t before = gpu::model::real_host_ns();
    if (lib.get_timestamp(&t) != CUPTI_SUCCESS) return false;
    const int64_t after = gpu::model::real_host_ns();
    if (best < 0 || after - before < best) {
      best = after - before;
      *host = before + (after - before) / 2;
      *cupti = t;
    }
  }
  return true;
}

const char* kind_name(CUpti_ActivityKind kind) {
  switch (kind) {
    case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL: return "CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL";
    case CUPTI_ACTIVITY_KIND_MEMCPY: return "CUPTI_ACTIVITY_KIND_MEMCPY";
    case CUPTI_ACTIVITY_KIND_MEMSET: return "CUPTI_ACTIVITY_KIND_MEMSET";
    case CUPTI_ACTIVITY_KIND_RUNTIME: return "CUPTI_ACTIVITY_KIND_RUNTIME";
    case CUPTI_ACTIVITY_KIND_DRIVER: return "CUPTI_ACTIVITY_KIND_DRIVER";
    case CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION: return "CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION";
    default: return "a CUPTI activity kind";
  }
}

// What to do about a CUPTI call that failed.
std::string advice(CUptiResult r) {
  switch (r) {
    case CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED:
      return "another profiler (Nsight Systems, Nsight Compute, a second torch.profiler) holds CUPTI in this "
             "process: profile with one tool at a time";
    case CUPTI_ERROR_INSUFFICIENT_PRIVILEGES:
      return "the driver allows profiling to administrators only: run as root, or load the nvidia module with "
             "NVreg_RestrictProfilingToAdminUsers=0";
    case CUPTI_ERROR_NOT_INITIALIZED:
    case CUPTI_ERROR_INVALID_DEVICE:
      return "CUPTI found no usable GPU or driver: check nvidia-smi, and that libcupti comes from a toolkit the "
             "driver supports";
    default: return "check that libcupti comes from the same CUDA toolkit as libcudart and that the driver supports it";
  }
}

std::string failed(const Cupti& lib, const std::string& call, CUptiResult r) {
  return "CUPTI (" + lib.path + ") failed: " + call + " returned " + lib.result(r) + "; " + advice(r);
}

void disable_all(const Cupti& lib) {
  for (const CUpti_ActivityKind kind : kHostKinds) (void)lib.disable(kind);
  for (const CUpti_ActivityKind kind : kGpuKinds) (void)lib.disable(kind);
}

// Waits for every GPU, so that the work queued inside the profile has run and
// its records are complete. Straight through the runtime API: the profiler's
// wait is not the program's, so tiny's synchronization counters do not see it.
void wait_for_gpus() {
  int count = 0, current = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || cudaGetDevice(&current) != cudaSuccess) {
    (void)cudaGetLastError();
    return;
  }
  for (int d = 0; d < count; ++d) {
    if (cudaSetDevice(d) == cudaSuccess) (void)cudaDeviceSynchronize();
  }
  (void)cudaSetDevice(current);
  // A kernel's fault stays sticky and is raised by tiny's next synchronizing call, as without a profile.
}

// The op hooks: CUPTI's external correlation stack, per thread. Only what was
// pushed is popped (an op that began before the recording pushed nothing).
thread_local int t_pushed = 0;
void push_op(uint64_t id) {
  Cupti* lib = g_recording.load(std::memory_order_relaxed);
  if (lib == nullptr) return;
  if (lib->push_external(CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0, id) == CUPTI_SUCCESS) ++t_pushed;
}
void pop_op() {
  Cupti* lib = g_reader.load(std::memory_order_relaxed);
  if (t_pushed == 0 || lib == nullptr) return;
  uint64_t id = 0;
  (void)lib->pop_external(CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0, &id);
  --t_pushed;
}

}  // namespace

std::string cupti_start() {
  std::string why;
  Cupti* lib = library(&why);
  if (lib == nullptr) return why;
  if (!lib->callbacks_registered) {
    const CUptiResult r = lib->register_callbacks(buffer_requested, buffer_completed);
    if (r != CUPTI_SUCCESS) return failed(*lib, "cuptiActivityRegisterCallbacks", r);
    lib->callbacks_registered = true;
  }
  {
    std::lock_guard<std::mutex> lock(g_mutex);
    g_collected = GpuActivities{};
  }
  g_reader.store(lib);
  if (!sample_clocks(*lib, &g_clock.host_start, &g_clock.cupti_start)) {
    return failed(*lib, "cuptiGetTimestamp", CUPTI_ERROR_UNKNOWN);
  }
  for (const auto* kinds : {&kGpuKinds, &kHostKinds}) {
    for (const CUpti_ActivityKind kind : *kinds) {
      const CUptiResult r = lib->enable(kind);
      if (r != CUPTI_SUCCESS) {
        disable_all(*lib);
        return failed(*lib, std::string("cuptiActivityEnable(") + kind_name(kind) + ")", r);
      }
    }
  }
  g_recording.store(lib);
  return "";
}

CuptiRecording cupti_stop() {
  CuptiRecording out;
  Cupti* lib = g_recording.exchange(nullptr);
  if (lib == nullptr) {
    out.error = "CUPTI was not recording";
    return out;
  }
  // The host's calls first, so that the profiler's own wait below is not in the trace.
  for (const CUpti_ActivityKind kind : kHostKinds) (void)lib->disable(kind);
  wait_for_gpus();
  out.clock = g_clock;
  if (!sample_clocks(*lib, &out.clock.host_stop, &out.clock.cupti_stop)) out.clock.cupti_stop = out.clock.cupti_start;
  for (const CUpti_ActivityKind kind : kGpuKinds) (void)lib->disable(kind);
  const CUptiResult r = lib->flush_all(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
  if (r != CUPTI_SUCCESS) out.error = failed(*lib, "cuptiActivityFlushAll", r);
  std::lock_guard<std::mutex> lock(g_mutex);
  out.activities = std::move(g_collected);
  g_collected = GpuActivities{};
  return out;
}

const gpu::model::RealGpuTracing* cupti_op_hooks() {
  static const gpu::model::RealGpuTracing hooks{push_op, pop_op};
  return &hooks;
}

std::string cupti_try_load(const std::string& library_path) {
  std::string why;
  const std::unique_ptr<Cupti> lib = load({library_path}, true, &why);
  if (lib == nullptr) return why;
  uint32_t version = 0;
  if (lib->get_version(&version) != CUPTI_SUCCESS) return "cuptiGetVersion failed in " + library_path;
  return "";  // (the handle stays open: CUPTI is not made to be unloaded)
}

bool cupti_built() { return true; }

}  // namespace tiny::profiler::detail

#endif  // TINY_HAVE_CUPTI
