// tiny::optim::Optimizer: param groups, zero_grad, state_dict and its checks.
#include "tiny/optim/optimizer.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <set>
#include <sstream>

#include "optim/optim_helpers.h"
#include "tiny/autograd.h"
#include "tiny/ops.h"

namespace tiny::optim {

namespace detail {

std::string format_option(double value) {
  if (std::isinf(value)) return value > 0 ? "inf" : "-inf";
  if (std::isnan(value)) return "nan";
  char buf[32];
  for (int precision = 1; precision <= 17; ++precision) {
    std::snprintf(buf, sizeof(buf), "%.*g", precision, value);
    if (std::strtod(buf, nullptr) == value) break;
  }
  return buf;
}

double get_option(const OptionMap& options, const std::string& name) {
  auto it = options.find(name);
  if (it != options.end()) return it->second;
  std::string names;
  for (const auto& [key, value] : options) names += (names.empty() ? "" : ", ") + key;
  TINY_THROW(IndexError, "param group has no option '", name, "'; it has {", names, "}");
}

Tensor state_buffer(ParamState& state, const char* name, const Tensor& param) {
  auto it = state.buffers.find(name);
  if (it != state.buffers.end()) return it->second;
  Tensor zeros = zeros_like(param);
  state.buffers[name] = zeros;
  return zeros;
}

void check_grad(const std::string& opt, size_t index, const Tensor& param, const Tensor& grad) {
  TINY_CHECK(param.is_floating_point(), DtypeError, opt, ": parameter ", index, " is ", dtype_name(param.dtype()),
             "; optimizers update floating-point parameters only (float32, float64, float16, bfloat16)");
  TINY_CHECK(grad.device() == param.device(), DeviceError, opt, ": parameter ", index, " is on ", param.device(),
             " but its gradient is on ", grad.device(), ": keep the gradient on the parameter's device");
  TINY_CHECK(grad.dtype() == param.dtype(), DtypeError, opt, ": parameter ", index, " is ",
             dtype_name(param.dtype()), " but its gradient is ", dtype_name(grad.dtype()));
  TINY_CHECK(grad.sizes() == param.sizes(), ShapeError, opt, ": parameter ", index, " has shape ",
             shape_str(param.sizes()), " but its gradient has shape ", shape_str(grad.sizes()));
}

}  // namespace detail

namespace {

std::string join_names(const OptionMap& options) {
  std::string out = "{";
  for (const auto& [name, value] : options) out += (out.size() > 1 ? ", " : "") + name;
  return out + "}";
}

std::string join_indices(const std::vector<size_t>& indices) {
  std::string out;
  for (size_t i = 0; i < indices.size(); ++i) out += (i ? "," : "") + std::to_string(indices[i]);
  return out;
}

const std::string& metadata_at(const StateDict& sd, const std::string& key) {
  auto it = sd.metadata.find(key);
  TINY_CHECK(it != sd.metadata.end(), ValueError, "load_state_dict: the state dict has no metadata entry '", key,
             "' (was it written by Optimizer::state_dict()?)");
  return it->second;
}

int64_t parse_int(const std::string& key, const std::string& text) {
  int64_t value = 0;
  const char* end = text.data() + text.size();
  auto [ptr, ec] = std::from_chars(text.data(), end, value);
  TINY_CHECK(ec == std::errc() && ptr == end, ValueError, "load_state_dict: metadata '", key, "' = '", text,
             "' is not an integer");
  return value;
}

double parse_double(const std::string& key, const std::string& text) {
  char* end = nullptr;
  const double value = std::strtod(text.c_str(), &end);
  TINY_CHECK(!text.empty() && end == text.c_str() + text.size(), ValueError, "load_state_dict: metadata '", key,
             "' = '", text, "' is not a number");
  return value;
}

// The options saved under `prefix` (param_groups.G.) but its parameter list.
OptionMap saved_options(const StateDict& sd, const std::string& prefix) {
  OptionMap saved;
  for (auto it = sd.metadata.lower_bound(prefix); it != sd.metadata.end() && it->first.rfind(prefix, 0) == 0; ++it) {
    const std::string option = it->first.substr(prefix.size());
    if (option == "params") continue;
    saved[option] = parse_double(it->first, it->second);
  }
  return saved;
}

// Throws, naming what is missing or unexpected, when group g's saved options
// have other names than `ours` in optimizer `optimizer`.
void check_option_names(const OptionMap& saved, const OptionMap& ours, size_t g, const std::string& optimizer) {
  std::vector<std::string> missing, unknown;
  for (const auto& [name, value] : ours)
    if (!saved.count(name)) missing.push_back(name);
  for (const auto& [name, value] : saved)
    if (!ours.count(name)) unknown.push_back(name);
  if (missing.empty() && unknown.empty()) return;
  std::ostringstream msg;
  msg << "load_state_dict: the options of param group " << g << " differ: the state dict has " << join_names(saved)
      << " but this " << optimizer << " has " << join_names(ours);
  if (!missing.empty()) {
    msg << " (missing:";
    for (const auto& m : missing) msg << " " << m;
    msg << ")";
  }
  if (!unknown.empty()) {
    msg << " (unexpected:";
    for (const auto& u : unknown) msg << " " << u;
    msg << ")";
  }
  throw ValueError(msg.str());
}

void check_param_shapes(const StateDict& sd, const std::vector<Tensor>& params) {
  for (size_t i = 0; i < params.size(); ++i) {
    const std::string key = "params." + std::to_string(i) + ".shape";
    const std::string& saved_shape = metadata_at(sd, key);
    TINY_CHECK(saved_shape == shape_str(params[i].sizes()), ValueError, "load_state_dict: parameter ", i,
               " has shape ", saved_shape, " in the state dict but ", shape_str(params[i].sizes()),
               " in this optimizer (were the parameters passed in a different order?)");
  }
}

// The state tensors (each named in `allowed`, of its parameter's shape) and
// step counts saved, per parameter of `params`.
std::vector<ParamState> saved_state(const StateDict& sd, const std::vector<Tensor>& params,
                                    const std::vector<std::string>& allowed, const std::string& optimizer) {
  std::vector<ParamState> new_state(params.size());
  for (const auto& [key, tensor] : sd) {
    const size_t dot = key.find('.', 6);
    TINY_CHECK(key.rfind("state.", 0) == 0 && dot != std::string::npos, ValueError,
               "load_state_dict: unexpected tensor '", key, "' (optimizer state tensors are named "
               "state.<param index>.<name>)");
    const int64_t i = parse_int(key, key.substr(6, dot - 6));
    const std::string buffer = key.substr(dot + 1);
    TINY_CHECK(i >= 0 && i < static_cast<int64_t>(params.size()), ValueError, "load_state_dict: tensor '", key,
               "' refers to parameter ", i, " but there are ", params.size(), " parameters");
    TINY_CHECK(std::find(allowed.begin(), allowed.end(), buffer) != allowed.end(), ValueError,
               "load_state_dict: tensor '", key, "': ", optimizer, " keeps no state named '", buffer, "'");
    const Tensor& p = params[static_cast<size_t>(i)];
    TINY_CHECK(tensor.sizes() == p.sizes(), ValueError, "load_state_dict: '", key, "' has shape ",
               shape_str(tensor.sizes()), " but parameter ", i, " has shape ", shape_str(p.sizes()));
    TINY_CHECK(tensor.is_floating_point(), ValueError, "load_state_dict: '", key, "' is ", dtype_name(tensor.dtype()),
               "; state tensors are floating point");
    // Like PyTorch: floating-point state takes the parameter's device and dtype.
    Tensor copy = empty_like(p);
    copy.copy_(tensor.detach().to(p.device()).to(p.dtype()));
    new_state[static_cast<size_t>(i)].buffers[buffer] = copy;
  }
  for (size_t i = 0; i < params.size(); ++i) {
    const std::string key = "state." + std::to_string(i) + ".step";
    auto it = sd.metadata.find(key);
    if (it == sd.metadata.end()) continue;
    const int64_t step = parse_int(key, it->second);
    TINY_CHECK(step >= 0, ValueError, "load_state_dict: ", key, " = ", step, " is negative");
    new_state[i].step = step;
  }
  return new_state;
}

}  // namespace

double ParamGroup::option(const std::string& name) const { return detail::get_option(options, name); }

Optimizer::Optimizer(std::vector<Tensor> params, OptionMap defaults) : defaults_(std::move(defaults)) {
  TINY_CHECK(!params.empty(), ValueError, "optimizer got an empty parameter list (pass model.parameters(), and check "
             "that the model has parameters)");
  check_new_params(params);
  state_.resize(params.size());
  groups_.emplace_back(std::move(params), defaults_);
}

void Optimizer::check_new_params(const std::vector<Tensor>& params) const {
  std::vector<Tensor> seen = parameters();
  for (size_t i = 0; i < params.size(); ++i) {
    const Tensor& p = params[i];
    TINY_CHECK(p.defined(), ValueError, "optimizer got an undefined tensor at position ", i, " of its parameter list");
    TINY_CHECK(p.requires_grad(), ValueError, "optimizer got a tensor that does not require grad at position ", i,
               " (shape ", shape_str(p.sizes()), "): call p.requires_grad_() on it, or leave it out");
    TINY_CHECK(p.is_leaf(), ValueError, "can't optimize a non-leaf Tensor (position ", i, ", shape ",
               shape_str(p.sizes()), "): optimize the leaf it was computed from, or p.detach().requires_grad_()");
    TINY_CHECK(p.is_floating_point(), DtypeError, "optimizer got a ", dtype_name(p.dtype()), " tensor at position ",
               i, ": only floating-point parameters (float32, float64, float16, bfloat16) can be optimized");
    for (const Tensor& q : seen) {
      TINY_CHECK(!q.is_same(p), ValueError, "optimizer got the same tensor twice (position ", i, ", shape ",
                 shape_str(p.sizes()), "): some parameters appear more than once or in more than one parameter group");
    }
    seen.push_back(p);
  }
}

void Optimizer::add_param_group(std::vector<Tensor> params, const OptionMap& options) {
  TINY_CHECK(!params.empty(), ValueError, "add_param_group: the parameter list is empty");
  OptionMap merged = defaults_;
  for (const auto& [name, value] : options) {
    TINY_CHECK(defaults_.count(name) != 0, ValueError, "add_param_group: ", this->name(), " has no option '", name,
               "'; its options are ", join_names(defaults_));
    merged[name] = value;
  }
  check_options(merged);
  check_new_params(params);
  state_.resize(state_.size() + params.size());
  groups_.emplace_back(std::move(params), std::move(merged));
}

void Optimizer::zero_grad(bool set_to_none) {
  NoGradGuard no_grad;
  for (const ParamGroup& group : groups_) {
    for (const Tensor& p : group.params()) {
      Tensor grad = p.grad();
      if (!grad.defined()) continue;
      if (set_to_none) {
        p.set_grad(Tensor());
        continue;
      }
      if (grad.requires_grad()) {  // a gradient computed with create_graph: cut it from its graph
        grad = grad.detach();
        p.set_grad(grad);
      }
      grad.zero_();
    }
  }
}

double Optimizer::lr() const {
  const double first = groups_.front().lr();
  for (size_t g = 1; g < groups_.size(); ++g) {
    TINY_CHECK(groups_[g].lr() == first, ValueError, "lr(): the param groups have different learning rates (group 0: ",
               detail::format_option(first), ", group ", g, ": ", detail::format_option(groups_[g].lr()),
               "); read param_groups()[i].lr() instead");
  }
  return first;
}

void Optimizer::set_lr(double lr) {
  TINY_CHECK(lr >= 0.0, ValueError, "Invalid learning rate: ", detail::format_option(lr));
  for (ParamGroup& group : groups_) group.set_lr(lr);
}

std::vector<Tensor> Optimizer::parameters() const {
  std::vector<Tensor> out;
  for (const ParamGroup& group : groups_) out.insert(out.end(), group.params().begin(), group.params().end());
  return out;
}

const ParamState& Optimizer::state(size_t index) const {
  TINY_CHECK(index < state_.size(), IndexError, "state(", index, "): the optimizer has ", state_.size(),
             " parameters");
  return state_[index];
}

StateDict Optimizer::state_dict() const {
  NoGradGuard no_grad;
  StateDict sd;
  sd.metadata["optimizer"] = name();
  sd.metadata["num_params"] = std::to_string(state_.size());
  sd.metadata["param_groups"] = std::to_string(groups_.size());
  size_t index = 0;
  for (size_t g = 0; g < groups_.size(); ++g) {
    const std::string prefix = "param_groups." + std::to_string(g) + ".";
    std::vector<size_t> indices;
    for (const Tensor& p : groups_[g].params()) {
      sd.metadata["params." + std::to_string(index) + ".shape"] = shape_str(p.sizes());
      indices.push_back(index++);
    }
    sd.metadata[prefix + "params"] = join_indices(indices);
    for (const auto& [name, value] : groups_[g].options) sd.metadata[prefix + name] = detail::format_option(value);
  }
  for (size_t i = 0; i < state_.size(); ++i) {
    const std::string prefix = "state." + std::to_string(i) + ".";
    for (const auto& [name, buffer] : state_[i].buffers) sd.insert(prefix + name, buffer.detach().clone());
    if (state_[i].step != 0) sd.metadata[prefix + "step"] = std::to_string(state_[i].step);
  }
  return sd;
}

void Optimizer::load_state_dict(const StateDict& sd) {
  NoGradGuard no_grad;
  const std::string& saved_name = metadata_at(sd, "optimizer");
  TINY_CHECK(saved_name == name(), ValueError, "load_state_dict: the state dict was saved by ", saved_name,
             ", but this optimizer is ", name());
  const int64_t num_groups = parse_int("param_groups", metadata_at(sd, "param_groups"));
  TINY_CHECK(num_groups == static_cast<int64_t>(groups_.size()), ValueError,
             "loaded state dict has a different number of parameter groups: ", num_groups, " saved, ",
             groups_.size(), " in this optimizer");
  const int64_t num_params = parse_int("num_params", metadata_at(sd, "num_params"));
  TINY_CHECK(num_params == static_cast<int64_t>(state_.size()), ValueError,
             "loaded state dict has a different number of parameters: ", num_params, " saved, ", state_.size(),
             " in this optimizer");

  // Options of every group: the same names, values that pass the checks.
  std::vector<OptionMap> new_options(groups_.size());
  size_t index = 0;
  const std::vector<Tensor> params = parameters();
  for (size_t g = 0; g < groups_.size(); ++g) {
    const std::string prefix = "param_groups." + std::to_string(g) + ".";
    std::vector<size_t> indices;
    for (size_t k = 0; k < groups_[g].params().size(); ++k) indices.push_back(index++);
    const std::string& saved_indices = metadata_at(sd, prefix + "params");
    TINY_CHECK(saved_indices == join_indices(indices), ValueError, "loaded state dict contains a parameter group "
               "that doesn't match the size of optimizer's group: group ", g, " holds parameters [", saved_indices,
               "] in the state dict but [", join_indices(indices), "] in this optimizer");
    OptionMap saved = saved_options(sd, prefix);
    check_option_names(saved, groups_[g].options, g, name());
    check_options(saved);
    new_options[g] = std::move(saved);
  }

  // Parameter shapes, then the state tensors and step counts.
  check_param_shapes(sd, params);
  std::vector<ParamState> new_state = saved_state(sd, params, state_names(), name());

  // Everything checked: commit.
  for (size_t g = 0; g < groups_.size(); ++g) groups_[g].options = std::move(new_options[g]);
  state_ = std::move(new_state);
}

}  // namespace tiny::optim
