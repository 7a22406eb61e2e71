#include "autograd/function.h"

#include <limits>

#include "amp/autocast_policy.h"
#include "tiny/ops.h"

namespace tiny::autograd {

SavedTensor::SavedTensor(const Tensor& tensor, bool is_output) : defined_(tensor.defined()), is_output_(is_output) {
  if (!defined_) return;
  data_ = is_output ? tensor.detach() : tensor;
  version_ = tensor.version();
}

Tensor SavedTensor::unpack(const std::string& node_name) const {
  TINY_CHECK(!released_, Error,
             "Trying to backward through the graph a second time (or directly access saved tensors after they have "
             "already been freed). Saved intermediate values of the graph are freed when you call .backward() or "
             "autograd::grad(). Specify retain_graph=true if you need to backward through the graph a second time "
             "(node ", node_name, ").");
  if (!defined_) return Tensor();
  if (data_.version() != version_) {
    // As PyTorch: a saved output names the node that saved it; a saved input
    // names its own grad_fn now (the in-place op that changed it), if any.
    std::string which;
    if (is_output_) {
      which = ", which is output 0 of " + node_name + ",";
    } else if (std::shared_ptr<Node> fn = data_.grad_fn()) {
      which = ", which is output " + std::to_string(data_.unsafe_impl()->autograd->output_nr) + " of " + fn->name() +
              ",";
    }
    TINY_THROW(Error, "one of the variables needed for gradient computation has been modified by an inplace "
               "operation: [", dtype_name(data_.dtype()), " ", shape_str(data_.sizes()), "]", which, " is at version ",
               data_.version(), "; expected version ", version_, " instead. Hint: ", node_name, " saved this tensor "
               "for backward, and an in-place op (relu_, add_, mul_, copy_, ReLU(true), an optimizer step...) changed "
               "it before backward(): use the out-of-place op there (y = y.relu(), nn::ReLU() without inplace), or "
               "change a clone() of the tensor instead.");
  }
  return data_;
}

std::vector<Tensor> FunctionNode::apply(std::vector<Tensor>&& grad_outputs) {
  std::vector<Tensor> saved;
  saved.reserve(saved_.size());
  for (const SavedTensor& s : saved_) saved.push_back(s.unpack(name_));
  BackwardArgs args{grad_outputs, saved, {}};
  for (const Edge& e : next_edges()) args.needs.push_back(e.is_valid());
  // A formula runs in its forward's dtypes even under an enabled autocast
  // guard (PyTorch's backward ops run in the dtype of their forward). Only the
  // casts are off: hooks, which run outside formulas, see the user's state.
  amp::detail::BackwardFormulaGuard in_formula;
  return fn_(args);
}

void FunctionNode::release_variables() {
  for (SavedTensor& s : saved_) s.release();
}

AccumulateGrad::AccumulateGrad(Tensor variable)
    : Node(std::numeric_limits<uint64_t>::max()), variable_(std::move(variable)) {}

std::vector<Tensor> AccumulateGrad::apply(std::vector<Tensor>&& grad_outputs) {
  Tensor grad = std::move(grad_outputs[0]);
  if (!grad.defined()) return {};
  AutogradMeta& meta = variable_.unsafe_impl()->autograd_meta();
  for (auto& [id, hook] : meta.leaf_hooks) {
    Tensor replaced = hook(grad);
    if (replaced.defined()) grad = replaced;
  }
  TINY_CHECK(grad.sizes() == variable_.sizes(), ShapeError, "AccumulateGrad: gradient of shape ",
             shape_str(grad.sizes()), " does not match the leaf's shape ", shape_str(variable_.sizes()));
  {
    std::lock_guard<std::mutex> lock(mutex_);  // backward passes on other threads may share this leaf
    if (!meta.grad.defined()) {
      // Keep the incoming buffer when nothing else can see it; otherwise copy, so
      // that later in-place accumulation never writes into someone else's tensor.
      // A view holds its base (view_base), which holds the storage too: when
      // nothing else holds that base, its reference is the view's own.
      const TensorImpl& g = *grad.unsafe_impl();
      const long base_refs = g.view_base && g.view_base.use_count() == 1 && g.view_base->storage == g.storage ? 1 : 0;
      const bool exclusive = grad.impl_ptr().use_count() == 1 && g.storage.use_count() == 1 + base_refs &&
                             grad.is_contiguous() && grad.dtype() == variable_.dtype();
      meta.grad = exclusive ? grad.detach() : grad.to(variable_.dtype()).clone().detach();
    } else {
      meta.grad.add_(grad);
    }
  }
  for (auto& [id, hook] : meta.post_accumulate_hooks) hook(variable_);
  return {};
}

bool should_record(const std::vector<Tensor>& inputs) {
  if (!is_grad_enabled()) return false;
  for (const Tensor& t : inputs) {
    if (t.defined() && t.requires_grad()) return true;
  }
  return false;
}

Edge gradient_edge(const Tensor& t) {
  if (!t.defined() || !t.requires_grad()) return {};
  if (t.unsafe_impl()->view_base) refresh_view_grad_fn(*t.unsafe_impl());
  AutogradMeta& meta = t.unsafe_impl()->autograd_meta();
  if (meta.grad_fn) return {meta.grad_fn, meta.output_nr};
  // Forward passes on several threads may use one leaf: create its single accumulator under a lock.
  static std::mutex accumulator_mutex;
  std::lock_guard<std::mutex> lock(accumulator_mutex);
  std::shared_ptr<Node> acc = meta.grad_accumulator.lock();
  if (!acc) {
    acc = std::make_shared<AccumulateGrad>(t);
    meta.grad_accumulator = acc;
  }
  return {acc, 0};
}

namespace {

// True when `out` is a view of one of `inputs` (or of the base they view): a view op's output.
bool is_view_of_an_input(const TensorImpl& out, const std::vector<Tensor>& inputs) {
  for (const Tensor& t : inputs) {
    if (!t.defined()) continue;
    const TensorImpl* in = t.unsafe_impl();
    if (out.view_base.get() == in || (in->view_base && out.view_base == in->view_base)) return true;
  }
  return false;
}

}  // namespace

void record(const std::string& name, const std::vector<Tensor>& inputs, const std::vector<Tensor>& outputs,
            std::vector<SavedTensor> saved, BackwardFn fn) {
  auto node = std::make_shared<FunctionNode>(name, static_cast<uint32_t>(outputs.size()), std::move(saved),
                                             std::move(fn));
  std::vector<Edge> edges;
  edges.reserve(inputs.size());
  for (const Tensor& t : inputs) edges.push_back(gradient_edge(t));
  node->set_next_edges(std::move(edges));
  for (size_t i = 0; i < outputs.size(); ++i) {
    if (!outputs[i].defined()) continue;
    TensorImpl& out = *outputs[i].unsafe_impl();
    if (out.view_base && !is_view_of_an_input(out, inputs)) {
      // A view made by the op's own plumbing (under NoGradGuard: conv2d's
      // output is a view of its GEMM's result): to autograd, as in PyTorch, the
      // op's output is a new tensor, whose in-place ops rewrite its own history.
      out.view_base = nullptr;
      out.view_made_in_no_grad = false;
    }
    AutogradMeta& meta = out.autograd_meta();
    meta.requires_grad = true;
    meta.grad_fn = node;
    meta.output_nr = static_cast<uint32_t>(i);
  }
}

Tensor sum_to(const Tensor& grad, const IntArrayRef& shape) {
  if (grad.sizes() == shape) return grad;
  const int64_t lead = grad.dim() - static_cast<int64_t>(shape.size());
  std::vector<int64_t> dims;
  for (int64_t d = 0; d < grad.dim(); ++d) {
    if (d < lead || (shape[d - lead] == 1 && grad.size(d) != 1)) dims.push_back(d);
  }
  Tensor reduced = dims.empty() ? grad : grad.sum(dims, /*keepdim=*/true);
  return reduced.reshape(shape);
}

}  // namespace tiny::autograd
