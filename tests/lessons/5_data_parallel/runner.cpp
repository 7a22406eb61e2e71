// Lesson 5's glue: builds the inputs from the bundle, calls each exercise, and
// writes down what came out, where it lives, which bytes went to which GPU,
// and which replica saw which rows.
#include <optional>

#include "exercise.h"
#include "harness/runner.h"
#include "model.h"

namespace F = tiny::nn::functional;
using lesson5_checks::Probe;

namespace {

int gpus() { return tiny::cuda::is_available() ? tiny::cuda::device_count() : 0; }

// Waits for every GPU, then starts its counters from zero: what follows is the exercise's alone.
void start_counting() {
  for (int d = 0; d < gpus(); ++d) {
    tiny::cuda::synchronize(d);
    workbook::reset_device_counters(d);
  }
}

// Every copy counter of each GPU since start_counting(): bytes each way, pageable and pinned.
nlohmann::json copy_counters() {
  nlohmann::json all = nlohmann::json::array();
  for (int d = 0; d < gpus(); ++d) {
    const tiny::cuda::DeviceCounters c = tiny::cuda::device_counters(d);
    all.push_back({{"bytes_host_to_device_pageable", c.bytes_host_to_device_pageable},
                   {"bytes_host_to_device_pinned", c.bytes_host_to_device_pinned},
                   {"bytes_device_to_host_pageable", c.bytes_device_to_host_pageable},
                   {"bytes_device_to_host_pinned", c.bytes_device_to_host_pinned},
                   {"bytes_device_to_device", c.bytes_device_to_device}});
  }
  return all;
}

// Bytes copied into each GPU from the host since start_counting().
nlohmann::json host_to_device_bytes() {
  nlohmann::json bytes = nlohmann::json::array();
  for (int d = 0; d < gpus(); ++d) {
    const tiny::cuda::DeviceCounters c = tiny::cuda::device_counters(d);
    bytes.push_back(c.bytes_host_to_device_pageable + c.bytes_host_to_device_pinned);
  }
  return bytes;
}

std::vector<int> ints(const nlohmann::json& values) { return values.get<std::vector<int>>(); }

std::shared_ptr<tiny::nn::Sequential> load_model(const workbook::Bundle& in) {
  auto model = lesson5_checks::make_model();
  model->load_state_dict(in.state("init"));
  return model;
}

nlohmann::json take_passes() {
  std::lock_guard<std::mutex> lock(Probe::mutex());
  nlohmann::json passes = nlohmann::json::array();
  for (const Probe::Pass& p : Probe::passes()) passes.push_back({{"device", p.device}, {"rows", p.rows}});
  Probe::passes().clear();
  return passes;
}

}  // namespace

// scatter(batch, devices): the pieces, where they are, and the bytes each GPU received.
WORKBOOK_EXERCISE(scatter) {
  std::vector<tiny::Device> devices;
  for (const auto& name : in.values.at("devices")) devices.emplace_back(name.get<std::string>());
  const tiny::Tensor batch = in.tensor("batch");
  start_counting();
  const std::vector<tiny::Tensor> pieces = lesson5::scatter(batch, devices);
  out.values["host_to_device"] = host_to_device_bytes();
  out.values["pieces"] = pieces.size();
  for (size_t i = 0; i < pieces.size(); ++i) out.put("piece." + std::to_string(i), pieces[i]);
}

// gather(pieces, output_device), each piece first put on its own device by the glue.
WORKBOOK_EXERCISE(gather) {
  std::vector<tiny::Tensor> pieces;
  const auto devices = in.values.at("devices");
  for (size_t i = 0; i < devices.size(); ++i) {
    pieces.push_back(in.tensor("piece." + std::to_string(i)).to(tiny::Device(devices[i].get<std::string>())));
  }
  start_counting();
  out.put("out", lesson5::gather(pieces, tiny::Device(in.values.at("output_device").get<std::string>())));
  out.values["copy_counters"] = copy_counters();
}

// wrap(model, device_ids), then one forward pass of the wrapper on a CPU batch.
WORKBOOK_EXERCISE(wrap) {
  auto model = load_model(in);
  const std::shared_ptr<tiny::nn::DataParallel> dp = lesson5::wrap(model, ints(in.values.at("device_ids")));
  if (!dp) throw tiny::ValueError("wrap returned an empty std::shared_ptr instead of a DataParallel");
  out.values["wraps_model"] = dp->module() == model;
  out.values["device_ids"] = dp->device_ids();
  out.values["module_device"] = model->parameters().at(0).device().str();
  take_passes();
  out.put("out", (*dp)(in.tensor("x")));
  out.values["passes"] = take_passes();
}

// train_step on `steps` batches with a DataParallel over cuda:0 and cuda:1 made by the glue.
WORKBOOK_EXERCISE(train_step) {
  auto model = load_model(in);
  model->to(tiny::Device("cuda:0"));
  tiny::nn::DataParallel dp(model, {0, 1});
  tiny::optim::SGD optimizer(model->parameters(), {in.values.at("lr").get<double>()});
  nlohmann::json losses = nlohmann::json::array(), passes = nlohmann::json::array(),
                 bytes = nlohmann::json::array(), counters = nlohmann::json::array(),
                 mallocs = nlohmann::json::array(), reserved = nlohmann::json::array(),
                 idle = nlohmann::json::array();
  take_passes();
  for (int k = 0; k < in.values.at("steps").get<int>(); ++k) {
    tiny::data::Batch batch{in.tensor("x." + std::to_string(k)), in.tensor("y." + std::to_string(k))};
    start_counting();
    losses.push_back(lesson5::train_step(dp, batch, optimizer));
    // Work still queued on the output device when the loss came back, after a copy into pinned
    // memory (a non_blocking one): the loss was read before the copy ran (in the check's
    // deferred mode, every time). Taken before anything of the glue waits.
    idle.push_back(tiny::cuda::current_stream(0).query());
    bytes.push_back(host_to_device_bytes());
    counters.push_back(copy_counters());
    passes.push_back(take_passes());
    // The allocator, per GPU: allocations the cache could not serve (they reached the device)
    // and memory_reserved after the step. empty_cache() every step shows there: the replica's
    // segment on cuda:1 given back, and asked for again at the next step.
    nlohmann::json step_mallocs = nlohmann::json::array(), step_reserved = nlohmann::json::array();
    for (int d = 0; d < gpus(); ++d) {
      step_mallocs.push_back(tiny::cuda::device_counters(d).device_mallocs);
      step_reserved.push_back(tiny::cuda::memory_reserved(d));
    }
    mallocs.push_back(step_mallocs);
    reserved.push_back(step_reserved);
  }
  out.values["idle"] = idle;
  out.values["device_mallocs"] = mallocs;
  out.values["reserved_after_step"] = reserved;
  out.values["copy_counters"] = counters;
  out.values["losses"] = losses;
  out.values["passes"] = passes;
  out.values["host_to_device"] = bytes;
  out.put_state("final", model->state_dict());
}

// The single-device baseline (run with the reference only): the same steps on cuda:0 without DataParallel.
WORKBOOK_EXERCISE(train_single) {
  auto model = load_model(in);
  const tiny::Device gpu("cuda:0");
  model->to(gpu);
  tiny::optim::SGD optimizer(model->parameters(), {in.values.at("lr").get<double>()});
  nlohmann::json losses = nlohmann::json::array();
  for (int k = 0; k < in.values.at("steps").get<int>(); ++k) {
    optimizer.zero_grad();
    const tiny::Tensor loss =
        F::cross_entropy((*model)(in.tensor("x." + std::to_string(k)).to(gpu)), in.tensor("y." + std::to_string(k)).to(gpu));
    loss.backward();
    optimizer.step();
    losses.push_back(loss.item<double>());
  }
  out.values["losses"] = losses;
  out.put_state("final", model->state_dict());
}

// The speed check's step: the large model and batch, one warm-up step (the
// allocator's cache fills), then one step timed on the modelled clock, with its
// copy counters. With "devices" 2, your train_step on a DataParallel over
// cuda:0 and cuda:1; with 1 (the reference only), the same step on cuda:0 alone.
WORKBOOK_EXERCISE(step_speed) {
  tiny::manual_seed(in.values.at("seed").get<uint64_t>());
  auto model = lesson5_checks::make_large_model();
  const tiny::Device gpu("cuda:0");
  model->to(gpu);
  tiny::optim::SGD optimizer(model->parameters(), {in.values.at("lr").get<double>()});
  tiny::Generator g(in.values.at("seed").get<uint64_t>() + 1);
  const int64_t rows = lesson5_checks::kLargeBatch;
  const tiny::data::Batch batch{tiny::randn({rows, lesson5_checks::kLargeWidth}, {}, g).pin_memory(),
                                tiny::randint(0, lesson5_checks::kLargeClasses, {rows}, tiny::kInt64, g).pin_memory()};
  const bool parallel = in.values.at("devices").get<int>() == 2;
  std::optional<tiny::nn::DataParallel> dp;
  if (parallel) dp.emplace(model, std::vector<int>{0, 1});
  auto step = [&]() {
    if (parallel) return lesson5::train_step(*dp, batch, optimizer);
    optimizer.zero_grad();
    const tiny::Tensor loss = F::cross_entropy((*model)(batch.data.to(gpu)), batch.target.to(gpu));
    loss.backward();
    optimizer.step();
    return loss.item<double>();
  };
  // Timed as the demo's table times it (lessons/5_data_parallel/main.cpp,
  // time_steps), so that the student sees the same figures in both: one
  // warm-up step (the allocator's cache fills), every GPU synchronized, then
  // the mean of kTimedSteps steps.
  constexpr int kTimedSteps = 2;
  step();
  for (int d = 0; d < gpus(); ++d) tiny::cuda::synchronize(d);
  start_counting();
  // On the emulated GPUs the timed step is profiled: the grader's report draws its timeline beside the reference's.
  std::optional<tiny::profiler::profile> prof;
  if (tiny::cuda::is_emulated(0)) prof.emplace();
  const double start = tiny::cuda::host_time();
  double loss = 0;
  for (int i = 0; i < kTimedSteps; ++i) loss = step();
  for (int d = 0; d < gpus(); ++d) tiny::cuda::synchronize(d);
  out.values["step_ms"] = (tiny::cuda::host_time() - start) * 1e3 / kTimedSteps;
  if (prof) {
    prof->stop();
    out.values["trace"] = nlohmann::json::parse(prof->chrome_trace());
  }
  out.values["copy_counters"] = copy_counters();
  out.values["loss"] = loss;
  if (tiny::cuda::is_emulated(0)) out.values["modelled_gpu"] = tiny::cuda::get_device_properties(0).modelled_gpu;
}
