// What core needs from the layer that owns the GPUs, registered by that layer
// while the library loads (gpu/core_hooks.cpp), as c10's allocator registry:
// core names no GPU type and includes nothing above it.
#pragma once

#include "core/tensor_impl.h"

namespace tiny::detail {

struct GpuHooks {
  // The device index `device` names ("cuda" alone: the calling thread's
  // current device); throws tiny::DeviceError, naming the devices that exist,
  // when it is out of range.
  int (*resolve_index)(const Device& device) = nullptr;
  // The allocator of tensors on cuda:`index` (never destroyed).
  Allocator* (*allocator)(int index) = nullptr;
};

// Called once by the GPU layer; a second registration replaces the first.
void register_gpu_hooks(const GpuHooks& hooks);

// The registered hooks; throws tiny::DeviceError when no GPU layer registered.
const GpuHooks& gpu_hooks();

}  // namespace tiny::detail
