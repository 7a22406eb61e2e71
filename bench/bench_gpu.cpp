// What a real GPU does through tiny: the figures lessons 2, 4 and 7 quote
// beside the student's own (bench/peers/bench_torch_gpu.py times the same
// with PyTorch). Every benchmark skips, saying why, unless cuda:0 is a real
// GPU: the emulator computes on the CPU (bench_training_step's
// TinyStepEmulated measures it).
//
//   Matmul/<dtype>/<n>        an n x n x n product (tiny::matmul: cuBLAS; float32
//                             without TF32, as PyTorch's default; float16 and
//                             bfloat16 on the tensor cores), synchronized after
//                             each; counter TFLOP/s = 2 n^3 / time
//   CopyToGpu/<kind>/<KiB>    a host tensor to cuda:0 and a synchronize, from
//                             pageable or pinned memory; counter GB/s
//   CopyToCpu/<kind>/<KiB>    back, into pageable memory (.cpu()) or into a
//                             pinned tensor (copy_ with non_blocking) and a synchronize
#include <benchmark/benchmark.h>

#include <initializer_list>

#include "tiny/cuda.h"
#include "tiny/ops.h"
#include "tiny/tensor.h"
#include "real_gpu.h"

namespace {

using bench::copy_to_cpu;
using bench::copy_to_gpu;
using bench::real_gpu;
using tiny::Tensor;

const char* const kGpu = "cuda:0";

void matmul(benchmark::State& state, tiny::Dtype dtype) {
  if (!real_gpu(state)) return;
  const int64_t n = state.range(0);
  const Tensor a = tiny::randn({n, n}, kGpu).to(dtype), b = tiny::randn({n, n}, kGpu).to(dtype);
  for (int i = 0; i < 3; ++i) benchmark::DoNotOptimize(tiny::matmul(a, b));  // cuBLAS handle, kernel choice
  tiny::cuda::synchronize(0);
  for (auto _ : state) {
    benchmark::DoNotOptimize(tiny::matmul(a, b));
    tiny::cuda::synchronize(0);
  }
  state.counters["TFLOP/s"] = benchmark::Counter(2.0 * n * n * n * 1e-12, benchmark::Counter::kIsIterationInvariantRate);
}

template <typename Fn, typename Arg>
void add(const char* name, Fn fn, Arg arg, std::initializer_list<int64_t> sizes) {
  auto* b = benchmark::RegisterBenchmark(name, fn, arg)->Unit(benchmark::kMillisecond)->UseRealTime();
  for (int64_t size : sizes) b->Arg(size);
}

const bool registered = [] {
  add("Matmul/float32", matmul, tiny::kFloat32, {1024, 4096});
  add("Matmul/float16", matmul, tiny::kFloat16, {1024, 4096});
  add("Matmul/bfloat16", matmul, tiny::kBFloat16, {1024, 4096});
  add("CopyToGpu/pageable", copy_to_gpu, false, {256 << 10});
  add("CopyToGpu/pinned", copy_to_gpu, true, {256 << 10});
  add("CopyToCpu/pageable", copy_to_cpu, false, {256 << 10});
  add("CopyToCpu/pinned", copy_to_cpu, true, {256 << 10});
  return true;
}();

}  // namespace
