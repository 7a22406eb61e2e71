// Lesson 7's glue: rebuilds the model, optimizer, scaler and batches from the
// bundle, calls each exercise, and writes down what came out and what the step
// did on the way: whether autocast was on in the forward pass, in backward and
// in optimizer.step(), the gradients the optimizer was handed, the dtypes, the
// scale after each step, the bytes a forward pass keeps for backward, and the
// GPU's GEMM counters (which dtype each matrix product really ran in).
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <optional>

#include "exercise.h"
#include "harness/runner.h"
#include "model.h"

namespace F = tiny::nn::functional;
using lesson7_checks::ProbedMLP;
using lesson7_checks::ProbedSGD;

namespace {

const tiny::Device kGpu("cuda:0");

// The kernels of amp's own helpers in a profile (GradScaler's fused
// unscale-and-check and its scale update, PyTorch's
// torch._amp_foreach_non_finite_check_and_unscale_ and torch._amp_update_scale_):
// the loss scaling exercises build these, so an answer that calls them is named.
nlohmann::json amp_helper_kernels(const tiny::profiler::profile& prof) {
  nlohmann::json calls = nlohmann::json::object();
  for (const char* name : {"_amp_foreach_non_finite_check_and_unscale_", "_amp_update_scale_"}) calls[name] = 0;
  const nlohmann::json trace = nlohmann::json::parse(prof.chrome_trace());  // kept: the loop reads into it
  for (const nlohmann::json& e : trace.at("traceEvents")) {
    if (e.value("ph", "") != "X" || e.value("cat", "") != "kernel") continue;
    const std::string name = e.value("name", "");
    if (calls.contains(name)) calls[name] = calls[name].get<int>() + 1;
  }
  return calls;
}

std::shared_ptr<ProbedMLP> load_model(const workbook::Bundle& in) {
  auto model = std::make_shared<ProbedMLP>(in.values.at("in").get<int64_t>(), in.values.at("hidden").get<int64_t>(),
                                           in.values.at("classes").get<int64_t>());
  model->load_state_dict(in.state("init"));
  model->to(kGpu);
  model->train();
  return model;
}

std::unique_ptr<ProbedSGD> make_sgd(const ProbedMLP& model, const workbook::Bundle& in) {
  tiny::optim::SGDOptions options;
  options.lr = in.values.at("lr").get<double>();
  options.momentum = in.values.at("momentum").get<double>();
  return std::make_unique<ProbedSGD>(model.parameters(), options);
}

// Hooks on the first and the last weight that backward reaches: was autocast on
// while it ran? And at the first backward, before it adds to fc3.weight's
// .grad(): does that still hold the stale gradient seeded before the first
// step (seed_stale_grads), because the step did not clear the gradients?
struct BackwardProbe {
  BackwardProbe(ProbedMLP& model, std::optional<double> stale) {
    for (const tiny::Tensor& w : {model.fc3->weight, model.fc1->weight}) {
      const bool first = w.unsafe_impl() == model.fc3->weight.unsafe_impl();
      // The model, not the weight: a weight's hook holding the weight would keep it alive forever.
      w.register_hook([this, first, stale, m = &model](const tiny::Tensor&) {
        ++calls;
        if (tiny::amp::is_autocast_enabled("cuda")) autocast = true;
        if (first && stale && ++fc3_backwards == 1) {
          const tiny::Tensor g = m->fc3->weight.grad();
          stale_kept = g.defined() && g.abs().max().item<double>() == std::fabs(*stale);
        }
        return tiny::Tensor();  // keep the gradient as it is
      });
    }
  }
  int calls = 0;
  int fc3_backwards = 0;
  bool autocast = false;
  bool stale_kept = false;
};

nlohmann::json number_or_null(double v) { return std::isfinite(v) ? nlohmann::json(v) : nlohmann::json(nullptr); }

// The matrix products since the harness reset the counters, by the math they ran in.
nlohmann::json gemm_counts() {
  const tiny::cuda::DeviceCounters c = tiny::cuda::device_counters(0);
  return {{"float32", c.gemms_float32}, {"tf32", c.gemms_tf32}, {"float16", c.gemms_float16},
          {"bfloat16", c.gemms_bfloat16}, {"other", c.gemms_other}};
}

// Stale gradients in every parameter before the first step, as a previous
// step would leave them: a step that does not clear them adds to them.
void seed_stale_grads(const tiny::nn::Module& model, const workbook::Bundle& in) {
  if (!in.values.contains("stale_grad")) return;
  const double stale = in.values["stale_grad"].get<double>();
  for (const tiny::Tensor& p : model.parameters()) p.set_grad(tiny::full_like(p, stale));
}

// Everything the forward passes saw.
void record_calls(const ProbedMLP& model, workbook::Bundle& out) {
  nlohmann::json calls = nlohmann::json::array();
  for (const ProbedMLP::Call& c : model.calls) {
    calls.push_back({{"autocast", c.autocast}, {"autocast_dtype", c.autocast_dtype},
                     {"weight_dtype", c.weight_dtype}, {"output_dtype", c.output_dtype}});
  }
  out.values["forward_calls"] = calls;
}

// A CPU copy of every parameter, to see which step changed them.
std::vector<tiny::Tensor> snapshot(const ProbedMLP& model) {
  std::vector<tiny::Tensor> s;
  for (const tiny::Tensor& p : model.parameters()) s.push_back(p.detach().cpu().to(tiny::kFloat32));
  return s;
}

bool all_finite(const std::vector<tiny::Tensor>& params) {
  for (const tiny::Tensor& p : params) {
    for (float v : p.contiguous().to_vector<float>()) {
      if (!std::isfinite(v)) return false;
    }
  }
  return true;
}

bool changed(const std::vector<tiny::Tensor>& before, const std::vector<tiny::Tensor>& after) {
  for (size_t i = 0; i < before.size(); ++i) {
    const std::vector<float> a = before[i].contiguous().to_vector<float>(), b = after[i].contiguous().to_vector<float>();
    for (size_t j = 0; j < a.size(); ++j) {
      if (!(a[j] == b[j]) && !(std::isnan(a[j]) && std::isnan(b[j]))) return true;
    }
  }
  return false;
}

enum class Steps { grad_scaler, own_scaler, bfloat16 };

// The training steps of amp_steps, scaled_steps and bf16_steps: the same loop,
// with GradScaler, with the student's own scaler, or with no scaler.
void train_steps(const workbook::Bundle& in, workbook::Bundle& out, Steps kind) {
  const bool with_scaler = kind != Steps::bfloat16;
  auto model = load_model(in);
  auto optimizer = make_sgd(*model, in);
  tiny::amp::GradScaler::Options options;
  if (with_scaler) {
    options.init_scale = in.values.at("init_scale").get<double>();
    options.growth_interval = in.values.at("growth_interval").get<int64_t>();
  }
  tiny::amp::GradScaler scaler("cuda", options);
  lesson7::ScalerState own;
  own.scale = options.init_scale;
  own.growth_interval = options.growth_interval;
  std::optional<double> stale;
  if (in.values.contains("stale_grad")) stale = in.values["stale_grad"].get<double>();
  BackwardProbe probe(*model, stale);
  const int steps = in.values.at("steps").get<int>();
  const double max_grad_norm = in.values.value("max_grad_norm", 1.0);
  nlohmann::json losses = nlohmann::json::array(), scales = nlohmann::json::array(),
                 trackers = nlohmann::json::array(), changes = nlohmann::json::array(),
                 finite = nlohmann::json::array(), stepped = nlohmann::json::array();
  // Your own scaler's steps: does scaled_train_step call amp's helpers (GradScaler's kernels)?
  std::optional<tiny::profiler::profile> prof;
  if (kind == Steps::own_scaler) prof.emplace();
  // With "watch_cache": the allocator over the steps (segments given back, allocations the
  // cache did not serve, memory_reserved after each step): empty_cache() every step shows there.
  std::optional<tiny::cuda::MemoryTimeline> timeline;
  const uint64_t mallocs_before = tiny::cuda::device_counters(0).device_mallocs;
  nlohmann::json reserved = nlohmann::json::array();
  if (in.values.value("watch_cache", false)) {
    timeline.emplace(0);
    timeline->start();
  }
  // Writes what was seen so far: also when the student's step threw, so the checks can probe why.
  auto record = [&] {
    if (timeline) {
      timeline->stop();
      int64_t segment_frees = 0;
      for (const tiny::cuda::MemorySample& m : timeline->samples()) segment_frees += m.kind == "segment_free" ? 1 : 0;
      out.values["segment_frees"] = segment_frees;
      out.values["step_mallocs"] = tiny::cuda::device_counters(0).device_mallocs - mallocs_before;
      out.values["reserved_after_step"] = reserved;
    }
    if (prof) {
      prof->stop();
      out.values["amp_helper_kernels"] = amp_helper_kernels(*prof);
    }
    record_calls(*model, out);
    out.values["losses"] = losses;
    out.values["scales"] = scales;
    out.values["growth_trackers"] = trackers;
    out.values["params_changed"] = changes;
    out.values["params_finite"] = finite;
    out.values["stepped"] = stepped;
    out.values["backward_hook_calls"] = probe.calls;
    out.values["backward_autocast"] = probe.autocast;
    out.values["stale_grads_kept"] = probe.stale_kept;
    out.values["init_scale"] = with_scaler ? options.init_scale : 0.0;
    out.values["gemms"] = gemm_counts();
    bool step_autocast = false;
    nlohmann::json step_of = nlohmann::json::array();
    for (const ProbedSGD::Step& s : optimizer->steps) {
      step_autocast = step_autocast || s.autocast;
      step_of.push_back(s.train_step);
    }
    out.values["step_autocast"] = step_autocast;
    out.values["step_calls"] = step_of;
    // The gradients handed to the optimizer at its last step() call.
    if (!optimizer->steps.empty()) {
      const ProbedSGD::Step& last = optimizer->steps.back();
      size_t i = 0;
      for (const auto& [name, p] : model->named_parameters()) {
        (void)p;
        out.put("grad." + name, i < last.grads.size() ? last.grads[i] : tiny::Tensor());
        ++i;
      }
    }
    nlohmann::json dtypes = nlohmann::json::array();
    for (const tiny::Tensor& p : model->parameters()) dtypes.push_back(tiny::dtype_name(p.dtype()));
    out.values["param_dtypes"] = dtypes;
    out.put_state("final", model->state_dict());
  };
  try {
    seed_stale_grads(*model, in);
    std::vector<tiny::Tensor> before = snapshot(*model);
    for (int k = 0; k < steps; ++k) {
      optimizer->current_step = k;
      const size_t calls_before = optimizer->steps.size();
      const tiny::Tensor x = in.tensor("x." + std::to_string(k)).to(kGpu);
      const tiny::Tensor y = in.tensor("y." + std::to_string(k)).to(kGpu);
      double loss = 0;
      switch (kind) {
        case Steps::grad_scaler:
          loss = lesson7::amp_train_step(*model, *optimizer, scaler, x, y, max_grad_norm);
          break;
        case Steps::own_scaler: loss = lesson7::scaled_train_step(*model, *optimizer, own, x, y); break;
        case Steps::bfloat16: loss = lesson7::bf16_train_step(*model, *optimizer, x, y); break;
      }
      losses.push_back(number_or_null(loss));
      if (kind == Steps::grad_scaler) {
        scales.push_back(scaler.get_scale());
        trackers.push_back(scaler.growth_tracker());
      } else if (kind == Steps::own_scaler) {
        scales.push_back(own.scale);
        trackers.push_back(own.growth_tracker);
      }
      stepped.push_back(optimizer->steps.size() > calls_before);
      if (timeline) reserved.push_back(tiny::cuda::memory_reserved(0));
      std::vector<tiny::Tensor> after = snapshot(*model);
      changes.push_back(changed(before, after));
      finite.push_back(all_finite(after));
      before = std::move(after);
    }
  } catch (...) {
    record();
    throw;
  }
  record();
}

}  // namespace

// amp_forward on one batch. With "measure_memory": the bytes its graph keeps
// (memory_allocated after the call minus before), then the same for a plain
// float32 forward pass and loss run by the glue, on the same model and batch.
WORKBOOK_EXERCISE(amp_forward) {
  auto model = load_model(in);
  const tiny::Tensor x = in.tensor("x").to(kGpu), y = in.tensor("y").to(kGpu);
  tiny::cuda::synchronize(0);
  const size_t m0 = tiny::cuda::memory_allocated(0);
  tiny::Tensor loss;
  // With keep_trace, the call is profiled: the grader's report draws its GPU timeline beside the reference's.
  std::optional<tiny::profiler::profile> prof;
  if (in.values.value("keep_trace", false) && tiny::cuda::is_emulated(0)) prof.emplace();
  try {
    loss = lesson7::amp_forward(*model, x, y);
  } catch (...) {
    record_calls(*model, out);
    throw;
  }
  const size_t m1 = tiny::cuda::memory_allocated(0);
  if (prof) {
    tiny::cuda::synchronize(0);
    prof->stop();
    out.values["trace"] = nlohmann::json::parse(prof->chrome_trace());
  }
  out.values["gemms"] = gemm_counts();  // before the glue's own float32 pass below
  record_calls(*model, out);
  out.values["autocast_after"] = tiny::amp::is_autocast_enabled("cuda");
  out.values["amp_bytes"] = static_cast<int64_t>(m1) - static_cast<int64_t>(m0);
  out.values["loss_requires_grad"] = loss.defined() && loss.requires_grad();
  out.put("loss", loss.defined() ? loss.detach() : loss);
  loss = tiny::Tensor();  // frees the graph
  if (in.values.value("measure_memory", false)) {
    tiny::cuda::synchronize(0);
    const size_t m2 = tiny::cuda::memory_allocated(0);
    const tiny::Tensor full = F::cross_entropy((*model)(x), y);
    const size_t m3 = tiny::cuda::memory_allocated(0);
    out.values["fp32_bytes"] = static_cast<int64_t>(m3) - static_cast<int64_t>(m2);
    out.put("fp32_loss", full.detach());
  }
}

// amp_train_step on K batches in a row, from the snapshot "init", with a ProbedSGD
// and a GradScaler(init_scale, growth_interval) made by the glue.
WORKBOOK_EXERCISE(amp_steps) { train_steps(in, out, Steps::grad_scaler); }

// scaled_train_step on K batches in a row, from the snapshot "init", with a ProbedSGD
// and a ScalerState(init_scale, growth_interval).
WORKBOOK_EXERCISE(scaled_steps) { train_steps(in, out, Steps::own_scaler); }

// bf16_train_step on K batches in a row, from the snapshot "init", with a ProbedSGD.
WORKBOOK_EXERCISE(bf16_steps) { train_steps(in, out, Steps::bfloat16); }

// unscale_grads_ on the gradients g.0 ... g.{n-1} (moved to cuda:0; the
// indices in "undefined" are passed as undefined tensors) and "scale": the
// answer and the gradients after the call.
WORKBOOK_EXERCISE(unscale) {
  const int n = in.values.at("count").get<int>();
  const nlohmann::json undefined = in.values.value("undefined", nlohmann::json::array());
  std::vector<tiny::Tensor> grads;
  for (int i = 0; i < n; ++i) {
    const bool none = std::find(undefined.begin(), undefined.end(), i) != undefined.end();
    grads.push_back(none ? tiny::Tensor() : in.tensor("g." + std::to_string(i)).to(kGpu));
  }
  tiny::cuda::synchronize(0);
  tiny::profiler::profile prof;  // opened before the count: it must not add to it
  const tiny::cuda::DeviceCounters before = tiny::cuda::device_counters(0);
  const bool found_inf = lesson7::unscale_grads_(grads, in.values.at("scale").get<double>());
  // Work still queued when the answer came back, after a copy into pinned memory (a non_blocking
  // one): the flag was read before the copy ran (in the check's deferred mode, every time).
  out.values["idle"] = tiny::cuda::current_stream(0).query();
  const tiny::cuda::DeviceCounters after = tiny::cuda::device_counters(0);
  out.values["synchronizations"] = after.synchronizations - before.synchronizations;
  out.values["bytes_to_pinned"] = after.bytes_device_to_host_pinned - before.bytes_device_to_host_pinned;
  // Bytes each way between the GPU and the host during the call: gradients taken through the host and back.
  out.values["bytes_to_host"] = after.bytes_device_to_host_pageable + after.bytes_device_to_host_pinned -
                                before.bytes_device_to_host_pageable - before.bytes_device_to_host_pinned;
  out.values["bytes_to_device"] = after.bytes_host_to_device_pageable + after.bytes_host_to_device_pinned -
                                  before.bytes_host_to_device_pageable - before.bytes_host_to_device_pinned;
  prof.stop();
  out.values["amp_helper_kernels"] = amp_helper_kernels(prof);
  out.values["found_inf"] = found_inf;
  for (int i = 0; i < n; ++i) {
    if (grads[static_cast<size_t>(i)].defined()) out.put("g." + std::to_string(i), grads[static_cast<size_t>(i)].cpu());
  }
}

// update_scale after each flag of "found_inf", from a ScalerState with
// "init_scale" and "growth_interval": the scale and the tracker after each.
WORKBOOK_EXERCISE(update_scale) {
  lesson7::ScalerState state;
  state.scale = in.values.at("init_scale").get<double>();
  state.growth_interval = in.values.at("growth_interval").get<int64_t>();
  nlohmann::json scales = nlohmann::json::array(), trackers = nlohmann::json::array();
  for (const auto& flag : in.values.at("found_inf")) {
    lesson7::update_scale(state, flag.get<bool>());
    scales.push_back(state.scale);
    trackers.push_back(state.growth_tracker);
  }
  out.values["scales"] = scales;
  out.values["growth_trackers"] = trackers;
}

// save_checkpoint after K float16 steps taken here with tiny::amp::GradScaler
// (init_scale, growth_interval; batch 1 overflows, so the scale has moved),
// then load_checkpoint into a fresh model, optimizer and default scaler: the
// states before the save and after the load.
WORKBOOK_EXERCISE(checkpoint) {
  auto model = load_model(in);
  auto optimizer = make_sgd(*model, in);
  tiny::amp::GradScaler::Options options;
  options.init_scale = in.values.at("init_scale").get<double>();
  options.growth_interval = in.values.at("growth_interval").get<int64_t>();
  tiny::amp::GradScaler scaler("cuda", options);
  for (int k = 0; k < in.values.at("steps").get<int>(); ++k) {
    optimizer->zero_grad();
    tiny::Tensor loss;
    {
      tiny::amp::autocast guard("cuda", tiny::kFloat16);
      loss = F::cross_entropy((*model)(in.tensor("x." + std::to_string(k)).to(kGpu)),
                              in.tensor("y." + std::to_string(k)).to(kGpu));
    }
    scaler.scale(loss).backward();
    scaler.step(*optimizer);
    scaler.update();
  }
  out.put_state("saved_model", model->state_dict());
  out.put_state("saved_optimizer", optimizer->state_dict());
  out.values["saved_scale"] = scaler.get_scale();
  out.values["saved_growth_tracker"] = scaler.growth_tracker();
  const std::string path = in.values.at("path");
  std::filesystem::remove(path);
  lesson7::save_checkpoint(path, *model, *optimizer, scaler);
  out.values["file_written"] = std::filesystem::exists(path);

  auto fresh = load_model(in);
  auto fresh_optimizer = make_sgd(*fresh, in);
  tiny::amp::GradScaler fresh_scaler("cuda", tiny::amp::GradScaler::Options{});
  out.values["fresh_scale"] = tiny::amp::GradScaler::Options{}.init_scale;
  lesson7::load_checkpoint(path, *fresh, *fresh_optimizer, fresh_scaler);
  out.put_state("loaded_model", fresh->state_dict());
  out.put_state("loaded_optimizer", fresh_optimizer->state_dict());
  out.values["loaded_scale"] = fresh_scaler.get_scale();
  out.values["loaded_growth_tracker"] = fresh_scaler.growth_tracker();
}
