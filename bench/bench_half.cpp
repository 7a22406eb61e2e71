// float16 on the CPU and the emulated GPU: the cost of converting, and what
// it does to a mixed-precision training step.
//
//   HalfToFloat/bulk, FloatToHalf/bulk   tiny's kernels' bulk conversion
//                                        (backend/cpu/half_convert.h: F16C on x86)
//   HalfToFloat/scalar, FloatToHalf/scalar   the same through tiny::Half one
//                                        element at a time (the portable code, and
//                                        what every float16 kernel paid before)
//   BFloat16ToFloat, FloatToBFloat16     the peer: bfloat16's conversion is a shift
//                                        the compiler vectorises
//   AmpStep/<dtype>   one training step of case B (bench/training_cases.h) on the
//                     emulated cuda:0: float32; float16 autocast + GradScaler
//                     (lesson 7's step); bfloat16 autocast. The emulator has no
//                     tensor cores, so 16-bit is not faster here; the figure to
//                     watch is how close float16 stays to bfloat16.
// Items are elements (conversions) or samples (steps).
#include <benchmark/benchmark.h>

#include <memory>
#include <random>
#include <type_traits>
#include <vector>

#include "backend/cpu/half_convert.h"
#include "tiny/amp.h"
#include "tiny/cuda.h"
#include "tiny/half.h"
#include "tiny/nn/nn.h"
#include "tiny/ops.h"
#include "tiny/optim/optim.h"
#include "tiny/tensor.h"
#include "tiny_trainer.h"
#include "training_cases.h"

namespace {

using tiny::BFloat16;
using tiny::Half;
using tiny::Tensor;

constexpr int64_t kElements = 1 << 20;  // 4 MiB of float: in L2/L3, not DRAM-bound

std::vector<float> random_floats() {
  std::vector<float> v(kElements);
  std::mt19937 rng(7);
  std::normal_distribution<float> normal(0.0f, 4.0f);
  for (float& x : v) x = normal(rng);
  return v;
}

template <typename T>
std::vector<T> narrowed(const std::vector<float>& f) {
  std::vector<T> out(f.size());
  for (size_t i = 0; i < f.size(); ++i) out[i] = T(f[i]);
  return out;
}

// random_floats(), or those values rounded to T.
template <typename T>
std::vector<T> inputs() {
  if constexpr (std::is_same_v<T, float>) {
    return random_floats();
  } else {
    return narrowed<T>(random_floats());
  }
}

// tiny's bulk conversion (tiny::cpu::half_to_float or float_to_half).
template <typename From, typename To, void (*Convert)(const From*, To*, int64_t)>
void bulk(benchmark::State& state) {
  const std::vector<From> src = inputs<From>();
  std::vector<To> dst(src.size());
  for (auto _ : state) {
    Convert(src.data(), dst.data(), kElements);
    benchmark::DoNotOptimize(dst.data());
  }
  state.SetItemsProcessed(state.iterations() * kElements);
  state.SetLabel(tiny::cpu::half_convert_uses_f16c() ? "F16C" : "portable");
}

template <typename T>
void to_float_scalar(benchmark::State& state) {
  const std::vector<T> src = inputs<T>();
  std::vector<float> dst(src.size());
  for (auto _ : state) {
    for (int64_t i = 0; i < kElements; ++i) dst[i] = static_cast<float>(src[i]);
    benchmark::DoNotOptimize(dst.data());
  }
  state.SetItemsProcessed(state.iterations() * kElements);
}

template <typename T>
void from_float_scalar(benchmark::State& state) {
  const std::vector<float> src = random_floats();
  std::vector<T> dst(src.size());
  for (auto _ : state) {
    for (int64_t i = 0; i < kElements; ++i) dst[i] = T(src[i]);
    benchmark::DoNotOptimize(dst.data());
  }
  state.SetItemsProcessed(state.iterations() * kElements);
}

// Lesson 7's three steps on case B, on cuda:0, each ending in a synchronize.
void amp_step(benchmark::State& state, tiny::Dtype dtype) {
  if (!tiny::cuda::is_available()) {
    state.SkipWithError("no cuda device (TINY_EMULATED_GPUS=0)");
    return;
  }
  bench::AmpTrainer t(dtype, tiny::Device("cuda:0"));
  auto step = [&] {
    t.step();
    tiny::cuda::synchronize(0);
  };
  for (int i = 0; i < 5; ++i) step();
  for (auto _ : state) step();
  state.SetItemsProcessed(state.iterations() * bench::training_cases()[1].batch);
}

}  // namespace

BENCHMARK(bulk<Half, float, tiny::cpu::half_to_float>)->Name("HalfToFloat/bulk");
BENCHMARK(to_float_scalar<Half>)->Name("HalfToFloat/scalar");
BENCHMARK(to_float_scalar<BFloat16>)->Name("BFloat16ToFloat");
BENCHMARK(bulk<float, Half, tiny::cpu::float_to_half>)->Name("FloatToHalf/bulk");
BENCHMARK(from_float_scalar<Half>)->Name("FloatToHalf/scalar");
BENCHMARK(from_float_scalar<BFloat16>)->Name("FloatToBFloat16");
BENCHMARK_CAPTURE(amp_step, float32, tiny::kFloat32)->Name("AmpStep/float32")->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK_CAPTURE(amp_step, float16, tiny::kFloat16)->Name("AmpStep/float16")->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK_CAPTURE(amp_step, bfloat16, tiny::kBFloat16)->Name("AmpStep/bfloat16")->Unit(benchmark::kMillisecond)->UseRealTime();
