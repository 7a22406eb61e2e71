// Lesson 4's glue: rebuilds the model, data and optimizer from the bundle, calls
// each exercise, and writes down what came out and what the loop did on the way
// (forward passes, grad mode, training flag, copies and synchronizations).
#include <optional>

#include "exercise.h"
#include "harness/runner.h"
#include "model.h"
#include "epoch_profile.h"

namespace F = tiny::nn::functional;
using lesson4_checks::ProbedMLP;
using lesson4_checks::RecordingDataset;

namespace {

tiny::Device device_of(const workbook::Bundle& in) { return tiny::Device(in.values.at("device").get<std::string>()); }

bool has_gpu(const tiny::Device& device) { return device.is_cuda(); }

// Waits for every GPU, then starts its counters from zero: what follows is the exercise's alone.
void start_counting() {
  const int n = tiny::cuda::is_available() ? tiny::cuda::device_count() : 0;
  for (int d = 0; d < n; ++d) {
    tiny::cuda::synchronize(d);
    workbook::reset_device_counters(d);
  }
}

// The counters of `device` right now (before anything of the glue synchronizes).
nlohmann::json counters_of(const tiny::Device& device) {
  if (!device.is_cuda()) return nlohmann::json::object();
  const tiny::cuda::DeviceCounters c = tiny::cuda::device_counters(device.index());
  return {{"synchronizations", c.synchronizations},
          {"bytes_host_to_device_pinned", c.bytes_host_to_device_pinned},
          {"bytes_host_to_device_pageable", c.bytes_host_to_device_pageable},
          {"device_mallocs", c.device_mallocs}};
}

// Right after the student's function returned: a copy back into pinned memory (a
// non_blocking one) and work still queued means the answer was read before the copy
// ran (in a check's deferred mode queued work runs only when the host waits, so such
// a read is stale every time). Taken before anything of the glue waits.
void record_unwaited_copy(const tiny::Device& device, workbook::Bundle& out) {
  if (!device.is_cuda()) return;
  out.values["idle"] = tiny::cuda::current_stream(device.index()).query();
  out.values["bytes_to_pinned"] = tiny::cuda::device_counters(device.index()).bytes_device_to_host_pinned;
}

std::shared_ptr<ProbedMLP> load_model(const workbook::Bundle& in, const tiny::Device& device) {
  auto model = std::make_shared<ProbedMLP>();
  model->load_state_dict(in.state("init"));
  model->to(device);
  model->train();
  return model;
}

std::unique_ptr<tiny::optim::SGD> make_sgd(const ProbedMLP& model, const workbook::Bundle& in) {
  tiny::optim::SGDOptions options;
  options.lr = in.values.at("lr").get<double>();
  options.momentum = in.values.at("momentum").get<double>();
  return std::make_unique<tiny::optim::SGD>(model.parameters(), options);
}

std::shared_ptr<RecordingDataset> dataset_of(const workbook::Bundle& in) {
  return std::make_shared<RecordingDataset>(in.tensor("features"), in.tensor("labels"));
}

// The loss of every forward pass, recomputed from its logits and the labels of the batch it got.
void record_passes(const ProbedMLP& model, const RecordingDataset& dataset, workbook::Bundle& out) {
  tiny::NoGradGuard no_grad;
  const std::vector<std::vector<int64_t>> served = dataset.served();
  nlohmann::json losses = nlohmann::json::array(), sizes = nlohmann::json::array(), grad = nlohmann::json::array(),
                 training = nlohmann::json::array(), requires_grad = nlohmann::json::array();
  for (size_t k = 0; k < model.calls.size(); ++k) {
    const ProbedMLP::Call& call = model.calls[k];
    grad.push_back(call.grad_enabled);
    training.push_back(call.training);
    requires_grad.push_back(call.requires_grad);
    if (k < served.size() && call.logits.size(0) == static_cast<int64_t>(served[k].size())) {
      const tiny::Tensor labels = dataset.TensorDataset::get_batch(served[k]).target.to(call.logits.device());
      losses.push_back(F::cross_entropy(call.logits, labels).item<double>());
    } else {
      losses.push_back(nullptr);  // a pass that matches no batch
    }
  }
  for (const auto& indices : served) sizes.push_back(indices.size());
  out.values["pass_losses"] = losses;
  out.values["batch_sizes"] = sizes;
  out.values["pass_grad_enabled"] = grad;
  out.values["pass_training"] = training;
  out.values["pass_requires_grad"] = requires_grad;
  out.values["pass_devices"] = nlohmann::json::array();
  out.values["pass_graphs_alive"] = nlohmann::json::array();
  out.values["pass_memory_allocated"] = nlohmann::json::array();
  for (const auto& call : model.calls) {
    out.values["pass_devices"].push_back(call.device);
    out.values["pass_graphs_alive"].push_back(call.graphs_alive);
    out.values["pass_memory_allocated"].push_back(call.memory_allocated);
  }
}

}  // namespace

// One epoch of the student's loader; the glue copies each batch to cuda:0 with non_blocking.
WORKBOOK_EXERCISE(make_loader) {
  auto dataset = std::make_shared<tiny::data::TensorDataset>(in.tensor("features"), in.tensor("labels"));
  std::unique_ptr<tiny::data::DataLoader> loader =
      lesson4::make_loader(dataset, in.values.at("batch_size").get<int64_t>(), in.values.at("shuffle").get<bool>(),
                           in.values.at("pin_memory").get<bool>(), in.values.at("num_workers").get<int>(),
                           tiny::Generator(in.values.at("generator_seed").get<uint64_t>()));
  if (!loader) throw tiny::ValueError("make_loader returned an empty std::unique_ptr instead of a loader");
  out.values["num_workers"] = loader->options().num_workers;
  const tiny::Device gpu("cuda:0");
  start_counting();
  nlohmann::json order = nlohmann::json::array(), sizes = nlohmann::json::array(), pinned = nlohmann::json::array();
  std::vector<tiny::Tensor> copies;
  for (const tiny::data::Batch& batch : *loader) {
    for (float id : batch.data.select(1, 0).contiguous().to_vector<float>()) order.push_back(static_cast<int64_t>(id));
    sizes.push_back(batch.data.size(0));
    pinned.push_back(batch.data.is_pinned() && batch.target.is_pinned());
    copies.push_back(batch.data.to(gpu, /*non_blocking=*/true));
  }
  out.values["copy_counters"] = counters_of(gpu);
  tiny::cuda::synchronize(0);
  out.values["order"] = order;
  out.values["batch_sizes"] = sizes;
  out.values["pinned"] = pinned;
  out.values["num_batches"] = loader->size();
}

// to_device on one batch, pinned or not; the counters of the target device are taken around the call.
WORKBOOK_EXERCISE(to_device) {
  tiny::data::Batch batch{in.tensor("features"), in.tensor("labels")};
  if (in.values.at("pinned").get<bool>()) batch = {batch.data.pin_memory(), batch.target.pin_memory()};
  const tiny::Device device = device_of(in);
  start_counting();
  const tiny::data::Batch moved = lesson4::to_device(batch, device, in.values.at("non_blocking").get<bool>());
  out.values["copy_counters"] = counters_of(device);
  out.put("data", moved.data);
  out.put("target", moved.target);
}

// train_step on K batches in a row, from the snapshot "init", with SGD; optionally
// with gradients already in .grad (as the previous step leaves them).
WORKBOOK_EXERCISE(train_step) {
  const tiny::Device device = device_of(in);
  auto model = load_model(in, device);
  auto optimizer = make_sgd(*model, in);
  if (in.values.value("stale_grads", false)) {
    for (auto& [name, p] : model->named_parameters()) p.set_grad(in.tensor("stale." + name).to(device));
  }
  const bool labels_on_device = in.values.value("labels_on_device", false);
  const int steps = in.values.at("steps").get<int>();
  std::vector<tiny::data::Batch> batches;
  for (int k = 0; k < steps; ++k) {
    // Pinned, as the loader of a GPU loop makes them (pin_memory=true): a train_step that passes
    // non_blocking only for pinned batches (batch.data.is_pinned()) is right too.
    batches.push_back({in.tensor("x." + std::to_string(k)).pin_memory(), in.tensor("y." + std::to_string(k)).pin_memory()});
    if (labels_on_device) batches.back().target = batches.back().target.to(device);
  }
  start_counting();
  std::vector<tiny::Tensor> returned;
  for (const tiny::data::Batch& batch : batches) returned.push_back(lesson4::train_step(*model, batch, *optimizer, device));
  out.values["step_counters"] = counters_of(device);  // before the glue reads anything back
  nlohmann::json losses = nlohmann::json::array(), where = nlohmann::json::array(), graph = nlohmann::json::array();
  for (const tiny::Tensor& loss : returned) {
    where.push_back(loss.defined() ? loss.device().str() : "undefined");
    graph.push_back(loss.defined() && loss.requires_grad());
    losses.push_back(loss.defined() ? loss.item<double>() : 0.0);
  }
  out.values["losses"] = losses;
  out.values["loss_devices"] = where;
  out.values["loss_requires_grad"] = graph;
  out.values["forward_passes"] = model->calls.size();
  out.put_state("final", model->state_dict());
  for (auto& [name, p] : model->named_parameters()) out.put("grad." + name, p.grad());
}

// train_one_epoch over a shuffled, pinned loader made by the glue.
WORKBOOK_EXERCISE(train_one_epoch) {
  const tiny::Device device = device_of(in);
  auto model = load_model(in, device);
  auto optimizer = make_sgd(*model, in);
  auto dataset = dataset_of(in);
  tiny::data::DataLoaderOptions options;
  options.batch_size = in.values.at("batch_size").get<int64_t>();
  options.shuffle = true;
  options.pin_memory = has_gpu(device);
  options.generator = tiny::Generator(in.values.at("generator_seed").get<uint64_t>());
  tiny::data::DataLoader loader(dataset, options);
  start_counting();
  const double mean = lesson4::train_one_epoch(*model, loader, *optimizer, device);
  record_unwaited_copy(device, out);
  out.values["copy_counters"] = counters_of(device);
  out.values["mean_loss"] = mean;
  out.values["examples"] = dataset->size();
  out.put_state("final", model->state_dict());
  record_passes(*model, *dataset, out);
}

// The whole pipeline with the student's own loader, timed on the modelled clock
// and profiled: make_loader(pin_memory, 2 workers) + train_one_epoch over a data
// set whose examples cost host time to load (model.h, kLoadNsPerExample).
WORKBOOK_EXERCISE(epoch_pipeline) {
  const tiny::Device device = device_of(in);
  auto model = load_model(in, device);
  auto optimizer = make_sgd(*model, in);
  auto dataset = dataset_of(in);
  dataset->set_load_ns(in.values.at("load_ns_per_example").get<int64_t>());
  std::unique_ptr<tiny::data::DataLoader> loader =
      lesson4::make_loader(dataset, in.values.at("batch_size").get<int64_t>(), /*shuffle=*/true,
                           /*pin_memory=*/true, in.values.at("num_workers").get<int>(),
                           tiny::Generator(in.values.at("generator_seed").get<uint64_t>()));
  if (!loader) throw tiny::ValueError("make_loader returned an empty std::unique_ptr instead of a loader");
  out.values["num_workers"] = loader->options().num_workers;
  start_counting();
  const bool modelled = tiny::cuda::is_emulated(device.index());
  std::optional<tiny::profiler::profile> prof;
  if (modelled) prof.emplace();
  const double start = tiny::cuda::host_time();
  const double mean = lesson4::train_one_epoch(*model, *loader, *optimizer, device);
  out.values["copy_counters"] = counters_of(device);
  tiny::cuda::synchronize(device.index());
  out.values["epoch_ms"] = (tiny::cuda::host_time() - start) * 1e3;
  if (modelled) {
    prof->stop();
    const std::string trace = prof->chrome_trace();
    out.values["profile"] = lesson4_checks::epoch_profile(trace).to_json();
    out.values["trace"] = nlohmann::json::parse(trace);  // the grader's report draws it beside the reference's
    out.values["modelled_gpu"] = tiny::cuda::get_device_properties(device.index()).modelled_gpu;
    out.values["utilization"] = tiny::cuda::utilization(device.index());
  }
  out.values["mean_loss"] = mean;
  out.values["batches"] = dataset->served().size();
  // A probe, so that the check blames the right function: how often the student's
  // to_device alone makes the host wait, on a pinned batch as the loader gives it.
  if (device.is_cuda()) {
    const tiny::Tensor x = in.tensor("features"), y = in.tensor("labels");
    const tiny::data::Batch probe{x.narrow(0, 0, 8).contiguous().pin_memory(), y.narrow(0, 0, 8).contiguous().pin_memory()};
    start_counting();
    const tiny::data::Batch moved = lesson4::to_device(probe, device, /*non_blocking=*/true);
    out.values["to_device_synchronizations"] = tiny::cuda::device_counters(device.index()).synchronizations;
    (void)moved;  // kept alive until the copy is done
    tiny::cuda::synchronize(device.index());
  }
}

// evaluate over an unshuffled loader made by the glue, with the model in training mode.
WORKBOOK_EXERCISE(evaluate) {
  const tiny::Device device = device_of(in);
  auto model = load_model(in, device);
  auto dataset = dataset_of(in);
  tiny::data::DataLoaderOptions options;
  options.batch_size = in.values.at("batch_size").get<int64_t>();
  options.pin_memory = has_gpu(device);
  tiny::data::DataLoader loader(dataset, options);
  start_counting();
  const lesson4::EvalResult result = lesson4::evaluate(*model, loader, device);
  out.values["copy_counters"] = counters_of(device);  // the loop's waits, before the glue reads anything back
  out.values["training_after"] = model->is_training();
  out.values["grad_mode_after"] = tiny::is_grad_enabled();
  out.values["loss"] = result.loss;
  out.values["accuracy"] = result.accuracy;
  int grads = 0;
  for (const tiny::Tensor& p : model->parameters()) grads += p.grad().defined() ? 1 : 0;
  out.values["grads_defined"] = grads;
  record_passes(*model, *dataset, out);
}
