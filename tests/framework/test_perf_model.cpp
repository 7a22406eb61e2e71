// The emulated GPU's performance model (framework/src/gpu/model/): device
// models, the cost of kernels and copies against hand-computed rooflines, the
// engines' schedule, and the model against every real-GPU measurement
// committed in data/gpu_measurements/ (PerfModel.Calibration prints the table).
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <iterator>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "gpu/model/cost.h"
#include "gpu/model/device_model.h"
#include "gpu/model/timeline.h"
#include "emulated_mode.h"
#include "test_util.h"
#include "tiny/data/data.h"
#include "tiny/parallel.h"
#include "tiny/ops.h"
#include "tiny/cuda.h"
#include "tiny/error.h"
#include "tiny_trainer.h"  // bench/: the training steps the benchmarks time

namespace {

using namespace tiny::gpu::model;
using tiny::Dtype;
using tiny::gpu::CopyKind;
namespace model = tiny::gpu::model;

// The call throws `type` with a message containing `text`.
#define EXPECT_THROW_WITH(call, type, text)                                            \
  do {                                                                                 \
    try {                                                                              \
      call;                                                                            \
      ADD_FAILURE() << #call " did not throw";                                         \
    } catch (const type& e) {                                                          \
      EXPECT_NE(std::string(e.what()).find(text), std::string::npos) << e.what();     \
    }                                                                                  \
  } while (0)

const DeviceModel& h100() {
  static const DeviceModel m = load_model("h100-sxm");
  return m;
}

// ---------------------------------------------------------------- device models

TEST(PerfModel, BuiltInModelsCarryTheirDatasheetFigures) {
  EXPECT_EQ(known_models(), (std::vector<std::string>{"h100-sxm", "h200", "a100-sxm", "l4", "t4"}));
  const DeviceModel a100 = load_model("A100-SXM");  // any case
  EXPECT_EQ(a100.name, "a100-sxm");
  EXPECT_EQ(a100.sm_count, 108);
  EXPECT_DOUBLE_EQ(a100.peak_of("bfloat16_tensor"), 312e12);
  EXPECT_EQ(h100().major, 9);
  EXPECT_DOUBLE_EQ(h100().memory_bandwidth, 3350e9);
  const DeviceModel t4 = load_model("t4");
  EXPECT_EQ(t4.peak_of("tf32_tensor"), 0.0) << "Turing has no TF32";
  EXPECT_EQ(t4.peak_of("bfloat16_tensor"), 0.0) << "Turing has no bfloat16 tensor cores";
  EXPECT_STREQ(gemm_math(t4, Dtype::BFloat16), "bfloat16");
  EXPECT_STREQ(gemm_math(h100(), Dtype::BFloat16), "bfloat16_tensor");
  EXPECT_STREQ(gemm_math(h100(), Dtype::Float32), "float32") << "no TF32 unless asked, as PyTorch";
  // PCIe gen5 x16: 3.94 GB/s per lane and direction; gen3: 0.985.
  EXPECT_NEAR(h100().pcie_bandwidth(), 63.0e9, 0.1e9);
  EXPECT_NEAR(t4.pcie_bandwidth(), 15.8e9, 0.1e9);
}

TEST(PerfModel, AnUnknownModelNamesTheKnownOnes) {
  try {
    load_model("rtx9090");
    FAIL() << "expected a ValueError";
  } catch (const tiny::ValueError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("TINY_EMULATED_GPU_MODEL=\"rtx9090\""), std::string::npos) << what;
    EXPECT_NE(what.find("h100-sxm, h200, a100-sxm, l4, t4"), std::string::npos) << what;
  }
}

TEST(PerfModel, AMalformedModelFileIsNamedWithTheField) {
  tiny_test::TempDir dir;
  const std::string path = dir.path() + "/mine.json";
  const auto write = [&](const std::string& text) { std::ofstream(path) << text; };
  write("{ not json");
  EXPECT_THROW_WITH(load_model(path), tiny::ValueError, "is not valid JSON");
  write(R"({"models": {"a": {}, "b": {}}})");
  EXPECT_THROW_WITH(load_model(path), tiny::ValueError, "exactly one model");
  write(R"({"models": {"mine": {"display_name": "Mine"}}})");
  EXPECT_THROW_WITH(load_model(path), tiny::ValueError, "has no \"source\"");
  // A whole model, with the built-in defaults copied in, loads; a bad field is named.
  nlohmann::json file;
  std::ifstream(std::string(TINY_SOURCE_DIR) + "/framework/src/gpu/model/gpu_models.json") >> file;
  nlohmann::json mine = {{"defaults", file["defaults"]}, {"models", {{"mine", file["models"]["l4"]}}}};
  write(mine.dump());
  EXPECT_EQ(load_model(path).sm_count, 58);
  mine["models"]["mine"]["sm_count"] = "many";
  write(mine.dump());
  EXPECT_THROW_WITH(load_model(path), tiny::ValueError, "\"sm_count\" is \"many\"");
  mine["models"]["mine"]["sm_count"] = 58;
  mine["models"]["mine"]["gemm_tiles_not_for_aligned_tensor_cores"] = {"16x16"};
  write(mine.dump());
  EXPECT_THROW_WITH(load_model(path), tiny::ValueError, "names \"16x16\", which is not a key of \"gemm_tile_efficiency\"");
  EXPECT_THROW_WITH(load_model(dir.path() + "/missing.json"), tiny::ValueError, "cannot read this file");
}

// ---------------------------------------------------------------- costs, by hand

TEST(PerfModel, PointwiseKernelsAreBoundByBytesOrTheMinimumTime) {
  const DeviceModel& m = h100();
  KernelCost add;
  add.bytes = 12 * (int64_t{1} << 24);  // a + b -> out, 16M float32
  const double expected = add.bytes / (m.memory_bandwidth * m.pointwise_efficiency) * 1e9;
  EXPECT_NEAR(kernel_ns(m, add), expected, 1.0);
  KernelCost tiny_op;
  tiny_op.bytes = 12;
  EXPECT_EQ(kernel_ns(m, tiny_op), m.min_kernel_ns) << "a one-element op costs the shortest kernel";
  KernelCost optimizer = add;
  optimizer.work = Work::optimizer;
  EXPECT_LT(kernel_ns(m, optimizer), kernel_ns(m, add)) << "the fused optimizer reaches more of the bandwidth";
  EXPECT_EQ(element_bytes(Dtype::BFloat16), 4) << "one element per thread: 16 bits cost a 32-bit access";
  EXPECT_EQ(element_bytes(Dtype::Float64), 8);
}


// tiny's fill kernel (zero_) up to 16M elements runs one thread per element
// and the SMs retire threads at a fixed rate (the H100 wrote 16M floats in
// 49 us, 1.4 TB/s); past the grid cap each thread loops, and the bytes bound
// it (64M floats in 85 us, 3.2 TB/s): on a real H100 and H200 alike
// (data/gpu_measurements/h100-sxm-2026-11-27-kernels.json).
TEST(PerfModel, OneElementPerThreadKernelsAreBoundByTheThreadRateUpToTheGridCap) {
  const DeviceModel& m = h100();
  const double rate = m.threads_per_sm_cycle * 132 * 1980e6;  // threads per second, from the datasheet's SMs and clock
  const auto fill = [](int64_t n) {
    KernelCost c;
    c.work = Work::memset;
    c.bytes = 4 * n;
    c.threads = n;
    return c;
  };
  const int64_t cap = int64_t{1} << 24;
  EXPECT_EQ(kMaxKernelThreads, cap) << "gpu/cuda/launch.cuh: 65536 blocks of 256";
  EXPECT_NEAR(kernel_ns(m, fill(cap)), cap / rate * 1e9, 1.0) << "thread-bound: 16M threads";
  EXPECT_NEAR(kernel_ns(m, fill(2 * cap)), cap / rate * 1e9, 1.0) << "still 16M threads, each writing two floats";
  const int64_t big = 4 * cap;
  EXPECT_NEAR(kernel_ns(m, fill(big)), 4.0 * big / (m.memory_bandwidth * m.memset_efficiency) * 1e9, 1.0)
      << "bandwidth-bound past the cap";
  KernelCost relu = fill(cap);
  relu.work = Work::pointwise;
  relu.bytes = 8 * cap;  // reads and writes a float per thread: the bytes bound it
  EXPECT_NEAR(kernel_ns(m, relu), relu.bytes / (m.memory_bandwidth * m.pointwise_efficiency) * 1e9, 1.0);
  KernelCost untracked = fill(cap);
  untracked.threads = 0;  // cudaMemsetAsync: no thread term
  EXPECT_LT(kernel_ns(m, untracked), kernel_ns(m, fill(cap)));
  EXPECT_NEAR(load_model("t4").thread_rate(), rate * (40 * 1590.0) / (132 * 1980.0), rate * 1e-9)
      << "the thread rate scales with the SMs and the clock (a T4: 40 SMs at 1590 MHz)";
}
TEST(PerfModel, LargeGemmsRunInWavesOfTilesOverTheSms) {
  const DeviceModel& m = h100();
  // 8192^3 bfloat16: 64 x 32 tiles of 128x256... the model picks the best tile;
  // whichever it is, the time is within the roofline and above the peak.
  const KernelCost c = gemm_cost(Dtype::BFloat16, 8192, 8192, 8192, false);
  const double at_peak = c.flops / m.peak_of("bfloat16_tensor") * 1e9;
  const int64_t t = kernel_ns(m, c);
  EXPECT_GT(t, at_peak);
  EXPECT_LT(t, at_peak / 0.6);
  // Wave quantization: 132 tiles of 128x128 fill one wave; 133 need two.
  DeviceModel one_tile = m;
  one_tile.tiles = {Tile{128, 128, 1.0}};
  one_tile.gemm_k_overhead = 0;
  one_tile.gemm_fixed_ns = 0;
  one_tile.memory_bandwidth = 1e18;  // the arithmetic alone
  const int64_t k = 64;  // split-K needs k / split >= 64: none here
  const int64_t one_wave = kernel_ns(one_tile, gemm_cost(Dtype::Float32, 128 * 132, 128, k, false));
  const int64_t two_waves = kernel_ns(one_tile, gemm_cost(Dtype::Float32, 128 * 133, 128, k, false));
  const double per_tile = 2.0 * 128 * 128 * k / (m.peak_of("float32") / m.sm_count) * 1e9;
  EXPECT_NEAR(one_wave, std::max<double>(per_tile, m.min_kernel_ns), 2.0);
  EXPECT_NEAR(two_waves, std::max<double>(2 * per_tile, m.min_kernel_ns), 2.0);
}

// cuBLAS's float32 products (SIMT units) with a small output split K over the
// SMs and sum the partial products in a second kernel; a large output, or a
// tensor-core product, runs one kernel (cost.cpp, from the H100's kernel trace).
TEST(PerfModel, SmallFloat32GemmsSplitKAndPayForASecondKernel) {
  DeviceModel m = h100();
  m.tiles = {Tile{64, 64, 1.0}};
  m.gemm_k_overhead = 0;
  m.gemm_fixed_ns = 0;
  m.memory_bandwidth = 1e18;  // the arithmetic and the second kernel's start alone
  ASSERT_GE(m.gemm_split_k_max_output, 64 * 64);
  const double k_step = 2.0 * 64 * 64 / (m.peak_of("float32") / m.sm_count) * 1e9;  // one tile, one k, in ns
  const auto ns = [&](Dtype dtype, int64_t rows, int64_t cols, int64_t k) {
    return static_cast<double>(kernel_ns(m, gemm_cost(dtype, rows, cols, k, false)));
  };
  // One 64x64 tile, K = 4096: split 32 ways (4096 / 32 = 128 >= 64) onto 32 SMs, then the reduction kernel.
  EXPECT_NEAR(ns(Dtype::Float32, 64, 64, 4096), 128 * k_step + m.min_kernel_ns, 2.0);
  // K = 10 is too short to split, but not a multiple of 4: cuBLASLt's unaligned kernel still ends in a reduction.
  EXPECT_NEAR(ns(Dtype::Float32, 64, 64, 10), 10 * k_step + m.min_kernel_ns, 2.0);
  // K = 64, aligned: not worth splitting, one kernel.
  EXPECT_NEAR(ns(Dtype::Float32, 64, 64, 64), std::max<double>(64 * k_step, m.min_kernel_ns), 2.0);
  // A large output (12 x 12 = 144 tiles, two waves over 132 SMs, 589824 elements): one kernel, K whole.
  ASSERT_LT(m.gemm_split_k_max_output, 768 * 768);
  EXPECT_NEAR(ns(Dtype::Float32, 768, 768, 4096), 2 * 4096 * k_step, 2.0);
  // bfloat16 on the tensor cores: one kernel, however small the output.
  const double bf16_k_step = 2.0 * 64 * 64 / (m.peak_of("bfloat16_tensor") / m.sm_count) * 1e9;
  EXPECT_NEAR(ns(Dtype::BFloat16, 64, 64, 4096), std::max<double>(4096 * bf16_k_step, m.min_kernel_ns), 2.0);
}

// The 32x32 tile is cuBLAS's only on the CUDA cores (float32) and in its WMMA
// kernels for unaligned float16/bfloat16; an aligned bfloat16 product of the
// same shape runs a larger tile (the H100's trace, cost.cpp).
TEST(PerfModel, SmallTilesServeFloat32AndUnalignedTensorCoreProductsOnly) {
  DeviceModel m = h100();
  m.tiles = {Tile{64, 64, 1.0}, Tile{32, 32, 1.0, /*aligned_tensor_cores=*/false}};
  m.gemm_k_overhead = 0;
  m.gemm_fixed_ns = 0;
  m.min_kernel_ns = 0;
  m.memory_bandwidth = 1e18;
  const double bf16_sm = m.peak_of("bfloat16_tensor") / m.sm_count, fp32_sm = m.peak_of("float32") / m.sm_count;
  const auto ns = [&](Dtype dtype, int64_t k) {
    return static_cast<double>(kernel_ns(m, gemm_cost(dtype, 32, 32, k, false)));
  };
  // A 32x32 output, K = 64 (no split-K: float32 needs K > 64 or an unaligned dimension).
  EXPECT_NEAR(ns(Dtype::BFloat16, 64), 2.0 * 64 * 64 * 64 / bf16_sm * 1e9, 1.0) << "aligned: a 64x64 tile";
  EXPECT_NEAR(ns(Dtype::BFloat16, 60), 2.0 * 32 * 32 * 60 / (bf16_sm * m.unaligned_tensor_core_efficiency) * 1e9,
              1.0)
      << "K = 60 is not a multiple of 8: the 32x32 WMMA tile, at the unaligned rate";
  EXPECT_NEAR(ns(Dtype::Float32, 64), 2.0 * 32 * 32 * 64 / fp32_sm * 1e9, 1.0) << "float32: the 32x32 tile";
}

TEST(PerfModel, TensorCoresOnlyWhereTheGpuAndTheShapeAllowThem) {
  const DeviceModel& m = h100();
  const int64_t fp32 = kernel_ns(m, gemm_cost(Dtype::Float32, 4096, 4096, 4096, false));
  const int64_t bf16 = kernel_ns(m, gemm_cost(Dtype::BFloat16, 4096, 4096, 4096, false));
  const int64_t bf16_unaligned = kernel_ns(m, gemm_cost(Dtype::BFloat16, 4095, 4095, 4095, false));
  EXPECT_GT(fp32, 10 * bf16) << "H100: 67 TFLOP/s float32 against 989 on the tensor cores";
  EXPECT_GT(bf16_unaligned, 3 * bf16) << "a dimension that is not a multiple of 8 takes the slow kernels";
  const DeviceModel t4 = load_model("t4");
  const int64_t t4_fp16 = kernel_ns(t4, gemm_cost(Dtype::Float16, 4096, 4096, 4096, false));
  const int64_t t4_bf16 = kernel_ns(t4, gemm_cost(Dtype::BFloat16, 4096, 4096, 4096, false));
  EXPECT_GT(t4_bf16, 4 * t4_fp16) << "a T4 has float16 tensor cores but no bfloat16 ones";
}

TEST(PerfModel, CopiesUseTheirLink) {
  const DeviceModel& m = h100();
  const int64_t mib256 = int64_t{256} << 20;
  const int64_t pinned = copy_ns(m, CopyKind::HostToDevice, true, mib256);
  EXPECT_NEAR(pinned, m.copy_fixed_ns + mib256 / (m.pcie_bandwidth() * m.pinned_efficiency) * 1e9, 2.0);
  const int64_t pageable = copy_ns(m, CopyKind::HostToDevice, false, mib256);
  EXPECT_NEAR(pageable, m.copy_fixed_ns + m.pageable_to_device_fixed_ns + mib256 / m.pageable_to_device * 1e9, 2.0);
  EXPECT_GT(pageable, 3 * pinned) << "pageable memory is staged by the host";
  const int64_t nvlink = copy_ns(m, CopyKind::DeviceToDevice, true, mib256, /*peer=*/true);
  EXPECT_NEAR(nvlink, m.copy_fixed_ns + mib256 / (450e9 * m.pinned_efficiency) * 1e9, 2.0);
  const int64_t t4_peer = copy_ns(load_model("t4"), CopyKind::DeviceToDevice, true, mib256, true);
  EXPECT_GT(t4_peer, 20 * nvlink) << "a T4 has no NVLink: peers copy over PCIe gen3";
  // Device to device: a kernel that reads and writes every byte.
  KernelCost twice;
  twice.bytes = 2 * mib256;
  EXPECT_EQ(copy_ns(m, CopyKind::DeviceToDevice, false, mib256), kernel_ns(m, twice));
}

// ---------------------------------------------------------------- the schedule

TEST(PerfModel, AnEngineFillsGapsAndNeverOverlaps) {
  Engine e;
  EXPECT_EQ(e.place(100, 50).start, 100);   // [100, 150)
  EXPECT_EQ(e.place(300, 50).start, 300);   // [300, 350)
  EXPECT_EQ(e.place(120, 100).start, 150);  // the gap [150, 300) holds it: [150, 250)
  EXPECT_EQ(e.place(200, 60).start, 350);   // [250, 300) is too short: after 350
  EXPECT_EQ(e.place(0, 100).start, 0);      // before everything
  EXPECT_EQ(e.busy_total(), 50 + 50 + 100 + 60 + 100);
  EXPECT_EQ(e.busy_between(100, 300), 50 + 100);
  EXPECT_EQ(e.last_end(), 410);
}

TEST(PerfModel, AnEngineForgetsOldSpansButNeverPlacesWorkBeforeThem) {
  Engine e;
  const int64_t n = 70000;  // past the engine's limit of 65536 spans kept
  for (int64_t i = 0; i < n; ++i) e.place(2 * i, 1);
  EXPECT_EQ(e.busy_total(), n);
  EXPECT_NEAR(static_cast<double>(e.busy_between(0, 2 * n)), static_cast<double>(n), 2.0);
  const Span late = e.place(0, 1);  // the gaps before the forgotten spans are gone
  EXPECT_GT(late.start, n / 2) << "it would have fitted at 1";
  EXPECT_EQ(e.busy_between(late.start, late.end), 1) << "and it overlaps nothing";
}

TEST(PerfModel, ThreadsStartAtTheirCallersTimeAndTheCallerJoinsTheLatest) {
  host_advance(1000);
  const int64_t start = host_now();
  HostClockFork fork;
  std::vector<std::thread> threads;
  for (int64_t spend : {300, 700}) {
    threads.emplace_back([&fork, spend, start] {
      fork.enter();
      EXPECT_EQ(host_now(), start);
      host_advance(spend);
      fork.leave();
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(host_now(), start) << "the caller has not joined the clocks yet";
  fork.join();
  EXPECT_EQ(host_now(), start + 700);
}

// A std::thread of the program's own cannot show the model its parent: it
// starts at the latest time any thread had reached, never at 0, where the GPU
// work it queues would land in the GPU's idle past (a student's trial made a
// timed step take 0.001 ms so: the caller polled its clock far ahead, then
// queued the step from a new thread).
TEST(PerfModel, AThreadOfTheProgramsOwnStartsAtTheLatestTimeNotAtZero) {
  const tiny::Device gpu("cuda:0");
  const tiny::Tensor x = tiny::ones({512, 512}).to(gpu);
  tiny::cuda::synchronize(0);
  const tiny::cuda::Stream stream = tiny::cuda::current_stream(0);
  const double polled_from = tiny::cuda::host_time();
  while (tiny::cuda::host_time() - polled_from < 0.01) (void)stream.query();  // the GPU idle for 10 ms
  const double caller = tiny::cuda::host_time();
  double thread_start = -1;
  std::thread t([&] {
    thread_start = tiny::cuda::host_time();
    (void)tiny::matmul(x, x);
  });
  t.join();
  tiny::cuda::synchronize(0);
  EXPECT_GE(thread_start, caller) << "the new thread's clock started before the time its caller had reached";
  EXPECT_GT(tiny::cuda::host_time(), caller)
      << "the product ran in the GPU's past, before the caller's time: waiting for it cost nothing";
}

// A data set whose every batch costs the host `load_ms` of modelled time (a
// transform, declared), and, really, a random sleep of up to 2 ms: the modelled
// times must not depend on which worker thread really loaded what, or when.
class SlowDataset : public tiny::data::Dataset {
 public:
  explicit SlowDataset(int64_t n, double load_ms) : n_(n), load_ns_(static_cast<int64_t>(load_ms * 1e6)) {}
  int64_t size() const override { return n_; }
  tiny::data::Example get(int64_t index) const override {
    std::this_thread::sleep_for(std::chrono::microseconds(std::rand() % 2000));
    return {tiny::full({1}, static_cast<double>(index)), tiny::full({}, 0.0)};
  }
  int64_t modelled_load_ns(const std::vector<int64_t>& indices) const override {
    (void)indices;
    return load_ns_;
  }

 private:
  int64_t n_, load_ns_;
};

// One epoch of 4 batches of 2, the loop spending `step_ms` per batch: its modelled length in ms.
double epoch_ms(int num_workers, int prefetch_factor, double load_ms, double step_ms) {
  tiny::data::DataLoaderOptions options;
  options.batch_size = 2;
  options.num_workers = num_workers;
  options.prefetch_factor = prefetch_factor;
  tiny::data::DataLoader loader(std::make_shared<SlowDataset>(8, load_ms), options);
  const int64_t start = host_now();
  int64_t batches = 0;
  for (const tiny::data::Batch& batch : loader) {
    EXPECT_EQ(batch.data.size(0), 2);
    host_advance(static_cast<int64_t>(step_ms * 1e6));
    ++batches;
  }
  EXPECT_EQ(batches, 4);
  return static_cast<double>(host_now() - start) / 1e6;
}

TEST(PerfModel, DataLoaderWorkersTakeBatchesInTurnAndTheLoopWaitsForThem) {
  // Batches cost 10 ms to load, the loop 1 ms per batch. Worked by hand:
  // no workers: the loop loads each batch itself, 4 x (10 + 1).
  EXPECT_DOUBLE_EQ(epoch_ms(0, 2, 10, 1), 44);
  // 2 workers: batches 0 and 1 ready at 10, 2 and 3 at 20; the loop takes 0 at
  // 10, 1 at 11, waits for 2 until 20, takes 3 at 21, ends at 22.
  EXPECT_DOUBLE_EQ(epoch_ms(2, 2, 10, 1), 22);
  // 4 workers: every batch ready at 10; then the loop alone, 4 x 1.
  EXPECT_DOUBLE_EQ(epoch_ms(4, 2, 10, 1), 14);
  // A slow loop hides loading: 1 worker, loading 1 ms, the loop 10 ms per batch:
  // only the first batch is waited for.
  EXPECT_DOUBLE_EQ(epoch_ms(1, 2, 1, 10), 41);
  // prefetch_factor 1, one worker: batch k + 1 is handed out when batch k is
  // taken, so the worker starts it at 10, 20, 30: taken at 10, 20, 30, 40 (+1).
  EXPECT_DOUBLE_EQ(epoch_ms(1, 1, 10, 1), 41);
  // Free data sets (the default) cost nothing in modelled time, with or without workers.
  EXPECT_DOUBLE_EQ(epoch_ms(2, 2, 0, 1), 4);
}

// Runs `program` on a fresh device timeline and returns the host time it took.
int64_t host_ns(const DeviceModel& m, const std::function<void(DeviceTimeline&)>& program) {
  DeviceTimeline t(m);
  const int64_t start = host_now();
  program(t);
  return host_now() - start;
}

KernelCost bytes_cost(int64_t bytes, Work work = Work::pointwise) {
  KernelCost c;
  c.work = work;
  c.bytes = bytes;
  return c;
}

TEST(PerfModel, ACopyOverlapsAKernelOnlyFromAnotherStream) {
  const DeviceModel& m = h100();
  const KernelCost gemm = gemm_cost(Dtype::Float32, 4096, 4096, 4096, false);
  const int64_t mib256 = int64_t{256} << 20;
  const int64_t same = host_ns(m, [&](DeviceTimeline& t) {
    t.launch(0, gemm);
    t.copy(0, CopyKind::HostToDevice, true, mib256);
    t.synchronize_device();
  });
  const int64_t side = host_ns(m, [&](DeviceTimeline& t) {
    t.launch(0, gemm);
    t.copy(1, CopyKind::HostToDevice, true, mib256);
    t.synchronize_device();
  });
  const int64_t k = kernel_ns(m, gemm), c = copy_ns(m, CopyKind::HostToDevice, true, mib256);
  EXPECT_GE(same, k + c) << "on one stream the copy waits for the product";
  // Beside the longer of the two, only the host's launches, one latency and the synchronize.
  const int64_t fixed = m.host_launch_ns + m.host_gemm_ns + m.host_copy_ns + m.launch_latency_ns + m.sync_ns;
  EXPECT_LE(side, std::max(k, c) + fixed) << "on a side stream the copy engine runs beside the compute engine";
}

TEST(PerfModel, KernelsOfTwoStreamsShareTheComputeEngine) {
  const DeviceModel& m = h100();
  const KernelCost big = bytes_cost(int64_t{1} << 30);
  DeviceTimeline t(m);
  const Span a = t.launch(0, big);
  const Span b = t.launch(1, big);
  EXPECT_GE(b.start, a.end) << "concurrent kernels are not modelled: one engine";
}

TEST(PerfModel, APageableCopyHoldsTheHostAndASynchronizeWaitsForTheDevice) {
  const DeviceModel& m = h100();
  const int64_t mib16 = int64_t{16} << 20;
  DeviceTimeline t(m);
  const int64_t start = host_now();
  const Span pinned = t.copy(0, CopyKind::HostToDevice, true, mib16);
  EXPECT_LT(host_now(), pinned.end) << "a pinned copy frees the host at once";
  const Span pageable = t.copy(0, CopyKind::HostToDevice, false, mib16);
  EXPECT_EQ(host_now(), pageable.end) << "a pageable copy holds the host until it is done";
  const Span kernel = t.launch(0, bytes_cost(int64_t{1} << 30));
  EXPECT_LT(host_now(), kernel.end);
  t.synchronize(0);
  EXPECT_EQ(host_now(), kernel.end + m.sync_ns);
  EXPECT_GT(host_now(), start);
  // Events: a wait on another stream orders it after the event.
  const int64_t event = t.record_event(0);
  t.wait_event(2, event + 1000);
  const Span after = t.launch(2, bytes_cost(4));
  EXPECT_GE(after.start, event + 1000);
}

TEST(PerfModel, ASmallModelIsLaunchBoundAndHidesTheLatency) {
  const DeviceModel& m = h100();
  // 100 one-element ops: the host's launches, not the GPU, set the pace.
  const int64_t ns = host_ns(m, [&](DeviceTimeline& t) {
    for (int i = 0; i < 100; ++i) t.launch(0, bytes_cost(12));
    t.synchronize(0);
  });
  EXPECT_NEAR(ns, 100 * m.host_launch_ns + m.launch_latency_ns + m.min_kernel_ns + m.sync_ns, 1.0);
}

// The schedule is computed as work is issued, never from the workers' clocks:
// the same program takes the same modelled time in every execution mode, with
// any number of threads, and however slowly this machine runs it.
// Pinned batches copied without waiting, as a loader with pin_memory feeds a
// loop: the pinned allocator asks which earlier blocks' copies have run each
// time, and how many have depends on how far the emulator's workers got (in
// deferred mode none, in blocking mode all). Its questions must cost nothing in
// modelled time, or a loop's time would grow with its number of steps and
// depend on the host's speed.
TEST(PerfModel, PinnedAllocationsCostTheSameHostTimeWhateverTheWorkersDid) {
  using Mode = tiny::gpu::EmulatedRuntime::Mode;
  const tiny::Tensor batch = tiny::ones({32, 784});
  std::vector<std::vector<int64_t>> per_mode;  // the host's time of each step, per mode
  for (Mode mode : {Mode::deferred, Mode::blocking, Mode::threaded}) {
    tiny_test::ModeGuard guard(mode);
    tiny::cuda::synchronize(0);
    std::vector<int64_t> steps;
    for (int i = 0; i < 30; ++i) {
      const int64_t start = host_now();
      const tiny::Tensor pinned = batch.pin_memory();
      const tiny::Tensor on_gpu = pinned.to(tiny::Device("cuda:0"), /*non_blocking=*/true);
      on_gpu.mul_(2);
      steps.push_back(host_now() - start);
    }
    tiny::cuda::synchronize(0);
    for (int64_t t : steps) EXPECT_EQ(t, steps[0]) << "every step costs the host the same: a copy and a launch";
    per_mode.push_back(steps);
  }
  EXPECT_EQ(per_mode[0], per_mode[1]) << "deferred and blocking modes agree";
  EXPECT_EQ(per_mode[0], per_mode[2]) << "deferred and threaded modes agree";
}

TEST(PerfModel, ModelledTimeIsTheSameInEveryModeAndThreadCount) {
  using Mode = tiny::gpu::EmulatedRuntime::Mode;
  const bench::TrainingCase& c = bench::training_cases()[0];  // A: dropout, Adam, three layers
  std::vector<int64_t> times;  // integer nanoseconds, as the model keeps them
  for (Mode mode : {Mode::threaded, Mode::blocking, Mode::deferred}) {
    for (int threads : {1, 2, 3}) {
      tiny_test::ModeGuard guard(mode);
      tiny::set_num_threads(threads);
      bench::TinyTrainer t(c, tiny::Device("cuda:0"));
      t.step();
      tiny::cuda::synchronize(0);
      const int64_t start = host_now();
      for (int i = 0; i < 2; ++i) {
        t.step();
        tiny::cuda::synchronize(0);
      }
      times.push_back(host_now() - start);
    }
  }
  tiny::set_num_threads(2);
  for (int64_t t : times) EXPECT_EQ(t, times.front());
  EXPECT_GT(times.front(), 0);
}

// The allocators poll their blocks' events on every free to find the ones they
// may reuse; how many are still pending depends on how far the workers really
// got (none ran in deferred mode, all in blocking mode). What the polling costs
// must not change the modelled time: here it made a loop of pinned copies
// slower in deferred mode than in blocking mode, and a threaded run depend on
// this machine's load.
TEST(PerfModel, PinnedCopiesTakeTheSameTimeInEveryMode) {
  using Mode = tiny::gpu::EmulatedRuntime::Mode;
  std::vector<int64_t> times;
  for (Mode mode : {Mode::threaded, Mode::blocking, Mode::deferred}) {
    tiny_test::ModeGuard guard(mode);
    tiny::cuda::synchronize(0);
    const int64_t start = host_now();
    for (int i = 0; i < 30; ++i) {
      const tiny::Tensor batch = tiny::ones({256, 64}).pin_memory();  // freed at the end of the step
      batch.to(tiny::Device("cuda:0"), /*non_blocking=*/true).sum();
    }
    tiny::cuda::synchronize(0);
    times.push_back(host_now() - start);
  }
  for (int64_t t : times) EXPECT_EQ(t, times.front());
}

// ---------------------------------------------------------------- calibration

// The model's prediction of one measured row (microseconds), or nullopt with
// the reason when the model does not predict it.
struct Prediction {
  std::optional<double> us;
  std::string why_not;
};

std::vector<std::string> split(const std::string& name) {
  std::vector<std::string> parts;
  std::stringstream in(name);
  for (std::string part; std::getline(in, part, '/');) parts.push_back(part);
  return parts;
}

Dtype dtype_named(const std::string& s) {
  return s == "float16" ? Dtype::Float16 : s == "bfloat16" ? Dtype::BFloat16 : Dtype::Float32;
}

// The bytes and kind of work of the calibration bench's Kernel/<op>/<n> rows,
// as tiny's kernels move them (bench/gpu/bench_calibration.cpp).
// Pointwise kernels (zero_ and fill_ too: both are tiny's fill kernel) run one
// thread per element.
std::optional<KernelCost> op_cost(const std::string& op, int64_t n) {
  const int64_t f = 4;
  const auto pointwise = [n](int64_t bytes, Work work = Work::pointwise) {
    KernelCost c = bytes_cost(bytes, work);
    c.threads = n;
    return c;
  };
  if (op == "add") return pointwise(3 * f * n);
  if (op == "relu" || op == "clone") return pointwise(2 * f * n);
  if (op == "to_bf16") return pointwise((f + element_bytes(Dtype::BFloat16)) * n);
  if (op == "zero_" || op == "fill_") return pointwise(f * n, Work::memset);
  if (op == "adam") return bytes_cost(7 * f * n, Work::optimizer);
  return std::nullopt;
}

Prediction predict(const DeviceModel& m, const std::string& row) {
  const std::vector<std::string> p = split(row);
  const auto us = [](int64_t ns) { return Prediction{ns * 1e-3, ""}; };
  const auto host = [&](const std::function<void(DeviceTimeline&)>& program) { return us(host_ns(m, program)); };
  const KernelCost one = bytes_cost(12);
  if (p[0] == "Kernel" || p[0] == "KernelCold") {  // the model has no cache: the same prediction for both
    if (p[1] == "sum") {
      return {std::nullopt, "measured before the split reduction fixed tiny's CUDA sum (101 ms then, 112 us after, for "
                            "64M floats: data/gpu_measurements/h100-sxm-2026-11-25-sum-after-fix.json)"};
    }
    return us(kernel_ns(m, *op_cost(p[1], std::stoll(p[2]))));
  }
  if (p[0] == "Gemm") {
    return us(kernel_ns(m, gemm_cost(dtype_named(p[1]), std::stoll(p[2]), std::stoll(p[3]), std::stoll(p[4]), false)));
  }
  if (p[0] == "Sync") return host([&](DeviceTimeline& t) { t.synchronize(0); });
  if (p[0] == "OpSync") return host([&](DeviceTimeline& t) { t.launch(0, one), t.synchronize(0); });
  if (p[0] == "Item") {
    return host([&](DeviceTimeline& t) {
      t.launch(0, one);
      t.copy(0, CopyKind::DeviceToHost, false, 4);
      t.synchronize(0);  // a copy into pageable memory waits for its stream
    });
  }
  if (p[0] == "LaunchRate") {
    return host([&](DeviceTimeline& t) {
      for (int i = 0; i < std::stoi(p[2]); ++i) t.launch(0, one);
      t.synchronize(0);
    });
  }
  if (p[0] == "MatmulRate") {  // 64x64 products queued back to back, then a synchronize
    return host([&](DeviceTimeline& t) {
      for (int i = 0; i < std::stoi(p[2]); ++i) t.launch(0, gemm_cost(dtype_named(p[1]), 64, 64, 64, false));
      t.synchronize(0);
    });
  }
  if (p[0] == "GemmKernelRate") return {std::nullopt, "tiny's cuBLAS call without its tensor op: no op of the model"};
  if (p[0] == "MatmulSync") {
    const int64_t n = std::stoll(p[2]);
    return host([&](DeviceTimeline& t) { t.launch(0, gemm_cost(dtype_named(p[1]), n, n, n, false)), t.synchronize(0); });
  }
  if (p[0] == "CopyToGpu" || p[0] == "CopyToCpu") {
    const bool pinned = p[1] == "pinned";
    const CopyKind kind = p[0] == "CopyToGpu" ? CopyKind::HostToDevice : CopyKind::DeviceToHost;
    return host([&](DeviceTimeline& t) {
      t.copy(0, kind, pinned, std::stoll(p[2]) * 1024);
      t.synchronize(0);
    });
  }
  if (p[0] == "PageableAfterKernel") {
    const int64_t n = std::stoll(p[1]);
    return host([&](DeviceTimeline& t) {
      t.launch(0, gemm_cost(Dtype::Float32, n, n, n, false));
      t.copy(0, CopyKind::DeviceToHost, false, 4);
      t.synchronize(0);
    });
  }
  if (p[0] == "Overlap") {
    return host([&](DeviceTimeline& t) {
      t.launch(0, gemm_cost(Dtype::Float32, 4096, 4096, 4096, false));
      t.copy(p[1] == "side_stream" ? 1 : 0, CopyKind::HostToDevice, true, int64_t{256} << 20);
      t.synchronize_device();
    });
  }
  if (p[0] == "TinyStepCuda" || p[0] == "AmpStep") {
    // The real step, run on the emulated cuda:0 (whose model is the one the
    // calibration reads), each step ending in a synchronize as the benchmark's.
    if (tiny::cuda::get_device_properties(0).modelled_gpu != m.display_name) {
      return {std::nullopt, "the emulated GPU models another GPU here (TINY_EMULATED_GPU_MODEL)"};
    }
    std::function<void()> step;
    std::shared_ptr<void> keep;
    if (p[0] == "TinyStepCuda") {
      const char name = p[1][0];
      for (const bench::TrainingCase& c : bench::training_cases()) {
        if (c.name == name) {
          auto t = std::make_shared<bench::TinyTrainer>(c, tiny::Device("cuda:0"));
          step = [t] { t->step(); };
          keep = t;
        }
      }
    } else {
      auto t = std::make_shared<bench::AmpTrainer>(dtype_named(p[1]), tiny::Device("cuda:0"));
      step = [t] { t->step(); };
      keep = t;
    }
    if (!step) return {std::nullopt, "no such training case"};
    for (int i = 0; i < 3; ++i) step();  // optimizer state, allocator cache
    tiny::cuda::synchronize(0);
    const double start = tiny::cuda::host_time();
    constexpr int kSteps = 3;
    for (int i = 0; i < kSteps; ++i) {
      step();
      tiny::cuda::synchronize(0);
    }
    return {(tiny::cuda::host_time() - start) / kSteps * 1e6, ""};
  }
  return {std::nullopt, "no prediction for this kind of row"};
}

// The model's error on one committed measurement file: every tiny row it
// predicts, printed with the measured median and [min, max]. `fitted` are the
// rows the parameters were set from (on the H100): on another GPU they are
// predictions too.
struct CalibrationSummary {
  int predicted_rows = 0, over_20 = 0;
  double predicted_max = 0, predicted_mean = 0, fitted_max = 0;
  std::string line;  // the summary printed last
};

// docs/performance_model.md quotes each table's summary line: it must be the
// one the model gives today (the lessons' boxes quote the page: docs.emulator_boxes).
void expect_quoted_by_the_model_page(const std::string& line) {
  std::ifstream in(std::string(TINY_SOURCE_DIR) + "/docs/performance_model.md");
  const std::string page((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_NE(page.find("\n    " + line + "\n"), std::string::npos)
      << "docs/performance_model.md should quote, indented by four spaces:\n    " << line;
}

CalibrationSummary calibration_table(const std::string& file, const std::set<std::string>& fitted) {
  const std::string path = std::string(TINY_SOURCE_DIR) + "/data/gpu_measurements/" + file;
  nlohmann::json measured;
  std::ifstream(path) >> measured;
  EXPECT_TRUE(measured.contains("rows")) << path;
  if (!measured.contains("rows")) return {};
  const DeviceModel m = load_model(measured["model"].get<std::string>());

  struct Result {
    std::string row;
    double median, min, max, predicted, error;
  };
  std::vector<Result> results;
  std::vector<std::string> not_predicted;
  for (const auto& [row, r] : measured["rows"].items()) {
    if (row.rfind("tiny/", 0) != 0) continue;  // the PyTorch rows are the peer's, not tiny's
    const Prediction p = predict(m, row.substr(5));
    if (!p.us) {
      not_predicted.push_back(row + ": " + p.why_not);
      continue;
    }
    const double median = r["median"];
    results.push_back({row, median, r["min"], r["max"], *p.us, (*p.us - median) / median});
  }

  std::printf("%s (%s)\n%-44s %8s %12s %22s %12s %8s\n", file.c_str(), m.display_name.c_str(), "row (tiny, us)", "",
              "measured", "[min, max]", "modelled", "error");
  CalibrationSummary sum;
  for (const Result& r : results) {
    const bool is_fitted = fitted.count(r.row) > 0;
    std::printf("%-44s %8s %12.2f [%9.2f, %9.2f] %12.2f %+7.1f%%\n", r.row.c_str(), is_fitted ? "fitted" : "predicted",
                r.median, r.min, r.max, r.predicted, 100 * r.error);
    if (is_fitted) {
      sum.fitted_max = std::max(sum.fitted_max, std::abs(r.error));
    } else {
      sum.predicted_max = std::max(sum.predicted_max, std::abs(r.error));
      sum.predicted_mean += std::abs(r.error);
      ++sum.predicted_rows;
      sum.over_20 += std::abs(r.error) > 0.20;
    }
  }
  if (sum.predicted_rows > 0) sum.predicted_mean /= sum.predicted_rows;
  for (const std::string& row : not_predicted) std::printf("not predicted: %s\n", row.c_str());
  char line[200];
  std::snprintf(line, sizeof line,
                "predicted rows: %d, max error %.1f%%, mean error %.1f%%, %d over 20%%; fitted rows: max error %.1f%%",
                sum.predicted_rows, 100 * sum.predicted_max, 100 * sum.predicted_mean, sum.over_20,
                100 * sum.fitted_max);
  sum.line = line;
  std::printf("%s\n", line);
  return sum;
}

TEST(PerfModel, Calibration) {
  nlohmann::json models;
  std::ifstream(std::string(TINY_SOURCE_DIR) + "/framework/src/gpu/model/gpu_models.json") >> models;
  std::set<std::string> fitted;
  for (const auto& [parameter, rows] : models["defaults"]["fitted_rows"].items()) {
    std::stringstream in(rows.get<std::string>());
    for (std::string row; in >> row;) fitted.insert(row);
  }
  const CalibrationSummary sum = calibration_table("h100-sxm-2026-11-25.json", fitted);
  ASSERT_GT(sum.predicted_rows, 100) << "every kernel, GEMM and copy row of the run is predicted";
  EXPECT_LT(sum.fitted_max, 0.05) << "a fitted row is what its parameter was set from";
  // Where the model stands (docs/performance_model.md lists the rows that
  // miss and why): the target is every predicted row within 20%.
  EXPECT_LT(sum.predicted_mean, 0.15);
  EXPECT_LE(sum.over_20, 15);
  EXPECT_LT(sum.predicted_max, 0.8);
  expect_quoted_by_the_model_page(sum.line);
}

// The same kind of GPU on another machine, two days later (2026-11-27): the
// first run's fitted rows are predictions here, and the rows it did not have
// (zero_ and add at 4M and 32M, fill_) are new ones.
TEST(PerfModel, CalibrationOnASecondH100) {
  const CalibrationSummary sum = calibration_table("h100-sxm-2026-11-27.json", {});
  ASSERT_GT(sum.predicted_rows, 150);
  EXPECT_LT(sum.predicted_mean, 0.15);
  EXPECT_LE(sum.over_20, 29);
  EXPECT_LT(sum.predicted_max, 0.8);
  expect_quoted_by_the_model_page(sum.line);
  // The same machine's kernels with their inputs in the L2 cache (Kernel/) and
  // out of it (KernelCold/), against the model, which has no cache: printed
  // for the record (docs/performance_model.md, "How close it is").
  calibration_table("h100-sxm-2026-11-27-l2.json", {});
}

// A GPU the model was not fitted on: an H200 (the H100's chip with 4.8 TB/s of
// HBM3e instead of 3.35), measured on 2026-11-26 after its model entry was
// written from the datasheet alone. Every row is a prediction.
TEST(PerfModel, CalibrationOnAGpuItWasNotFittedOn) {
  // A process of its own under ctest: the training-step rows run on an emulated H200.
  setenv("TINY_EMULATED_GPU_MODEL", "h200", 0);
  const CalibrationSummary sum = calibration_table("h200-2026-11-26.json", {});
  ASSERT_GT(sum.predicted_rows, 150);
  EXPECT_LT(sum.predicted_mean, 0.20);
  EXPECT_LE(sum.over_20, 36);
  EXPECT_LT(sum.predicted_max, 0.8);
  if (tiny::cuda::get_device_properties(0).modelled_gpu == load_model("h200").display_name) {
    expect_quoted_by_the_model_page(sum.line);  // the training steps were predicted too, as under ctest
  }
  // The host's costs on that machine (host_gemm_ns was fitted on these rows,
  // scaled by the two hosts' LaunchRate/add_): printed for the record.
  calibration_table("h200-2026-11-26-host-rates.json", {});
}

}  // namespace
