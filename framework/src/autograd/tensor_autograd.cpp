// The autograd methods of Tensor: requires_grad, grad, backward, retain_grad
// and the hooks, on the AutogradMeta that core keeps in each TensorImpl.
#include <atomic>

#include "autograd/function.h"
#include "core/tensor_impl.h"
#include "tiny/ops.h"

namespace tiny {

namespace {
std::atomic<int64_t> next_hook_id{0};
}  // namespace

bool Tensor::requires_grad() const { return defined_impl(impl_).autograd && impl_->autograd->requires_grad; }

Tensor& Tensor::requires_grad_(bool requires_grad) {
  defined_impl(impl_);
  TINY_CHECK(is_leaf() || requires_grad, Error, "you can only change requires_grad flags of leaf variables. If you "
             "want to use a computed variable in a subgraph that doesn't require differentiation use "
             "var_no_grad = var.detach().");
  TINY_CHECK(!requires_grad || is_floating_point(), DtypeError, "only Tensors of floating point dtype can require "
             "gradients (this one is ", dtype_name(dtype()), ")");
  impl_->autograd_meta().requires_grad = requires_grad;
  return *this;
}

Tensor Tensor::grad() const { return defined_impl(impl_).autograd ? impl_->autograd->grad : Tensor(); }

void Tensor::set_grad(const Tensor& grad) const {
  defined_impl(impl_);
  if (grad.defined()) {
    TINY_CHECK(grad.sizes() == sizes(), ShapeError, "assigned grad has data of a different size: ",
               shape_str(grad.sizes()), " vs the tensor's ", shape_str(sizes()));
    TINY_CHECK(grad.device() == device(), DeviceError, "assigned grad is on ", grad.device(), " but the tensor is on ",
               device());
    TINY_CHECK(grad.dtype() == dtype(), DtypeError, "assigned grad has dtype ", dtype_name(grad.dtype()),
               " but the tensor has ", dtype_name(dtype()));
  }
  impl_->autograd_meta().grad = grad;
}

bool Tensor::is_leaf() const { return !(defined_impl(impl_).autograd && impl_->autograd->grad_fn); }

std::shared_ptr<autograd::Node> Tensor::grad_fn() const {
  if (defined_impl(impl_).view_base) autograd::refresh_view_grad_fn(*impl_);
  return impl_->autograd ? impl_->autograd->grad_fn : nullptr;
}

void Tensor::backward(const Tensor& gradient, bool retain_graph) const {
  autograd::backward({*this}, gradient.defined() ? std::vector<Tensor>{gradient} : std::vector<Tensor>{},
                     retain_graph);
}

void Tensor::retain_grad() const {
  TINY_CHECK(requires_grad(), Error, "can't retain_grad on Tensor that has requires_grad=False");
  if (is_leaf()) return;  // leaves keep their gradient anyway
  AutogradMeta& meta = impl_->autograd_meta();
  if (meta.retains_grad) return;
  meta.retains_grad = true;
  std::weak_ptr<TensorImpl> weak = impl_;
  meta.grad_fn->pre_hooks().push_back({meta.output_nr, {-1, [weak](const Tensor& g) {
    if (auto self = weak.lock()) {
      AutogradMeta& m = self->autograd_meta();
      m.grad = m.grad.defined() ? m.grad + g : g.clone();
    }
    return Tensor();
  }}});
}

HookHandle Tensor::register_hook(GradHook hook) const {
  TINY_CHECK(requires_grad(), Error, "cannot register a hook on a tensor that doesn't require gradient");
  const int64_t id = next_hook_id.fetch_add(1);
  AutogradMeta& meta = impl_->autograd_meta();
  if (meta.grad_fn) {
    meta.grad_fn->pre_hooks().push_back({meta.output_nr, {id, std::move(hook)}});
  } else {
    meta.leaf_hooks.push_back({id, std::move(hook)});
  }
  return {id};
}

HookHandle Tensor::register_post_accumulate_grad_hook(PostAccumulateGradHook hook) const {
  TINY_CHECK(requires_grad() && is_leaf(), Error, "post accumulate grad hooks cannot be registered on non-leaf "
             "tensors or tensors that don't require grad");
  const int64_t id = next_hook_id.fetch_add(1);
  impl_->autograd_meta().post_accumulate_hooks.push_back({id, std::move(hook)});
  return {id};
}

void Tensor::remove_hook(HookHandle handle) const {
  if (!defined_impl(impl_).autograd || handle.id < 0) return;
  AutogradMeta& meta = *impl_->autograd;
  auto drop = [&](auto& list, auto key) {
    list.erase(std::remove_if(list.begin(), list.end(), [&](const auto& e) { return key(e) == handle.id; }),
               list.end());
  };
  drop(meta.leaf_hooks, [](const auto& e) { return e.first; });
  drop(meta.post_accumulate_hooks, [](const auto& e) { return e.first; });
  if (meta.grad_fn) drop(meta.grad_fn->pre_hooks(), [](const auto& e) { return e.second.first; });
}

}  // namespace tiny
