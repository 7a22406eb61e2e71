// tiny::profiler on a real GPU: CUPTI records the kernels, copies and waits of
// a profile with their real device times, on the host's clock, linked to the
// calls and ops that queued them. Counts and categories only, never cuBLAS's
// kernel names (they change with the GPU and the library's version).
//
// Without a GPU every test skips, saying why. The same code path on
// synthetic CUPTI records runs everywhere: tests/framework/test_profiler_cupti.cpp.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "backend/cuda/probe.h"
#include "gpu/device_context.h"
#include "profiler/cupti_recorder.h"
#include "tiny/tiny.h"

namespace {

using json = nlohmann::json;
using tiny::Device;
using tiny::Tensor;

const Device kGpu("cuda:0");

#define REQUIRE_CUDA_BACKEND()                                                                                   \
  do {                                                                                                           \
    if (tiny::cuda_backend::real_device_count() == 0)                                                            \
      GTEST_SKIP() << "no NVIDIA GPU (cudaGetDeviceCount found none): run ./workbook test --gpu on a GPU "       \
                      "machine";                                                                                 \
    if (const char* forced = std::getenv(tiny::gpu::kForceEmulatedGpuVariable);                                  \
        forced != nullptr && std::string(forced) == "1")                                                         \
      GTEST_SKIP() << tiny::gpu::kForceEmulatedGpuVariable << "=1 is set, so tensors use the emulated GPU: unset " \
                      "it to test the real one";                                                                 \
    ASSERT_TRUE(tiny::gpu::device_runtime_is_cuda()) << "a GPU is present but tiny did not select it";          \
  } while (0)

// How far (us) a time CUPTI measured may stray from the host's clock: the
// clocks are matched to well under a microsecond; this leaves room for a
// preempted sample.
constexpr double kSlackUs = 10;

// The device total (us) of `name`'s row in key_averages(), or -1 without one.
double device_total(const std::string& table, const std::string& name) {
  std::istringstream rows(table);
  std::string line;
  while (std::getline(rows, line)) {
    if (line.rfind(name + " ", 0) != 0) continue;
    std::istringstream fields(line.substr(name.size()));
    std::string unit;
    long calls = 0;
    double host_total = 0, host_avg = 0, device = -1;
    fields >> calls >> host_total >> unit >> host_avg >> unit >> device;
    return device;
  }
  return -1;
}

struct Profiled {
  json trace;
  std::string table;
  uint64_t launches_counted = 0;  // tiny's own count of the kernels it queued
};

// A matrix product, an add, a 4 MiB host-to-device copy and a synchronize on cuda:0, profiled.
Profiled profile_work() {
  tiny::manual_seed(3);
  const Tensor a = tiny::randn({512, 512}).to(kGpu), b = tiny::randn({512, 512}).to(kGpu);
  const Tensor host = tiny::randn({1 << 20});
  (void)tiny::matmul(a, b);  // cuBLAS's handle and workspace, before the profile
  tiny::cuda::synchronize(0);
  tiny::cuda::reset_device_counters(0);
  Profiled out;
  tiny::profiler::profile prof;
  const Tensor product = tiny::matmul(a, b);
  const Tensor sum = product + b;
  const Tensor copied = host.to(kGpu);
  tiny::cuda::synchronize(0);
  prof.stop();
  out.launches_counted = tiny::cuda::device_counters(0).kernel_launches;
  out.table = prof.key_averages();
  out.trace = json::parse(prof.chrome_trace());  // throws (and fails the test) if it is not JSON
  return out;
}

TEST(ProfilerOnGpu, CuptiRecordsKernelsCopiesAndWaitsOnTheHostsClock) {
  REQUIRE_CUDA_BACKEND();
  for (int round = 0; round < 2; ++round) {  // a second profile records as the first did
    SCOPED_TRACE("profile " + std::to_string(round + 1));
    const Profiled p = profile_work();
    // TINY_PROFILER_TRACE_OUT=dir keeps the trace and the table, to look at (bench/gpu/on_device.sh).
    if (const char* dir = std::getenv("TINY_PROFILER_TRACE_OUT"); dir != nullptr && round == 0) {
      std::ofstream(std::string(dir) + "/cupti_trace.json") << p.trace.dump(1);
      std::ofstream(std::string(dir) + "/cupti_key_averages.txt") << p.table;
    }
    const json& other = p.trace["otherData"];
    ASSERT_FALSE(other.contains("gpu_rows_missing"))
        << "CUPTI did not record: " << other["gpu_rows_missing"].get<std::string>();
    std::map<uint64_t, json> launches;  // by correlation
    std::vector<json> device, ops;
    std::map<int64_t, int> flow_starts, flow_ends;
    std::map<int64_t, std::string> stream_tracks;
    double host_first = 1e300, host_last = -1e300;
    int waits = 0;
    for (const json& e : p.trace["traceEvents"]) {
      if (e["ph"] == "s") ++flow_starts[e["id"].get<int64_t>()];
      if (e["ph"] == "f") ++flow_ends[e["id"].get<int64_t>()];
      if (e["ph"] == "M" && e["name"] == "thread_name" && e["pid"] == 1) {
        stream_tracks[e["tid"].get<int64_t>()] = e["args"]["name"];
      }
      if (e["ph"] != "X") continue;
      const double ts = e["ts"].get<double>(), end = ts + e["dur"].get<double>();
      if (e["pid"] == 0) {
        host_first = std::min(host_first, ts);
        host_last = std::max(host_last, end);
        if (e["cat"] == "cpu_op") ops.push_back(e);
        if (e["cat"] == "cuda_runtime" && e["args"].contains("correlation")) {
          launches[e["args"]["correlation"].get<uint64_t>()] = e;
        }
        if (e["cat"] == "cuda_runtime" && e["name"].get<std::string>().find("Synchronize") != std::string::npos) {
          ++waits;
        }
      } else {
        device.push_back(e);
      }
    }
    int kernels = 0, copies = 0, matmul_kernels = 0;
    int64_t bytes_copied = 0;
    for (const json& e : device) {
      const std::string cat = e["cat"];
      const double ts = e["ts"].get<double>(), end = ts + e["dur"].get<double>();
      EXPECT_EQ(e["pid"], 1) << "cuda:0's work: " << e.dump();
      EXPECT_GT(e["dur"].get<double>(), 0.0) << "a real device time: " << e.dump();
      EXPECT_TRUE(stream_tracks.count(e["tid"].get<int64_t>())) << "on a named stream track: " << e.dump();
      EXPECT_GE(ts, host_first - kSlackUs) << "inside the host's span [" << host_first << ", " << host_last << "]";
      EXPECT_LE(end, host_last + kSlackUs) << "inside the host's span [" << host_first << ", " << host_last << "]";
      const uint64_t correlation = e["args"]["correlation"];
      const auto launch = launches.find(correlation);
      if (launch == launches.end()) {
        ADD_FAILURE() << "no host call with CUPTI's correlation id " << correlation << " for " << e.dump();
      } else {
        EXPECT_GE(ts, launch->second["ts"].get<double>() - kSlackUs) << "the work starts after its call: " << e.dump()
                                                                    << "\nits call: " << launch->second.dump();
      }
      if (cat == "kernel") {
        ++kernels;
        if (e["args"].value("op", "") == "matmul") ++matmul_kernels;
      }
      if (cat == "gpu_memcpy" && e["name"] == "HostToDevice") {
        ++copies;
        bytes_copied += e["args"]["bytes"].get<int64_t>();
      }
    }
    EXPECT_GE(kernels, 2) << "the product's and the add's";
    EXPECT_GE(static_cast<uint64_t>(kernels), p.launches_counted)
        << "a kernel event for every kernel tiny launched (cuBLAS may launch more than it counts)";
    EXPECT_GE(matmul_kernels, 1) << "the product's kernels are linked to the op that launched them";
    EXPECT_GE(copies, 1) << "the host-to-device copy";
    EXPECT_EQ(bytes_copied, 4 << 20) << "its bytes (in one record, or in the driver's staged pieces)";
    EXPECT_GE(waits, 1) << "the synchronize, on the host";
    EXPECT_EQ(flow_starts.size(), device.size()) << "an arrow from each call to its work";
    for (const auto& [id, n] : flow_starts) EXPECT_EQ(flow_ends[id], n) << "arrow " << id << " lands";
    // The matmul op's range holds the call that launched its kernel: the two clocks agree.
    const auto matmul_op = std::find_if(ops.begin(), ops.end(), [](const json& e) { return e["name"] == "matmul"; });
    ASSERT_NE(matmul_op, ops.end()) << "the matmul op's host range";
    const double op_start = (*matmul_op)["ts"].get<double>(), op_end = op_start + (*matmul_op)["dur"].get<double>();
    const bool call_inside = std::any_of(launches.begin(), launches.end(), [&](const std::pair<const uint64_t, json>& entry) {
      const double ts = entry.second["ts"].get<double>(), end = ts + entry.second["dur"].get<double>();
      return ts >= op_start - 2 && end <= op_end + 2;
    });
    EXPECT_TRUE(call_inside) << "matmul [" << op_start << ", " << op_end << "] us holds one of its calls";
    EXPECT_GT(device_total(p.table, "matmul"), 0.0) << "the op's device time (PyTorch's CUDA total)\n" << p.table;
    EXPECT_NE(p.table.find("measured"), std::string::npos) << p.table;
    EXPECT_NE(other["devices"].get<std::string>().find("cuda:0"), std::string::npos) << other.dump();
  }
}

TEST(ProfilerOnGpu, OneProfileAtATimeAndCuptiStillRecords) {
  REQUIRE_CUDA_BACKEND();
  const Tensor a = tiny::ones({256}, kGpu);
  tiny::profiler::profile prof;
  EXPECT_THROW(tiny::profiler::profile second, tiny::Error);
  const Tensor b = a * 2.0;
  tiny::cuda::synchronize(0);
  prof.stop();
  const json trace = json::parse(prof.chrome_trace());
  int kernels = 0;
  for (const json& e : trace["traceEvents"]) kernels += e["ph"] == "X" && e["cat"] == "kernel";
  EXPECT_GE(kernels, 1) << "the refused second profile left CUPTI recording the first\n" << trace.dump();
}

TEST(ProfilerOnGpu, WithoutCuptiTheHostsOpsAreRecordedAndTheTraceSaysWhy) {
  REQUIRE_CUDA_BACKEND();
  const char* variable = tiny::profiler::detail::kCuptiLibraryVariable;
  const std::string missing = "/nonexistent/tiny-test/libcupti.so";
  setenv(variable, missing.c_str(), 1);
  const Tensor a = tiny::ones({64, 64}, kGpu);
  tiny::profiler::profile prof;
  const Tensor b = tiny::matmul(a, a);
  tiny::cuda::synchronize(0);
  prof.stop();
  unsetenv(variable);
  const json trace = json::parse(prof.chrome_trace());
  ASSERT_TRUE(trace["otherData"].contains("gpu_rows_missing")) << trace["otherData"].dump();
  EXPECT_NE(trace["otherData"]["gpu_rows_missing"].get<std::string>().find(missing), std::string::npos);
  int ops = 0, kernels = 0;
  for (const json& e : trace["traceEvents"]) {
    if (e["ph"] != "X") continue;
    ops += e["cat"] == "cpu_op" && e["name"] == "matmul";
    kernels += e["cat"] == "kernel";
  }
  EXPECT_EQ(ops, 1) << "the host's side is recorded";
  EXPECT_EQ(kernels, 0);
}

}  // namespace
