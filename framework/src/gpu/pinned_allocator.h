// Page-locked host memory for tensors (Tensor::pin_memory, the DataLoader's
// pin_memory), cached and guarded by events as PyTorch's CachingHostAllocator:
// a block handed to an asynchronous copy is reused only after that copy ran.
#pragma once

#include "core/tensor_impl.h"
#include "gpu/runtime.h"

namespace tiny::gpu {

// The allocator of pinned CPU storages; nullptr when there is no GPU runtime.
Allocator* pinned_allocator();

// Marks the pinned block starting at `block` as used by work queued on
// `stream`: freeing it waits (without blocking the host) until that work ran.
void record_pinned_use(const void* block, Stream stream);

}  // namespace tiny::gpu
