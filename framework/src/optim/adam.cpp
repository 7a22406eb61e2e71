// tiny::optim::Adam and AdamW: option checks and the step, one fused kernel per parameter.
#include "tiny/optim/adam.h"

#include "backend/define_dispatch.h"
#include "backend/stubs/optimizer.h"
#include "core/op_scope.h"
#include "core/tensor_impl.h"
#include "optim/optim_helpers.h"
#include "tiny/autograd.h"
#include "tiny/ops.h"

// The kernels these ops call, each with the work of one call on the modelled GPU.
namespace tiny {
namespace {
// Reads and writes the parameter and both moments (and the max), reads the gradient.
KernelWork adam_step_work(const Tensor& param, const Tensor& grad, const Tensor& m, const Tensor& v,
                          const Tensor& vmax, const kernels::AdamParams&) {
  return {"adam_step", cost_of({param, param, grad, m, m, v, v, vmax, vmax}, Work::optimizer)};
}
}  // namespace

TINY_DEFINE_DISPATCH(adam_step_stub, "adam_step", adam_step_work);
}  // namespace tiny

namespace tiny::optim {

using detail::format_option;

namespace {

template <typename Options>
OptionMap to_map(const Options& o) {
  return {{"lr", o.lr},
          {"beta1", o.betas.first},
          {"beta2", o.betas.second},
          {"eps", o.eps},
          {"weight_decay", o.weight_decay},
          {"amsgrad", o.amsgrad ? 1.0 : 0.0},
          {"maximize", o.maximize ? 1.0 : 0.0}};
}

template <typename Options>
Options from_map(const OptionMap& m) {
  Options o;
  o.lr = detail::get_option(m, "lr");
  o.betas = {detail::get_option(m, "beta1"), detail::get_option(m, "beta2")};
  o.eps = detail::get_option(m, "eps");
  o.weight_decay = detail::get_option(m, "weight_decay");
  o.amsgrad = detail::get_option(m, "amsgrad") != 0.0;
  o.maximize = detail::get_option(m, "maximize") != 0.0;
  return o;
}

// PyTorch's checks (Adam and AdamW share them), in PyTorch's order and words.
OptionMap checked(const OptionMap& m) {
  const double lr = detail::get_option(m, "lr"), eps = detail::get_option(m, "eps"), beta1 = detail::get_option(m, "beta1"), beta2 = detail::get_option(m, "beta2"),
               weight_decay = detail::get_option(m, "weight_decay");
  TINY_CHECK(lr >= 0.0, ValueError, "Invalid learning rate: ", format_option(lr));
  TINY_CHECK(eps >= 0.0, ValueError, "Invalid epsilon value: ", format_option(eps));
  TINY_CHECK(beta1 >= 0.0 && beta1 < 1.0, ValueError, "Invalid beta parameter at index 0: ", format_option(beta1));
  TINY_CHECK(beta2 >= 0.0 && beta2 < 1.0, ValueError, "Invalid beta parameter at index 1: ", format_option(beta2));
  TINY_CHECK(weight_decay >= 0.0, ValueError, "Invalid weight_decay value: ", format_option(weight_decay));
  return m;
}

}  // namespace

OptionMap to_option_map(const AdamOptions& options) { return to_map(options); }
OptionMap to_option_map(const AdamWOptions& options) { return to_map(options); }

Adam::Adam(std::vector<Tensor> params, const AdamOptions& options)
    : Optimizer(std::move(params), checked(to_map(options))) {}

Adam::Adam(std::vector<Tensor> params, const OptionMap& options, bool decoupled_weight_decay)
    : Optimizer(std::move(params), checked(options)), decoupled_weight_decay_(decoupled_weight_decay) {}

void Adam::check_options(const OptionMap& options) const { checked(options); }

void Adam::add_param_group(std::vector<Tensor> params, const AdamOptions& options) {
  Optimizer::add_param_group(std::move(params), checked(to_map(options)));
}

AdamOptions Adam::options(size_t group) const {
  TINY_CHECK(group < param_groups().size(), IndexError, name(), "::options(", group, "): there are ",
             param_groups().size(), " param groups");
  return from_map<AdamOptions>(param_groups()[group].options);
}

void Adam::step() {
  TINY_OP_SCOPE("optimizer.step");
  NoGradGuard no_grad;
  size_t index = 0;
  for (const ParamGroup& group : param_groups()) {
    const AdamOptions o = from_map<AdamOptions>(group.options);
    for (const Tensor& p : group.params()) {
      const size_t i = index++;
      const Tensor grad = p.grad();
      if (!grad.defined()) continue;  // PyTorch skips parameters whose .grad is None
      detail::check_grad(name(), i, p, grad);
      ParamState& state = mutable_state(i);
      auto buffer = [&](const char* buffer_name) { return detail::state_buffer(state, buffer_name, p); };
      const Tensor exp_avg = buffer("exp_avg");
      const Tensor exp_avg_sq = buffer("exp_avg_sq");
      const Tensor max_exp_avg_sq = o.amsgrad ? buffer("max_exp_avg_sq") : Tensor();
      state.step += 1;
      kernels::AdamParams k;
      k.lr = o.lr;
      k.beta1 = o.betas.first;
      k.beta2 = o.betas.second;
      k.eps = o.eps;
      k.weight_decay = o.weight_decay;
      k.decoupled_weight_decay = decoupled_weight_decay_;
      k.amsgrad = o.amsgrad;
      k.maximize = o.maximize;
      k.step = state.step;
      adam_step_stub(p.device())(p, grad, exp_avg, exp_avg_sq, max_exp_avg_sq, k);
      bump_version(p);
      bump_version(exp_avg);
      bump_version(exp_avg_sq);
      if (max_exp_avg_sq.defined()) bump_version(max_exp_avg_sq);
    }
  }
}

AdamW::AdamW(std::vector<Tensor> params, const AdamWOptions& options)
    : Adam(std::move(params), to_map(options), /*decoupled_weight_decay=*/true) {}

void AdamW::add_param_group(std::vector<Tensor> params, const AdamWOptions& options) {
  Optimizer::add_param_group(std::move(params), checked(to_map(options)));
}

AdamWOptions AdamW::options(size_t group) const {
  TINY_CHECK(group < param_groups().size(), IndexError, name(), "::options(", group, "): there are ",
             param_groups().size(), " param groups");
  return from_map<AdamWOptions>(param_groups()[group].options);
}

}  // namespace tiny::optim
