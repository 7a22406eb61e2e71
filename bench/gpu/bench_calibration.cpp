// What the emulated GPU's performance model is fitted to and checked against
// (docs/performance_model.md): the times of tiny's own operations on a real
// GPU, one row per thing the model must predict. bench/gpu/run.sh runs it on a
// GPU machine with its PyTorch peer (bench/peers/bench_torch_calibration.py)
// and bench/gpu/collect.py turns the JSON into data/gpu_measurements/.
// Every benchmark skips, saying why, unless cuda:0 is a real GPU.
//
// Two kinds of row:
// - host rows (real time, per iteration): what a program waits for, with the
//   fixed per-call costs in it (dispatch, launch, synchronize);
// - device rows (manual time from CUDA events, per op): K identical ops queued
//   behind a long "spacer" kernel, so the queue is full when the start event
//   runs and the events measure the kernels back to back, not the host's
//   launch rate.
//
//   Sync/idle                      synchronize() on an idle device
//   OpSync/add_                    x.add_(1) on a 1-element tensor, then synchronize()
//   Item/after_op                  (x + 1).item(): an op, then a copy into pageable memory (waits)
//   LaunchRate/add_/1000           1000 x.add_(1) then one synchronize(): host time per op (counter us/op)
//   LaunchRate/add/1000            the same with y = x + 1 (allocates through the caching allocator)
//   Kernel/<op>/<n>                device time of one op on n float32 elements (add: a + b, relu,
//                                  sum, clone, zero_ and fill_ (both tiny's fill kernel), to_bf16,
//                                  adam: one Adam step of one parameter)
//   KernelCold/<op>/<n>            the same (add, relu, zero_, adam), each call on the next of enough
//                                  tensors to pass 256 MiB: inputs out of the L2 cache
//   Gemm/<dtype>/<m>/<n>/<k>       device time of one [m,k] x [k,n] product (float32 without TF32)
//   MatmulSync/<dtype>/<n>         one n^3 product then synchronize() (host time: bench_gpu's row)
//   CopyToGpu/<kind>/<KiB>         a host tensor to cuda:0 and a synchronize (pinned: non_blocking)
//   CopyToCpu/<kind>/<KiB>         back: .cpu() (pageable) or copy_ into a pinned tensor, and a synchronize
//   PageableAfterKernel/4096       a 4096^3 float32 product, then .cpu() of one element (waits for the product)
//   Overlap/<same|side>_stream     a 4096^3 float32 product and a 256 MiB pinned copy to the GPU, the copy
//                                  on the same stream or on a side stream, then synchronize()
#include <benchmark/benchmark.h>

#include <algorithm>
#include <functional>
#include <string>
#include <vector>

#include "tiny/cuda.h"
#include "tiny/ops.h"
#include "tiny/optim/adam.h"
#include "tiny/tensor.h"
#include "../real_gpu.h"
#include "gemm_shapes.h"
#include "backend/stubs/gemm.h"  // tiny's cuBLAS call, for MatmulRate's split
#include "core/tensor_impl.h"    // the device pointers the GEMM stub takes

namespace {

using bench::copy_to_cpu;
using bench::copy_to_gpu;
using bench::host_tensor;
using bench::real_gpu;
using tiny::Tensor;

const char* const kGpu = "cuda:0";

tiny::Device gpu() { return tiny::Device(kGpu); }

// Keeps the GPU busy for a few milliseconds so that ops queued after it wait in
// the queue: a 4096^3 float32 product (about 2.7 ms on an H100; 512^3 on the
// emulated GPU, where only the program is being checked).
struct Spacer {
  Tensor a = tiny::randn({tiny::cuda::is_emulated(0) ? 512 : 4096, tiny::cuda::is_emulated(0) ? 512 : 4096}, kGpu);
  void run() const { benchmark::DoNotOptimize(tiny::matmul(a, a)); }
};

// Device time per op: `ops` calls of `op` between two events, queued behind the spacer.
void device_rows(benchmark::State& state, const std::function<void()>& op, int ops) {
  static const Spacer* spacer = new Spacer();
  for (int i = 0; i < 3; ++i) op();  // handles, kernel choice, cached blocks
  tiny::cuda::synchronize(0);
  tiny::cuda::Event start(true), end(true);
  for (auto _ : state) {
    spacer->run();
    start.record();
    for (int i = 0; i < ops; ++i) op();
    end.record();
    end.synchronize();
    state.SetIterationTime(start.elapsed_time(end) * 1e-3 / ops);
  }
}

// ---------------------------------------------------------------- host rows

void sync_idle(benchmark::State& state) {
  if (!real_gpu(state)) return;
  tiny::cuda::synchronize(0);
  for (auto _ : state) tiny::cuda::synchronize(0);
}

void op_sync(benchmark::State& state) {
  if (!real_gpu(state)) return;
  const Tensor x = tiny::zeros({1}, gpu());
  for (auto _ : state) {
    x.add_(1);
    tiny::cuda::synchronize(0);
  }
}

void item_after_op(benchmark::State& state) {
  if (!real_gpu(state)) return;
  const Tensor x = tiny::zeros({1}, gpu());
  for (auto _ : state) benchmark::DoNotOptimize((x + 1).item());
}

void launch_rate(benchmark::State& state, bool in_place) {
  if (!real_gpu(state)) return;
  const int64_t ops = state.range(0);
  const Tensor x = tiny::zeros({1}, gpu());
  tiny::cuda::synchronize(0);
  for (auto _ : state) {
    for (int64_t i = 0; i < ops; ++i) {
      if (in_place) {
        x.add_(1);
      } else {
        benchmark::DoNotOptimize(x + 1);
      }
    }
    tiny::cuda::synchronize(0);
  }
  state.counters["us/op"] = benchmark::Counter(static_cast<double>(ops) * 1e-6,
                                               benchmark::Counter::kIsIterationInvariantRate | benchmark::Counter::kInvert);
}

// The host's cost of one small matrix product: `ops` products of 64x64 (a few
// microseconds each on the GPU, so the host's queueing sets the pace), then a
// synchronize, as LaunchRate. `through` picks the path: "matmul" (tiny::matmul:
// the tensor op, its output and cuBLAS) or "gemm_kernel" (tiny's cuBLAS call
// alone, into one preallocated output), so that the two costs can be told apart.
void matmul_rate(benchmark::State& state, tiny::Dtype dtype, bool through_matmul) {
  if (!real_gpu(state)) return;
  if (!through_matmul && tiny::cuda::is_emulated(0)) {
    state.SkipWithError("the CUDA backend's GEMM kernel needs a real GPU");
    return;
  }
  const int64_t ops = state.range(0), n = 64;
  const Tensor a = tiny::randn({n, n}, kGpu).to(dtype), b = tiny::randn({n, n}, kGpu).to(dtype);
  const Tensor c = tiny::empty({n, n}, tiny::TensorOptions(dtype).device(kGpu));
  const auto product = [&] {
    if (!through_matmul) {
      tiny::gemm_stub(tiny::Backend::CUDA)(dtype, false, false, n, n, n, 1.0, b.unsafe_impl()->data(), n,
                                           a.unsafe_impl()->data(), n, 0.0, c.unsafe_impl()->data(), n);
      return;
    }
    benchmark::DoNotOptimize(tiny::matmul(a, b));
  };
  for (int i = 0; i < 3; ++i) product();
  tiny::cuda::synchronize(0);
  for (auto _ : state) {
    for (int64_t i = 0; i < ops; ++i) product();
    tiny::cuda::synchronize(0);
  }
  state.counters["us/op"] = benchmark::Counter(static_cast<double>(ops) * 1e-6,
                                               benchmark::Counter::kIsIterationInvariantRate | benchmark::Counter::kInvert);
}

void matmul_sync(benchmark::State& state, tiny::Dtype dtype) {
  if (!real_gpu(state)) return;
  const int64_t n = state.range(0);
  const Tensor a = tiny::randn({n, n}, kGpu).to(dtype), b = tiny::randn({n, n}, kGpu).to(dtype);
  for (int i = 0; i < 3; ++i) benchmark::DoNotOptimize(tiny::matmul(a, b));
  tiny::cuda::synchronize(0);
  for (auto _ : state) {
    benchmark::DoNotOptimize(tiny::matmul(a, b));
    tiny::cuda::synchronize(0);
  }
}

void pageable_after_kernel(benchmark::State& state) {
  if (!real_gpu(state)) return;
  const int64_t n = state.range(0);
  const Tensor a = tiny::randn({n, n}, kGpu);
  benchmark::DoNotOptimize(tiny::matmul(a, a).cpu());
  for (auto _ : state) {
    const Tensor c = tiny::matmul(a, a);
    benchmark::DoNotOptimize(c.select(0, 0).select(0, 0).cpu());
  }
}

void overlap(benchmark::State& state, bool side_stream) {
  if (!real_gpu(state)) return;
  const Tensor a = tiny::randn({4096, 4096}, kGpu);
  const Tensor src = host_tensor(256 << 10, true);
  const tiny::cuda::Stream side(0);
  for (int i = 0; i < 2; ++i) benchmark::DoNotOptimize(tiny::matmul(a, a));
  tiny::cuda::synchronize(0);
  for (auto _ : state) {
    benchmark::DoNotOptimize(tiny::matmul(a, a));
    if (side_stream) {
      tiny::cuda::StreamGuard guard(side);
      benchmark::DoNotOptimize(src.to(gpu(), /*non_blocking=*/true));
    } else {
      benchmark::DoNotOptimize(src.to(gpu(), /*non_blocking=*/true));
    }
    tiny::cuda::synchronize(0);
  }
}

// ---------------------------------------------------------------- device rows

// The bytes one element costs each Kernel/ op (reads and writes, float32;
// Adam reads param, grad, exp_avg, exp_avg_sq and writes param, exp_avg, exp_avg_sq).
int64_t bytes_per_element(const std::string& op) {
  if (op == "add") return 12;
  if (op == "relu" || op == "clone") return 8;
  if (op == "to_bf16") return 6;
  if (op == "adam") return 28;
  return 4;  // sum, zero_, fill_
}

void kernel_row(benchmark::State& state, const std::string& op) {
  if (!real_gpu(state)) return;
  const int64_t n = state.range(0);
  const Tensor a = tiny::randn({n}, kGpu), b = tiny::randn({n}, kGpu);
  std::function<void()> fn;
  std::shared_ptr<tiny::optim::Adam> adam;
  if (op == "add") {
    fn = [&] { benchmark::DoNotOptimize(a + b); };
  } else if (op == "relu") {
    fn = [&] { benchmark::DoNotOptimize(a.relu()); };
  } else if (op == "sum") {
    fn = [&] { benchmark::DoNotOptimize(a.sum()); };
  } else if (op == "clone") {
    fn = [&] { benchmark::DoNotOptimize(a.clone()); };
  } else if (op == "zero_") {
    fn = [&] { b.zero_(); };
  } else if (op == "fill_") {
    fn = [&] { b.fill_(1.5); };
  } else if (op == "to_bf16") {
    fn = [&] { benchmark::DoNotOptimize(a.to(tiny::kBFloat16)); };
  } else if (op == "adam") {
    Tensor p = tiny::randn({n}, kGpu);
    p.requires_grad_(true);
    p.set_grad(tiny::randn({n}, kGpu));
    adam = std::make_shared<tiny::optim::Adam>(std::vector<Tensor>{p});
    fn = [&] { adam->step(); };
  }
  device_rows(state, fn, n >= (1 << 24) ? 5 : 50);
  state.SetBytesProcessed(state.iterations() * bytes_per_element(op) * n);
}

// The same kernels with their inputs out of the L2 cache: each call takes the
// next of enough tensors (or Adam parameters) to pass 256 MiB, four times an
// H100's 50 MB of L2, where Kernel/ repeats one set that a small n keeps in it.
void cold_kernel_row(benchmark::State& state, const std::string& op) {
  if (!real_gpu(state)) return;
  const int64_t n = state.range(0);
  const int64_t per_call = bytes_per_element(op) * n;
  const int64_t sets = std::min<int64_t>(1024, std::max<int64_t>(1, ((int64_t{256} << 20) + per_call - 1) / per_call));
  std::vector<Tensor> a, b;
  std::vector<std::shared_ptr<tiny::optim::Adam>> adams;
  for (int64_t i = 0; i < sets; ++i) {
    a.push_back(tiny::randn({n}, kGpu));
    b.push_back(tiny::randn({n}, kGpu));
    if (op == "adam") {
      a.back().requires_grad_(true);
      a.back().set_grad(b.back());
      adams.push_back(std::make_shared<tiny::optim::Adam>(std::vector<Tensor>{a.back()}));
    }
  }
  size_t next = 0;
  const std::function<void()> fn = [&] {
    const size_t i = next++ % a.size();
    if (op == "add") benchmark::DoNotOptimize(a[i] + b[i]);
    if (op == "relu") benchmark::DoNotOptimize(a[i].relu());
    if (op == "zero_") b[i].zero_();
    if (op == "adam") adams[i]->step();
  };
  device_rows(state, fn, n >= (1 << 24) ? 5 : 50);
  state.SetBytesProcessed(state.iterations() * per_call);
  state.counters["sets"] = static_cast<double>(sets);
}

void gemm_row(benchmark::State& state, tiny::Dtype dtype) {
  if (!real_gpu(state)) return;
  const int64_t m = state.range(0), n = state.range(1), k = state.range(2);
  const Tensor a = tiny::randn({m, k}, kGpu).to(dtype), b = tiny::randn({k, n}, kGpu).to(dtype);
  const double flops = 2.0 * m * n * k;
  device_rows(state, [&] { benchmark::DoNotOptimize(tiny::matmul(a, b)); }, flops > 1e11 ? 5 : 50);
  state.counters["TFLOP/s"] = benchmark::Counter(flops * 1e-12, benchmark::Counter::kIsIterationInvariantRate);
}

// ---------------------------------------------------------------- registration

benchmark::internal::Benchmark* host(const std::string& name, const std::function<void(benchmark::State&)>& fn) {
  return benchmark::RegisterBenchmark(name.c_str(), fn)->Unit(benchmark::kMicrosecond)->UseRealTime();
}

benchmark::internal::Benchmark* device(const std::string& name, const std::function<void(benchmark::State&)>& fn) {
  // A fixed count: each iteration costs a spacer, which the manual time leaves out.
  return benchmark::RegisterBenchmark(name.c_str(), fn)->Unit(benchmark::kMicrosecond)->UseManualTime()->Iterations(10);
}

const bool registered = [] {
  host("Sync/idle", sync_idle);
  host("OpSync/add_", op_sync);
  host("Item/after_op", item_after_op);
  host("LaunchRate/add_", [](benchmark::State& s) { launch_rate(s, true); })->Arg(1000);
  host("LaunchRate/add", [](benchmark::State& s) { launch_rate(s, false); })->Arg(1000);

  for (const char* op : {"add", "relu", "sum", "clone", "zero_", "fill_", "to_bf16", "adam"}) {
    auto* b = device(std::string("Kernel/") + op, [op](benchmark::State& s) { kernel_row(s, op); });
    for (int64_t n : {1, 1 << 16, 1 << 18, 1 << 20, 1 << 22, 1 << 24, 1 << 25, 1 << 26}) b->Arg(n);
  }

  for (const char* op : {"add", "relu", "zero_", "adam"}) {
    auto* b = device(std::string("KernelCold/") + op, [op](benchmark::State& s) { cold_kernel_row(s, op); });
    for (int64_t n : {1 << 16, 1 << 18, 1 << 20, 1 << 22}) b->Arg(n);
  }

  const std::vector<std::vector<int64_t>> shapes = bench::calibration_gemm_shapes();
  for (tiny::Dtype dtype : {tiny::kFloat32, tiny::kFloat16, tiny::kBFloat16}) {
    auto* b = device(std::string("Gemm/") + dtype_name(dtype), [dtype](benchmark::State& s) { gemm_row(s, dtype); });
    for (const auto& s : shapes) b->Args(s);
    host(std::string("MatmulRate/") + dtype_name(dtype), [dtype](benchmark::State& s) { matmul_rate(s, dtype, true); })
        ->Arg(1000);
#ifdef TINY_HAVE_CUDA
    host(std::string("GemmKernelRate/") + dtype_name(dtype),
         [dtype](benchmark::State& s) { matmul_rate(s, dtype, false); })
        ->Arg(1000);
#endif
    host(std::string("MatmulSync/") + dtype_name(dtype), [dtype](benchmark::State& s) { matmul_sync(s, dtype); })
        ->Arg(1024)
        ->Arg(4096);
  }

  for (bool pinned : {false, true}) {
    const std::string kind = pinned ? "pinned" : "pageable";
    auto* to_gpu = host("CopyToGpu/" + kind, [pinned](benchmark::State& s) { copy_to_gpu(s, pinned); });
    auto* to_cpu = host("CopyToCpu/" + kind, [pinned](benchmark::State& s) { copy_to_cpu(s, pinned); });
    for (int64_t kib : {4, 64, 1024, 16384, 262144}) {
      to_gpu->Arg(kib);
      to_cpu->Arg(kib);
    }
  }
  host("PageableAfterKernel", pageable_after_kernel)->Arg(4096);
  host("Overlap/same_stream", [](benchmark::State& s) { overlap(s, false); });
  host("Overlap/side_stream", [](benchmark::State& s) { overlap(s, true); });
  return true;
}();

}  // namespace
