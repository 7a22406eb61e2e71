// tiny::cuda: the user-facing GPU functions, over gpu::device_runtime() and the
// per-device caching allocators.
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <sstream>
#include <string>

#include "gpu/caching_allocator.h"
#include "gpu/device_context.h"
#include "gpu/emulated/emulated_runtime.h"
#include "gpu/model/device_model.h"
#include "gpu/model/timeline.h"
#include "runtime/cpu_allocator.h"
#include "tiny/cuda.h"
#include "tiny/cuda_grading.h"
#include "tiny/error.h"

namespace tiny::cuda {

namespace {
int resolve(int index) {
  return gpu::resolve_index(index < 0 ? Device(DeviceType::CUDA) : Device(DeviceType::CUDA, index));
}

// grading::refuse_counter_resets (a graded run of the workbook): once set, for
// the rest of the process, the resets below change nothing and are counted.
std::atomic<bool> g_resets_refused{false};
std::atomic<uint64_t> g_refused_counter_resets{0};
std::atomic<uint64_t> g_refused_peak_resets{0};
}  // namespace

bool is_available() { return gpu::device_count() > 0; }
int device_count() { return gpu::device_count(); }
// Each function resolves the index first: without a GPU, device_runtime() is
// null, and resolve() is what throws the DeviceError that says so.
bool is_emulated(int index) {
  const int i = resolve(index);
  return gpu::device_runtime()->properties(i).emulated;
}
std::string get_device_name(int index) {
  const int i = resolve(index);
  return gpu::device_runtime()->properties(i).name;
}

DeviceProperties get_device_properties(int index) {
  const int i = resolve(index);
  const gpu::DeviceProperties p = gpu::device_runtime()->properties(i);
  return DeviceProperties{p.name, p.total_memory, p.multiprocessor_count, p.major, p.minor, p.emulated, p.modelled_gpu};
}

int current_device() { return gpu::current_device(); }
void set_device(int index) { gpu::set_current_device(index); }

DeviceGuard::DeviceGuard(int index) : previous_(gpu::current_device()) { gpu::set_current_device(index); }
DeviceGuard::~DeviceGuard() { gpu::set_current_device(previous_); }

void synchronize(int index) {
  const int i = resolve(index);
  gpu::device_runtime()->device_synchronize(i);
}

std::string device_banner(const Device& device) {
  if (device.is_cpu()) return "cpu";
  const int index = resolve(device.index());
  const gpu::DeviceProperties p = gpu::device_runtime()->properties(index);
  const std::string name = "cuda:" + std::to_string(index);
  if (p.emulated) {
    // Which clock CUDA events and host_time() read (TINY_EMULATED_GPU_CLOCK): the modelled GPU's by default.
    const char* clock = std::getenv("TINY_EMULATED_GPU_CLOCK");
    const bool host = clock != nullptr && std::string(clock) == "host";
    // The memory is this machine's cap (TINY_EMULATED_GPU_MEMORY), not the modelled card's: say both,
    // or "4.00 GiB" reads as the H100's memory.
    std::ostringstream real_card;
    if (p.modelled_memory_gb > 0) real_card << ", " << p.modelled_memory_gb << " GB on the real card";
    return name + " - EMULATED on your CPU (" +
           (host ? std::string("events time this CPU's work")
                 : "timing modelled on the " + p.modelled_gpu + ", an estimate") +
           "; " + runtime::format_bytes(p.total_memory) + " here" + (host ? "" : real_card.str()) + ")";
  }
  return name + " - " + p.name + " (" + runtime::format_bytes(p.total_memory) + ")";
}

size_t memory_allocated(int index) { return gpu::device_allocator(resolve(index)).memory_allocated(); }
size_t max_memory_allocated(int index) { return gpu::device_allocator(resolve(index)).max_memory_allocated(); }
size_t memory_reserved(int index) { return gpu::device_allocator(resolve(index)).memory_reserved(); }
size_t max_memory_reserved(int index) { return gpu::device_allocator(resolve(index)).max_memory_reserved(); }
void reset_peak_memory_stats(int index) {
  const int i = resolve(index);  // a wrong index is an error, graded or not
  if (g_resets_refused.load()) {
    ++g_refused_peak_resets;
    return;
  }
  gpu::device_allocator(i).reset_peak_stats();
}
std::string memory_summary(int index) { return gpu::device_allocator(resolve(index)).memory_summary(); }

DeviceCounters device_counters(int index) {
  const int i = resolve(index);
  const gpu::Counters c = gpu::device_runtime()->counters(i);
  DeviceCounters out = c;  // the public counters: gpu::Counters' base
  out.modelled_kernel_ms = static_cast<double>(c.modelled_kernel_ns) * 1e-6;
  out.modelled_copy_ms = static_cast<double>(c.modelled_copy_ns) * 1e-6;
  return out;
}

double host_time() {
  gpu::Runtime* runtime = gpu::device_count() > 0 ? gpu::device_runtime() : nullptr;
  if (runtime != nullptr && std::string(runtime->kind()) == "emulated") {
    return static_cast<double>(gpu::model::host_now()) * 1e-9;
  }
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

double utilization(int index) {
  const int i = resolve(index);
  gpu::Runtime* runtime = gpu::device_runtime();
  TINY_CHECK(std::string(runtime->kind()) == "emulated", NotImplemented, "utilization(", i,
             "): cuda:", i, " is a real GPU; read its GPU-Util with nvidia-smi (utilization.gpu). "
             "tiny::cuda::utilization models it on the emulated GPU");
  return static_cast<gpu::EmulatedRuntime*>(runtime)->utilization(i);
}
void reset_device_counters(int index) {
  const int i = resolve(index);  // a wrong index is an error, graded or not
  if (g_resets_refused.load()) {
    ++g_refused_counter_resets;
    return;
  }
  gpu::device_runtime()->reset_counters(i);
}

namespace grading {
void refuse_counter_resets() { g_resets_refused = true; }
RefusedResets refused_counter_resets() { return {g_refused_counter_resets.load(), g_refused_peak_resets.load()}; }
void reset_device_counters(int index) {
  const int i = resolve(index);
  gpu::device_runtime()->reset_counters(i);
}
void reset_peak_memory_stats(int index) { gpu::device_allocator(resolve(index)).reset_peak_stats(); }
std::string emulated_gpu_model() {
  if (gpu::device_count() == 0 || std::string(gpu::device_runtime()->kind()) != "emulated") return "";
  const gpu::model::DeviceModel& m = gpu::model::selected_model();
  return m.name + " " + m.digest;
}
std::string emulated_gpu_model(const std::string& name_or_path) {
  const gpu::model::DeviceModel m = gpu::model::load_model(name_or_path.empty() ? gpu::model::kDefaultGpuModel : name_or_path);
  return m.name + " " + m.digest;
}
}  // namespace grading

void empty_cache() {
  for (int i = 0; i < gpu::device_count(); ++i) {
    // Synchronize before the allocator takes its lock: a queued emulated
    // kernel frees the tensors it captured (through this allocator) when it
    // has run, so waiting for it while holding the lock can deadlock.
    // CachingAllocator::empty_cache synchronizes again under its lock.
    gpu::device_runtime()->device_synchronize(i);
    gpu::device_allocator(i).empty_cache();
  }
}

}  // namespace tiny::cuda
