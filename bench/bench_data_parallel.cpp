// DataParallel on the emulated GPUs: one training step of a mid-size MLP on 1
// device, then with the batch split over 2 (DESIGN.md section 3: each emulated
// device owns an equal share of the host's cores, so 2 devices running at once
// can each use their share at the same time).
//
// Model: 1024-2048-512-10 (case B of training_cases.h), batch 256, Adam(lr 1e-3).
// One step = zero_grad, DataParallel forward (scatter, replicate, parallel
// apply, gather on cuda:0), cross_entropy, backward, Adam step, then a
// synchronize of every device used, so the time is the step's, not the queue's.
//
// Benchmarks (items = samples; wall-clock per step, host timings: the devices
// are emulated on the CPU):
//   DataParallelStep/1   device_ids {0}: the whole batch on cuda:0
//   DataParallelStep/2   device_ids {0, 1}: 128 samples on each
//
// Threads: tiny's default (TINY_NUM_THREADS, else every CPU the process may
// use); each device's kernels get max(1, threads / TINY_EMULATED_GPUS) of them.
// So DataParallelStep/1 uses one device's share only: compare it with /2 to see
// what the second device's share adds. OpenBLAS's thread count is process-wide
// (every GEMM may use all threads), which blurs the split for GEMM-bound steps.
#include <benchmark/benchmark.h>

#include <memory>
#include <vector>

#include "tiny/cuda.h"
#include "tiny/nn/nn.h"
#include "tiny/nn/parallel/data_parallel.h"
#include "tiny/ops.h"
#include "tiny/optim/optim.h"
#include "tiny/parallel.h"
#include "tiny/tensor.h"
#include "training_cases.h"

namespace {

using tiny::Tensor;

constexpr int64_t kBatch = 256;
const std::vector<int64_t> kSizes = {1024, 2048, 512, 10};

void data_parallel_step(benchmark::State& state) {
  const int devices = static_cast<int>(state.range(0));
  if (tiny::cuda::device_count() < devices) {
    state.SkipWithError("not enough emulated GPUs: set TINY_EMULATED_GPUS=2 or more");
    return;
  }
  const tiny::Device cuda0("cuda:0");
  tiny::manual_seed(0);
  auto mlp = std::make_shared<tiny::nn::Sequential>();
  for (size_t i = 0; i + 1 < kSizes.size(); ++i) {
    mlp->push_back(std::make_shared<tiny::nn::Linear>(kSizes[i], kSizes[i + 1]));
    if (i + 2 < kSizes.size()) mlp->push_back(std::make_shared<tiny::nn::ReLU>());
  }
  mlp->to(cuda0);
  std::vector<int> ids;
  for (int d = 0; d < devices; ++d) ids.push_back(d);
  tiny::nn::DataParallel model(mlp, ids);
  tiny::optim::AdamOptions options;
  options.lr = bench::kAdamLr;
  tiny::optim::Adam optimizer(mlp->parameters(), options);
  const bench::TrainingCase c{'B', kSizes, kBatch, 0.0, true};
  const Tensor x = tiny::from_vector(bench::case_inputs(c), {kBatch, kSizes.front()}).to(cuda0);
  const Tensor y = tiny::from_vector(bench::case_labels(c), {kBatch}).to(cuda0);

  auto step = [&] {
    optimizer.zero_grad();
    Tensor loss = tiny::nn::functional::cross_entropy(model(x), y);
    loss.backward();
    optimizer.step();
    for (int d = 0; d < devices; ++d) tiny::cuda::synchronize(d);
  };
  for (int i = 0; i < 3; ++i) step();
  for (auto _ : state) step();
  state.SetItemsProcessed(state.iterations() * kBatch);
  state.counters["threads"] = tiny::get_num_threads();
  state.counters["threads/device"] = tiny::cuda::get_device_properties(0).multi_processor_count;
}

}  // namespace

BENCHMARK(data_parallel_step)->Name("DataParallelStep")->Arg(1)->Arg(2)->Unit(benchmark::kMillisecond)->UseRealTime();
