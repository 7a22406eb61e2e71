// tiny::profiler on the emulated GPU: the Chrome trace it writes (parsed
// back), key_averages, and its bad inputs.
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <map>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "test_util.h"
#include "tiny/cuda.h"
#include "tiny/ops.h"
#include "tiny/profiler.h"
#include "tiny_trainer.h"  // bench/

namespace {

using json = nlohmann::json;

// Two training steps of case C on cuda:0 and a pinned copy on a side stream, profiled.
void run_profiled_work() {
  bench::TinyTrainer t(bench::training_cases()[2], tiny::Device("cuda:0"));
  const tiny::Tensor host = tiny::ones({1 << 20}).pin_memory();
  tiny::cuda::synchronize(0);
  for (int i = 0; i < 2; ++i) t.step();
  {
    const tiny::cuda::Stream side(0);
    tiny::cuda::StreamGuard guard(side);
    const tiny::Tensor on_gpu = host.to(tiny::Device("cuda:0"), /*non_blocking=*/true);
    on_gpu.mul_(2);  // a kernel on the side stream: a track of its own
    tiny::cuda::synchronize(0);
  }
}

TEST(Profiler, ChromeTraceHasHostStreamAndCopyTracksWithArrows) {
  tiny_test::TempDir dir;
  const std::string path = dir.file("trace.json");
  {
    tiny::profiler::profile prof;
    run_profiled_work();
    prof.stop();
    EXPECT_GT(prof.num_events(), 20u);
    prof.export_chrome_trace(path);
  }
  json trace;
  std::ifstream(path) >> trace;
  ASSERT_TRUE(trace.contains("traceEvents"));
  std::map<std::string, int> categories;
  std::set<int64_t> gpu_tracks;
  std::map<int64_t, int> flow_starts, flow_ends;
  std::vector<std::pair<double, double>> compute;  // cuda:0's kernels on its compute engine
  for (const json& e : trace["traceEvents"]) {
    const std::string ph = e["ph"];
    if (ph == "s") ++flow_starts[e["id"].get<int64_t>()];
    if (ph == "f") ++flow_ends[e["id"].get<int64_t>()];
    if (ph != "X") continue;
    ++categories[e["cat"].get<std::string>()];
    EXPECT_GE(e["ts"].get<double>(), 0.0);
    EXPECT_GE(e["dur"].get<double>(), 0.0);
    if (e["pid"] == 1) gpu_tracks.insert(e["tid"].get<int64_t>());
    if (e["pid"] == 1 && (e["cat"] == "kernel" || e["cat"] == "gpu_memset")) {
      compute.emplace_back(e["ts"].get<double>(), e["ts"].get<double>() + e["dur"].get<double>());
    }
  }
  EXPECT_GT(categories["kernel"], 10) << "the steps' kernels";
  EXPECT_GT(categories["gpu_memcpy"], 0) << "the copy";
  EXPECT_GT(categories["cuda_runtime"], categories["kernel"]) << "a launch per kernel, and the synchronizes";
  EXPECT_TRUE(gpu_tracks.count(0)) << "the default stream's track";
  EXPECT_TRUE(gpu_tracks.count(1000)) << "the host-to-device copy engine's track";
  EXPECT_GE(gpu_tracks.size(), 3u) << "and the side stream's (its copy is on the copy engine's)";
  EXPECT_EQ(flow_starts.size(), flow_ends.size());
  for (const auto& [id, n] : flow_starts) EXPECT_EQ(flow_ends[id], 1) << "arrow " << id;
  std::sort(compute.begin(), compute.end());
  for (size_t i = 1; i < compute.size(); ++i) {
    EXPECT_LE(compute[i - 1].second, compute[i].first + 1e-3) << "one compute engine: kernels never overlap";
  }
}

// Each user-facing op (linear, the optimizer's step, ...) is a cpu_op range on its host
// thread's track, around the launches it made, as Kineto draws aten::linear.
TEST(Profiler, OpsAreHostRangesAroundTheirLaunches) {
  tiny_test::TempDir dir;
  const std::string path = dir.file("trace.json");
  {
    tiny::profiler::profile prof;
    run_profiled_work();
    prof.stop();
    prof.export_chrome_trace(path);
    const std::string table = prof.key_averages();
    EXPECT_NE(table.find("linear "), std::string::npos) << "the op's row, with its kernels' device time\n" << table;
  }
  json trace;
  std::ifstream(path) >> trace;
  std::map<std::string, int> ops;
  std::vector<std::pair<double, double>> linear;  // host ranges of linear on thread 0
  std::vector<double> launches;                   // cudaLaunchKernel starts on thread 0
  for (const json& e : trace["traceEvents"]) {
    if (e["ph"] != "X" || e["pid"] != 0) continue;
    const double ts = e["ts"].get<double>(), dur = e["dur"].get<double>();
    if (e["cat"] == "cpu_op") {
      ++ops[e["name"].get<std::string>()];
      if (e["name"] == "linear" && e["tid"] == 0) linear.emplace_back(ts, ts + dur);
    }
    if (e["name"] == "cudaLaunchKernel" && e["tid"] == 0) launches.push_back(ts);
  }
  EXPECT_GT(ops["linear"], 0) << "every layer's forward";
  EXPECT_EQ(ops["optimizer.step"], 2) << "one per step";
  ASSERT_FALSE(linear.empty());
  for (const auto& [start, end] : linear) {
    EXPECT_GT(end, start) << "a linear launches kernels, which costs the host time";
    const bool holds_a_launch = std::any_of(launches.begin(), launches.end(),
                                            [&](double t) { return t >= start - 1e-3 && t <= end + 1e-3; });
    EXPECT_TRUE(holds_a_launch) << "linear at " << start << " us: its launches lie inside it";
  }
}

TEST(Profiler, KeyAveragesSumsEachKernel) {
  tiny::profiler::profile prof;
  run_profiled_work();
  prof.stop();
  const std::string table = prof.key_averages();
  EXPECT_NE(table.find("# Calls"), std::string::npos) << table;
  EXPECT_NE(table.find("gemm"), std::string::npos) << table;
  EXPECT_NE(table.find("sgd_step"), std::string::npos) << table;
  EXPECT_NE(table.find("cudaDeviceSynchronize"), std::string::npos) << table;
}

TEST(Profiler, OnlyOneRecordsAtATimeAndABadPathIsNamed) {
  {
    tiny::profiler::profile first;
    try {
      tiny::profiler::profile second;
      FAIL() << "a second profile opened while the first records";
    } catch (const tiny::Error& e) {
      EXPECT_NE(std::string(e.what()).find("already recording"), std::string::npos) << e.what();
    }
    first.stop();
    tiny::profiler::profile third;  // once stopped, another may record
    third.stop();
    try {
      third.export_chrome_trace("/nonexistent-folder/trace.json");
      FAIL() << "exported to a folder that does not exist";
    } catch (const tiny::IOError& e) {
      EXPECT_NE(std::string(e.what()).find("/nonexistent-folder/trace.json"), std::string::npos) << e.what();
    }
  }
  tiny::profiler::profile after_scope;  // the first's destructor stopped nothing twice
}

}  // namespace
