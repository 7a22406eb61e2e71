// Which runtime serves `cuda:N` tensors, the current device of each thread,
// and one caching allocator per device: the glue between tensors and a
// gpu::Runtime.
#pragma once

#include "gpu/caching_allocator.h"
#include "gpu/runtime.h"
#include "tiny/device.h"

namespace tiny::gpu {

// The runtime behind `cuda:N` tensors, or nullptr when there is none
// (no emulated devices and no usable real GPU). Today this is always the
// emulator: the real CUDA runtime exists (gpu/cuda/), but tiny's kernels are
// not registered for it yet, so a real GPU would have no ops.
Runtime* device_runtime();

// Number of `cuda` devices tensors can use.
int device_count();

// The device index `device` names ("cuda" alone means the current device);
// throws tiny::DeviceError naming the devices that exist when out of range.
int resolve_index(const Device& device);

// The calling thread's current device (torch.cuda.current_device()).
int current_device();
void set_current_device(int index);

// The stream new work on `device` goes to (its default stream for now).
Stream current_stream(int device);

// The caching allocator of `device` (created on first use, never destroyed).
CachingAllocator& device_allocator(int device);

}  // namespace tiny::gpu
