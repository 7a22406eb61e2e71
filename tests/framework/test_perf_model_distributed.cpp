// Collectives and DDP in modelled time (docs/performance_model.md, "Collectives
// and DDP"): the ring costs against hand-computed values, per collective and
// link; ranks agreeing on a collective's end when one is late; DDP's
// all-reduces overlapping backward; the same modelled times in every execution
// mode and under random real sleeps. The ranks are tests/framework/distributed/worker.cpp.
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "distributed/ranks.h"
#include "gpu/model/collective_cost.h"
#include "gpu/model/device_model.h"
#include "test_util.h"
#include "tiny/error.h"

namespace {

using namespace tiny::gpu::model;
using namespace dist_test;

const DeviceModel& model(const char* name) {
  static std::map<std::string, DeviceModel> models;
  auto it = models.find(name);
  if (it == models.end()) it = models.emplace(name, load_model(name)).first;
  return it->second;
}

constexpr int64_t kMiB = 1 << 20;

// ---------------------------------------------------------------- the ring, by hand

// NCCL's Ring/Simple figures (tuning.cc): 8.4 us base, 3.4 us per step over
// NVLink, 5.7 us over PCIe; the bus reaches 0.8 of the link.
TEST(PerfModelCollectives, RingCostsByHandOverNvlink) {
  const DeviceModel& h = model("h100-sxm");  // NVLink 450 GB/s per direction: bus 0.8 x 450 = 360 GB/s
  EXPECT_STREQ(collective_link(h), "NVLink");
  // all_reduce, 2 ranks, 1 MiB: 8400 + 2 x 3400 + 1048576 x 2(1)/2 / 360e9 s (2912.7 ns) = 18113 ns.
  EXPECT_EQ(nccl_collective_ns(h, Collective::all_reduce, 2, kMiB), 18113);
  // 4 ranks: 8400 + 6 x 3400 + 1048576 x 6/4 / 360e9 (4369.1 ns) = 33169 ns.
  EXPECT_EQ(nccl_collective_ns(h, Collective::all_reduce, 4, kMiB), 33169);
  // broadcast, 4 ranks: 8400 + 3 x 3400 + 1048576 / 360e9 (2912.7) = 21513 ns.
  EXPECT_EQ(nccl_collective_ns(h, Collective::broadcast, 4, kMiB), 21513);
  // all_gather and reduce_scatter, 4 ranks, 1 MiB in all: 8400 + 3 x 3400 + 1048576 x 3/4 / 360e9 (2184.5) = 20785 ns.
  EXPECT_EQ(nccl_collective_ns(h, Collective::all_gather, 4, kMiB), 20785);
  EXPECT_EQ(nccl_collective_ns(h, Collective::reduce_scatter, 4, kMiB), 20785);
  // One rank: nothing to exchange.
  EXPECT_EQ(nccl_collective_ns(h, Collective::all_reduce, 1, kMiB), 0);
  // A100: NVLink 300 GB/s, bus 240 GB/s: 8400 + 6800 + 1048576 / 240e9 (4369.1) = 19569 ns.
  EXPECT_EQ(nccl_collective_ns(model("a100-sxm"), Collective::all_reduce, 2, kMiB), 19569);
}

TEST(PerfModelCollectives, RingCostsByHandOverPcie) {
  // T4: no NVLink; PCIe gen3 x16 = 16 x 0.985 GB/s = 15.76 GB/s, bus 12.608 GB/s.
  const DeviceModel& t4 = model("t4");
  EXPECT_STREQ(collective_link(t4), "PCIe");
  // all_reduce, 2 ranks, 1 MiB: 8400 + 2 x 5700 + 1048576 / 12.608e9 (83167.8 ns) = 102968 ns.
  EXPECT_EQ(nccl_collective_ns(t4, Collective::all_reduce, 2, kMiB), 102968);
  // L4: gen4 x16 = 31.52 GB/s, bus 25.216 GB/s: 19800 + 1048576 / 25.216e9 (41583.9) = 61384 ns.
  EXPECT_EQ(nccl_collective_ns(model("l4"), Collective::all_reduce, 2, kMiB), 61384);
}

TEST(PerfModelCollectives, GlooGoesThroughHostMemory) {
  // 20 us per ring step, 5 GB/s: all_reduce of 1 MiB over 2 ranks = 2 x 20000 + 1048576 / 5e9 (209715.2) = 249715 ns.
  const DeviceModel& h = model("h100-sxm");
  EXPECT_EQ(gloo_collective_ns(h, Collective::all_reduce, 2, kMiB), 249715);
  // broadcast over 3 ranks: 2 x 20000 + 209715 = 249715 ns as well; all_gather of 3 MiB: 40000 + 2 MiB / 5e9 = 459430.
  EXPECT_EQ(gloo_collective_ns(h, Collective::broadcast, 3, kMiB), 249715);
  EXPECT_EQ(gloo_collective_ns(h, Collective::all_gather, 3, 3 * kMiB), 459430);
  EXPECT_GT(gloo_collective_ns(h, Collective::all_reduce, 2, kMiB), 10 * nccl_collective_ns(h, Collective::all_reduce, 2, kMiB));
}

// nccl-tests' bus bandwidth: algBw x 2(n-1)/n for an all-reduce reaches 0.8 of the link on a large buffer, whatever n.
TEST(PerfModelCollectives, BusBandwidthIsTheLinksShareForAnyRankCount) {
  const DeviceModel& h = model("h100-sxm");
  const int64_t size = int64_t{1} << 36;  // 64 GiB: the latency terms vanish
  for (int n : {2, 4, 8}) {
    const double seconds = static_cast<double>(nccl_collective_ns(h, Collective::all_reduce, n, size)) * 1e-9;
    const double bus = static_cast<double>(size) / seconds * 2.0 * (n - 1) / n;
    EXPECT_NEAR(bus / 360e9, 1.0, 1e-3) << n << " ranks";
  }
}

TEST(PerfModelCollectives, AMalformedCollectiveParameterIsNamedWithItsFix) {
  tiny_test::TempDir dir;
  const std::string path = dir.path() + "/mine.json";
  nlohmann::json file;
  std::ifstream(std::string(TINY_SOURCE_DIR) + "/framework/src/gpu/model/gpu_models.json") >> file;
  auto write_with = [&](const char* key, const nlohmann::json& value) {
    nlohmann::json mine = {{"defaults", file["defaults"]}, {"models", {{"mine", file["models"]["h100-sxm"]}}}};
    mine["models"]["mine"][key] = value;
    std::ofstream(path) << mine.dump();
  };
  auto message = [&] {
    try {
      load_model(path);
    } catch (const tiny::ValueError& e) {
      return std::string(e.what());
    }
    return std::string("(no error)");
  };
  write_with("nccl_bus_efficiency", 1.5);
  std::string what = message();
  EXPECT_NE(what.find("\"nccl_bus_efficiency\" is 1.5"), std::string::npos) << what;
  EXPECT_NE(what.find("a number in (0, 1]"), std::string::npos) << what;
  write_with("gloo_bandwidth_gbps", "fast");
  what = message();
  EXPECT_NE(what.find("\"gloo_bandwidth_gbps\" is \"fast\", which is not a number"), std::string::npos) << what;
  write_with("nccl_step_latency_nvlink_ns", -3);
  what = message();
  EXPECT_NE(what.find("\"nccl_step_latency_nvlink_ns\" is -3"), std::string::npos) << what;
  EXPECT_NE(what.find("must be >= 0"), std::string::npos) << what;
  write_with("gloo_step_latency_ns", 20000);  // a good value loads
  EXPECT_EQ(load_model(path).collective.gloo_step_ns, 20000);
}

// ---------------------------------------------------------------- ranks agree

struct Clocks {
  int64_t joined = 0;
  std::vector<std::pair<int64_t, int64_t>> calls;  // (before, after) of all_reduce, broadcast, all_gather, reduce_scatter
};

Clocks read_clocks(const std::string& path) {
  Clocks c;
  std::ifstream in(path);
  in >> c.joined;
  int64_t before, after;
  while (in >> before >> after) c.calls.emplace_back(before, after);
  return c;
}

std::vector<Clocks> run_clock(int world, const std::string& device, int64_t late_ns, std::vector<std::string> env = {}) {
  const fs::path out = fresh_dir("clock") / "clock";
  auto outcomes = run_ranks(world, {"clock", device, out.string(), std::to_string(late_ns)}, file_init("clock"), env, -1, 60);
  std::vector<Clocks> clocks;
  for (const auto& o : outcomes) EXPECT_TRUE(o.ok()) << describe(outcomes);
  for (int r = 0; r < world; ++r) clocks.push_back(read_clocks(out.string() + "." + std::to_string(r)));
  fs::remove_all(out.parent_path());
  return clocks;
}

// Every rank leaves each collective (and the synchronize after it) at the
// same modelled time, the late rank's issue plus the cost.
void expect_ranks_agree(int world) {
  const int64_t late = 5'000'000;  // rank r's host is r x 5 ms ahead
  // Rank r also joins r x 2 ms late: init_process_group aligns every clock to the latest.
  const auto clocks = run_clock(world, "cuda0", late, {"TINY_EMULATED_GPUS=1", "TINY_TEST_EARLY_NS=2000000"});
  ASSERT_EQ(static_cast<int>(clocks.size()), world);
  const DeviceModel& h = model("h100-sxm");
  for (int r = 0; r < world; ++r) {
    ASSERT_EQ(clocks[r].calls.size(), 4u) << "rank " << r;
    EXPECT_EQ(clocks[r].joined, clocks[0].joined) << "rank " << r << ": init_process_group aligns the clocks";
    EXPECT_GE(clocks[r].joined, (world - 1) * 2'000'000) << "rank " << r << ": the latest clock wins";
    for (size_t c = 0; c < 4; ++c)
      EXPECT_EQ(clocks[r].calls[c].second, clocks[0].calls[c].second) << "rank " << r << ", collective " << c;
  }
  // The last rank is the latest: the all_reduce and the broadcast (no other
  // kernel) end at its issue + launch + launch latency + the ring's cost, and
  // the synchronize after them adds its own cost.
  const auto& last = clocks[world - 1].calls;
  const int64_t issue = h.host_launch_ns + h.launch_latency_ns;
  EXPECT_EQ(last[0].second - last[0].first,
            issue + nccl_collective_ns(h, Collective::all_reduce, world, kMiB) + h.sync_ns);
  EXPECT_EQ(last[1].second - last[1].first,
            issue + nccl_collective_ns(h, Collective::broadcast, world, kMiB) + h.sync_ns);
}

TEST(PerfModelDistributed, TwoRanksAgreeOnACollectivesEndWhenOneIsLate) { expect_ranks_agree(2); }

TEST(PerfModelDistributed, ThreeRanksAgreeOnACollectivesEndWhenOneIsLate) { expect_ranks_agree(3); }

TEST(PerfModelDistributed, GlooOnCpuTensorsAgreesThroughHostMemory) {
  const auto clocks = run_clock(2, "cpu", 5'000'000);
  ASSERT_EQ(clocks.size(), 2u);
  ASSERT_EQ(clocks[1].calls.size(), 4u);
  for (size_t c = 0; c < 4; ++c) EXPECT_EQ(clocks[0].calls[c].second, clocks[1].calls[c].second) << c;
  // The late rank pays Gloo's all-reduce of 1 MiB only: CPU tensors cost the host nothing else.
  EXPECT_EQ(clocks[1].calls[0].second - clocks[1].calls[0].first,
            gloo_collective_ns(model("h100-sxm"), Collective::all_reduce, 2, kMiB));
}

// ---------------------------------------------------------------- the same in every mode

TEST(PerfModelDistributed, IdenticalAcrossExecutionModesAndRandomSleeps) {
  auto flat = [](const std::vector<Clocks>& clocks) {
    std::vector<int64_t> v;
    for (const auto& c : clocks) {
      v.push_back(c.joined);
      for (const auto& [b, a] : c.calls) {
        v.push_back(b);
        v.push_back(a);
      }
    }
    return v;
  };
  // Each run names its mode (the suite's extended tier sets TINY_LAUNCH_BLOCKING=1 for everything).
  auto with = [&](std::vector<std::string> env) {
    env.push_back("TINY_EMULATED_GPUS=1");
    return flat(run_clock(2, "cuda0", 1'000'000, env));
  };
  const auto threaded = with({"TINY_LAUNCH_BLOCKING=0", "TINY_EMULATED_GPU_MODE=threaded"});
  ASSERT_EQ(threaded.size(), 2u * 9u);
  EXPECT_EQ(with({"TINY_LAUNCH_BLOCKING=1", "TINY_EMULATED_GPU_MODE=blocking"}), threaded) << "blocking mode";
  EXPECT_EQ(with({"TINY_LAUNCH_BLOCKING=0", "TINY_EMULATED_GPU_MODE=deferred"}), threaded) << "deferred mode";
  EXPECT_EQ(with({"TINY_LAUNCH_BLOCKING=0", "TINY_EMULATED_GPU_MODE=threaded",
                  "TINY_TEST_SLEEP_SEED=" + std::to_string(::getpid())}),
            threaded)
      << "random real sleeps";
}

// ---------------------------------------------------------------- DDP's overlap

struct Slice {
  double ts = 0, dur = 0;
  int64_t bytes = 0;
};

struct Step {
  int64_t ns = 0;
  size_t buckets = 0;
  int64_t start = 0, end = 0;  // rank 0's modelled clock around the step
  std::vector<Slice> kernels, collectives;  // rank 0's, on cuda:0
  std::vector<Slice> collectives_rank1;
};

std::vector<Slice> slices(const nlohmann::json& trace, bool collectives) {
  std::vector<Slice> out;
  for (const auto& e : trace["traceEvents"]) {
    if (e.value("ph", "") != "X" || e.value("cat", "") != "kernel") continue;
    if ((e["tid"].get<int64_t>() == 1002) != collectives) continue;
    if (collectives) {
      EXPECT_EQ(e.value("name", ""), "ncclDevKernel_AllReduce_RING");
    }
    out.push_back({e["ts"].get<double>(), e["dur"].get<double>(), e["args"].value("bytes", int64_t{0})});
  }
  std::sort(out.begin(), out.end(), [](const Slice& a, const Slice& b) { return a.ts < b.ts; });
  return out;
}

// The step's real work is heavy for a loaded 2-core machine: a generous timeout, so a slow rank is not a lost one.
Step run_ddp_step(double bucket_mb, std::vector<std::string> env = {}) {
  const fs::path out = fresh_dir("ddp_time") / "step";
  env.push_back("TINY_DIST_TIMEOUT=120");
  auto outcomes = run_ranks(2, {"ddp_time", out.string(), std::to_string(bucket_mb)}, file_init("ddp_time"), env, -1, 300);
  Step step;
  bool ok = true;
  for (const auto& o : outcomes) ok = ok && o.ok();
  EXPECT_TRUE(ok) << describe(outcomes);
  if (!ok) {
    fs::remove_all(out.parent_path());
    return step;
  }
  std::ifstream(out.string() + ".0") >> step.ns >> step.buckets >> step.start >> step.end;
  int64_t ns1 = 0;
  std::ifstream(out.string() + ".1") >> ns1;
  EXPECT_EQ(ns1, step.ns) << "the ranks' modelled step times differ";
  nlohmann::json trace0, trace1;
  std::ifstream(out.string() + ".0.json") >> trace0;
  std::ifstream(out.string() + ".1.json") >> trace1;
  // The collectives have a track of their own on the device (Perfetto draws overlapping slices only on separate tracks).
  bool named = false;
  for (const auto& e : trace0["traceEvents"])
    named = named || (e.value("ph", "") == "M" && e.value("name", "") == "thread_name" && e["tid"] == 1002 &&
                      e["args"].value("name", "") == "collectives (NCCL)");
  EXPECT_TRUE(named) << "no track named \"collectives (NCCL)\" in the trace";
  step.kernels = slices(trace0, false);
  step.collectives = slices(trace0, true);
  step.collectives_rank1 = slices(trace1, true);
  fs::remove_all(out.parent_path());
  return step;
}

// Strictly (the trace's microseconds are doubles: a kernel ending as the all-reduce starts is not overlap).
bool overlaps(const Slice& a, const Slice& b) {
  return a.ts < b.ts + b.dur - 1e-3 && b.ts < a.ts + a.dur - 1e-3;
}

double busy(const std::vector<Slice>& s) {
  double total = 0;
  for (const Slice& x : s) total += x.dur;
  return total;
}

// Four Linear(1024, 1024) layers, batch 1024 per rank, two ranks on h100-sxm.
TEST(PerfModelDistributed, DdpAllReducesOverlapBackwardAndBucketSizeChangesTheStep) {
  const DeviceModel& h = model("h100-sxm");
  const Step small = run_ddp_step(1.0);   // a bucket per layer (its weight, 4 MiB, and bias)
  const Step one = run_ddp_step(100.0);   // one bucket of 16 MiB: it can start only after the whole backward
  ASSERT_GT(small.ns, 0);
  ASSERT_GT(one.ns, 0);
  ASSERT_EQ(small.buckets, 4u);
  ASSERT_EQ(one.buckets, 1u);
  ASSERT_EQ(small.collectives.size(), 4u);
  ASSERT_EQ(one.collectives.size(), 1u);
  // Each all-reduce lasts what the ring model says for its bucket, and both ranks place it at the same time.
  for (const Step* s : {&small, &one}) {
    ASSERT_EQ(s->collectives.size(), s->collectives_rank1.size());
    for (size_t i = 0; i < s->collectives.size(); ++i) {
      const Slice& c = s->collectives[i];
      EXPECT_NEAR(c.dur * 1e3, nccl_collective_ns(h, Collective::all_reduce, 2, c.bytes), 1.0) << "bucket " << i;
      EXPECT_DOUBLE_EQ(c.ts, s->collectives_rank1[i].ts) << "bucket " << i;
      EXPECT_DOUBLE_EQ(c.dur, s->collectives_rank1[i].dur) << "bucket " << i;
    }
  }
  EXPECT_EQ(one.collectives[0].bytes, 4 * (1024 * 1024 + 1024) * 4);
  // Small buckets: the first all-reduces run while backward's kernels do.
  size_t overlapped = 0;
  for (const Slice& c : small.collectives)
    for (const Slice& k : small.kernels) overlapped += overlaps(c, k) ? 1 : 0;
  EXPECT_GT(overlapped, 0u) << "no kernel ran during an all-reduce: no overlap";
  // ... so the step is shorter than its kernels and all-reduces one after the other.
  EXPECT_LT(static_cast<double>(small.ns), (busy(small.kernels) + busy(small.collectives)) * 1e3);
  // One bucket: nothing of backward is left to overlap: no kernel runs during it.
  for (const Slice& k : one.kernels) EXPECT_FALSE(overlaps(one.collectives[0], k)) << "kernel at " << k.ts << " us";
  // By hand: the step ends when the last all-reduce has ended, the kernels
  // that must follow it (the copies of its bucket back into the gradients)
  // have run back to back, and the host has paid its synchronize. With small
  // buckets only the last bucket's all-reduce is exposed; with one bucket the
  // whole 16 MiB one, and every copy back follows it.
  for (const Step* s : {&small, &one}) {
    const double last_end_us = s->collectives.back().ts + s->collectives.back().dur;
    double tail_us = 0;
    for (const Slice& k : s->kernels)
      if (k.ts >= last_end_us - 1e-3) tail_us += k.dur;
    EXPECT_NEAR(static_cast<double>(s->end), (last_end_us + tail_us) * 1e3 + h.sync_ns, 2.0)
        << (s == &small ? "small buckets" : "one bucket");
  }
  EXPECT_LT(small.ns, one.ns);
  EXPECT_GE(static_cast<double>(one.ns - small.ns) + 2.0,
            (one.collectives[0].dur - small.collectives.back().dur) * 1e3)
      << "small buckets: " << small.ns << " ns, one bucket: " << one.ns << " ns";
  std::printf("modelled DDP step on h100-sxm, 2 ranks, 4 x Linear(1024, 1024), batch 1024 per rank: %.1f us with "
              "4 buckets of 4 MiB, %.1f us with one bucket of 16 MiB (all-reduces %.1f us and %.1f us)\n",
              small.ns * 1e-3, one.ns * 1e-3, busy(small.collectives), busy(one.collectives));
}

TEST(PerfModelDistributed, DdpStepIsIdenticalAcrossExecutionModes) {
  const Step threaded = run_ddp_step(1.0, {"TINY_LAUNCH_BLOCKING=0", "TINY_EMULATED_GPU_MODE=threaded"});
  ASSERT_GT(threaded.ns, 0);
  const std::vector<std::vector<std::string>> others{
      {"TINY_LAUNCH_BLOCKING=1", "TINY_EMULATED_GPU_MODE=blocking"},
      {"TINY_LAUNCH_BLOCKING=0", "TINY_EMULATED_GPU_MODE=deferred"},
      {"TINY_LAUNCH_BLOCKING=0", "TINY_EMULATED_GPU_MODE=threaded", "TINY_TEST_SLEEP_SEED=11"}};
  for (const auto& env : others) {
    const std::string setting = env[1] + (env.size() > 2 ? " " + env[2] : "");
    const Step other = run_ddp_step(1.0, env);
    EXPECT_EQ(other.ns, threaded.ns) << setting;
    ASSERT_EQ(other.collectives.size(), threaded.collectives.size()) << setting;
    for (size_t i = 0; i < other.collectives.size(); ++i) EXPECT_DOUBLE_EQ(other.collectives[i].ts, threaded.collectives[i].ts) << setting;
  }
}

}  // namespace
