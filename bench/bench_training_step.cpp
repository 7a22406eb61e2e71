// One training step of an MLP with tiny, and the GEMM-only floor of that step.
//
// Cases (bench/training_cases.h, shared with the PyTorch and LibTorch peers in
// bench/peers/):
//   A  784-512-256-10, Dropout(0.2) after each ReLU (train mode), batch 64,  Adam(lr 1e-3)
//   B  1024-2048-512-10,                                          batch 128, Adam(lr 1e-3)
//   C  784-256-10,                                                batch 32,  SGD(lr 0.01, momentum 0.9)
//
// Benchmarks (items = samples; the reported time is wall-clock per step):
//   TinyStep/<case>      zero_grad, forward, CrossEntropyLoss, backward, optimizer step,
//                        with tiny::nn and tiny::optim, one fixed batch
//   GemmFloor/<case>     the same step's matrix products alone, through cblas_sgemm:
//                        forward Y = X W^T per layer, backward dW = dY^T X per layer and
//                        dX = dY W for every layer but the first (no framework computes the
//                        gradient of the input batch). Nothing else: no bias, activation,
//                        loss, optimizer or allocation. No framework's step can be faster
//                        on the same BLAS and threads.
//   TinyForward/<case>   the three phases of TinyStep on their own, to see where its time
//   TinyForwardBackward/<case>   goes (forward with the graph recorded; zero_grad + forward +
//   TinyOptimizerStep/<case>     backward; optimizer.step() alone on fixed gradients)
// TinyStep also counts tensor allocations per step (allocs/step) and those the
// caching allocator had to ask the system for (sys_allocs/step: fresh pages).
//
// Threads: tiny's default (TINY_NUM_THREADS, else every CPU the process may use);
// OpenBLAS gets the same count from tiny, and the floor runs with it too.
// bench/compare.sh runs this program beside PyTorch and LibTorch and prints the
// comparison table (docs/performance.md).
#include <benchmark/benchmark.h>
#include <cblas.h>

#include <chrono>

#include <memory>
#include <string>
#include <vector>

#include "tiny/autograd.h"
#include "tiny/cuda.h"
#include "tiny/nn/nn.h"
#include "tiny/ops.h"
#include "tiny/optim/optim.h"
#include "tiny/parallel.h"
#include "tiny/tensor.h"
#include "gpu/model/cost.h"
#include "gpu/model/device_model.h"
#include "gpu/model/timeline.h"
#include "runtime/cpu_allocator.h"
#include "tiny_trainer.h"
#include "training_cases.h"

namespace {

using bench::TinyTrainer;
using bench::TrainingCase;
using tiny::Tensor;

// ---- tiny: TinyTrainer (tiny_trainer.h) -------------------------------------
void report(benchmark::State& state, const TrainingCase& c) {
  state.SetItemsProcessed(state.iterations() * c.batch);
  state.counters["threads"] = tiny::get_num_threads();
}

void tiny_step(benchmark::State& state, const TrainingCase& c) {
  TinyTrainer t(c);
  for (int i = 0; i < 5; ++i) t.step();  // optimizer state, allocator cache
  const auto before = tiny::runtime::cpu_allocator_stats();
  for (auto _ : state) t.step();
  const auto after = tiny::runtime::cpu_allocator_stats();
  report(state, c);
  // Tensor storage blocks per step (from tiny's caching allocator), and how many
  // of them had to come from the system (mmap/posix_memalign: fresh pages).
  const double steps = static_cast<double>(state.iterations());
  state.counters["allocs/step"] = static_cast<double>(after.num_allocs - before.num_allocs) / steps;
  state.counters["sys_allocs/step"] = static_cast<double>(after.num_system_allocs - before.num_system_allocs) / steps;
}

// The same step on cuda:0, each step ending with a synchronize so the time is
// the step's, not the queue's. TinyStepEmulated: the emulator's overhead over
// the CPU backend (queuing each kernel on a stream, a worker thread running
// it). TinyStepCuda: a real GPU (the CUDA backend); bench/peers/bench_torch.py
// --device cuda is its PyTorch peer. Each skips, saying why, where cuda:0 is
// the other kind.
void tiny_step_gpu(benchmark::State& state, const TrainingCase& c, bool emulated) {
  if (!tiny::cuda::is_available()) {
    state.SkipWithError("no cuda device (no NVIDIA GPU, and TINY_EMULATED_GPUS=0)");
    return;
  }
  if (tiny::cuda::is_emulated(0) != emulated) {
    state.SkipWithError(emulated ? "cuda:0 is a real GPU here: TINY_FORCE_EMULATED_GPU=1 selects the emulator"
                                 : "cuda:0 is the emulated GPU here: TinyStepCuda needs an NVIDIA GPU");
    return;
  }
  TinyTrainer t(c, tiny::Device("cuda:0"));
  for (int i = 0; i < 5; ++i) t.step();
  tiny::cuda::synchronize(0);
  for (auto _ : state) {
    t.step();
    tiny::cuda::synchronize(0);
  }
  state.SetLabel(tiny::cuda::get_device_name(0));
  report(state, c);
}

void tiny_step_emulated(benchmark::State& state, const TrainingCase& c) { tiny_step_gpu(state, c, true); }

// TinyStepModelShare: what the performance model costs the emulator (issue 16 asks
// for under 5% of an emulated step). Per kernel the emulator prices the work
// (kernel_ns) and places it on the device's timeline; this times that for as many
// launches as one step of the case makes, each priced as a GEMM (the dearest to
// price: tile shapes and waves), and reports it as a share of the same step on the
// emulated GPU, timed here beside it. An upper bound: most of a step's kernels are
// pointwise.
void tiny_step_model_share(benchmark::State& state, const TrainingCase& c) {
  if (!tiny::cuda::is_available() || !tiny::cuda::is_emulated(0)) {
    state.SkipWithError("needs the emulated GPU as cuda:0 (TINY_FORCE_EMULATED_GPU=1 on a machine with a GPU)");
    return;
  }
  TinyTrainer t(c, tiny::Device("cuda:0"));
  for (int i = 0; i < 5; ++i) t.step();
  tiny::cuda::synchronize(0);
  tiny::cuda::reset_device_counters(0);
  const int steps = 5;
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < steps; ++i) t.step();
  tiny::cuda::synchronize(0);
  const double step_ns =
      static_cast<double>(std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - start)
                              .count()) / steps;
  const int64_t launches = static_cast<int64_t>(tiny::cuda::device_counters(0).kernel_launches) / steps;

  const tiny::gpu::model::DeviceModel& gpu = tiny::gpu::model::selected_model();
  tiny::gpu::model::DeviceTimeline timeline(gpu);
  const tiny::gpu::model::KernelCost gemm =
      tiny::gpu::model::gemm_cost(tiny::Dtype::Float32, c.batch, c.sizes.back(), c.sizes.front(), false);
  const auto model_start = std::chrono::steady_clock::now();
  for (auto _ : state) {
    for (int64_t i = 0; i < launches; ++i) benchmark::DoNotOptimize(timeline.launch(i % 2, gemm));
  }
  const double model_ns = static_cast<double>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                                  std::chrono::steady_clock::now() - model_start)
                                                  .count()) /
                          static_cast<double>(state.iterations());
  state.counters["launches/step"] = static_cast<double>(launches);
  state.counters["emulated_step_ms"] = step_ns / 1e6;
  state.counters["model_share_%"] = 100.0 * model_ns / step_ns;
}
void tiny_step_cuda(benchmark::State& state, const TrainingCase& c) { tiny_step_gpu(state, c, false); }

void tiny_forward(benchmark::State& state, const TrainingCase& c) {
  TinyTrainer t(c);
  for (int i = 0; i < 5; ++i) t.step();
  for (auto _ : state) benchmark::DoNotOptimize(t.forward());
  report(state, c);
}

void tiny_forward_backward(benchmark::State& state, const TrainingCase& c) {
  TinyTrainer t(c);
  for (int i = 0; i < 5; ++i) t.step();
  for (auto _ : state) {
    t.optimizer->zero_grad();
    t.forward().backward();
  }
  report(state, c);
}

void tiny_optimizer_step(benchmark::State& state, const TrainingCase& c) {
  TinyTrainer t(c);
  for (int i = 0; i < 5; ++i) t.step();
  t.optimizer->zero_grad();
  t.forward().backward();
  for (auto _ : state) t.optimizer->step();
  report(state, c);
}

// ---- the GEMM floor -------------------------------------------------------------
struct GemmFloor {
  struct Layer {
    int in, out;
    std::vector<float> w, dw, y, dy, dx;
  };
  int batch;
  std::vector<float> x;
  std::vector<Layer> layers;

  explicit GemmFloor(const TrainingCase& c) : batch(static_cast<int>(c.batch)), x(bench::case_inputs(c)) {
    uint64_t k = 0;
    for (size_t i = 0; i + 1 < c.sizes.size(); ++i) {
      Layer l;
      l.in = static_cast<int>(c.sizes[i]);
      l.out = static_cast<int>(c.sizes[i + 1]);
      l.w.resize(static_cast<size_t>(l.in) * l.out);
      for (float& v : l.w) v = (2 * bench::uniform01(bench::splitmix64(7, k++)) - 1) * 0.05f;
      l.dw.assign(l.w.size(), 0.0f);
      l.y.assign(static_cast<size_t>(batch) * l.out, 0.0f);
      l.dy.assign(l.y.size(), 1e-3f);
      l.dx.assign(static_cast<size_t>(batch) * l.in, 0.0f);
      layers.push_back(std::move(l));
    }
  }

  const float* input_of(size_t i) const { return i == 0 ? x.data() : layers[i - 1].y.data(); }

  void step() {
    for (size_t i = 0; i < layers.size(); ++i) {  // Y = X W^T
      Layer& l = layers[i];
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, batch, l.out, l.in, 1.0f, input_of(i), l.in, l.w.data(),
                  l.in, 0.0f, l.y.data(), l.out);
    }
    for (size_t i = layers.size(); i-- > 0;) {
      Layer& l = layers[i];
      // dW = dY^T X
      cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, l.out, l.in, batch, 1.0f, l.dy.data(), l.out, input_of(i),
                  l.in, 0.0f, l.dw.data(), l.in);
      // dX = dY W (the previous layer's dY in a real step)
      if (i > 0)
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, batch, l.in, l.out, 1.0f, l.dy.data(), l.out,
                    l.w.data(), l.in, 0.0f, l.dx.data(), l.in);
    }
  }

  double flops() const {
    double f = 0;
    for (size_t i = 0; i < layers.size(); ++i)
      f += 2.0 * batch * layers[i].in * layers[i].out * (i == 0 ? 2 : 3);
    return f;
  }
};

void gemm_floor(benchmark::State& state, const TrainingCase& c) {
  // The floor is OpenBLAS's own threading at tiny's thread count; tiny itself
  // keeps OpenBLAS at one thread and splits its GEMMs over its pool.
  openblas_set_num_threads(tiny::get_num_threads());
  GemmFloor g(c);
  for (int i = 0; i < 5; ++i) g.step();
  for (auto _ : state) g.step();
  openblas_set_num_threads(1);
  benchmark::DoNotOptimize(g.layers.back().dw.data());
  report(state, c);
  state.counters["GFLOP/s"] = benchmark::Counter(g.flops() * static_cast<double>(state.iterations()),
                                                 benchmark::Counter::kIsRate, benchmark::Counter::kIs1000);
}

// Registers <name>/<case> for every case.
template <typename Fn>
bool register_all(const char* name, Fn fn) {
  for (const TrainingCase& c : bench::training_cases()) {
    benchmark::RegisterBenchmark((std::string(name) + "/" + c.name).c_str(), fn, c)
        ->Unit(benchmark::kMillisecond)
        ->UseRealTime();
  }
  return true;
}

const bool registered = register_all("TinyStep", tiny_step) && register_all("TinyStepEmulated", tiny_step_emulated) &&
                        register_all("TinyStepModelShare", tiny_step_model_share) &&
                        register_all("TinyStepCuda", tiny_step_cuda) && register_all("GemmFloor", gemm_floor) &&
                        register_all("TinyForward", tiny_forward) &&
                        register_all("TinyForwardBackward", tiny_forward_backward) &&
                        register_all("TinyOptimizerStep", tiny_optimizer_step);

}  // namespace
