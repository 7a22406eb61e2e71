// tiny::optim::RMSprop: option checks and the step, one fused kernel per parameter.
#include "tiny/optim/rmsprop.h"

#include <cmath>

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
// Reads and writes the parameter and square_avg (and grad_avg, the buffer), reads the gradient.
KernelWork rmsprop_step_work(const Tensor& param, const Tensor& grad, const Tensor& sq, const Tensor& ga,
                             const Tensor& buf, const kernels::RmspropParams& p) {
  const Tensor ga_used = p.centered ? ga : Tensor(), buf_used = p.momentum > 0.0 ? buf : Tensor();
  return {"rmsprop_step", cost_of({param, param, grad, sq, sq, ga_used, ga_used, buf_used, buf_used}, Work::optimizer)};
}
}  // namespace

TINY_DEFINE_DISPATCH(rmsprop_step_stub, "rmsprop_step", rmsprop_step_work);
}  // namespace tiny

namespace tiny::optim {

using detail::format_option;

OptionMap to_option_map(const RMSpropOptions& o) {
  return {{"lr", o.lr},
          {"alpha", o.alpha},
          {"eps", o.eps},
          {"weight_decay", o.weight_decay},
          {"momentum", o.momentum},
          {"centered", o.centered ? 1.0 : 0.0},
          {"maximize", o.maximize ? 1.0 : 0.0}};
}

namespace {

RMSpropOptions from_option_map(const OptionMap& m) {
  RMSpropOptions o;
  o.lr = detail::get_option(m, "lr");
  o.alpha = detail::get_option(m, "alpha");
  o.eps = detail::get_option(m, "eps");
  o.weight_decay = detail::get_option(m, "weight_decay");
  o.momentum = detail::get_option(m, "momentum");
  o.centered = detail::get_option(m, "centered") != 0.0;
  o.maximize = detail::get_option(m, "maximize") != 0.0;
  return o;
}

// PyTorch's checks, in PyTorch's order and words (a NaN fails them too, as `not 0.0 <= nan` in Python).
OptionMap checked(const RMSpropOptions& o) {
  TINY_CHECK(o.lr >= 0.0, ValueError, "Invalid learning rate: ", format_option(o.lr));
  TINY_CHECK(o.eps >= 0.0, ValueError, "Invalid epsilon value: ", format_option(o.eps));
  TINY_CHECK(o.momentum >= 0.0, ValueError, "Invalid momentum value: ", format_option(o.momentum));
  TINY_CHECK(o.weight_decay >= 0.0, ValueError, "Invalid weight_decay value: ", format_option(o.weight_decay));
  TINY_CHECK(o.alpha >= 0.0, ValueError, "Invalid alpha value: ", format_option(o.alpha));
  return to_option_map(o);
}

}  // namespace

RMSprop::RMSprop(std::vector<Tensor> params, const RMSpropOptions& options)
    : Optimizer(std::move(params), checked(options)) {}

void RMSprop::check_options(const OptionMap& options) const { checked(from_option_map(options)); }

void RMSprop::add_param_group(std::vector<Tensor> params, const RMSpropOptions& options) {
  Optimizer::add_param_group(std::move(params), checked(options));
}

RMSpropOptions RMSprop::options(size_t group) const {
  TINY_CHECK(group < param_groups().size(), IndexError, "RMSprop::options(", group, "): there are ",
             param_groups().size(), " param groups");
  return from_option_map(param_groups()[group].options);
}

void RMSprop::step() {
  TINY_OP_SCOPE("optimizer.step");
  NoGradGuard no_grad;
  size_t index = 0;
  for (const ParamGroup& group : param_groups()) {
    const RMSpropOptions o = from_option_map(group.options);
    for (const Tensor& p : group.params()) {
      const size_t i = index++;
      const Tensor grad = p.grad();
      if (!grad.defined()) continue;  // PyTorch skips parameters whose .grad is None
      detail::check_grad(name(), i, p, grad);
      ParamState& state = mutable_state(i);
      auto buffer = [&](const char* buffer_name) { return detail::state_buffer(state, buffer_name, p); };
      const Tensor square_avg = buffer("square_avg");
      const Tensor momentum_buffer = o.momentum > 0.0 ? buffer("momentum_buffer") : Tensor();
      const Tensor grad_avg = o.centered ? buffer("grad_avg") : Tensor();
      state.step += 1;
      kernels::RmspropParams k;
      k.lr = o.lr;
      k.alpha = o.alpha;
      k.eps = o.eps;
      k.weight_decay = o.weight_decay;
      k.momentum = o.momentum;
      k.centered = o.centered;
      k.maximize = o.maximize;
      rmsprop_step_stub(p.device())(p, grad, square_avg, grad_avg, momentum_buffer, k);
      bump_version(p);
      bump_version(square_avg);
      if (momentum_buffer.defined()) bump_version(momentum_buffer);
      if (grad_avg.defined()) bump_version(grad_avg);
    }
  }
}

}  // namespace tiny::optim
