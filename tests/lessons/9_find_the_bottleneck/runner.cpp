// Lesson 9's glue: calls each exercise on the emulated GPU and writes down what
// it returned and what it did: the counters of the call (synchronizations,
// pageable and pinned bytes), and from a profile of it the dtypes of the
// products and how long the loop waited for the DataLoader.
#include <algorithm>
#include <optional>

#include "exercise.h"
#include "harness/runner.h"

using tiny::data::Batch;

namespace {

const tiny::Device kGpu("cuda:0");
constexpr const char* kLoaderWait = "enumerate(DataLoader)#";

// Waits for the GPU, then starts its counters from zero: what follows is the exercise's alone.
void start_counting() {
  tiny::cuda::synchronize(0);
  workbook::reset_device_counters(0);
}

nlohmann::json counters() {
  const tiny::cuda::DeviceCounters c = tiny::cuda::device_counters(0);
  return {{"synchronizations", c.synchronizations},
          {"kernel_launches", c.kernel_launches},
          {"bytes_host_to_device_pageable", c.bytes_host_to_device_pageable},
          {"bytes_host_to_device_pinned", c.bytes_host_to_device_pinned},
          {"bytes_device_to_host", c.bytes_device_to_host_pageable + c.bytes_device_to_host_pinned},
          {"modelled_kernel_ms", c.modelled_kernel_ms}};
}

// What a profile shows: the input dtypes of every linear, and the host's time
// (ms) inside the DataLoader's __next__ (the loop waiting for a batch).
nlohmann::json trace_facts(const tiny::profiler::profile& prof) {
  const nlohmann::json trace = nlohmann::json::parse(prof.chrome_trace());
  nlohmann::json types = nlohmann::json::array();
  double loader_wait_us = 0;
  for (const nlohmann::json& e : trace["traceEvents"]) {
    if (e.value("ph", "") != "X" || e.value("cat", "") != "cpu_op") continue;
    const std::string name = e.value("name", "");
    if (name == "linear" && e.contains("args") && e["args"].contains("Input type")) {
      const nlohmann::json& t = e["args"]["Input type"];
      if (!t.empty() && t[0].is_string() && std::find(types.begin(), types.end(), t[0]) == types.end()) {
        types.push_back(t[0]);
      }
    }
    if (name.rfind(kLoaderWait, 0) == 0) loader_wait_us += e.value("dur", 0.0);
  }
  return {{"linear_input_types", types}, {"loader_wait_ms", loader_wait_us / 1e3}};
}

std::shared_ptr<tiny::nn::Sequential> load_model(const workbook::Bundle& in) {
  auto model = lesson9::make_model();
  model->load_state_dict(in.state("init"));
  model->to(kGpu);
  model->train();
  return model;
}

std::unique_ptr<tiny::optim::SGD> make_sgd(const tiny::nn::Module& model) {
  tiny::optim::SGDOptions options;
  options.lr = 0.05;
  options.momentum = 0.9;
  return std::make_unique<tiny::optim::SGD>(model.parameters(), options);
}

}  // namespace

// measure() on a step the check chooses; the glue notes how often the step ran,
// whether the GPU was idle when measure returned, and GPU-Util over the whole call.
WORKBOOK_EXERCISE(measure) {
  const std::string probe = in.values.at("probe").get<std::string>();
  const int64_t n = in.values.value("n", int64_t{512});
  tiny::Generator generator(in.values.at("generator_seed").get<uint64_t>());
  const tiny::Tensor a = tiny::randn({n, n}, kGpu, generator), b = tiny::randn({n, n}, kGpu, generator);
  const tiny::Tensor small = tiny::zeros({16}, kGpu);
  int calls = 0;
  const auto step = [&] {
    if (probe == "gpu_bound") {
      tiny::Tensor c = a.matmul(b);
      c = c.matmul(b);
    } else if (probe == "host_bound") {
      for (int i = 0; i < 12; ++i) small.add_(1.0);
    } else {  // slow_first: the first call pays a one-off setup, as a first step does
      if (calls == 0) {
        for (int i = 0; i < 6; ++i) tiny::Tensor c = a.matmul(b);
      }
      for (int i = 0; i < 4; ++i) small.add_(1.0);
    }
    ++calls;
  };
  start_counting();
  if (in.values.value("queued", false)) {
    for (int i = 0; i < 4; ++i) tiny::Tensor c = a.matmul(b);  // left queued before the call
  }
  const lesson9::Measurement m = lesson9::measure(step, in.values.at("warmup").get<int>(),
                                                  in.values.at("steps").get<int>(),
                                                  in.values.at("flops_per_step").get<double>(), 0);
  out.values["idle"] = tiny::cuda::current_stream(0).query();
  out.values["counters"] = counters();
  out.values["whole_call_utilization"] = tiny::cuda::utilization(0);
  out.values["calls"] = calls;
  out.values["step_ms"] = m.step_ms;
  out.values["utilization"] = m.utilization;
  out.values["tflops"] = m.tflops;
  tiny::cuda::synchronize(0);
}

// train_step on three pinned batches in a row from the snapshot "init", profiled.
// SGD that notes whether its step ran inside an enabled autocast guard (a probe
// for the train_step check: the optimizer's step belongs outside the guard).
class ProbedSGD : public tiny::optim::SGD {
 public:
  using tiny::optim::SGD::SGD;
  void step() override {
    steps_under_autocast += tiny::amp::is_autocast_enabled("cuda") ? 1 : 0;
    tiny::optim::SGD::step();
  }
  int steps_under_autocast = 0;
};

WORKBOOK_EXERCISE(train_step) {
  auto model = load_model(in);
  const std::unique_ptr<tiny::optim::SGD> sgd = make_sgd(*model);
  auto optimizer = std::make_unique<ProbedSGD>(model->parameters(), sgd->options());
  // The other probe: whether backward() ran inside the guard (the gradient of the first parameter is made there).
  int backward_under_autocast = 0;
  tiny::Tensor first = model->parameters().front();
  first.register_post_accumulate_grad_hook(
      [&backward_under_autocast](tiny::Tensor&) { backward_under_autocast += tiny::amp::is_autocast_enabled("cuda") ? 1 : 0; });
  std::vector<Batch> batches;
  for (int k = 0; k < 3; ++k) {
    batches.push_back({in.tensor("x." + std::to_string(k)).pin_memory(),
                       in.tensor("y." + std::to_string(k)).pin_memory()});
  }
  tiny::Tensor loss_sum = tiny::zeros({}, kGpu);
  start_counting();
  nlohmann::json facts;
  {
    tiny::profiler::profile prof(tiny::profiler::ProfileOptions{/*record_shapes=*/true});
    for (const Batch& batch : batches) lesson9::train_step(*model, batch, *optimizer, kGpu, loss_sum);
    out.values["counters"] = counters();
    prof.stop();
    facts = trace_facts(prof);
  }
  out.values["trace"] = facts;
  out.values["loss_sum_has_graph"] = loss_sum.requires_grad();  // a loss added without detach() keeps its graph
  out.values["backward_under_autocast"] = backward_under_autocast;
  out.values["steps_under_autocast"] = optimizer->steps_under_autocast;
  out.put("loss_sum", loss_sum.detach());
  out.put_state("final", model->state_dict());
}

// train_epoch over a pinned loader with workers made by the glue.
WORKBOOK_EXERCISE(train_epoch) {
  auto model = load_model(in);
  auto optimizer = make_sgd(*model);
  const auto images = std::make_shared<lesson9::AugmentedImages>(in.tensor("x"), in.tensor("y"));
  tiny::data::DataLoaderOptions options;
  options.batch_size = in.values.at("batch_size").get<int64_t>();
  options.num_workers = 2;
  options.pin_memory = true;
  options.shuffle = true;
  options.generator = tiny::Generator(in.values.at("generator_seed").get<uint64_t>());
  tiny::data::DataLoader loader(images, options);
  start_counting();
  const double mean = lesson9::train_epoch(*model, loader, *optimizer, kGpu);
  // Right after it returned, before anything of the glue waits: work still queued and a copy
  // into pinned memory mean the answer was read before that copy ran (the check's deferred
  // mode runs queued work only when the host waits, so such a read is stale every time).
  out.values["idle"] = tiny::cuda::current_stream(0).query();
  out.values["bytes_to_pinned"] = tiny::cuda::device_counters(0).bytes_device_to_host_pinned;
  out.values["counters"] = counters();
  out.values["mean_loss"] = mean;
  out.values["batches"] = loader.size();
  out.put_state("final", model->state_dict());
  // A probe, so that the check blames the right function: how often one call
  // of train_step alone makes the host wait (a pinned batch from the same loader).
  const Batch probe = *loader.begin();
  tiny::Tensor loss_sum = tiny::zeros({}, kGpu);
  start_counting();
  lesson9::train_step(*model, probe, *optimizer, kGpu, loss_sum);
  out.values["step_synchronizations"] = tiny::cuda::device_counters(0).synchronizations;
}

// The program, fixed: your make_loader and your train_step, `warmup` steps and
// then `steps` timed ones, measured as the reference's measure() does and profiled.
WORKBOOK_EXERCISE(program) {
  tiny::Generator data_generator(in.values.at("data_seed").get<uint64_t>());
  const auto images = lesson9::make_images(in.values.at("images").get<int64_t>(), data_generator);
  auto model = load_model(in);
  auto optimizer = make_sgd(*model);
  std::unique_ptr<tiny::data::DataLoader> loader =
      lesson9::make_loader(images, tiny::Generator(in.values.at("generator_seed").get<uint64_t>()));
  if (!loader) throw tiny::ValueError("make_loader returned an empty std::unique_ptr instead of a loader");
  const tiny::data::DataLoaderOptions& o = loader->options();
  out.values["batch_size"] = o.batch_size;
  out.values["num_workers"] = o.num_workers;
  out.values["pin_memory"] = o.pin_memory;
  if (o.batch_size > 1024) return;  // the check says why; nothing is run
  lesson9::Feed feed(*loader);
  tiny::Tensor loss_sum = tiny::zeros({}, kGpu);
  const auto step = [&] { lesson9::train_step(*model, feed.next(), *optimizer, kGpu, loss_sum); };
  for (int i = 0; i < in.values.at("warmup").get<int>(); ++i) step();
  start_counting();
  const int steps = in.values.at("steps").get<int>();
  const double start_s = tiny::cuda::host_time();
  nlohmann::json facts;
  {
    tiny::profiler::profile prof(tiny::profiler::ProfileOptions{/*record_shapes=*/true});
    for (int i = 0; i < steps; ++i) {
      step();
      prof.step();
    }
    out.values["counters"] = counters();  // before the glue's wait below
    tiny::cuda::synchronize(0);
    prof.stop();
    facts = trace_facts(prof);
    if (in.values.value("keep_trace", false)) out.values["chrome_trace"] = prof.chrome_trace();
  }
  const double elapsed_ms = (tiny::cuda::host_time() - start_s) * 1e3;
  out.values["trace"] = facts;
  out.values["step_ms"] = elapsed_ms / steps;
  out.values["utilization"] = tiny::cuda::device_counters(0).modelled_kernel_ms / elapsed_ms;
  out.values["images_per_s"] = static_cast<double>(o.batch_size) * steps / (elapsed_ms * 1e-3);
  out.values["mean_loss"] = loss_sum.item<double>() / (steps + in.values.at("warmup").get<int>());
}
