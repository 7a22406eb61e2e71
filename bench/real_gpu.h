// What the benchmarks that need a real GPU share (bench_gpu, gpu/bench_calibration).
#pragma once

#include <benchmark/benchmark.h>

#include <cstdlib>

#include "tiny/cuda.h"
#include "tiny/ops.h"
#include "tiny/tensor.h"

namespace bench {

// True when cuda:0 is a real GPU; otherwise the benchmark is skipped, saying
// why. BENCH_ON_EMULATOR=1 runs it on the emulated GPU: that checks the
// program before spending GPU time, not the figures.
inline bool real_gpu(benchmark::State& state) {
  if (!tiny::cuda::is_available()) {
    state.SkipWithError("no GPU: these figures need an NVIDIA GPU");
    return false;
  }
  if (tiny::cuda::is_emulated(0) && std::getenv("BENCH_ON_EMULATOR") == nullptr) {
    state.SkipWithError("cuda:0 is the emulated GPU, which computes on the CPU: these figures need an NVIDIA GPU");
    return false;
  }
  state.SetLabel(tiny::cuda::get_device_name(0));
  return true;
}

// A host tensor of `kib` KiB of float32, pinned or not.
inline tiny::Tensor host_tensor(int64_t kib, bool pinned) {
  const tiny::Tensor t = tiny::rand({kib << 8});  // float32: 256 per KiB
  return pinned ? t.pin_memory() : t;
}

// state.range(0) KiB to cuda:0 and a synchronize (pinned: non_blocking); counter bytes/s.
inline void copy_to_gpu(benchmark::State& state, bool pinned) {
  if (!real_gpu(state)) return;
  const tiny::Tensor src = host_tensor(state.range(0), pinned);
  benchmark::DoNotOptimize(src.to(tiny::Device("cuda:0")));
  tiny::cuda::synchronize(0);
  for (auto _ : state) {
    benchmark::DoNotOptimize(src.to(tiny::Device("cuda:0"), /*non_blocking=*/pinned));
    tiny::cuda::synchronize(0);
  }
  state.SetBytesProcessed(state.iterations() * src.numel() * 4);
}

// ... and back: .cpu() into pageable memory, or copy_ into a pinned tensor and a synchronize.
inline void copy_to_cpu(benchmark::State& state, bool pinned) {
  if (!real_gpu(state)) return;
  const tiny::Tensor src = host_tensor(state.range(0), false).to(tiny::Device("cuda:0"));
  const tiny::Tensor dst = pinned ? host_tensor(state.range(0), true) : tiny::Tensor();
  for (auto _ : state) {
    if (pinned) {
      dst.copy_(src, /*non_blocking=*/true);
      tiny::cuda::synchronize(0);
    } else {
      benchmark::DoNotOptimize(src.cpu());
    }
  }
  state.SetBytesProcessed(state.iterations() * src.numel() * 4);
}

}  // namespace bench
