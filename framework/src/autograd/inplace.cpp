// In-place ops in the graph: rebasing a tensor's history, and CopySlices for views.
//
// PyTorch's rules, which these follow: an in-place op makes its node the
// tensor's new grad_fn (the node's first input is the tensor's previous
// history); a view's in-place op rewrites its base's history, because the
// base's memory changed too; a leaf that requires grad, or a view of one, may
// be changed in place only under no_grad. The version counter (in the shared
// storage) is what catches a saved tensor changed afterwards.
#include "autograd/function.h"
#include "tiny/ops.h"

namespace tiny::autograd {

namespace {

// Where a tensor's elements lie in its storage.
struct Geometry {
  IntArrayRef sizes;
  IntArrayRef strides;
  int64_t offset = 0;
};

Geometry geometry_of(const TensorImpl& t) { return {t.sizes, t.strides, t.offset}; }

// True when two indices of `t` reach one element (a size > 1 with stride 0,
// as expand makes): writing through such a view is ambiguous.
bool has_internal_overlap(const TensorImpl& t) {
  for (size_t d = 0; d < t.sizes.size(); ++d) {
    if (t.sizes[d] > 1 && t.strides[d] == 0) return true;
  }
  return false;
}

// An uninitialised tensor laid out with `g`'s sizes and strides from offset 0
// (the base's layout, so that a view's geometry relative to the base applies).
Tensor empty_with_layout(const Geometry& g, Dtype dtype, Device device) {
  int64_t extent = 1;
  for (size_t d = 0; d < g.sizes.size(); ++d) {
    if (g.sizes[d] == 0) return make_tensor(g.sizes, dtype, device);
    extent += (g.sizes[d] - 1) * g.strides[d];
  }
  const Tensor flat = make_tensor({extent}, dtype, device);
  return make_view(flat, g.sizes, g.strides, 0);
}

// The elements of `view` inside `whole`, a tensor laid out as `base`.
Tensor slice_of(const Tensor& whole, const Geometry& base, const Geometry& view) {
  return make_view(whole, view.sizes, view.strides, whole.storage_offset() + view.offset - base.offset);
}

// The gradient of a view as a gradient of its base: zeros, with the view's
// elements set (PyTorch's AsStridedBackward0, for views without overlap).
class AsStridedBackward final : public Node {
 public:
  AsStridedBackward(Geometry base, Geometry view) : base_(std::move(base)), view_(std::move(view)) {}
  std::vector<Tensor> apply(std::vector<Tensor>&& grads) override {
    const Tensor& grad = grads[0];
    if (!grad.defined()) return {Tensor()};
    Tensor result = empty_with_layout(base_, grad.dtype(), grad.device());
    result.zero_();
    slice_of(result, base_, view_).copy_(grad);
    return {result};
  }
  std::string name() const override { return "AsStridedBackward0"; }

 private:
  Geometry base_, view_;
};

// The base's grad_fn after an in-place op on one of its views: the base's
// gradient passes unchanged outside the view, and through `fn` (the op's own
// backward) inside it (PyTorch's CopySlices).
class CopySlices final : public Node {
 public:
  CopySlices(Geometry base, Geometry view, std::shared_ptr<FunctionNode> fn)
      : base_(std::move(base)), view_(std::move(view)), fn_(std::move(fn)) {}
  std::vector<Tensor> apply(std::vector<Tensor>&& grads) override {
    const Tensor& grad = grads[0];
    if (!grad.defined()) return std::vector<Tensor>(next_edges().size());
    Tensor result = empty_with_layout(base_, grad.dtype(), grad.device());
    result.copy_(grad);
    const Tensor slice = slice_of(result, base_, view_);
    std::vector<Tensor> res = fn_->apply({slice.clone()});
    if (res[0].defined()) {
      slice.copy_(res[0]);
    } else {
      slice.zero_();  // the view's old values did not reach the result
    }
    res[0] = result;
    return res;
  }
  std::string name() const override { return "CopySlices"; }
  void release_variables() override { fn_->release_variables(); }

 private:
  Geometry base_, view_;
  std::shared_ptr<FunctionNode> fn_;
};

void set_history(TensorImpl& t, std::shared_ptr<Node> node) {
  AutogradMeta& meta = t.autograd_meta();
  if (meta.retains_grad && meta.grad_fn) {
    // retain_grad() follows the tensor to its new value, as in PyTorch: move
    // its hook (id -1, see Tensor::retain_grad) from the old grad_fn to the new.
    auto& hooks = meta.grad_fn->pre_hooks();
    for (auto it = hooks.begin(); it != hooks.end();) {
      if (it->first == meta.output_nr && it->second.first == -1) {
        node->pre_hooks().push_back({0, it->second});
        it = hooks.erase(it);
      } else {
        ++it;
      }
    }
  }
  meta.requires_grad = true;
  meta.grad_fn = std::move(node);
  meta.output_nr = 0;
}

void check_no_overlap(const Tensor& self) {
  TINY_CHECK(!has_internal_overlap(*self.unsafe_impl()), Error, "unsupported operation: more than one element of the "
             "written-to tensor refers to a single memory location (shape ", shape_str(self.sizes()), ", strides ",
             shape_str(self.strides()), ", an expand() view?). Please clone() the tensor before performing the "
             "operation.");
}

}  // namespace

bool inplace_needs_record(const Tensor& self, const std::vector<Tensor>& others) {
  if (!is_grad_enabled()) return false;  // no_grad: how optimizers change parameters
  bool others_need = false;
  for (const Tensor& o : others) others_need = others_need || (o.defined() && o.requires_grad());
  const TensorImpl& impl = *self.unsafe_impl();
  if (impl.view_base) {
    const Tensor base(impl.view_base);
    TINY_CHECK(!impl.view_made_in_no_grad, Error, "A view was created in no_grad mode and is being modified inplace "
               "with grad mode enabled. Given that this use case is ambiguous and error-prone, it is forbidden. You "
               "can clarify your code by moving both the view and the inplace either both inside the no_grad block "
               "(if you don't want the inplace to be tracked) or both outside (if you want the inplace to be "
               "tracked). (view of shape ", shape_str(self.sizes()), " of a tensor of shape ",
               shape_str(base.sizes()), ")");
    if (!base.requires_grad() && !others_need) return false;
    TINY_CHECK(!(base.requires_grad() && base.is_leaf()), Error, "a view of a leaf Variable that requires grad is "
               "being used in an in-place operation. (view of shape ", shape_str(self.sizes()), " of a leaf of shape ",
               shape_str(base.sizes()), "; change the leaf under tiny::NoGradGuard, as optimizers do, or change a "
               "clone() of it)");
    check_no_overlap(self);
    return true;
  }
  if (!self.requires_grad() && !others_need) return false;
  TINY_CHECK(!(self.requires_grad() && self.is_leaf()), Error, "a leaf Variable that requires grad is being used in "
             "an in-place operation. (a leaf of shape ", shape_str(self.sizes()), "; change it under "
             "tiny::NoGradGuard, as optimizers do (PyTorch: with torch.no_grad()), or use the out-of-place op)");
  check_no_overlap(self);
  return true;
}

void record_inplace(const std::string& name, const Tensor& self, const std::vector<Tensor>& others,
                    std::vector<SavedTensor> saved, BackwardFn fn) {
  TensorImpl& impl = *self.unsafe_impl();
  const bool is_view = impl.view_base != nullptr;
  const Tensor target = is_view ? Tensor(impl.view_base) : self;  // whose history is rewritten
  std::vector<Edge> edges;
  edges.reserve(others.size() + 1);
  edges.push_back(gradient_edge(target));  // the previous history, read before rebasing
  for (const Tensor& o : others) edges.push_back(gradient_edge(o));
  auto node = std::make_shared<FunctionNode>(name, 1, std::move(saved), std::move(fn));
  node->set_next_edges(edges);
  if (!is_view) {
    set_history(impl, std::move(node));
    return;
  }
  TensorImpl& base = *impl.view_base;
  const Geometry base_geometry = geometry_of(base), view_geometry = geometry_of(impl);
  auto copy_slices = std::make_shared<CopySlices>(base_geometry, view_geometry, std::move(node));
  copy_slices->set_next_edges(std::move(edges));
  set_history(base, copy_slices);
  auto view_fn = std::make_shared<AsStridedBackward>(base_geometry, view_geometry);
  view_fn->set_next_edges({Edge{copy_slices, 0}});
  set_history(impl, std::move(view_fn));
  impl.view_version = impl.storage->version.load(std::memory_order_relaxed);
}

void refresh_view_grad_fn(TensorImpl& view) {
  const uint32_t version = view.storage->version.load(std::memory_order_relaxed);
  if (version == view.view_version) return;
  TensorImpl& base = *view.view_base;
  // A leaf base changed under no_grad (an optimizer step) keeps the view's
  // history valid; only a base rebased by an in-place op needs a new one.
  const bool base_rebased = base.autograd && base.autograd->grad_fn;
  if (!base_rebased || !view.autograd || !view.autograd->grad_fn) {
    view.view_version = version;
    return;
  }
  TINY_CHECK(!has_internal_overlap(view), Error, "a view whose elements overlap (shape ", shape_str(view.sizes),
             ", strides ", shape_str(view.strides), ", an expand() view) of a tensor that was since changed in place "
             "cannot take part in autograd: tiny does not rebuild its gradient. Make the view after the in-place op, "
             "or expand a clone().");
  auto node = std::make_shared<AsStridedBackward>(geometry_of(base), geometry_of(view));
  node->set_next_edges({gradient_edge(Tensor(view.view_base))});
  set_history(view, std::move(node));
  view.view_version = version;
}

}  // namespace tiny::autograd
