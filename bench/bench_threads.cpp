// Benchmarks of tiny's thread pool and CPU caching allocator.
//
//   (a) cblas_sgemm 512x512x512, OpenBLAS at 1 and 2 threads
//   (b) the same sgemm right after a parallel_for that did real work: with
//       passive waits the pool's idle workers leave the cores to OpenBLAS
//       (libgomp's spinning workers once made this 2.5x slower)
//   (c) parallel_for overhead with an empty body, 1 and 2 threads
//   (d) cpu_malloc/cpu_free versus malloc/free, touching every page as a
//       tensor would (first touches of fresh memory are page faults)
//   (e) the reverse of (b): a parallel_for right after an sgemm, while
//       OpenBLAS's own workers may still be awake (they poll, calling
//       sched_yield, for about 2^28 cycles after each call before they sleep)
//   (f) for comparison with (a) and (e): OpenBLAS at 1 thread and the sgemm
//       split by rows over tiny's pool, so that only one pool ever runs
//
// Build by hand, for example:
//   g++ -std=c++17 -O2 -I framework/include -I framework/src bench/bench_threads.cpp
//       framework/src/runtime/*.cpp -lbenchmark -lbenchmark_main -lopenblas -pthread -o /tmp/bench_threads
#include <benchmark/benchmark.h>
#include <cblas.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <thread>
#include <vector>

#include "runtime/cpu_allocator.h"
#include "runtime/thread_pool.h"

namespace rt = tiny::runtime;

namespace {

constexpr int kN = 512;

struct Matrices {
  std::vector<float> a = std::vector<float>(kN * kN, 0.5f);
  std::vector<float> b = std::vector<float>(kN * kN, 0.25f);
  std::vector<float> c = std::vector<float>(kN * kN, 0.0f);
  void sgemm() {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, kN, kN, kN, 1.0f, a.data(), kN, b.data(), kN, 0.0f,
                c.data(), kN);
  }
};

// A few hundred microseconds of element-wise work (4 MiB), split over the pool.
void pool_work(std::vector<float>& x) {
  rt::parallel_for(0, x.size(), 1 << 16, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) x[i] = x[i] * 0.999f + 0.001f;
  });
  benchmark::DoNotOptimize(x.data());
}

// Adds the fastest repetition to the report: the least disturbed by other
// processes on a shared machine.
void with_min(benchmark::internal::Benchmark* b) {
  b->ComputeStatistics("min", [](const std::vector<double>& v) { return *std::min_element(v.begin(), v.end()); });
}

template <typename Fn>
double seconds(Fn&& fn) {
  const auto start = std::chrono::steady_clock::now();
  fn();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// (a)
void BM_Sgemm512(benchmark::State& state) {
  rt::set_num_threads(state.range(0));
  Matrices m;
  for (auto _ : state) m.sgemm();
  benchmark::DoNotOptimize(m.c.data());
  state.counters["GFLOP/s"] = benchmark::Counter(2.0 * kN * kN * kN * state.iterations(),
                                                 benchmark::Counter::kIsRate, benchmark::Counter::kIs1000);
}
BENCHMARK(BM_Sgemm512)
    ->ArgName("threads")
    ->Arg(1)
    ->Arg(2)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime()
    ->Apply(with_min);

// (b) only the sgemm is timed. Each iteration also times a second sgemm that
// follows the first one, not a parallel_for: the counter "alone_ms" is that
// baseline, measured under the same machine load.
void BM_Sgemm512AfterParallelFor(benchmark::State& state) {
  rt::set_num_threads(state.range(0));
  Matrices m;
  std::vector<float> x(1 << 20, 1.0f);
  double alone = 0;
  for (auto _ : state) {
    pool_work(x);
    state.SetIterationTime(seconds([&] { m.sgemm(); }));
    alone += seconds([&] { m.sgemm(); });
  }
  benchmark::DoNotOptimize(m.c.data());
  state.counters["alone_ms"] = benchmark::Counter(alone * 1e3 / state.iterations());
}
BENCHMARK(BM_Sgemm512AfterParallelFor)
    ->ArgName("threads")
    ->Arg(1)
    ->Arg(2)
    ->Unit(benchmark::kMillisecond)
    ->UseManualTime()
    ->Apply(with_min);

// (c)
void BM_ParallelForEmpty(benchmark::State& state) {
  rt::set_num_threads(state.range(0));
  const int64_t chunks = state.range(1);
  for (auto _ : state) rt::parallel_for(0, chunks, 1, [](int64_t, int64_t) {});
}
BENCHMARK(BM_ParallelForEmpty)
    ->ArgNames({"threads", "chunks"})
    ->Args({1, 2})
    ->Args({2, 2})
    ->Args({1, 64})
    ->Args({2, 64})
    ->UseRealTime()
    ->Apply(with_min);

// (d) one byte written per 4 KiB page, as the first write of a tensor would.
void touch_pages(void* p, size_t bytes) {
  auto* c = static_cast<volatile char*>(p);
  for (size_t i = 0; i < bytes; i += 4096) c[i] = 1;
}

void BM_CpuMallocFreeTouch(benchmark::State& state) {
  const size_t bytes = static_cast<size_t>(state.range(0)) << 20;
  for (auto _ : state) {
    void* p = rt::cpu_malloc(bytes);
    touch_pages(p, bytes);
    rt::cpu_free(p, bytes);
  }
  state.SetBytesProcessed(state.iterations() * bytes);
}
BENCHMARK(BM_CpuMallocFreeTouch)
    ->ArgName("MiB")
    ->Arg(4)
    ->Arg(64)
    ->UseRealTime()
    ->Apply(with_min);

void BM_MallocFreeTouch(benchmark::State& state) {
  const size_t bytes = static_cast<size_t>(state.range(0)) << 20;
  for (auto _ : state) {
    void* p = std::malloc(bytes);
    touch_pages(p, bytes);
    std::free(p);
  }
  state.SetBytesProcessed(state.iterations() * bytes);
}
BENCHMARK(BM_MallocFreeTouch)
    ->ArgName("MiB")
    ->Arg(4)
    ->Arg(64)
    ->UseRealTime()
    ->Apply(with_min);

// (e) baseline: the pool's work alone; then right after an sgemm (only the
// parallel_for is timed).
void BM_ParallelForWork(benchmark::State& state) {
  rt::set_num_threads(state.range(0));
  std::vector<float> x(1 << 20, 1.0f);
  for (auto _ : state) state.SetIterationTime(seconds([&] { pool_work(x); }));
}
BENCHMARK(BM_ParallelForWork)
    ->ArgName("threads")
    ->Arg(1)
    ->Arg(2)
    ->Unit(benchmark::kMicrosecond)
    ->UseManualTime()
    ->Apply(with_min);

void BM_ParallelForWorkAfterSgemm(benchmark::State& state) {
  rt::set_num_threads(state.range(0));
  Matrices m;
  std::vector<float> x(1 << 20, 1.0f);
  for (auto _ : state) {
    m.sgemm();
    state.SetIterationTime(seconds([&] { pool_work(x); }));
  }
}
BENCHMARK(BM_ParallelForWorkAfterSgemm)
    ->ArgName("threads")
    ->Arg(1)
    ->Arg(2)
    ->Unit(benchmark::kMicrosecond)
    ->UseManualTime()
    ->Apply(with_min);

// (f) row blocks of C = A B, one single-threaded sgemm per block.
void sgemm_on_pool(Matrices& m) {
  rt::parallel_for(0, kN, kN / rt::num_threads(), [&](int64_t b, int64_t e) {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, e - b, kN, kN, 1.0f, m.a.data() + b * kN, kN, m.b.data(),
                kN, 0.0f, m.c.data() + b * kN, kN);
  });
}

void BM_Sgemm512OnTinyPool(benchmark::State& state) {
  rt::set_num_threads(state.range(0));
  openblas_set_num_threads(1);
  Matrices m;
  for (auto _ : state) sgemm_on_pool(m);
  benchmark::DoNotOptimize(m.c.data());
}
BENCHMARK(BM_Sgemm512OnTinyPool)
    ->ArgName("threads")
    ->Arg(1)
    ->Arg(2)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime()
    ->Apply(with_min);

void BM_ParallelForWorkAfterSgemmOnTinyPool(benchmark::State& state) {
  rt::set_num_threads(state.range(0));
  openblas_set_num_threads(1);
  Matrices m;
  std::vector<float> x(1 << 20, 1.0f);
  for (auto _ : state) {
    sgemm_on_pool(m);
    state.SetIterationTime(seconds([&] { pool_work(x); }));
  }
}
BENCHMARK(BM_ParallelForWorkAfterSgemmOnTinyPool)
    ->ArgName("threads")
    ->Arg(1)
    ->Arg(2)
    ->Unit(benchmark::kMicrosecond)
    ->UseManualTime()
    ->Apply(with_min);

}  // namespace
