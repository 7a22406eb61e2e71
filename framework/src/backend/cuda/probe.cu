// The first CUDA translation unit: asks the runtime how many real GPUs there
// are, and instantiates the shared host+device op structs in device code so a
// CUDA build proves they compile for the GPU. The full backend (drivers,
// launchers, cuBLAS) grows beside this file.
#include <cuda_runtime.h>

#include "backend/cuda/probe.h"
#include "kernels/amp_ops.h"
#include "kernels/offset_calculator.h"
#include "kernels/philox.h"
#include "kernels/pointwise_ops.h"
#include "kernels/reduce_ops.h"
#include "tiny/half.h"

namespace tiny::cuda_backend {

int real_device_count() {
  // Without a driver cudaGetDeviceCount returns cudaErrorInsufficientDriver and
  // leaves `count` untouched: start from 0, and clear the error so later calls
  // do not see it.
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    (void)cudaGetLastError();
    return 0;
  }
  return count;
}

namespace {

template <typename T, typename F>
__global__ void unary_grid_stride(T* out, const T* in, int64_t n, F f) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(blockDim.x) * gridDim.x) {
    out[i] = f(in[i]);
  }
}

__global__ void philox_uniform(float* out, int64_t n, uint64_t seed, uint64_t offset) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(blockDim.x) * gridDim.x) {
    out[i] = kernels::uniform_float(kernels::philox_draw(seed, offset, static_cast<uint64_t>(i)));
  }
}

__global__ void strided_sum(float* out, const float* in, kernels::OffsetCalculator<1> calc, int64_t n) {
  kernels::SumOp<float> op;
  float acc = op.identity();
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
    int64_t off[1];
    calc.get(i, off);
    acc = op.reduce(acc, in[off[0]], i);
  }
  atomicAdd(out, op.project(acc));
}

// A 16-bit input summed in float (the accumulator type of every 16-bit reduction).
template <typename T>
__global__ void strided_sum_reduced(float* out, const T* in, kernels::OffsetCalculator<1> calc, int64_t n) {
  kernels::SumOp<float> op;
  float acc = op.identity();
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
    int64_t off[1];
    calc.get(i, off);
    acc = op.reduce(acc, in[off[0]], i);
  }
  atomicAdd(out, op.project(acc));
}

// GradScaler's fused unscale + inf/NaN check (the CPU driver is
// backend/cpu/amp_kernels.cpp): each thread folds its elements' flags with
// FoundInfOp and writes found_inf only if it found one (every writer writes 1).
template <typename T>
__global__ void non_finite_check_and_unscale(T* grad, int64_t n, float* found_inf, const float* inv_scale) {
  const kernels::UnscaleOp<float> op{*inv_scale};
  const kernels::FoundInfOp reduce;
  float flag = reduce.identity();
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(blockDim.x) * gridDim.x) {
    float v = static_cast<float>(grad[i]);
    flag = reduce.combine(flag, op(v));
    grad[i] = static_cast<T>(v);
  }
  if (flag > 0.0f) *found_inf = 1.0f;
}

__global__ void update_scale(float* scale, int64_t* growth_tracker, const float* found_inf, double growth_factor,
                             double backoff_factor, int64_t growth_interval) {
  kernels::update_scale(*scale, *growth_tracker, *found_inf, growth_factor, backoff_factor, growth_interval);
}

}  // namespace

// Never called: taking the kernels' addresses makes nvcc compile them.
void instantiate_kernels() {
  (void)&unary_grid_stride<float, kernels::GeluOp<float>>;
  (void)&unary_grid_stride<float, kernels::SigmoidOp<float>>;
  (void)&unary_grid_stride<float, kernels::ClampOp<float>>;
  // 16-bit storage, float math: tiny::Half and tiny::BFloat16 convert in device code.
  (void)&unary_grid_stride<Half, kernels::GeluOp<float>>;
  (void)&unary_grid_stride<BFloat16, kernels::ExpOp<float>>;
  (void)&strided_sum_reduced<Half>;
  (void)&strided_sum_reduced<BFloat16>;
  (void)&philox_uniform;
  (void)&strided_sum;
  (void)&non_finite_check_and_unscale<float>;
  (void)&non_finite_check_and_unscale<Half>;
  (void)&non_finite_check_and_unscale<BFloat16>;
  (void)&update_scale;
}

}  // namespace tiny::cuda_backend
