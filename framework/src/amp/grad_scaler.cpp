// tiny::amp::GradScaler: PyTorch's torch/cuda/amp/grad_scaler.py (1.13), with
// the scale and the growth tracker as one-element tensors on the device, the
// unscale + inf/NaN check as one fused kernel per device, and the scale update
// queued on the device, so an iteration synchronizes only where PyTorch does
// (step() reads each device's found_inf).
#include <cmath>
#include <cstdio>
#include <iostream>
#include <sstream>

#include "tiny/amp.h"
#include "tiny/autograd.h"
#include "tiny/cuda.h"
#include "tiny/ops.h"
#include "tiny/optim/optimizer.h"

namespace tiny::amp {

namespace {

void check_growth_factor(double f) {
  TINY_CHECK(f > 1.0, ValueError, "The growth factor must be > 1.0. (got ", f, ")");
}
void check_backoff_factor(double f) {
  TINY_CHECK(f < 1.0, ValueError, "The backoff factor must be < 1.0. (got ", f, ")");
}
void check_growth_interval(int64_t n) {
  TINY_CHECK(n > 0, ValueError, "The growth interval must be > 0 (got ", n, "): it counts the clean steps between "
             "growths of the scale");
}

std::string format_double(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  return buf;
}

const std::string& metadata_at(const StateDict& state, const std::string& key) {
  auto it = state.metadata.find(key);
  TINY_CHECK(it != state.metadata.end(), ValueError, "GradScaler.load_state_dict: the state dict has no '", key,
             "' (expected scale, growth_factor, backoff_factor, growth_interval, _growth_tracker as saved by "
             "GradScaler::state_dict())");
  return it->second;
}

double parse_double(const StateDict& state, const std::string& key) {
  const std::string& text = metadata_at(state, key);
  std::istringstream in(text);
  double v = 0;
  in >> v;
  TINY_CHECK(!in.fail() && in.eof(), ValueError, "GradScaler.load_state_dict: '", key, "' is '", text,
             "', not a number");
  return v;
}

int64_t parse_int(const StateDict& state, const std::string& key) {
  const std::string& text = metadata_at(state, key);
  std::istringstream in(text);
  int64_t v = 0;
  in >> v;
  TINY_CHECK(!in.fail() && in.eof(), ValueError, "GradScaler.load_state_dict: '", key, "' is '", text,
             "', not an integer");
  return v;
}

}  // namespace

GradScaler::GradScaler() : GradScaler("cuda", Options{}) {}

GradScaler::GradScaler(Options options) : GradScaler("cuda", options) {}

GradScaler::GradScaler(const std::string& device, Options options)
    : device_(device),
      enabled_(options.enabled),
      init_scale_(options.init_scale),
      growth_factor_(options.growth_factor),
      backoff_factor_(options.backoff_factor),
      growth_interval_(options.growth_interval) {
  TINY_CHECK(device == "cuda" || device == "cpu", ValueError, "GradScaler: device '", device,
             "' is not supported: expected \"cuda\" or \"cpu\" (a device type, without an index)");
  if (enabled_ && device_ == "cuda" && !cuda::is_available()) {
    std::cerr << "UserWarning: torch.cuda.amp.GradScaler is enabled, but CUDA is not available.  Disabling.\n";
    enabled_ = false;
  }
  if (enabled_) {
    check_growth_factor(growth_factor_);
    check_backoff_factor(backoff_factor_);
    check_growth_interval(growth_interval_);
  }
}

void GradScaler::lazy_init(const Device& device) {
  scale_ = full({1}, init_scale_, TensorOptions(kFloat32).device(device));
  growth_tracker_ = full({1}, init_growth_tracker_, TensorOptions(kInt64).device(device));
}

void GradScaler::check_scale_initialized(const char* funcname) const {
  TINY_CHECK(scale_.defined(), RuntimeError, "Attempted ", funcname,
             " but _scale is None.  This may indicate your script did not use scaler.scale(loss or outputs) "
             "earlier in the iteration.");
}

GradScaler::PerOptimizer& GradScaler::state_of(const optim::Optimizer& optimizer) {
  return per_optimizer_[&optimizer];
}

Tensor GradScaler::scale(const Tensor& outputs) {
  if (!enabled_) return outputs;
  TINY_CHECK(outputs.defined(), ValueError, "GradScaler.scale: outputs is an undefined tensor");
  if (!scale_.defined()) lazy_init(outputs.device());
  Tensor s;
  {
    NoGradGuard no_grad;  // the scale is a constant of the graph
    s = scale_.to(outputs.device(), /*non_blocking=*/true);
  }
  return outputs * s;
}

void GradScaler::unscale_(optim::Optimizer& optimizer) {
  if (!enabled_) return;
  check_scale_initialized("unscale_");
  PerOptimizer& state = state_of(optimizer);
  TINY_CHECK(state.stage != Stage::Unscaled, RuntimeError,
             "unscale_() has already been called on this optimizer since the last update().");
  TINY_CHECK(state.stage != Stage::Stepped, RuntimeError, "unscale_() is being called after step().");

  NoGradGuard no_grad;
  // inv_scale in double then rounded once, as PyTorch: self._scale.double().reciprocal().float().
  const Tensor scale64 = scale_.to(kFloat64);
  const Tensor inv_scale = (ones_like(scale64) / scale64).to(kFloat32);

  // One fused pass per device over every gradient that lives there.
  std::map<std::string, std::vector<Tensor>> grads_per_device;
  std::map<std::string, Device> devices;
  for (const optim::ParamGroup& group : optimizer.param_groups()) {
    for (const Tensor& p : group.params()) {
      const Tensor g = p.grad();
      if (!g.defined()) continue;
      const std::string key = g.device().str();
      grads_per_device[key].push_back(g);
      devices.emplace(key, g.device());
    }
  }
  for (auto& [key, grads] : grads_per_device) {
    const Device& device = devices.at(key);
    Tensor found_inf = zeros({1}, TensorOptions(kFloat32).device(device));
    // To another GPU the copy is queued; the CPU runs its kernel at once, so
    // a CPU gradient waits for the scale's device (a non-blocking copy would
    // race with it).
    foreach_non_finite_check_and_unscale_(grads, found_inf, inv_scale.to(device, /*non_blocking=*/device.is_cuda()));
    state.found_inf_per_device[key] = found_inf;
  }
  state.stage = Stage::Unscaled;
}

bool GradScaler::step(optim::Optimizer& optimizer) {
  if (!enabled_) {
    optimizer.step();
    return true;
  }
  check_scale_initialized("step");
  PerOptimizer& state = state_of(optimizer);
  TINY_CHECK(state.stage != Stage::Stepped, RuntimeError, "step() has already been called since the last update().");
  if (state.stage == Stage::Ready) unscale_(optimizer);
  TINY_CHECK(!state.found_inf_per_device.empty(), RuntimeError,
             "No inf checks were recorded for this optimizer. (None of its parameters has a gradient: did backward() "
             "run on the scaled loss?)");
  // The one synchronization of the iteration (per device), as PyTorch's v.item().
  double found = 0.0;
  for (const auto& [key, found_inf] : state.found_inf_per_device) found += found_inf.item<double>();
  const bool stepped = found == 0.0;
  if (stepped) optimizer.step();
  state.stage = Stage::Stepped;
  return stepped;
}

void GradScaler::update() {
  if (!enabled_) return;
  check_scale_initialized("update");
  Tensor combined;
  {
    NoGradGuard no_grad;
    for (const auto& [optimizer, state] : per_optimizer_) {
      for (const auto& [key, found_inf] : state.found_inf_per_device) {
        const Tensor here = found_inf.to(scale_.device(), /*non_blocking=*/true);
        combined = combined.defined() ? combined + here : here;
      }
    }
  }
  TINY_CHECK(combined.defined(), RuntimeError,
             "No inf checks were recorded prior to update(). (Call scaler.step(optimizer) or "
             "scaler.unscale_(optimizer) after backward and before update().)");
  update_scale_(scale_, growth_tracker_, combined, growth_factor_, backoff_factor_, growth_interval_);
  per_optimizer_.clear();
}

void GradScaler::update(double new_scale) {
  if (!enabled_) return;
  check_scale_initialized("update");
  scale_.fill_(new_scale);
  per_optimizer_.clear();
}

double GradScaler::get_scale() const {
  if (!enabled_) return 1.0;
  return scale_.defined() ? scale_.item<double>() : init_scale_;
}

double GradScaler::get_growth_factor() const { return growth_factor_; }
double GradScaler::get_backoff_factor() const { return backoff_factor_; }
int64_t GradScaler::get_growth_interval() const { return growth_interval_; }

void GradScaler::set_growth_factor(double growth_factor) {
  check_growth_factor(growth_factor);
  growth_factor_ = growth_factor;
}

void GradScaler::set_backoff_factor(double backoff_factor) {
  check_backoff_factor(backoff_factor);
  backoff_factor_ = backoff_factor;
}

void GradScaler::set_growth_interval(int64_t growth_interval) {
  check_growth_interval(growth_interval);
  growth_interval_ = growth_interval;
}

int64_t GradScaler::growth_tracker() const {
  if (!enabled_) return 0;
  return growth_tracker_.defined() ? growth_tracker_.item<int64_t>() : init_growth_tracker_;
}

StateDict GradScaler::state_dict() const {
  StateDict out;
  if (!enabled_) return out;
  out.metadata["scale"] = format_double(get_scale());
  out.metadata["growth_factor"] = format_double(growth_factor_);
  out.metadata["backoff_factor"] = format_double(backoff_factor_);
  out.metadata["growth_interval"] = std::to_string(growth_interval_);
  out.metadata["_growth_tracker"] = std::to_string(growth_tracker());
  return out;
}

void GradScaler::load_state_dict(const StateDict& state) {
  if (!enabled_) return;
  TINY_CHECK(!state.metadata.empty() || !state.empty(), RuntimeError,
             "The source state dict is empty, possibly because it was saved from a disabled instance of "
             "GradScaler.");
  // Parse everything before changing anything.
  const double scale = parse_double(state, "scale");
  const double growth_factor = parse_double(state, "growth_factor");
  const double backoff_factor = parse_double(state, "backoff_factor");
  const int64_t growth_interval = parse_int(state, "growth_interval");
  const int64_t tracker = parse_int(state, "_growth_tracker");
  check_growth_factor(growth_factor);
  check_backoff_factor(backoff_factor);
  check_growth_interval(growth_interval);
  init_scale_ = scale;
  if (scale_.defined()) scale_.fill_(scale);
  growth_factor_ = growth_factor;
  backoff_factor_ = backoff_factor;
  growth_interval_ = growth_interval;
  init_growth_tracker_ = tracker;
  if (growth_tracker_.defined()) growth_tracker_.fill_(tracker);
}

}  // namespace tiny::amp
