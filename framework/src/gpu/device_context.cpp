#include "gpu/device_context.h"

#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "core/thread_local_state.h"
#include "gpu/emulated/emulated_runtime.h"
#include "tiny/error.h"

namespace tiny::gpu {

namespace {
// The current device index is not here: it is part of the one per-thread state
// in core (core/thread_local_state.h), which ThreadLocalStateGuard carries into
// worker threads. This layer validates an index, then writes it there.
// The calling thread's current stream id per device; 0 (or no entry) means
// the default stream. Indexed by device.
thread_local std::vector<int64_t> t_current_streams;

std::string device_list(int count) {
  if (count == 0) return "none";
  std::string names;
  for (int i = 0; i < count; ++i) names += (i ? ", cuda:" : "cuda:") + std::to_string(i);
  return names;
}
}  // namespace

// Runtime selection. `cuda:N` tensors live on
// - the real NVIDIA GPUs, through gpu::CudaRuntime, when tiny was built with
//   CUDA (TINY_HAVE_CUDA) and cudaGetDeviceCount finds at least one GPU (any
//   error, such as cudaErrorInsufficientDriver on a machine without a driver,
//   means none: cuda_runtime() clears it and returns nullptr);
// - otherwise the emulated GPU (TINY_EMULATED_GPUS devices, default 2; 0 means
//   no GPU at all).
// TINY_FORCE_EMULATED_GPU=1 selects the emulator even on a machine with a GPU
// (the framework's own tests use it there, since they check the emulator's
// behaviour; lessons can use it to compare the two). 0 or unset: the real GPU
// when there is one. The choice is made once, on first use.
namespace {

bool force_emulated() {
  const char* value = std::getenv(kForceEmulatedGpuVariable);
  if (value == nullptr || value[0] == '\0' || std::strcmp(value, "0") == 0) return false;
  TINY_CHECK(std::strcmp(value, "1") == 0, ValueError, kForceEmulatedGpuVariable, " must be 0 or 1, got '", value,
             "' (1 uses the emulated GPU even when a real one is present)");
  return true;
}

Runtime* select_runtime() {
  if (!force_emulated()) {
    // Without CUDA in the build this is always nullptr (cuda_runtime_stub.cpp).
    if (Runtime* real = cuda_runtime()) return real;
  }
  return emulated_runtime();
}

}  // namespace

Runtime* device_runtime() {
  static Runtime* runtime = select_runtime();
  return runtime;
}

bool device_runtime_is_cuda() {
  static const bool is_cuda = [] {
    Runtime* rt = device_runtime();
    return rt != nullptr && std::strcmp(rt->kind(), "cuda") == 0;
  }();
  return is_cuda;
}

int device_count() {
  Runtime* rt = device_runtime();
  return rt ? rt->device_count() : 0;
}

namespace {

// What to do about a GPU index past the last one. In a process started by tinyrun (or
// torchrun), the usual cause is the global rank used as the GPU index: each machine
// numbers its GPUs from 0, and a process's GPU is cuda:LOCAL_RANK.
std::string no_such_device_advice(int index, int count) {
  const char* rank = std::getenv("RANK");
  const char* local_rank = std::getenv("LOCAL_RANK");
  if (rank != nullptr && local_rank != nullptr) {
    const std::string r = rank, l = local_rank;
    if (r == std::to_string(index) && r != l) {
      return ::tiny::detail::concat("This process is rank ", r, " (RANK, counted over every machine) but local rank ", l,
                            " (LOCAL_RANK, counted on this machine): the GPU index is the local rank. Use cuda:", l,
                            " (tiny::distributed::local_rank(); PyTorch: torch.device(\"cuda\", local_rank)).");
    }
    return ::tiny::detail::concat("This process has LOCAL_RANK=", l, ": each process on a machine uses cuda:LOCAL_RANK, so "
                          "start at most ", count, " process", count == 1 ? "" : "es", " per machine (tinyrun --nproc-per-node ",
                          count, ").");
  }
  if (device_runtime_is_cuda()) return "Use an index below the device count (tiny::cuda::device_count()).";
  return "Use an index below the device count (tiny::cuda::device_count()), or set TINY_EMULATED_GPUS to emulate more.";
}

}  // namespace

int resolve_index(const Device& device) {
  TINY_CHECK(device.is_cuda(), DeviceError, "internal: resolve_index(", device, ") is not a cuda device");
  const int count = device_count();
  TINY_CHECK(count > 0, DeviceError, "cannot use ", device,
             ": no GPU is available (no usable NVIDIA GPU, and the emulated GPU is off because "
             "TINY_EMULATED_GPUS=0). Keep tensors on the CPU or unset TINY_EMULATED_GPUS.");
  const int index = device.has_index() ? device.index() : ::tiny::detail::current_device_index();
  TINY_CHECK(index >= 0 && index < count, DeviceError, "CUDA error: invalid device ordinal: ", device,
             " does not exist; this machine has ", count, " device", count == 1 ? "" : "s", " (",
             device_list(count), "). ", no_such_device_advice(index, count));
  return index;
}

int current_device() { return ::tiny::detail::current_device_index(); }

void set_current_device(int index) {
  ::tiny::detail::set_current_device_index(resolve_index(Device(DeviceType::CUDA, index)));
}

Stream current_stream(int device) {
  if (device >= 0 && static_cast<size_t>(device) < t_current_streams.size()) {
    const int64_t id = t_current_streams[static_cast<size_t>(device)];
    if (id != 0) return Stream{device, id};
  }
  return device_runtime()->default_stream(device);
}

void set_current_stream(Stream stream) {
  TINY_CHECK(stream.device >= 0, DeviceError, "set_current_stream: invalid device index ", stream.device);
  const int index = resolve_index(Device(DeviceType::CUDA, stream.device));
  if (t_current_streams.size() <= static_cast<size_t>(index)) t_current_streams.resize(static_cast<size_t>(index) + 1, 0);
  t_current_streams[static_cast<size_t>(index)] = stream.id;
}

CachingAllocator& device_allocator(int device) {
  static std::mutex mutex;
  // Never destroyed: tensors freed during exit still return their blocks.
  static auto* allocators = new std::vector<std::unique_ptr<CachingAllocator>>();
  std::lock_guard<std::mutex> lock(mutex);
  Runtime* rt = device_runtime();
  if (allocators->empty()) allocators->resize(static_cast<size_t>(rt->device_count()));
  auto& slot = (*allocators)[static_cast<size_t>(device)];
  if (!slot) slot = std::make_unique<CachingAllocator>(*rt, device);
  return *slot;
}

}  // namespace tiny::gpu
