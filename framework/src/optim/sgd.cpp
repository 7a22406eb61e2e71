// tiny::optim::SGD: option checks and the step, one fused kernel per parameter.
#include "tiny/optim/sgd.h"

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
// Reads and writes the parameter (and the momentum buffer), reads the gradient.
KernelWork sgd_step_work(const Tensor& param, const Tensor& grad, const Tensor& buf, const kernels::SgdParams&) {
  return {"sgd_step", cost_of({param, param, grad, buf, buf}, Work::optimizer)};
}
}  // namespace

TINY_DEFINE_DISPATCH(sgd_step_stub, "sgd_step", sgd_step_work);
}  // namespace tiny

namespace tiny::optim {

using detail::format_option;

OptionMap to_option_map(const SGDOptions& o) {
  return {{"lr", o.lr},
          {"momentum", o.momentum},
          {"dampening", o.dampening},
          {"weight_decay", o.weight_decay},
          {"nesterov", o.nesterov ? 1.0 : 0.0},
          {"maximize", o.maximize ? 1.0 : 0.0}};
}

namespace {

SGDOptions from_option_map(const OptionMap& m) {
  SGDOptions o;
  o.lr = detail::get_option(m, "lr");
  o.momentum = detail::get_option(m, "momentum");
  o.dampening = detail::get_option(m, "dampening");
  o.weight_decay = detail::get_option(m, "weight_decay");
  o.nesterov = detail::get_option(m, "nesterov") != 0.0;
  o.maximize = detail::get_option(m, "maximize") != 0.0;
  return o;
}

// PyTorch's checks, in PyTorch's order and words.
OptionMap checked(const SGDOptions& o) {
  TINY_CHECK(!std::isnan(o.lr), ValueError, "SGD: the learning rate is required (PyTorch's SGD has no default lr): "
             "pass SGDOptions{0.01} or set options.lr");
  TINY_CHECK(o.lr >= 0.0, ValueError, "Invalid learning rate: ", format_option(o.lr));
  TINY_CHECK(o.momentum >= 0.0, ValueError, "Invalid momentum value: ", format_option(o.momentum));
  TINY_CHECK(o.weight_decay >= 0.0, ValueError, "Invalid weight_decay value: ", format_option(o.weight_decay));
  TINY_CHECK(!(o.nesterov && (o.momentum <= 0.0 || o.dampening != 0.0)), ValueError,
             "Nesterov momentum requires a momentum and zero dampening (got momentum=", format_option(o.momentum),
             ", dampening=", format_option(o.dampening), ")");
  return to_option_map(o);
}

}  // namespace

SGD::SGD(std::vector<Tensor> params, const SGDOptions& options) : Optimizer(std::move(params), checked(options)) {}

void SGD::check_options(const OptionMap& options) const { checked(from_option_map(options)); }

void SGD::add_param_group(std::vector<Tensor> params, const SGDOptions& options) {
  Optimizer::add_param_group(std::move(params), checked(options));
}

SGDOptions SGD::options(size_t group) const {
  TINY_CHECK(group < param_groups().size(), IndexError, "SGD::options(", group, "): there are ",
             param_groups().size(), " param groups");
  return from_option_map(param_groups()[group].options);
}

void SGD::step() {
  TINY_OP_SCOPE("optimizer.step");
  NoGradGuard no_grad;
  size_t index = 0;
  for (const ParamGroup& group : param_groups()) {
    const SGDOptions o = from_option_map(group.options);
    for (const Tensor& p : group.params()) {
      const size_t i = index++;
      const Tensor grad = p.grad();
      if (!grad.defined()) continue;  // PyTorch skips parameters whose .grad is None
      detail::check_grad(name(), i, p, grad);
      kernels::SgdParams k;
      k.lr = o.lr;
      k.momentum = o.momentum;
      k.dampening = o.dampening;
      k.weight_decay = o.weight_decay;
      k.nesterov = o.nesterov;
      k.maximize = o.maximize;
      Tensor buffer;
      if (o.momentum != 0.0) {
        ParamState& state = mutable_state(i);
        auto it = state.buffers.find("momentum_buffer");
        if (it == state.buffers.end()) {
          buffer = empty_like(p);  // written from the gradient by the kernel (first_step)
          state.buffers["momentum_buffer"] = buffer;
          k.first_step = true;
        } else {
          buffer = it->second;
        }
      }
      sgd_step_stub(p.device())(p, grad, buffer, k);
      bump_version(p);
      if (buffer.defined()) bump_version(buffer);
    }
  }
}

}  // namespace tiny::optim
