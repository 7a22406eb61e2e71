// Launch plumbing shared by the CUDA kernel drivers (the llm.c style): a
// launcher computes its grid with a ceil-div, launches, and checks the launch
// right after with check_launch, so a bad configuration is reported by the
// call that made it, not by some later synchronization.
//
// Kernels loop with grid_stride_for, so any element count works with a capped
// grid and one kernel covers tensors larger than a grid can index.
#pragma once

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdint>
#include <string>

#include "gpu/cuda/cuda_runtime.h"

namespace tiny::cuda_backend {

// Threads per block for pointwise kernels: a multiple of the warp size that
// keeps occupancy high on every architecture from sm_75 on.
constexpr int kBlockSize = 256;
// Enough blocks to fill the largest GPU many times over; beyond that, threads
// loop (grid-stride) rather than the grid growing.
constexpr int64_t kMaxGridBlocks = 65536;

constexpr int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// Blocks for `n` elements at `block` threads each: ceil(n / block), at least 1, capped.
inline unsigned int grid_size(int64_t n, int block = kBlockSize) {
  return static_cast<unsigned int>(std::min(std::max<int64_t>(ceil_div(n, block), 1), kMaxGridBlocks));
}

// Calls body(i) for every i in [0, n) that falls to this thread: thread t of
// the grid takes t, t + gridsize, t + 2 * gridsize, ...
template <typename Body>
__device__ __forceinline__ void grid_stride_for(int64_t n, Body&& body) {
  const int64_t stride = static_cast<int64_t>(blockDim.x) * gridDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) body(i);
}

// Checks the launch just made (configuration errors, a missing kernel image
// for this GPU) and counts it. Errors inside the kernel show up later, at the
// next synchronizing call, as on CUDA.
inline void check_launch(const char* kernel) {
  const cudaError_t error = cudaGetLastError();
  int device = -1;
  (void)cudaGetDevice(&device);
  if (error != cudaSuccess) gpu::throw_cuda_error(error, std::string("launch of ") + kernel, device);
  if (gpu::CudaRuntime* runtime = gpu::CudaRuntime::instance()) runtime->note_kernel_launch(device);
}

}  // namespace tiny::cuda_backend
