// Which runtime serves `cuda:N` tensors, the current device of each thread,
// and one caching allocator per device: the glue between tensors and a
// gpu::Runtime.
#pragma once

#include "gpu/caching_allocator.h"
#include "gpu/runtime.h"
#include "tiny/device.h"

namespace tiny::gpu {

// The runtime behind `cuda:N` tensors, or nullptr when there is none
// (no usable real GPU and no emulated devices): the real CUDA runtime when
// tiny was built with CUDA and a GPU is usable, else the emulator.
// TINY_FORCE_EMULATED_GPU=1 picks the emulator even on a GPU machine (a
// value other than 0 or 1 throws tiny::ValueError naming it). Chosen once.
Runtime* device_runtime();

// True when device_runtime() is the real CUDA runtime (ops then run the
// CUDA backend's kernels, backend/cuda/), false for the emulator or none.
bool device_runtime_is_cuda();

// The name of the setting that forces the emulator, for messages and tests.
inline constexpr const char* kForceEmulatedGpuVariable = "TINY_FORCE_EMULATED_GPU";

// Number of `cuda` devices tensors can use.
int device_count();

// The device index `device` names ("cuda" alone means the current device);
// throws tiny::DeviceError naming the devices that exist when out of range.
int resolve_index(const Device& device);

// The calling thread's current device (torch.cuda.current_device()).
int current_device();
void set_current_device(int index);

// The calling thread's current stream on `device`: where new work (kernels,
// copies) and new device memory on that device go. Per thread and per device
// (thread_local); the device's default stream until set_current_stream
// (tiny::cuda::set_stream / StreamGuard) changes it.
Stream current_stream(int device);
// Makes `stream` the calling thread's current stream on `stream.device` (the
// current device is not changed). Throws tiny::DeviceError for a device that
// does not exist; the stream's id is not checked (use one the runtime made).
void set_current_stream(Stream stream);

// The caching allocator of `device` (created on first use, never destroyed).
CachingAllocator& device_allocator(int device);

}  // namespace tiny::gpu
