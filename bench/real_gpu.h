// For the benchmarks that need a real GPU (bench_gpu, gpu/bench_calibration).
#pragma once

#include <benchmark/benchmark.h>

#include <cstdlib>

#include "tiny/cuda.h"

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

}  // namespace bench
