// tiny::profiler on the emulated GPU: the Chrome trace it writes (parsed
// back), key_averages, and its bad inputs.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <functional>
#include <map>
#include <set>
#include <sstream>
#include <iterator>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "test_util.h"
#include "tiny/cuda.h"
#include "tiny/data/data.h"
#include "tiny/nn/functional.h"
#include "tiny/nn/nn.h"
#include "tiny/optim/optim.h"
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

// A data set whose every batch declares 1 ms of host work (a transform).
class OneMsPerBatch : public tiny::data::TensorDataset {
 public:
  OneMsPerBatch() : TensorDataset(tiny::arange(8).to(tiny::kFloat32), tiny::zeros({8}, tiny::kInt64)) {}
  int64_t modelled_load_ns(const std::vector<int64_t>& indices) const override {
    (void)indices;
    return 1000000;
  }
};

// The host ranges (us) of the loader's __next__ in one profiled epoch of 4 batches
// whose loop spends 0.1 ms of launches each, keyed by name.
std::map<std::string, std::vector<double>> loader_ranges(int num_workers) {
  tiny::data::DataLoaderOptions options;
  options.batch_size = 2;
  options.num_workers = num_workers;
  tiny::data::DataLoader loader(std::make_shared<OneMsPerBatch>(), options);
  const tiny::Tensor x = tiny::zeros({1}, tiny::Device("cuda:0"));
  tiny::cuda::synchronize(0);
  tiny::profiler::profile prof;
  for (const tiny::data::Batch& batch : loader) {
    (void)batch;
    for (int i = 0; i < 10; ++i) x.add_(1);  // about 57 us of launches
  }
  prof.stop();
  std::map<std::string, std::vector<double>> ranges;
  const json trace = json::parse(prof.chrome_trace());
  for (const json& e : trace["traceEvents"]) {
    const std::string name = e.value("name", "");
    if (e["ph"] == "X" && e["cat"] == "cpu_op" && name.rfind("enumerate(DataLoader)", 0) == 0) {
      ranges[name].push_back(e["dur"].get<double>());
    }
  }
  tiny::cuda::synchronize(0);
  return ranges;
}

TEST(Profiler, TheLoadersWaitIsAHostRangeNamedAsPyTorchNamesIt) {
  // No workers: the loop loads each batch itself, 1 ms each (one range per batch taken).
  auto ranges = loader_ranges(0);
  const std::vector<double>& single = ranges["enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__"];
  ASSERT_EQ(single.size(), 4u) << "one range per batch";
  for (size_t k = 0; k < 4; ++k) EXPECT_NEAR(single[k], 1000.0, 1.0) << "batch " << k << " costs its 1 ms";
  EXPECT_EQ(ranges.count("enumerate(DataLoader)#_MultiProcessingDataLoaderIter.__next__"), 0u);
  // Four workers load all four batches at once from the epoch's start: the loop
  // waits 1 ms for the first, then finds the others ready.
  ranges = loader_ranges(4);
  const std::vector<double>& multi = ranges["enumerate(DataLoader)#_MultiProcessingDataLoaderIter.__next__"];
  ASSERT_EQ(multi.size(), 4u);
  EXPECT_NEAR(multi[0], 1000.0, 1.0) << "the first batch is waited for";
  for (size_t k = 1; k < 4; ++k) EXPECT_LT(multi[k], 1.0) << "batch " << k << " was ready";
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
      EXPECT_NE(std::string(e.what()).find("does not exist"), std::string::npos) << e.what();
    }
    // A folder that exists but takes no files is not called missing.
    try {
      third.export_chrome_trace("/proc/trace.json");
      FAIL() << "exported into /proc";
    } catch (const tiny::IOError& e) {
      EXPECT_EQ(std::string(e.what()).find("does not exist"), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("/proc takes no new files"), std::string::npos) << e.what();
    }
  }
  tiny::profiler::profile after_scope;  // the first's destructor stopped nothing twice
}

TEST(Profiler, ResultsAreReadOnlyOnceStopped) {
  tiny::profiler::profile prof;
  const tiny::Tensor x = tiny::ones({4}).to(tiny::Device("cuda:0")).mul(2);
  tiny::cuda::synchronize(0);
  // torch.profiler raises "Profiler didn't finish running"; an empty table would mislead.
  for (const auto& [call, read] : std::vector<std::pair<std::string, std::function<void()>>>{
           {"key_averages", [&] { (void)prof.key_averages(); }},
           {"chrome_trace", [&] { (void)prof.chrome_trace(); }},
           {"export_chrome_trace", [&] { prof.export_chrome_trace("/tmp/unused-trace.json"); }},
           {"export_timeline_html", [&] { prof.export_timeline_html("/tmp/unused-trace.html"); }}}) {
    try {
      read();
      ADD_FAILURE() << call << " read a profile that was still recording";
    } catch (const tiny::Error& e) {
      EXPECT_NE(std::string(e.what()).find(call + ": the profile is still recording; call prof.stop() first"),
                std::string::npos)
          << e.what();
    }
  }
  prof.stop();
  EXPECT_NE(prof.key_averages().find("mul"), std::string::npos) << prof.key_averages();
}

// ---------------------------------------------------------------- record_shapes

// A linear, a matmul and a cross_entropy on cuda:0, as a classifier's step does.
void run_shaped_ops() {
  const tiny::Device gpu("cuda:0");
  const tiny::Tensor x = tiny::randn({64, 784}).to(gpu), w = tiny::randn({512, 784}).to(gpu),
                     b = tiny::randn({512}).to(gpu), w2 = tiny::randn({512, 10}).to(gpu);
  const tiny::Tensor target = tiny::randint(0, 10, {64}).to(gpu);
  const tiny::Tensor h = tiny::nn::functional::linear(x, w, b);
  const tiny::Tensor logits = tiny::matmul(h, w2);
  const tiny::Tensor loss = tiny::nn::functional::cross_entropy(logits, target);
  tiny::cuda::synchronize(0);
}

// The cpu_op events of `trace` named `name`.
std::vector<json> cpu_ops(const json& trace, const std::string& name) {
  std::vector<json> found;
  for (const json& e : trace["traceEvents"]) {
    if (e["ph"] == "X" && e["cat"] == "cpu_op" && e["name"] == name) found.push_back(e);
  }
  return found;
}

TEST(Profiler, RecordShapesWritesKinetosInputDimsAndTypes) {
  tiny_test::TempDir dir;
  const std::string path = dir.file("trace.json");
  {
    tiny::profiler::profile prof(tiny::profiler::ProfileOptions{/*record_shapes=*/true});
    run_shaped_ops();
    prof.stop();
    prof.export_chrome_trace(path);
  }
  json trace;
  std::ifstream(path) >> trace;
  const std::vector<json> linear = cpu_ops(trace, "linear"), matmul = cpu_ops(trace, "matmul"),
                          loss = cpu_ops(trace, "cross_entropy");
  ASSERT_EQ(linear.size(), 1u);
  ASSERT_EQ(matmul.size(), 1u);
  ASSERT_EQ(loss.size(), 1u);
  EXPECT_EQ(linear[0]["args"]["Input Dims"], json::parse("[[64, 784], [512, 784], [512]]")) << linear[0].dump();
  EXPECT_EQ(linear[0]["args"]["Input type"], json::parse(R"(["float", "float", "float"])")) << linear[0].dump();
  EXPECT_EQ(matmul[0]["args"]["Input Dims"], json::parse("[[64, 512], [512, 10]]")) << matmul[0].dump();
  EXPECT_EQ(loss[0]["args"]["Input Dims"], json::parse("[[64, 10], [64]]")) << loss[0].dump();
  EXPECT_EQ(loss[0]["args"]["Input type"], json::parse(R"(["float", "long int"])")) << loss[0].dump();
}

TEST(Profiler, KeyAveragesGroupedByInputShapeHasOneRowPerShape) {
  tiny::profiler::profile prof(tiny::profiler::ProfileOptions{/*record_shapes=*/true});
  run_shaped_ops();
  // The same op on other shapes: a row of its own.
  const tiny::Device gpu("cuda:0");
  tiny::nn::functional::linear(tiny::randn({8, 16}).to(gpu), tiny::randn({4, 16}).to(gpu));
  tiny::cuda::synchronize(0);
  prof.stop();
  const std::string table = prof.key_averages(/*group_by_input_shape=*/true);
  EXPECT_NE(table.find("Input Shapes"), std::string::npos) << table;
  auto row = [&](const std::string& name, const std::string& shapes) {
    std::istringstream lines(table);
    for (std::string line; std::getline(lines, line);) {
      if (line.rfind(name + " ", 0) == 0 && line.size() >= shapes.size() &&
          line.compare(line.size() - shapes.size(), shapes.size(), shapes) == 0) {
        return line;
      }
    }
    return std::string();
  };
  EXPECT_NE(row("linear", "[[64, 784], [512, 784], [512]]"), "") << table;
  EXPECT_NE(row("linear", "[[8, 16], [4, 16], []]"), "") << "no bias: [] as PyTorch writes it\n" << table;
  EXPECT_NE(row("matmul", "[[64, 512], [512, 10]]"), "") << table;
  EXPECT_NE(row("cross_entropy", "[[64, 10], [64]]"), "") << table;
  EXPECT_NE(row("gemm", "[]"), "") << "a kernel has no input shapes\n" << table;
  // The op's row has its kernels' device time, as aten::linear's has.
  std::istringstream fields(row("linear", "[[64, 784], [512, 784], [512]]"));
  std::string name, unit;
  long long calls = 0;
  double host_total = 0, host_avg = 0, device_total = 0;
  fields >> name >> calls >> host_total >> unit >> host_avg >> unit >> device_total;
  EXPECT_EQ(calls, 1);
  EXPECT_GT(device_total, 0.0) << table;
  // Ungrouped, the two linears are one row, as before.
  const std::string plain = prof.key_averages();
  EXPECT_EQ(plain.find("Input Shapes"), std::string::npos) << plain;
  EXPECT_EQ(plain.find("[[64, 784]"), std::string::npos) << plain;
}

// The grouped table docs/performance_model.md shows ("Shapes"): a 784-512-10
// network, batch 64, two SGD steps. Each row the page quotes must be a row of
// today's table (the clock is the same on every machine), whitespace aside.
TEST(Profiler, TheModelPagesShapesTableIsTodays) {
  const tiny::Device gpu("cuda:0");
  tiny::manual_seed(0);
  tiny::nn::Sequential model(std::make_shared<tiny::nn::Linear>(784, 512), std::make_shared<tiny::nn::ReLU>(),
                             std::make_shared<tiny::nn::Linear>(512, 10));
  model.to(gpu);
  tiny::optim::SGD optimizer(model.parameters(), 0.01);
  const tiny::Tensor x = tiny::randn({64, 784}).to(gpu), target = tiny::randint(0, 10, {64}).to(gpu);
  tiny::cuda::synchronize(0);
  tiny::profiler::profile prof(tiny::profiler::ProfileOptions{/*record_shapes=*/true});
  for (int i = 0; i < 2; ++i) {
    optimizer.zero_grad();
    tiny::nn::functional::cross_entropy(model(x), target).backward();
    optimizer.step();
    prof.step();
  }
  tiny::cuda::synchronize(0);
  prof.stop();
  const std::string table = prof.key_averages(/*group_by_input_shape=*/true);
  auto words = [](const std::string& line) {
    std::istringstream in(line);
    std::string all, word;
    while (in >> word) all += word + " ";
    return all;
  };
  std::set<std::string> rows;
  std::istringstream table_lines(table);
  for (std::string line; std::getline(table_lines, line);) rows.insert(words(line));

  std::ifstream in(std::string(TINY_SOURCE_DIR) + "/docs/performance_model.md");
  const std::string page((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const std::string intro = "each row quoted here to today's table):\n\n";
  const size_t from = page.find(intro);
  ASSERT_NE(from, std::string::npos) << "docs/performance_model.md no longer has the table's introduction";
  std::istringstream quoted(page.substr(from + intro.size(), page.find("\n\n", from + intro.size()) - from -
                                                                  intro.size()));
  int checked = 0;
  for (std::string line; std::getline(quoted, line); ++checked) {
    EXPECT_EQ(rows.count(words(line)), 1u) << "docs/performance_model.md quotes a row today's table does not have:\n"
                                           << line << "\ntoday's table:\n" << table;
  }
  EXPECT_GE(checked, 4) << "the page quotes the heading and three rows at least";
}

TEST(Profiler, ShapesAreNotRecordedByDefault) {
  tiny_test::TempDir dir;
  const std::string path = dir.file("trace.json");
  tiny::profiler::profile prof;
  run_shaped_ops();
  prof.stop();
  prof.export_chrome_trace(path);
  json trace;
  std::ifstream(path) >> trace;
  ASSERT_EQ(cpu_ops(trace, "linear").size(), 1u);
  for (const json& e : trace["traceEvents"]) {
    EXPECT_FALSE(e.contains("args") && e["args"].contains("Input Dims")) << e.dump();
  }
  const std::string table = prof.key_averages(/*group_by_input_shape=*/true);
  EXPECT_EQ(table.find("[64, 784]"), std::string::npos) << "grouped without shapes: every row's are []\n" << table;
}

TEST(Profiler, StepsAreProfilerStepRanges) {
  tiny::profiler::profile prof;
  bench::TinyTrainer t(bench::training_cases()[2], tiny::Device("cuda:0"));
  for (int i = 0; i < 3; ++i) {
    t.step();
    tiny::cuda::synchronize(0);
    prof.step();
  }
  prof.stop();
  prof.step();  // ignored once stopped
  const json trace = json::parse(prof.chrome_trace());
  std::vector<std::string> steps;
  for (const json& e : trace["traceEvents"]) {
    if (e["ph"] == "X" && e["cat"] == "user_annotation") {
      steps.push_back(e["name"]);
      EXPECT_GT(e["dur"].get<double>(), 0.0) << e.dump();
    }
  }
  EXPECT_EQ(steps, (std::vector<std::string>{"ProfilerStep#0", "ProfilerStep#1", "ProfilerStep#2"}));
  EXPECT_NE(prof.key_averages().find("ProfilerStep*"), std::string::npos) << prof.key_averages();
}

// A model on the CPU: the modelled host clock counts only dispatch, so a profile
// with no GPU work shows the host's own clock, as torch.profiler does on a CPU.
TEST(Profiler, ACpuOnlyProfileIsMeasuredOnTheHostsClock) {
  const tiny::Tensor a = tiny::randn({256, 256}), b = tiny::randn({256, 256});
  tiny::profiler::profile prof;
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < 20; ++i) (void)tiny::matmul(a, b);
  const double wall_us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count();
  prof.stop();
  const json trace = json::parse(prof.chrome_trace());
  double ops_us = 0;
  int ops = 0;
  for (const json& e : trace["traceEvents"]) {
    if (e["ph"] == "X" && e["cat"] == "cpu_op") {
      ops_us += e["dur"].get<double>();
      ++ops;
    }
    if (e["ph"] == "M" && e["name"] == "process_name" && e["pid"] == 0) {
      EXPECT_EQ(e["args"]["name"], "host") << "not modelled: " << e.dump();
    }
  }
  ASSERT_EQ(ops, 20) << trace.dump();
  // 20 products of 256 x 256 are nearly all of the loop: their measured ranges
  // cover most of it (modelled, they would be 20 dispatches of a few us).
  EXPECT_GT(ops_us, 0.5 * wall_us) << "ops " << ops_us << " us of a " << wall_us << " us loop";
  EXPECT_LE(ops_us, wall_us + 1.0);
  EXPECT_NE(trace["otherData"]["clock"].get<std::string>().find("measured on the host's clock"), std::string::npos);
  EXPECT_NE(prof.key_averages().find("measured on the host's clock"), std::string::npos) << prof.key_averages();

  // One GPU op in the profile, and its times are the model's again.
  tiny::profiler::profile mixed;
  (void)tiny::matmul(a, b);
  (void)tiny::ones({4}, tiny::Device("cuda:0")).add_(1);
  tiny::cuda::synchronize(0);
  mixed.stop();
  EXPECT_NE(mixed.key_averages().find("modelled times on the emulated GPU"), std::string::npos)
      << mixed.key_averages();
}

// ---------------------------------------------------------------- the SVG timeline

size_t count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

TEST(ProfilerTimeline, DrawsALanePerHostThreadStreamAndCopyEngine) {
  tiny::profiler::profile prof;
  bench::TinyTrainer t(bench::training_cases()[2], tiny::Device("cuda:0"));
  for (int i = 0; i < 2; ++i) {
    t.step();
    tiny::cuda::synchronize(0);
    prof.step();
  }
  run_profiled_work();  // a side stream and a pinned copy
  prof.stop();
  tiny::profiler::TimelineOptions options;
  options.title = "two steps";
  options.notes.push_back("measured: 42 us");
  const std::string svg = tiny::profiler::timeline_svg(prof.chrome_trace(), options);
  EXPECT_EQ(svg.rfind("<svg", 0), 0u);
  EXPECT_EQ(count(svg, "<g"), count(svg, "</g>")) << "every group closed";
  EXPECT_EQ(count(svg, "<rect"), count(svg, "/>") - count(svg, "<path") - count(svg, "<line"))
      << "every rect closed";
  for (const std::string lane : {"host (modelled) / host thread 0", "cuda:0 (modelled) / stream 0",
                                 "cuda:0 (modelled) / copy engine: host to device"}) {
    EXPECT_NE(svg.find("data-lane=\"" + lane + "\""), std::string::npos) << lane;
  }
  EXPECT_GE(count(svg, "class=\"lane\""), 4u) << "host, two streams, a copy engine";
  EXPECT_LT(svg.find("host thread 0"), svg.find("stream 0")) << "the host's lanes first";
  EXPECT_NE(svg.find("modelled step time: "), std::string::npos);
  EXPECT_NE(svg.find("(mean of 2 ProfilerStep ranges)"), std::string::npos);
  EXPECT_NE(svg.find("measured: 42 us"), std::string::npos);
  EXPECT_NE(svg.find(" ms</text>"), std::string::npos) << "a time axis in ms";
  EXPECT_NE(svg.find("#7cc47f"), std::string::npos) << "kernels in their colour";
  EXPECT_NE(svg.find(">ProfilerStep#0</text>"), std::string::npos) << "a slice wide enough is labelled";

  const std::string page = tiny::profiler::timeline_html(prof.chrome_trace(), options);
  EXPECT_EQ(count(page, "<svg class=\"timeline\""), 2u) << "the whole trace and its last step alone";
  EXPECT_NE(page.find("ProfilerStep#1 alone"), std::string::npos);
}

TEST(ProfilerTimeline, ReadsAPyTorchTrace) {
  // The shape of a Kineto trace as torch.profiler writes it: a big host pid,
  // the GPU as pid 0, a string tid.
  const std::string kineto = R"({"schemaVersion": 1, "traceEvents": [
    {"ph": "X", "cat": "cpu_op", "name": "aten::linear", "pid": 4242, "tid": 4242, "ts": 1000.5, "dur": 40,
     "args": {"Input Dims": [[64, 784], [512, 784], [512]]}},
    {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 4242, "tid": 4242, "ts": 1010, "dur": 5},
    {"ph": "X", "cat": "kernel", "name": "ampere_sgemm_64x64_tn", "pid": 0, "tid": 7, "ts": 1020, "dur": 12},
    {"ph": "X", "cat": "python_function", "name": "train.py(12): step", "pid": 4242, "tid": "PyTorch main", "ts": 999, "dur": 80},
    {"ph": "M", "name": "thread_name", "pid": 0, "tid": 7, "args": {"name": "stream 7"}},
    {"ph": "s", "id": 1, "pid": 4242, "tid": 4242, "ts": 1010, "cat": "ac2g", "name": "ac2g"}]})";
  const std::string svg = tiny::profiler::timeline_svg(kineto);
  EXPECT_EQ(count(svg, "class=\"lane\""), 3u) << svg;
  EXPECT_NE(svg.find("data-lane=\"process 0 / stream 7\""), std::string::npos) << svg;
  EXPECT_LT(svg.find("process 4242"), svg.find("process 0 /")) << "the host's lanes first";
  EXPECT_NE(svg.find("Input Dims: [[64,784],[512,784],[512]]"), std::string::npos) << "details in the tooltip";
  EXPECT_EQ(svg.find("step time"), std::string::npos) << "no ProfilerStep, no step time";
}

// An op whose only cost is its launch has the launch's very range: the op is drawn above it.
TEST(ProfilerTimeline, AnOpHoldsALaunchOfTheSameRange) {
  const std::string trace = R"({"traceEvents": [
    {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 0, "tid": 0, "ts": 10, "dur": 5.7},
    {"ph": "X", "cat": "cpu_op", "name": "relu", "pid": 0, "tid": 0, "ts": 10, "dur": 5.7}]})";
  const std::string svg = tiny::profiler::timeline_svg(trace);
  auto y_of = [&](const std::string& name) {
    const size_t title = svg.find("<title>" + name);
    const size_t y = svg.find(" y=\"", title);
    return std::stod(svg.substr(y + 4));
  };
  EXPECT_LT(y_of("relu"), y_of("cudaLaunchKernel")) << svg;
}

TEST(ProfilerTimeline, AMalformedTraceIsANamedError) {
  auto message = [](const std::string& text) {
    try {
      tiny::profiler::timeline_svg(text);
    } catch (const tiny::ValueError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  std::string m = message("{\"traceEvents\": [");
  EXPECT_NE(m.find("not valid JSON"), std::string::npos) << m;
  EXPECT_NE(m.find("export_chrome_trace"), std::string::npos) << "says what to give instead: " << m;
  m = message(R"({"events": []})");
  EXPECT_NE(m.find("no \"traceEvents\" array"), std::string::npos) << m;
  m = message(R"({"traceEvents": [{"ph": "X", "name": "k", "ts": "soon", "dur": 1}]})");
  EXPECT_NE(m.find("traceEvents[0]"), std::string::npos) << m;
  EXPECT_NE(m.find("\"soon\""), std::string::npos) << "names the value: " << m;
  m = message(R"({"traceEvents": [{"ph": "M"}, {"ph": "X", "name": "k", "ts": 1, "dur": -3}]})");
  EXPECT_NE(m.find("traceEvents[1]"), std::string::npos) << m;
  EXPECT_NE(m.find("-3"), std::string::npos) << m;
  m = message(R"({"traceEvents": [7]})");
  EXPECT_NE(m.find("traceEvents[0] is not an object but 7"), std::string::npos) << m;
  // Found by mutating a real trace: a number too large for a double is bad JSON, not a crash ...
  m = message(R"({"traceEvents": [{"ph": "X", "ts": 28.9e3080002}]})");
  EXPECT_NE(m.find("not valid JSON"), std::string::npos) << m;
  // ... a name that is not a string is no name, and a window far from the first event
  // (-1e308) draws few ticks instead of looping forever.
  tiny::profiler::TimelineOptions window;
  window.from_us = 87;
  window.to_us = 218;
  const std::string far = tiny::profiler::timeline_svg(
      R"({"traceEvents": [{"ph": "M", "name": 5, "args": {"name": "x"}},
                          {"ph": "X", "name": "a", "ts": -1e308, "dur": 0}, {"ph": "X", "name": "b", "ts": 100, "dur": 9}]})",
      window);
  EXPECT_LT(far.size(), 100000u);
  // No complete events: a drawing that says so, not an error.
  const std::string empty = tiny::profiler::timeline_svg(R"({"traceEvents": []})");
  EXPECT_NE(empty.find("no complete events"), std::string::npos) << empty;
}

TEST(ProfilerTimeline, BadPathsAreNamed) {
  tiny_test::TempDir dir;
  const std::string trace = dir.file("trace.json"), bad = dir.file("bad.json");
  {
    tiny::profiler::profile prof;
    run_profiled_work();
    prof.stop();
    prof.export_chrome_trace(trace);
    try {
      prof.export_timeline_html("/nonexistent-folder/trace.html");
      FAIL() << "wrote into a folder that does not exist";
    } catch (const tiny::IOError& e) {
      EXPECT_NE(std::string(e.what()).find("/nonexistent-folder/trace.html"), std::string::npos) << e.what();
    }
    prof.export_timeline_html(dir.file("from_profile.html"));
  }
  tiny::profiler::write_timeline_html(trace, dir.file("trace.html"));
  std::ifstream page(dir.file("trace.html"));
  const std::string html((std::istreambuf_iterator<char>(page)), std::istreambuf_iterator<char>());
  EXPECT_EQ(html.rfind("<!DOCTYPE html>", 0), 0u);
  EXPECT_NE(html.find("<svg class=\"timeline\""), std::string::npos);
  try {
    tiny::profiler::write_timeline_html(dir.file("missing.json"), dir.file("x.html"));
    FAIL() << "read a trace that does not exist";
  } catch (const tiny::IOError& e) {
    EXPECT_NE(std::string(e.what()).find(dir.file("missing.json")), std::string::npos) << e.what();
  }
  std::ofstream(bad) << "{\"traceEvents\": [{\"ph\": \"X\", \"ts\": null}]}";
  try {
    tiny::profiler::write_timeline_html(bad, dir.file("x.html"));
    FAIL() << "drew a malformed trace";
  } catch (const tiny::ValueError& e) {
    EXPECT_NE(std::string(e.what()).find(bad), std::string::npos) << "names the file: " << e.what();
    EXPECT_NE(std::string(e.what()).find("\"ts\": null"), std::string::npos) << e.what();
  }
  try {
    tiny::profiler::write_timeline_html(trace, "/nonexistent-folder/trace.html");
    FAIL() << "wrote into a folder that does not exist";
  } catch (const tiny::IOError& e) {
    EXPECT_NE(std::string(e.what()).find("/nonexistent-folder/trace.html"), std::string::npos) << e.what();
  }
}

}  // namespace
