// Lesson 8's glue: rebuilds the model, batches and optimizer from the bundle,
// calls each exercise, and writes down what came out and what memory did on the
// way (per forward pass: memory at its start, graphs still alive; the peak).
#include <algorithm>
#include <optional>

#include "exercise.h"
#include "harness/runner.h"
#include "model.h"

namespace F = tiny::nn::functional;
using lesson8_checks::ProbedMLP;

namespace {

const tiny::Device kGpu("cuda:0");

std::shared_ptr<ProbedMLP> load_model(const workbook::Bundle& in) {
  auto model = std::make_shared<ProbedMLP>();
  model->load_state_dict(in.state("init"));
  model->to(kGpu);
  model->train();
  return model;
}

std::unique_ptr<tiny::optim::SGD> make_sgd(const ProbedMLP& model, const workbook::Bundle& in) {
  tiny::optim::SGDOptions options;
  options.lr = in.values.at("lr").get<double>();
  options.momentum = in.values.value("momentum", 0.0);
  return std::make_unique<tiny::optim::SGD>(model.parameters(), options);
}

std::vector<tiny::data::Batch> batches_of(const workbook::Bundle& in) {
  std::vector<tiny::data::Batch> batches;
  const int count = in.values.at("batches").get<int>();
  for (int k = 0; k < count; ++k) {
    batches.push_back({in.tensor("x." + std::to_string(k)).to(kGpu), in.tensor("y." + std::to_string(k)).to(kGpu)});
  }
  return batches;
}

// Everything set up is on the GPU: from here the peak counts the exercise alone.
size_t start_peak() {
  tiny::cuda::synchronize(0);
  workbook::reset_peak_memory_stats(0);
  return tiny::cuda::memory_allocated(0);
}

// The peak of memory_allocated since start_peak, above what was there then.
size_t peak_above(size_t base) {
  tiny::cuda::synchronize(0);
  const size_t peak = tiny::cuda::max_memory_allocated(0);
  return peak > base ? peak - base : 0;
}

void record_calls(const ProbedMLP& model, workbook::Bundle& out) {
  nlohmann::json before = nlohmann::json::array(), held = nlohmann::json::array(), alive = nlohmann::json::array(),
                 grad = nlohmann::json::array(), requires_grad = nlohmann::json::array(), rows = nlohmann::json::array();
  for (const ProbedMLP::Call& c : model.calls) {
    before.push_back(c.allocated_before);
    held.push_back(c.held_after);
    alive.push_back(c.older_graphs_alive);
    grad.push_back(c.grad_enabled);
    requires_grad.push_back(c.requires_grad);
    rows.push_back(c.rows);
  }
  out.values["pass_allocated"] = before;
  out.values["pass_held"] = held;
  out.values["pass_older_graphs_alive"] = alive;
  out.values["pass_grad_enabled"] = grad;
  out.values["pass_requires_grad"] = requires_grad;
  out.values["pass_rows"] = rows;
}

// The timeline for the report's plot: at most ~300 samples (every k-th, and
// the last), each {t (ms), allocated, reserved}, and the step markers.
nlohmann::json plot_points(const tiny::cuda::MemoryTimeline& timeline) {
  const std::vector<tiny::cuda::MemorySample> samples = timeline.samples();
  nlohmann::json points = nlohmann::json::array();
  const size_t stride = samples.size() / 300 + 1;
  for (size_t i = 0; i < samples.size(); ++i) {
    if (i % stride != 0 && i + 1 != samples.size()) continue;
    points.push_back({{"t", samples[i].t_us / 1000.0}, {"allocated", samples[i].allocated},
                      {"reserved", samples[i].reserved}});
  }
  for (const tiny::cuda::MemoryMarker& m : timeline.markers()) {
    // A marker is a point at its time, with the memory of the last sample before it.
    int64_t allocated = 0, reserved = 0;
    for (const auto& s : samples) {
      if (s.t_us > m.t_us) break;
      allocated = s.allocated;
      reserved = s.reserved;
    }
    points.push_back({{"t", m.t_us / 1000.0}, {"allocated", allocated}, {"reserved", reserved}, {"marker", m.label}});
  }
  // In time order: the report draws the points as a line.
  std::stable_sort(points.begin(), points.end(), [](const nlohmann::json& a, const nlohmann::json& b) {
    return a["t"].get<double>() < b["t"].get<double>();
  });
  return points;
}

}  // namespace

// train_epoch over batches already on cuda:0, with SGD.
WORKBOOK_EXERCISE(train_epoch) {
  auto model = load_model(in);
  auto optimizer = make_sgd(*model, in);
  const std::vector<tiny::data::Batch> batches = batches_of(in);
  tiny::cuda::MemoryTimeline timeline(0);
  model->timeline = &timeline;
  timeline.start();
  // With keep_trace, the epoch is profiled: the grader's report draws its GPU timeline beside the reference's.
  std::optional<tiny::profiler::profile> prof;
  if (in.values.value("keep_trace", false) && tiny::cuda::is_emulated(0)) prof.emplace();
  const uint64_t to_pinned_before = tiny::cuda::device_counters(0).bytes_device_to_host_pinned;
  const lesson8::TrainLog log = lesson8::train_epoch(*model, *optimizer, batches);
  // A copy back into pinned memory (a non_blocking one) and work still queued when the losses
  // came back: they were read before the copies ran (in the check's deferred mode queued work
  // runs only when the host waits, so such a read is stale every time).
  out.values["idle"] = tiny::cuda::current_stream(0).query();
  out.values["bytes_to_pinned"] = tiny::cuda::device_counters(0).bytes_device_to_host_pinned - to_pinned_before;
  tiny::cuda::synchronize(0);
  timeline.stop();
  if (prof) {
    prof->stop();
    out.values["trace"] = nlohmann::json::parse(prof->chrome_trace());
  }
  model->timeline = nullptr;
  out.values["timeline"] = plot_points(timeline);
  // Segments given back to the device during the epoch: empty_cache() at work
  // (a training loop that reuses its cache gives none back).
  int64_t segment_frees = 0;
  for (const tiny::cuda::MemorySample& s : timeline.samples()) segment_frees += s.kind == "segment_free" ? 1 : 0;
  out.values["segment_frees"] = segment_frees;
  out.values["mean_loss"] = log.mean_loss;
  out.values["losses"] = log.losses;
  record_calls(*model, out);
  out.put_state("final", model->state_dict());
}

// evaluate over batches already on cuda:0; the peak is measured above the model and the batches.
WORKBOOK_EXERCISE(evaluate) {
  auto model = load_model(in);
  const std::vector<tiny::data::Batch> batches = batches_of(in);
  const size_t base = start_peak();
  const uint64_t to_pinned_before = tiny::cuda::device_counters(0).bytes_device_to_host_pinned;
  const lesson8::EvalResult result = lesson8::evaluate(*model, batches);
  // A copy back into pinned memory and work still queued at return: read before the copy ran.
  out.values["idle"] = tiny::cuda::current_stream(0).query();
  out.values["bytes_to_pinned"] = tiny::cuda::device_counters(0).bytes_device_to_host_pinned - to_pinned_before;
  out.values["peak_above_start"] = peak_above(base);
  out.values["grad_mode_after"] = tiny::is_grad_enabled();
  out.values["loss"] = result.loss;
  out.values["accuracy"] = result.accuracy;
  record_calls(*model, out);
  // Each batch's mean loss (the check's probe for a plain mean over batches of different sizes).
  tiny::NoGradGuard no_grad;
  nlohmann::json batch_losses = nlohmann::json::array();
  for (const tiny::data::Batch& b : batches) {
    batch_losses.push_back(F::cross_entropy((*model)(b.data), b.target).item<double>());
  }
  out.values["batch_losses"] = batch_losses;
}

// accumulate_and_step on the whole batch (on cuda:0), with plain SGD (so the update is -lr * gradient).
WORKBOOK_EXERCISE(accumulate_and_step) {
  auto model = load_model(in);
  auto optimizer = make_sgd(*model, in);
  const tiny::Tensor inputs = in.tensor("inputs").to(kGpu), targets = in.tensor("targets").to(kGpu);
  const size_t base = start_peak();
  const double loss = lesson8::accumulate_and_step(*model, *optimizer, inputs, targets,
                                                   in.values.at("micro_batch").get<int64_t>());
  out.values["peak_above_start"] = peak_above(base);
  out.values["loss"] = loss;
  record_calls(*model, out);
  out.put_state("final", model->state_dict());
}

// Trusted (run with the reference): the gradients the checks compare
// accumulate_and_step with: of the whole batch's mean loss ("full"), and of
// each slice's mean loss ("slice.k"), each as a state dict of gradients.
WORKBOOK_EXERCISE(gradients) {
  auto model = load_model(in);
  const tiny::Tensor inputs = in.tensor("inputs").to(kGpu), targets = in.tensor("targets").to(kGpu);
  const int64_t total = inputs.size(0), micro = in.values.at("micro_batch").get<int64_t>();
  const auto grads_of = [&](int64_t start, int64_t rows, const std::string& prefix) {
    model->zero_grad();
    const tiny::Tensor loss = F::cross_entropy((*model)(inputs.narrow(0, start, rows)), targets.narrow(0, start, rows));
    loss.backward();
    for (auto& [name, p] : model->named_parameters()) out.put(prefix + "." + name, p.grad());
    return loss.item<double>();
  };
  out.values["full_loss"] = grads_of(0, total, "full");
  nlohmann::json rows = nlohmann::json::array();
  int k = 0;
  for (int64_t start = 0; start < total; start += micro, ++k) {
    const int64_t n = std::min(micro, total - start);
    grads_of(start, n, "slice" + std::to_string(k));
    rows.push_back(n);
  }
  out.values["slice_rows"] = rows;
}

// Trusted: one plain SGD step on the whole batch at once; under a small capacity it runs out of memory.
WORKBOOK_EXERCISE(big_batch_step) {
  auto model = load_model(in);
  auto optimizer = make_sgd(*model, in);
  const tiny::Tensor inputs = in.tensor("inputs").to(kGpu), targets = in.tensor("targets").to(kGpu);
  optimizer->zero_grad();
  const tiny::Tensor loss = F::cross_entropy((*model)(inputs), targets);
  loss.backward();
  optimizer->step();
  out.values["loss"] = loss.item<double>();
}

// free_and_measure on a tensor made on the asked device; the glue keeps no handle to it.
WORKBOOK_EXERCISE(free_and_measure) {
  const tiny::Device device(in.values.at("device").get<std::string>());
  tiny::Tensor tensor = in.tensor("tensor").to(device);
  tiny::cuda::synchronize(device.index());
  out.values["tensor_bytes"] = tensor.numel() * static_cast<int64_t>(tensor.element_size());
  const lesson8::FreeReport report = lesson8::free_and_measure(std::move(tensor));
  const auto json_of = [](const lesson8::MemoryReading& r) {
    return nlohmann::json{{"allocated", r.allocated}, {"reserved", r.reserved}};
  };
  out.values["before"] = json_of(report.before);
  out.values["after_free"] = json_of(report.after_free);
  out.values["after_empty_cache"] = json_of(report.after_empty_cache);
  // What the other device shows, for a check that names a reading of the wrong device.
  const int other = 1 - device.index();
  out.values["other_device"] = {{"allocated", tiny::cuda::memory_allocated(other)},
                                {"reserved", tiny::cuda::memory_reserved(other)}};
}

namespace {

// A model of model.h's on cuda:0, from the checker's initial weights.
std::shared_ptr<tiny::nn::Sequential> load_sequential(std::shared_ptr<tiny::nn::Sequential> model, const workbook::Bundle& in) {
  model->load_state_dict(in.state("init"));
  model->to(kGpu);
  return model;
}

size_t bytes_of(const tiny::Tensor& t) { return static_cast<size_t>(t.numel()) * t.element_size(); }

}  // namespace

// predict_step_memory for the 256-1024-1024-1024-10 MLP, then (trusted code)
// the real thing: three Adam steps on a batch of that size, and the peak of
// memory_allocated during the third (the optimizer's states exist by then),
// less the batch's own bytes.
WORKBOOK_EXERCISE(predict_step_memory) {
  auto model = load_sequential(lesson8_checks::make_predict_mlp(in.values.value("hidden", lesson8_checks::kPredictHidden)), in);
  const int64_t batch = in.values.at("batch_size").get<int64_t>();
  const lesson8::StepMemory m = lesson8::predict_step_memory(*model, batch);
  out.values["parameters"] = m.parameters;
  out.values["gradients"] = m.gradients;
  out.values["optimizer_states"] = m.optimizer_states;
  out.values["activations"] = m.activations;
  out.values["total"] = m.total();
  if (!in.values.value("measure", false)) return;
  const tiny::Tensor x = in.tensor("inputs").to(kGpu), y = in.tensor("targets").to(kGpu);
  tiny::optim::Adam adam(model->parameters(), tiny::optim::AdamOptions{1e-3});
  for (int step = 0; step < 3; ++step) {
    if (step == 2) start_peak();
    adam.zero_grad();
    F::cross_entropy((*model)(x), y).backward();
    adam.step();
  }
  tiny::cuda::synchronize(0);
  out.values["measured_peak"] = tiny::cuda::max_memory_allocated(0) - bytes_of(x) - bytes_of(y);
}

namespace {

// One step's forward and backward of the checkpointing MLP on the batch, by
// `forward`: the gradients (as "grad.<name>"), the loss, and the peak of
// memory_allocated above the model and the batch.
template <typename Forward>
void checkpoint_step(const workbook::Bundle& in, workbook::Bundle& out, Forward forward) {
  auto model = load_sequential(lesson8_checks::make_checkpoint_mlp(), in);
  const tiny::Tensor x = in.tensor("inputs").to(kGpu), y = in.tensor("targets").to(kGpu);
  const size_t base = start_peak();
  tiny::Tensor loss = F::cross_entropy(forward(*model, x), y);
  loss.backward();
  out.values["peak_above_start"] = peak_above(base);
  out.values["loss"] = loss.item<double>();
  for (auto& [name, p] : model->named_parameters()) {
    if (p.grad().defined()) out.put("grad." + name, p.grad());
  }
}

}  // namespace

// The student's checkpointed_forward in one training step's forward and backward.
WORKBOOK_EXERCISE(checkpointed_step) {
  checkpoint_step(in, out, [](tiny::nn::Sequential& model, const tiny::Tensor& x) {
    return lesson8::checkpointed_forward(model, x);
  });
}

// Trusted: the same step without checkpointing (every activation kept).
WORKBOOK_EXERCISE(plain_step) {
  checkpoint_step(in, out, [](tiny::nn::Sequential& model, const tiny::Tensor& x) { return model(x); });
}
