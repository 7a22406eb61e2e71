// tiny::cuda::MemoryTimeline: a 3-step training loop recorded on cuda:0,
// saved as "tiny.memory_timeline/1" JSON and read back.
#include <gtest/gtest.h>

#include <fstream>
#include <iterator>
#include <memory>
#include <nlohmann/json.hpp>
#include <set>
#include <string>

#include "test_util.h"
#include "tiny/cuda.h"
#include "tiny/nn/functional.h"
#include "tiny/nn/nn.h"
#include "tiny/ops.h"
#include "tiny/optim/optim.h"

namespace {

const tiny::Device kCuda0(tiny::DeviceType::CUDA, 0);

nlohmann::json read_json(const std::string& path) {
  std::ifstream in(path);
  return nlohmann::json::parse(std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()));
}

}  // namespace

TEST(MemoryTimeline, RecordsATrainingLoopWithOneMarkerPerStep) {
  if (!tiny::cuda::is_available()) GTEST_SKIP() << "no cuda device (TINY_EMULATED_GPUS=0)";
  tiny::manual_seed(1);
  auto model = std::make_shared<tiny::nn::Sequential>(std::make_shared<tiny::nn::Linear>(64, 256),
                                                      std::make_shared<tiny::nn::ReLU>(),
                                                      std::make_shared<tiny::nn::Linear>(256, 10));
  model->to(kCuda0);
  tiny::optim::Adam optimizer(model->parameters());
  const auto on_gpu = tiny::TensorOptions(tiny::kFloat32).device(kCuda0);
  tiny::Tensor x = tiny::randn({128, 64}, on_gpu);
  tiny::Tensor y = tiny::randint(0, 10, {128}, tiny::TensorOptions(tiny::kInt64).device(kCuda0));
  tiny::cuda::synchronize(0);

  tiny::cuda::MemoryTimeline timeline(0);
  EXPECT_FALSE(timeline.is_recording());
  timeline.start();
  for (int step = 1; step <= 3; ++step) {
    timeline.mark("step " + std::to_string(step));
    optimizer.zero_grad();
    tiny::Tensor loss = tiny::nn::functional::cross_entropy((*model)(x), y);
    loss.backward();
    optimizer.step();
  }
  tiny::cuda::synchronize(0);  // queued work frees what it held
  timeline.stop();
  const size_t allocated_at_end = tiny::cuda::memory_allocated(0);
  const size_t reserved_at_end = tiny::cuda::memory_reserved(0);

  tiny_test::TempDir dir("tiny-timeline");
  const std::string path = dir.file("timeline.json");
  timeline.save_json(path);
  EXPECT_EQ(dir.entries(), std::vector<std::string>{"timeline.json"}) << "no temporary file left behind";
  const nlohmann::json doc = read_json(path);

  EXPECT_EQ(doc.at("schema"), "tiny.memory_timeline/1");
  EXPECT_EQ(doc.at("device"), 0);
  EXPECT_EQ(doc.at("device_name"), tiny::cuda::get_device_name(0));
  EXPECT_EQ(doc.at("capacity").get<size_t>(), tiny::cuda::get_device_properties(0).total_memory);
  EXPECT_EQ(doc.at("dropped"), 0);
  EXPECT_EQ(doc.at("recording"), false);
  EXPECT_EQ(doc.at("sample_fields"),
            nlohmann::json({"t_us", "allocated", "reserved", "kind", "bytes", "op"}));

  const nlohmann::json& samples = doc.at("samples");
  ASSERT_GT(samples.size(), 20u);
  EXPECT_EQ(samples[0][3], "start");
  int64_t last_t = 0, allocated = samples[0][1], reserved = samples[0][2];
  std::set<std::string> ops;
  for (size_t i = 0; i < samples.size(); ++i) {
    const nlohmann::json& s = samples[i];
    ASSERT_EQ(s.size(), 6u);
    const int64_t t = s[0], now_allocated = s[1], now_reserved = s[2], bytes = s[4];
    const std::string kind = s[3];
    EXPECT_GE(t, last_t) << "sample " << i;
    EXPECT_LE(now_allocated, now_reserved) << "sample " << i;
    // Every change of the two totals is a sample: replaying the events gives them back.
    if (kind == "alloc") allocated += bytes;
    if (kind == "free") allocated -= bytes;
    if (kind == "segment_alloc") reserved += bytes;
    if (kind == "segment_free") reserved -= bytes;
    EXPECT_EQ(now_allocated, allocated) << "sample " << i << " (" << kind << ")";
    EXPECT_EQ(now_reserved, reserved) << "sample " << i << " (" << kind << ")";
    if (kind == "alloc") ops.insert(s[5].get<std::string>());
    last_t = t;
  }
  EXPECT_EQ(static_cast<size_t>(allocated), allocated_at_end);
  EXPECT_EQ(static_cast<size_t>(reserved), reserved_at_end);
  for (const char* op : {"linear", "relu", "cross_entropy", "backward", "optimizer.step"}) {
    EXPECT_EQ(ops.count(op), 1u) << op << " allocated nothing in the timeline";
  }

  const nlohmann::json& markers = doc.at("markers");
  ASSERT_EQ(markers.size(), 3u);
  int64_t last_marker = 0;
  for (int step = 1; step <= 3; ++step) {
    EXPECT_EQ(markers[step - 1][1], "step " + std::to_string(step));
    EXPECT_GE(markers[step - 1][0].get<int64_t>(), last_marker);
    last_marker = markers[step - 1][0];
  }
  EXPECT_LE(last_marker, doc.at("duration_us").get<int64_t>());
  // The in-memory view says the same.
  EXPECT_EQ(timeline.samples().size(), samples.size());
  EXPECT_EQ(timeline.markers().size(), 3u);
}

TEST(MemoryTimeline, AFullBufferDropsAndCountsAndTheFileSaysSo) {
  if (!tiny::cuda::is_available()) GTEST_SKIP() << "no cuda device (TINY_EMULATED_GPUS=0)";
  const auto on_gpu = tiny::TensorOptions(tiny::kFloat32).device(kCuda0);
  tiny::cuda::MemoryTimeline timeline(0, /*max_entries=*/10);
  timeline.start();  // 1 sample: "start"
  timeline.mark("begin");
  std::vector<tiny::Tensor> kept;
  for (int i = 0; i < 20; ++i) kept.push_back(tiny::empty({1024}, on_gpu));  // 20 "alloc" (+ a segment)
  timeline.mark("end");
  timeline.stop();
  EXPECT_EQ(timeline.samples().size() + timeline.markers().size(), 10u);
  EXPECT_EQ(timeline.markers().size(), 1u);
  const uint64_t events = 1 + 1 + 20 + 1 + (timeline.samples().size() > 1 &&
                                                    timeline.samples()[1].kind == "segment_alloc" ? 1 : 0);
  EXPECT_EQ(timeline.dropped(), events - 10);

  tiny_test::TempDir dir("tiny-timeline");
  timeline.save_json(dir.file("t.json"));
  const nlohmann::json doc = read_json(dir.file("t.json"));
  EXPECT_EQ(doc.at("dropped").get<uint64_t>(), timeline.dropped());
  EXPECT_EQ(doc.at("samples").size() + doc.at("markers").size(), 10u);
  EXPECT_NE(doc.at("note").get<std::string>().find("incomplete"), std::string::npos);
}

TEST(MemoryTimeline, IsOffByDefaultAndOneRecordsADeviceAtATime) {
  if (!tiny::cuda::is_available()) GTEST_SKIP() << "no cuda device (TINY_EMULATED_GPUS=0)";
  const auto on_gpu = tiny::TensorOptions(tiny::kFloat32).device(kCuda0);
  tiny::cuda::MemoryTimeline idle(0);
  tiny::Tensor t = tiny::ones({100}, on_gpu);
  EXPECT_TRUE(idle.samples().empty());
  EXPECT_THROW(idle.mark("step 1"), tiny::Error);
  EXPECT_THROW(idle.save_json("/tmp/never-written.json"), tiny::Error);

  tiny::cuda::MemoryTimeline first(0), second(0);
  first.start();
  EXPECT_THROW(second.start(), tiny::Error);
  EXPECT_THROW(first.start(), tiny::Error);
  first.stop();
  second.start();  // free again after stop()
  tiny::Tensor u = tiny::ones({100}, on_gpu);
  second.stop();
  EXPECT_GE(second.samples().size(), 2u);
  EXPECT_EQ(first.samples().size(), 1u) << "a stopped timeline records nothing more";
  EXPECT_THROW(tiny::cuda::MemoryTimeline(0, 0), tiny::ValueError);
}
