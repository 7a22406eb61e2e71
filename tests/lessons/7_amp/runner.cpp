// Lesson 7's glue: rebuilds the model, optimizer, scaler and batches from the
// bundle, calls each exercise, and writes down what came out and what the step
// did on the way: whether autocast was on in the forward pass, in backward and
// in optimizer.step(), the gradients the optimizer was handed, the dtypes, the
// scale after each step, and the bytes a forward pass keeps for backward.
#include <cmath>

#include "exercise.h"
#include "harness/runner.h"
#include "model.h"

namespace F = tiny::nn::functional;
using lesson7_checks::ProbedMLP;
using lesson7_checks::ProbedSGD;

namespace {

const tiny::Device kGpu("cuda:0");

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

// Hooks on the first and the last weight that backward reaches: was autocast on while it ran?
struct BackwardProbe {
  explicit BackwardProbe(ProbedMLP& model) {
    for (const tiny::Tensor& w : {model.fc3->weight, model.fc1->weight}) {
      w.register_hook([this](const tiny::Tensor&) {
        ++calls;
        if (tiny::amp::is_autocast_enabled("cuda")) autocast = true;
        return tiny::Tensor();  // keep the gradient as it is
      });
    }
  }
  int calls = 0;
  bool autocast = false;
};

nlohmann::json number_or_null(double v) { return std::isfinite(v) ? nlohmann::json(v) : nlohmann::json(nullptr); }

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

// The training steps of amp_steps and bf16_steps: the same loop, with or without the scaler.
void train_steps(const workbook::Bundle& in, workbook::Bundle& out, bool with_scaler) {
  auto model = load_model(in);
  auto optimizer = make_sgd(*model, in);
  tiny::amp::GradScaler::Options options;
  if (with_scaler) {
    options.init_scale = in.values.at("init_scale").get<double>();
    options.growth_interval = in.values.at("growth_interval").get<int64_t>();
  }
  tiny::amp::GradScaler scaler("cuda", options);
  BackwardProbe probe(*model);
  const int steps = in.values.at("steps").get<int>();
  const double max_grad_norm = in.values.value("max_grad_norm", 1.0);
  nlohmann::json losses = nlohmann::json::array(), scales = nlohmann::json::array(),
                 trackers = nlohmann::json::array(), changes = nlohmann::json::array(),
                 finite = nlohmann::json::array(), stepped = nlohmann::json::array();
  // Writes what was seen so far: also when the student's step threw, so the checks can probe why.
  auto record = [&] {
    record_calls(*model, out);
    out.values["losses"] = losses;
    out.values["scales"] = scales;
    out.values["growth_trackers"] = trackers;
    out.values["params_changed"] = changes;
    out.values["params_finite"] = finite;
    out.values["stepped"] = stepped;
    out.values["backward_hook_calls"] = probe.calls;
    out.values["backward_autocast"] = probe.autocast;
    out.values["init_scale"] = with_scaler ? options.init_scale : 0.0;
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
    std::vector<tiny::Tensor> before = snapshot(*model);
    for (int k = 0; k < steps; ++k) {
      optimizer->current_step = k;
      const size_t calls_before = optimizer->steps.size();
      const tiny::Tensor x = in.tensor("x." + std::to_string(k)).to(kGpu);
      const tiny::Tensor y = in.tensor("y." + std::to_string(k)).to(kGpu);
      const double loss = with_scaler
                              ? lesson7::amp_train_step(*model, *optimizer, scaler, x, y, max_grad_norm)
                              : lesson7::bf16_train_step(*model, *optimizer, x, y);
      losses.push_back(number_or_null(loss));
      if (with_scaler) {
        scales.push_back(scaler.get_scale());
        trackers.push_back(scaler.growth_tracker());
      }
      stepped.push_back(optimizer->steps.size() > calls_before);
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
  try {
    loss = lesson7::amp_forward(*model, x, y);
  } catch (...) {
    record_calls(*model, out);
    throw;
  }
  const size_t m1 = tiny::cuda::memory_allocated(0);
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
WORKBOOK_EXERCISE(amp_steps) { train_steps(in, out, /*with_scaler=*/true); }

// bf16_train_step on K batches in a row, from the snapshot "init", with a ProbedSGD.
WORKBOOK_EXERCISE(bf16_steps) { train_steps(in, out, /*with_scaler=*/false); }
