// Bytes between a GPU and the host or another GPU, through the device runtime,
// with CUDA's rules for pageable and pinned host memory: the GPU layer's half of
// Tensor::to(device) and copy_ (ops/copy.cpp holds the ops themselves).
#pragma once

#include "core/tensor_impl.h"

namespace tiny::gpu {

// An uninitialised contiguous CPU tensor in pinned (page-locked) memory; throws
// tiny::DeviceError when no GPU is available to pin it.
Tensor empty_pinned(const IntArrayRef& sizes, Dtype dtype);

// True when `t` is a CPU tensor in pinned memory.
bool storage_is_pinned(const Tensor& t);

// Copies the bytes of contiguous `src` into contiguous `dst` (same shape and
// dtype) on another device, through the GPU runtime, with CUDA's rules: to
// pageable host memory the copy waits for the stream (as .cpu() does in
// PyTorch); from pageable host memory it snapshots the source; pinned memory
// makes both directions asynchronous when `non_blocking`.
void copy_between_devices(const Tensor& dst, const Tensor& src, bool non_blocking);

}  // namespace tiny::gpu
