// What one piece of GPU work costs on a modelled GPU (docs/performance_model.md):
// every kernel family declares its work as a KernelCost where its stub is
// defined (TINY_DEFINE_DISPATCH, backend/define_dispatch.h), and the model
// turns it into nanoseconds:
//
//   duration = max(min_kernel, FLOPs / (efficiency x peak), bytes / (efficiency x bandwidth))
//
// with a GEMM's FLOPs term computed tile by tile (wave quantization over the
// SMs, split-K, a K-loop overhead, tensor cores only where the GPU has them
// for the dtype and the shape is aligned). Copies: a fixed set-up plus bytes
// over the link (PCIe for pinned memory, the host's staging rate for pageable
// memory, the device's memory for device-to-device).
#pragma once

#include <cstdint>

#include "gpu/model/device_model.h"
#include "gpu/runtime.h"
#include "tiny/dtype.h"

namespace tiny::gpu::model {

// Which efficiency applies: each kind of kernel reaches its own share of the peak.
enum class Work : uint8_t { pointwise, memset, reduction, optimizer, gemm };

struct KernelCost {
  Work work = Work::pointwise;
  // Bytes moved through device memory: each operand once (a broadcast operand
  // counts its own elements), reads and writes. tiny's kernels move one
  // element per thread, so an element narrower than 4 bytes costs 4
  // (element_bytes below).
  int64_t bytes = 0;
  // Threads the kernel runs, one per element of its output (tiny's pointwise
  // and fill kernels), up to tiny's grid cap (gpu/cuda/launch.cuh: 65536
  // blocks of 256, kMaxKernelThreads below): past it each thread loops over several
  // elements. 0: not modelled (GEMMs, reductions, optimizer steps, memsets).
  int64_t threads = 0;
  double flops = 0;  // float32 vector FLOPs for non-GEMM work
  // GEMMs only: C[m, n] += A[m, k] B[k, n] in `dtype`.
  Dtype dtype = Dtype::Float32;
  int64_t m = 0, n = 0, k = 0;
  // float32 GEMMs: TF32 tensor cores allowed (tiny::set_float32_matmul_precision
  // "high" or "medium"); used where the modelled GPU has them.
  bool allow_tf32 = false;
};

// The most threads one of tiny's kernels launches: grid_size()'s cap in
// gpu/cuda/launch.cuh (kMaxGridBlocks x kBlockSize).
inline constexpr int64_t kMaxKernelThreads = int64_t{65536} * 256;

// The bytes one element of `dtype` costs a tiny kernel: its size, at least 4.
inline int64_t element_bytes(Dtype dtype) {
  const int64_t size = static_cast<int64_t>(element_size(dtype));
  return size < 4 ? 4 : size;
}

// A GEMM's cost: 2mnk FLOPs and its operands' bytes (C read too when beta != 0).
KernelCost gemm_cost(Dtype dtype, int64_t m, int64_t n, int64_t k, bool reads_c, bool allow_tf32 = false);

// How long the kernel runs, in nanoseconds (at least min_kernel_ns).
int64_t kernel_ns(const DeviceModel& model, const KernelCost& cost);
// The math unit a GEMM of `dtype` uses ("float16_tensor", "tf32_tensor", "float32", ...).
const char* gemm_math(const DeviceModel& model, Dtype dtype, bool allow_tf32 = false);

// How long a copy runs on its engine, in nanoseconds. `pinned`: the host side
// is page-locked; DeviceToDevice copies run as kernels (2 x bytes moved);
// `peer`: between two devices (NVLink where the GPU has it, else PCIe).
int64_t copy_ns(const DeviceModel& model, CopyKind kind, bool pinned, int64_t bytes, bool peer = false);

}  // namespace tiny::gpu::model
