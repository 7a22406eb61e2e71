// The per-device error record of the real GPU (DESIGN.md section 4): a kernel
// that finds a bad index (an embedding index, an nll_loss target) writes what
// it saw here instead of reading out of bounds, and the next synchronizing
// call of gpu::CudaRuntime raises it as a tiny::Error, sticky until
// clear_error() (as a CUDA device-side assert is sticky until the process
// ends). The emulator keeps the same information as a string.
//
// Plain types only: the record lives in mapped pinned host memory that
// kernels write through a device pointer (the host reads it after a
// synchronization without a copy), so it must mean the same thing to nvcc's
// device code and to the host compiler. "First error wins" is decided by an
// atomicCAS on a lock word in device memory: device atomics on mapped host
// memory are not guaranteed to be atomic over PCIe.
#pragma once

#include <cstdint>

namespace tiny::gpu {

/// @brief Which op's kernel recorded the error (the message is worded per op).
enum class DeviceErrorOp : int32_t {
  None = 0,
  Embedding = 1,          ///< value = index, position = its place in the flattened indices, bound = num_embeddings
  EmbeddingBackward = 2,  ///< as Embedding
  NllLoss = 3,            ///< value = target, position = sample, bound = classes, extra = ignore_index
  NllLossBackward = 4,    ///< as NllLoss
};

/// @brief What a kernel saw. `flag` is 0 until the first error; the kernel
/// thread that won the device's lock word fills the fields, then sets it to 1.
struct DeviceErrorRecord {
  int32_t flag;
  int32_t op;  // a DeviceErrorOp
  int64_t value;
  int64_t position;
  int64_t bound;
  int64_t extra;
};

/// @brief Where a kernel reports: the device's lock word (device memory, 0
/// until the first error) and the record (mapped host memory, device address).
struct DeviceErrorTarget {
  int32_t* lock;
  DeviceErrorRecord* record;
};

}  // namespace tiny::gpu
