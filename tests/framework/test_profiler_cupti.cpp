// tiny::profiler's real-GPU half without a GPU: CUPTI's records (synthetic,
// as CUPTI's Activity API gives them) merged into the host's recording and
// exported as the trace; the fallback when libcupti cannot be loaded. The same
// path on a real GPU with the real CUPTI: tests/gpu/test_profiler_cupti.cpp.
#include <gtest/gtest.h>

#include <cstdlib>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "gpu/model/trace.h"
#include "profiler/cupti_recorder.h"
#include "profiler/gpu_activity.h"
#include "tiny/ops.h"
#include "tiny/profiler.h"
#include "tiny/tensor.h"

namespace {

using json = nlohmann::json;
using tiny::gpu::model::TraceEvent;
using tiny::profiler::detail::ApiCall;
using tiny::profiler::detail::ClockMap;
using tiny::profiler::detail::GpuActivities;
using tiny::profiler::detail::GpuWork;

// Sets an environment variable for one test, and restores it.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const std::string& value) : name_(name) {
    const char* old = std::getenv(name);
    had_ = old != nullptr;
    if (had_) old_ = old;
    setenv(name, value.c_str(), 1);
  }
  ~ScopedEnv() {
    if (had_) {
      setenv(name_, old_.c_str(), 1);
    } else {
      unsetenv(name_);
    }
  }

 private:
  const char* name_;
  bool had_ = false;
  std::string old_;
};

// Profiles from here on act as on a real GPU, until the end of the scope.
struct PretendRealGpu {
  PretendRealGpu() { tiny::profiler::detail::pretend_real_gpu_for_testing(true); }
  ~PretendRealGpu() {
    tiny::profiler::detail::fake_gpu_recorder_for_testing(nullptr);
    tiny::profiler::detail::pretend_real_gpu_for_testing(false);
  }
};

TEST(ProfilerCupti, ClockMapPutsCuptiTimesOnTheHostClock) {
  // CUPTI's clock 5 ms ahead of the host's and running 1e-4 fast: the two samples fix both.
  const ClockMap clock{1000, 5001000, 1001000, 5001000 + 1000100};
  EXPECT_EQ(clock.to_host(5001000), 1000);
  EXPECT_EQ(clock.to_host(5001000 + 1000100), 1001000);
  EXPECT_EQ(clock.to_host(5001000 + 500050), 501000) << "halfway, drift removed";
  EXPECT_EQ(clock.to_host(5001000 - 100), 1000 - 99) << "before the start sample: the same line";
  const ClockMap one_sample{1000, 5001000, 1000, 5001000};  // stop not sampled: an offset alone
  EXPECT_EQ(one_sample.to_host(5002000), 2000);
}

TEST(ProfilerCupti, KernelNamesAreDemangled) {
  EXPECT_EQ(tiny::profiler::detail::demangle("_Z4gemmIfEvPT_i"), "void gemm<float>(float*, int)");
  EXPECT_EQ(tiny::profiler::detail::demangle("sm90_xmma_gemm_f32f32_tf32f32"), "sm90_xmma_gemm_f32f32_tf32f32")
      << "a C name stays as it is";
  EXPECT_EQ(tiny::profiler::detail::intern("a kernel"), tiny::profiler::detail::intern(std::string("a ") + "kernel"));
}

// Two ops on host thread 0 (ids 1 and 2), and what CUPTI would report of them:
// a kernel launched by the runtime inside op 1, one launched through the driver
// (as cuBLAS does) inside op 2, a copy whose runtime and driver correlations
// differ, a kernel launched outside every op on another thread, a
// synchronize, and calls the trace leaves out.
struct Synthetic {
  std::vector<TraceEvent> host;
  GpuActivities gpu;
  ClockMap clock{0, 1000000, 100000, 1100000};  // CUPTI = host + 1 ms
};

Synthetic synthetic() {
  Synthetic s;
  auto op = [](const char* name, uint64_t id, int64_t start, int64_t end) {
    TraceEvent e;
    e.kind = TraceEvent::Kind::cpu_op;
    e.name = e.op = name;
    e.correlation = id;
    e.host_start_ns = start;
    e.host_end_ns = end;
    return e;
  };
  s.host = {op("matmul", 1, 1000, 9000), op("copy_", 2, 10000, 20000)};
  const uint64_t c = 1000000;  // CUPTI's clock at host 0
  s.gpu.calls = {
      {"cudaLaunchKernel", true, c + 2000, c + 5000, 4242, 10},
      {"cuLaunchKernelEx", false, c + 6000, c + 8000, 4242, 11},
      {"cuMemcpyHtoDAsync", false, c + 11000, c + 12000, 4242, 12},
      {"cudaMemcpyAsync", true, c + 10500, c + 12500, 4242, 13},
      {"cudaLaunchKernel", true, c + 30000, c + 31000, 777, 14},  // outside every op, another thread
      {"cudaStreamSynchronize", true, c + 32000, c + 60000, 4242, 15},
      {"cuStreamSynchronize", false, c + 32100, c + 59900, 4242, 16},  // inside the runtime's: left out
      {"cudaGetDevice", true, c + 100, c + 200, 4242, 17},             // no GPU work, not a wait: left out
  };
  s.gpu.links = {{10, 1}, {11, 1}, {12, 2}, {13, 2}};
  GpuWork k1;
  k1.name = "_Z4gemmIfEvPT_i";
  k1.stream = 7;
  k1.start_ns = c + 6000;
  k1.end_ns = c + 26000;
  k1.correlation = 10;
  GpuWork k2 = k1;
  k2.name = "sm90_xmma_gemm_f32f32";
  k2.start_ns = c + 26500;
  k2.end_ns = c + 40000;
  k2.correlation = 11;
  GpuWork copy;
  copy.kind = GpuWork::Kind::memcpy_to_device;
  copy.stream = 7;
  copy.start_ns = c + 40500;
  copy.end_ns = c + 45000;
  copy.correlation = 12;
  copy.runtime_correlation = 13;
  copy.bytes = 4 << 20;
  copy.pinned = true;
  GpuWork k3 = k1;
  k3.name = "elementwise";
  k3.stream = 13;
  k3.start_ns = c + 45500;
  k3.end_ns = c + 50000;
  k3.correlation = 14;
  GpuWork unfinished = k1;  // a record CUPTI flushed before it completed (end 0)
  unfinished.correlation = 99;
  unfinished.end_ns = 0;
  s.gpu.work = {k1, k2, copy, k3, unfinished};
  return s;
}

TEST(ProfilerCupti, MergeLinksEachKernelToItsCallAndOp) {
  Synthetic s = synthetic();
  const std::vector<TraceEvent> merged = tiny::profiler::detail::merge_gpu_activities(s.host, s.gpu, s.clock);
  std::map<uint64_t, const TraceEvent*> work;  // by correlation
  std::vector<const TraceEvent*> syncs;
  for (const TraceEvent& e : merged) {
    if (e.kind == TraceEvent::Kind::synchronize) syncs.push_back(&e);
    if (e.kind != TraceEvent::Kind::cpu_op && e.kind != TraceEvent::Kind::synchronize) work[e.correlation] = &e;
  }
  ASSERT_EQ(work.size(), 4u) << "the four completed records; the unfinished one is dropped";
  const TraceEvent& k1 = *work.at(10);
  EXPECT_STREQ(k1.name, "void gemm<float>(float*, int)");
  EXPECT_STREQ(k1.op, "matmul");
  EXPECT_STREQ(k1.call, "cudaLaunchKernel");
  EXPECT_EQ(k1.stream, 7);
  EXPECT_EQ(k1.start_ns, 6000) << "CUPTI's clock put on the host's";
  EXPECT_EQ(k1.end_ns, 26000);
  EXPECT_EQ(k1.host_start_ns, 2000);
  EXPECT_EQ(k1.host_end_ns, 5000);
  EXPECT_EQ(k1.thread, 0) << "the op's thread";
  const TraceEvent& k2 = *work.at(11);
  EXPECT_STREQ(k2.call, "cuLaunchKernelEx") << "a driver launch (cuBLAS's) is linked too";
  EXPECT_STREQ(k2.op, "matmul");
  const TraceEvent& copy = *work.at(13);
  EXPECT_EQ(copy.kind, TraceEvent::Kind::memcpy_to_device);
  EXPECT_STREQ(copy.name, "HostToDevice") << "named as the emulator names it";
  EXPECT_STREQ(copy.call, "cudaMemcpyAsync") << "the runtime's call, not the driver's inside it";
  EXPECT_STREQ(copy.op, "copy_");
  EXPECT_EQ(copy.bytes, 4 << 20);
  EXPECT_TRUE(copy.pinned);
  const TraceEvent& k3 = *work.at(14);
  EXPECT_STREQ(k3.op, "") << "launched outside every op";
  EXPECT_EQ(k3.thread, 1) << "CUPTI's thread 777 never ran an op: a track of its own, after tiny's thread 0";
  ASSERT_EQ(syncs.size(), 1u) << "the runtime's synchronize, not the driver's inside it nor cudaGetDevice";
  EXPECT_STREQ(syncs[0]->name, "cudaStreamSynchronize");
  EXPECT_EQ(syncs[0]->host_start_ns, 32000);
  EXPECT_EQ(syncs[0]->host_end_ns, 60000);
  // In order of issue: each call before the op that made it ends.
  std::vector<std::string> order;
  for (const TraceEvent& e : merged) order.push_back(e.kind == TraceEvent::Kind::cpu_op ? e.name : e.call);
  const std::vector<std::string> expected{"cudaLaunchKernel", "cuLaunchKernelEx", "matmul", "cudaMemcpyAsync",
                                          "copy_", "cudaLaunchKernel", "cudaStreamSynchronize"};
  EXPECT_EQ(order, expected);
}

TEST(ProfilerCupti, ThreadsWithoutOpsGetTracksOfTheirOwn) {
  Synthetic s = synthetic();
  s.host[0].thread = s.host[1].thread = 3;  // both ops ran on tiny's host thread 3
  const std::vector<TraceEvent> merged = tiny::profiler::detail::merge_gpu_activities(s.host, s.gpu, s.clock);
  for (const TraceEvent& e : merged) {
    if (e.correlation == 14 && e.kind == TraceEvent::Kind::kernel) {
      EXPECT_EQ(e.thread, 4) << "CUPTI's thread 777 made no op's call: the track after tiny's last thread (3)";
    }
    if (e.kind == TraceEvent::Kind::synchronize) {
      EXPECT_EQ(e.thread, 3) << "CUPTI's thread 4242 ran tiny's thread 3";
    }
  }
}

// Runs a few CPU ops (each an op scope, as on the GPU) inside a profile that acts as on a real GPU.
std::string profile_cpu_ops(std::string* table = nullptr) {
  tiny::profiler::profile prof;
  const tiny::Tensor a = tiny::ones({64, 64});
  const tiny::Tensor b = tiny::matmul(a, a);
  const tiny::Tensor c = tiny::matmul(b, a);
  (void)c;
  prof.stop();
  if (table != nullptr) *table = prof.key_averages();
  return prof.chrome_trace();
}

TEST(ProfilerCupti, RealGpuTraceHasStreamTracksArrowsAndDeviceTime) {
  PretendRealGpu real;
  // For each op the host recorded, a kernel CUPTI "saw" it launch: a call linked
  // to the op's id, 1 us into the op, and 5 us of GPU time on stream 7.
  tiny::profiler::detail::fake_gpu_recorder_for_testing([](const std::vector<TraceEvent>& host) {
    tiny::profiler::detail::CuptiRecording r;
    r.clock = {0, 0, 1, 1};  // the same clock
    uint32_t correlation = 100;
    for (const TraceEvent& e : host) {
      if (e.kind != TraceEvent::Kind::cpu_op || std::string(e.name) != "matmul") continue;
      EXPECT_NE(e.correlation, 0u) << "an op on a real GPU has an id for CUPTI's external correlation";
      const uint64_t at = static_cast<uint64_t>(e.host_start_ns);
      r.activities.calls.push_back({"cudaLaunchKernel", true, at + 1000, at + 2000, 1, correlation});
      r.activities.links.push_back({correlation, e.correlation});
      GpuWork k;
      k.name = "_Z4gemmIfEvPT_i";
      k.stream = 7;
      k.start_ns = at + 3000;
      k.end_ns = at + 8000;
      k.correlation = correlation++;
      r.activities.work.push_back(k);
    }
    return r;
  });
  std::string table;
  const json trace = json::parse(profile_cpu_ops(&table));
  int kernels = 0, launches = 0, ops = 0;
  std::map<int64_t, int> flow_starts, flow_ends;
  std::string host_process, device_process;
  for (const json& e : trace["traceEvents"]) {
    if (e["ph"] == "s") ++flow_starts[e["id"].get<int64_t>()];
    if (e["ph"] == "f") ++flow_ends[e["id"].get<int64_t>()];
    if (e["ph"] == "M" && e["name"] == "process_name") (e["pid"] == 0 ? host_process : device_process) = e["args"]["name"];
    if (e["ph"] != "X") continue;
    if (e["cat"] == "cpu_op" && e["name"] == "matmul") {
      ++ops;
      EXPECT_TRUE(e["args"].contains("External id")) << e.dump();
    }
    if (e["cat"] == "cuda_runtime" && e["name"] == "cudaLaunchKernel") ++launches;
    if (e["cat"] != "kernel") continue;
    ++kernels;
    EXPECT_EQ(e["name"], "void gemm<float>(float*, int)");
    EXPECT_EQ(e["pid"], 1) << "cuda:0's process";
    EXPECT_EQ(e["tid"], 7) << "its stream's track";
    EXPECT_NEAR(e["dur"].get<double>(), 5.0, 1e-9) << "5 us of GPU time";
    EXPECT_EQ(e["args"]["op"], "matmul");
  }
  EXPECT_EQ(ops, 2);
  EXPECT_EQ(kernels, 2) << "a kernel per op";
  EXPECT_EQ(launches, 2) << "each kernel's launch on the host";
  EXPECT_EQ(flow_starts.size(), 2u);
  for (const auto& [id, n] : flow_starts) EXPECT_EQ(flow_ends[id], 1) << "arrow " << id << " lands once";
  EXPECT_EQ(host_process, "host") << "not modelled";
  EXPECT_EQ(device_process.rfind("cuda:0", 0), 0u) << device_process;
  const std::string clock = trace["otherData"]["clock"];
  EXPECT_EQ(clock.find("modelled"), std::string::npos) << clock;
  EXPECT_NE(clock.find("CUPTI"), std::string::npos) << clock;
  EXPECT_FALSE(trace["otherData"].contains("gpu_rows_missing"));
  // key_averages: the op's row holds its kernels' 10 us of device time.
  std::istringstream rows(table);
  std::string line;
  bool found = false;
  while (std::getline(rows, line)) {
    if (line.rfind("matmul ", 0) != 0) continue;
    std::istringstream fields(line);
    std::string name, unit;
    long calls = 0;
    double host_total = 0, host_avg = 0, device_total = 0;
    fields >> name >> calls >> host_total >> unit >> host_avg >> unit >> device_total;
    EXPECT_EQ(calls, 2);
    EXPECT_NEAR(device_total, 10.0, 1e-6) << line;
    found = true;
  }
  EXPECT_TRUE(found) << table;
  EXPECT_NE(table.find("measured"), std::string::npos) << table;
  EXPECT_NE(tiny::profiler::timeline_html(trace.dump()).find("stream 7"), std::string::npos) << "the timeline draws it";
}

TEST(ProfilerCupti, WithoutCuptiTheHostsOpsAreRecordedAndTheReasonSaidOnce) {
  PretendRealGpu real;
  const std::string missing = "/nonexistent/tiny-test/libcupti.so.13";
  ScopedEnv library(tiny::profiler::detail::kCuptiLibraryVariable, missing);
  testing::internal::CaptureStderr();
  std::string table;
  const json trace = json::parse(profile_cpu_ops(&table));
  (void)profile_cpu_ops();  // a second profile: the trace says it again, stderr not
  const std::string err = testing::internal::GetCapturedStderr();
  // The reason, in the trace's metadata.
  ASSERT_TRUE(trace["otherData"].contains("gpu_rows_missing")) << trace["otherData"].dump();
  const std::string why = trace["otherData"]["gpu_rows_missing"];
  if (tiny::profiler::detail::cupti_built()) {
    EXPECT_NE(why.find(missing), std::string::npos) << "names the file it tried: " << why;
    EXPECT_NE(why.find(tiny::profiler::detail::kCuptiLibraryVariable), std::string::npos) << "and the fix: " << why;
  } else {
    EXPECT_NE(why.find("no CUPTI"), std::string::npos) << why;
  }
  // Once on stderr, with the same reason.
  const std::string said = "the GPU's kernels, copies and memsets are not in this profile";
  ASSERT_NE(err.find(said), std::string::npos) << err;
  EXPECT_EQ(err.find(said, err.find(said) + 1), std::string::npos) << "said once:\n" << err;
  EXPECT_NE(err.find(why), std::string::npos) << err;
  // The host's side is there, on the host's clock.
  int ops = 0;
  for (const json& e : trace["traceEvents"]) {
    if (e["ph"] != "X") continue;
    EXPECT_NE(e["cat"], "kernel") << "no GPU rows: " << e.dump();
    if (e["cat"] == "cpu_op" && e["name"] == "matmul") {
      ++ops;
      EXPECT_GT(e["dur"].get<double>(), 0.0) << "a 64x64 product takes the host's clock some time";
    }
  }
  EXPECT_EQ(ops, 2);
  EXPECT_NE(table.find("no device times"), std::string::npos) << table;
}

TEST(ProfilerCupti, LoadingNamesWhatIsMissing) {
  const std::string missing = "/nonexistent/tiny-test/libcupti.so.13";
  const std::string no_file = tiny::profiler::detail::cupti_try_load(missing);
  EXPECT_NE(no_file, "");
  if (!tiny::profiler::detail::cupti_built()) GTEST_SKIP() << "this build has no CUPTI (no cupti.h): " << no_file;
  EXPECT_NE(no_file.find(missing), std::string::npos) << no_file;
  EXPECT_NE(no_file.find("could not be loaded"), std::string::npos) << no_file;
  // A library that loads but is not CUPTI.
  const std::string not_cupti = tiny::profiler::detail::cupti_try_load("libm.so.6");
  EXPECT_NE(not_cupti.find("has no cuptiGetVersion"), std::string::npos) << not_cupti;
}

}  // namespace
