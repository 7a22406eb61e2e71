// Tensor's metadata, element access, copies, conversions and autograd methods.
#include <atomic>

#include "autograd/function.h"
#include "backend/dispatch.h"
#include "core/tensor_impl.h"
#include "gpu/device_context.h"
#include "gpu/pinned_allocator.h"
#include "ops/op_helpers.h"
#include "tiny/cuda.h"
#include "tiny/ops.h"

namespace tiny {

using autograd::BackwardArgs;
using autograd::record;
using autograd::should_record;

namespace {
std::atomic<int64_t> next_hook_id{0};

const TensorImpl& checked(const std::shared_ptr<TensorImpl>& impl) {
  TINY_CHECK(impl != nullptr, ValueError, "this tensor is undefined (default-constructed, like None): create it "
             "with tiny::zeros/empty/... or check .defined() first");
  return *impl;
}
}  // namespace

const IntArrayRef& Tensor::sizes() const { return checked(impl_).sizes; }
const IntArrayRef& Tensor::strides() const { return checked(impl_).strides; }
int64_t Tensor::size(int64_t dim) const { return sizes()[static_cast<size_t>(wrap_dim(dim, this->dim()))]; }
int64_t Tensor::stride(int64_t dim) const { return strides()[static_cast<size_t>(wrap_dim(dim, this->dim()))]; }
int64_t Tensor::storage_offset() const { return checked(impl_).offset; }
int64_t Tensor::dim() const { return static_cast<int64_t>(sizes().size()); }
int64_t Tensor::numel() const { return checked(impl_).numel(); }
Dtype Tensor::dtype() const { return checked(impl_).dtype; }
Device Tensor::device() const { return checked(impl_).storage->device; }
size_t Tensor::element_size() const { return tiny::element_size(dtype()); }
int Tensor::get_device() const { return is_cpu() ? -1 : device().index(); }
uint32_t Tensor::version() const { return checked(impl_).storage->version.load(std::memory_order_relaxed); }

bool Tensor::is_contiguous() const {
  if (numel() == 0) return true;  // no element is out of place (PyTorch agrees)
  int64_t expected = 1;
  for (int64_t d = dim() - 1; d >= 0; --d) {
    if (size(d) == 1) continue;
    if (stride(d) != expected) return false;
    expected *= size(d);
  }
  return true;
}

void Tensor::check_data_access(Dtype expected, const char* what) const {
  checked(impl_);
  TINY_CHECK(is_cpu(), DeviceError, "cannot read the elements of a tensor on ", device(),
             " from host code: copy it to the CPU first with .cpu() (then ", what, "/item works)");
  TINY_CHECK(dtype() == expected, DtypeError, what, ": expected a tensor of dtype ", dtype_name(expected),
             " but this one is ", dtype_name(dtype()), " (convert with .to(", dtype_name(expected), "))");
}

void* Tensor::raw_data_ptr() const {
  checked(impl_);
  TINY_CHECK(is_cpu(), DeviceError, "cannot read the elements of a tensor on ", device(),
             " from host code: copy it to the CPU first with .cpu()");
  return impl_->data();
}

Scalar Tensor::item() const {
  TINY_CHECK(numel() == 1, ValueError, "a Tensor with ", numel(), " elements cannot be converted to Scalar (item() "
             "needs exactly one element; this tensor has shape ", shape_str(sizes()), ")");
  const Tensor host = cpu();
  const char* p = host.unsafe_impl()->data();
  switch (dtype()) {
    case Dtype::Bool: return Scalar(*reinterpret_cast<const bool*>(p));
    case Dtype::Int64: return Scalar(*reinterpret_cast<const int64_t*>(p));
    case Dtype::Float32: return Scalar(*reinterpret_cast<const float*>(p));
    case Dtype::Float64: return Scalar(*reinterpret_cast<const double*>(p));
    case Dtype::Float16: return Scalar(static_cast<float>(*reinterpret_cast<const Half*>(p)));
    case Dtype::BFloat16: return Scalar(static_cast<float>(*reinterpret_cast<const BFloat16*>(p)));
  }
  TINY_THROW(DtypeError, "item(): unknown dtype");
}

template <typename T>
std::vector<T> Tensor::to_vector() const {
  NoGradGuard no_grad;
  const Tensor host = cpu().to(dtype_of<T>()).contiguous();
  const T* p = reinterpret_cast<const T*>(host.unsafe_impl()->data());
  return std::vector<T>(p, p + host.numel());
}

template std::vector<float> Tensor::to_vector<float>() const;
template std::vector<double> Tensor::to_vector<double>() const;
template std::vector<int64_t> Tensor::to_vector<int64_t>() const;
template std::vector<bool> Tensor::to_vector<bool>() const;
template std::vector<Half> Tensor::to_vector<Half>() const;
template std::vector<BFloat16> Tensor::to_vector<BFloat16>() const;

// ---- copies and conversions ---------------------------------------------------

// Copies the bytes of contiguous `src` into contiguous `dst` (same shape and
// dtype) on another device, through the GPU runtime. To pageable host memory
// the copy waits for the stream (as .cpu() does in PyTorch); from pageable
// host memory it snapshots the source; pinned memory makes both asynchronous.
namespace {

// An uninitialised contiguous CPU tensor in pinned memory.
Tensor empty_pinned(const IntArrayRef& sizes, Dtype dtype) {
  Allocator* pinned = gpu::pinned_allocator();
  TINY_CHECK(pinned != nullptr, DeviceError, "pin_memory() needs a GPU (real or emulated) and none is available "
             "(TINY_EMULATED_GPUS=0?)");
  auto impl = std::make_shared<TensorImpl>();
  impl->storage = std::make_shared<Storage>(static_cast<size_t>(checked_numel(sizes)) * element_size(dtype), Device(),
                                            pinned);
  impl->sizes = sizes;
  impl->strides = contiguous_strides(sizes);
  impl->dtype = dtype;
  return Tensor(std::move(impl));
}

bool storage_is_pinned(const Tensor& t) {
  gpu::Runtime* rt = gpu::device_runtime();
  return t.is_cpu() && rt != nullptr && t.unsafe_impl()->storage->data != nullptr &&
         rt->is_pinned(t.unsafe_impl()->storage->data);
}

// Copies the bytes of contiguous `src` into contiguous `dst` (same shape and
// dtype) on another device, through the GPU runtime, with CUDA's rules: to
// pageable host memory the copy waits for the stream (as .cpu() does in
// PyTorch); from pageable host memory it snapshots the source; pinned memory
// makes both directions asynchronous when `non_blocking`.
void copy_between_devices(const Tensor& dst, const Tensor& src, bool non_blocking) {
  const size_t nbytes = static_cast<size_t>(src.numel()) * src.element_size();
  if (nbytes == 0) return;
  gpu::Runtime* rt = gpu::device_runtime();
  TINY_CHECK(rt != nullptr, DeviceError, "cannot copy between ", src.device(), " and ", dst.device(),
             ": no GPU is available");
  gpu::CopyKind kind;
  int device;
  if (src.is_cpu()) {
    kind = gpu::CopyKind::HostToDevice;
    device = dst.device().index();
  } else if (dst.is_cpu()) {
    kind = gpu::CopyKind::DeviceToHost;
    device = src.device().index();
  } else {
    kind = gpu::CopyKind::DeviceToDevice;
    device = src.device().index();
  }
  const gpu::Stream stream = gpu::current_stream(device);
  if (kind == gpu::CopyKind::DeviceToDevice && dst.device().index() != device) {
    // The destination block comes from the destination's caching allocator,
    // which may hand out memory that work queued on the destination's stream
    // still reads; the copy runs on the source's stream, so order it after
    // that work (PyTorch's copy_kernel_cuda does the same). The other half of
    // the barrier follows the copy.
    const gpu::Stream dst_stream = gpu::current_stream(dst.device().index());
    const gpu::Event queued = rt->create_event(dst_stream.device, false);
    rt->record_event(queued, dst_stream);
    rt->stream_wait_event(stream, queued);
    rt->destroy_event(queued);  // the wait keeps it alive until it has run
  }
  rt->memcpy_async(dst.unsafe_impl()->data(), src.unsafe_impl()->data(), nbytes, kind, stream);
  if (kind == gpu::CopyKind::DeviceToDevice) {
    // A copy between two GPUs runs on the source's stream: the destination's
    // stream waits for it on the GPU, and the host goes on (the other half of
    // PyTorch's two-way barrier in copy_device_to_device; no host wait, so
    // DataParallel's replicas and gathers do not stall the thread that queues them).
    if (dst.device().index() != device) {
      const gpu::Event copied = rt->create_event(device, false);
      rt->record_event(copied, stream);
      rt->stream_wait_event(gpu::current_stream(dst.device().index()), copied);
      rt->destroy_event(copied);
    }
    return;
  }
  // A blocking copy from the host returns when the data is on the device, as in PyTorch.
  if (!non_blocking && kind == gpu::CopyKind::HostToDevice) {
    rt->stream_synchronize(stream);
    return;
  }
  // The pinned block must outlive the queued copy: its allocator reuses it
  // only after this point of the stream has run.
  const Tensor& host = kind == gpu::CopyKind::HostToDevice ? src : dst;
  if (storage_is_pinned(host)) gpu::record_pinned_use(host.unsafe_impl()->storage->data, stream);
}

}  // namespace

Tensor Tensor::clone() const {
  TINY_OP_SCOPE("clone", *this);
  Tensor out = make_tensor(sizes(), dtype(), device());
  {
    NoGradGuard no_grad;
    out.copy_(*this);
  }
  if (should_record({*this})) {
    record("CloneBackward0", {*this}, {out}, {}, [](const BackwardArgs& args) {
      return std::vector<Tensor>{args.grad()};
    });
  }
  return out;
}

Tensor Tensor::detach() const { return make_view(*this, sizes(), strides(), storage_offset()); }

Tensor Tensor::contiguous() const { return is_contiguous() ? *this : clone(); }

Tensor Tensor::to(Dtype target) const {
  if (dtype() == target) return *this;
  TINY_OP_SCOPE("to", *this);
  Tensor out = make_tensor(sizes(), target, device());
  {
    NoGradGuard no_grad;
    out.copy_(*this);
  }
  if (should_record({*this}) && tiny::is_floating_point(target)) {
    const Dtype source = dtype();
    record("ToCopyBackward0", {*this}, {out}, {}, [source](const BackwardArgs& args) {
      return std::vector<Tensor>{args.grad().to(source)};
    });
  }
  return out;
}

Tensor Tensor::to(const Device& target, bool non_blocking) const {
  checked(impl_);
  const Device dst_device = canonical_device(target);
  if (dst_device == device()) return *this;
  TINY_OP_SCOPE("to", *this);
  Tensor src;
  {
    NoGradGuard no_grad;
    src = contiguous();  // on the source device
  }
  // As PyTorch: a non-blocking copy to the CPU lands in pinned memory, or it
  // could not be asynchronous.
  Tensor out = non_blocking && is_cuda() && dst_device.is_cpu() && gpu::pinned_allocator() != nullptr
                   ? empty_pinned(sizes(), dtype())
                   : make_tensor(sizes(), dtype(), dst_device);
  copy_between_devices(out, src, non_blocking);
  if (should_record({*this})) {
    const Device source = device();
    record("ToCopyBackward0", {*this}, {out}, {}, [source](const BackwardArgs& args) {
      return std::vector<Tensor>{args.grad().to(source)};
    });
  }
  return out;
}

Tensor Tensor::cpu() const { return to(Device()); }


Tensor Tensor::pin_memory() const {
  TINY_CHECK(is_cpu(), DeviceError, "cannot pin a tensor on ", device(), ": only CPU tensors can be pinned");
  if (is_pinned()) return *this;
  Tensor out = empty_pinned(sizes(), dtype());
  {
    NoGradGuard no_grad;
    out.copy_(*this);
  }
  return out;
}

bool Tensor::is_pinned() const { return storage_is_pinned(*this); }

void Tensor::record_stream(const cuda::Stream& stream) const { cuda::record_stream(*this, stream); }

// ---- autograd -----------------------------------------------------------------

bool Tensor::requires_grad() const { return checked(impl_).autograd && impl_->autograd->requires_grad; }

Tensor& Tensor::requires_grad_(bool requires_grad) {
  checked(impl_);
  TINY_CHECK(is_leaf() || requires_grad, Error, "you can only change requires_grad flags of leaf variables. If you "
             "want to use a computed variable in a subgraph that doesn't require differentiation use "
             "var_no_grad = var.detach().");
  TINY_CHECK(!requires_grad || is_floating_point(), DtypeError, "only Tensors of floating point dtype can require "
             "gradients (this one is ", dtype_name(dtype()), ")");
  impl_->autograd_meta().requires_grad = requires_grad;
  return *this;
}

Tensor Tensor::grad() const { return checked(impl_).autograd ? impl_->autograd->grad : Tensor(); }

void Tensor::set_grad(const Tensor& grad) const {
  checked(impl_);
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

bool Tensor::is_leaf() const { return !(checked(impl_).autograd && impl_->autograd->grad_fn); }

std::shared_ptr<autograd::Node> Tensor::grad_fn() const {
  if (checked(impl_).view_base) autograd::refresh_view_grad_fn(*impl_);
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
  if (!checked(impl_).autograd || handle.id < 0) return;
  AutogradMeta& meta = *impl_->autograd;
  auto drop = [&](auto& list, auto key) {
    list.erase(std::remove_if(list.begin(), list.end(), [&](const auto& e) { return key(e) == handle.id; }),
               list.end());
  };
  drop(meta.leaf_hooks, [](const auto& e) { return e.first; });
  drop(meta.post_accumulate_hooks, [](const auto& e) { return e.first; });
  if (meta.grad_fn) drop(meta.grad_fn->pre_hooks(), [](const auto& e) { return e.second.first; });
}

void copy_values(const Tensor& dst, const Tensor& src, bool non_blocking) {
  if (src.device() != dst.device()) {
    // Across devices the bytes travel as they are: shape and dtype are made to
    // match on the source's device, then one copy through the runtime.
    NoGradGuard no_grad;
    const Tensor s = src.detach().to(dst.dtype()).expand(dst.sizes()).contiguous();
    if (dst.is_contiguous()) {
      copy_between_devices(dst, s, non_blocking);
      bump_version(dst);
      return;
    }
    copy_values(dst, s.to(dst.device()), false);
    return;
  }
  TensorIter iter = make_tensor_iter(dst, {src});
  copy_stub(dst.device())(iter);
  bump_version(dst);
}

// ---- the methods that forward to the free functions -------------------------------

Tensor Tensor::add(const Tensor& other, const Scalar& alpha) const { return tiny::add(*this, other, alpha); }
Tensor Tensor::sub(const Tensor& other, const Scalar& alpha) const { return tiny::sub(*this, other, alpha); }
Tensor Tensor::mul(const Tensor& other) const { return tiny::mul(*this, other); }
Tensor Tensor::div(const Tensor& other) const { return tiny::div(*this, other); }
Tensor Tensor::add(const Scalar& other) const { return tiny::add(*this, other); }
Tensor Tensor::sub(const Scalar& other) const { return tiny::sub(*this, other); }
Tensor Tensor::mul(const Scalar& other) const { return tiny::mul(*this, other); }
Tensor Tensor::div(const Scalar& other) const { return tiny::div(*this, other); }
Tensor Tensor::pow(const Scalar& exponent) const { return tiny::pow(*this, exponent); }
Tensor Tensor::pow(const Tensor& exponent) const { return tiny::pow(*this, exponent); }
Tensor Tensor::neg() const { return tiny::neg(*this); }
Tensor Tensor::exp() const { return tiny::exp(*this); }
Tensor Tensor::log() const { return tiny::log(*this); }
Tensor Tensor::sqrt() const { return tiny::sqrt(*this); }
Tensor Tensor::abs() const { return tiny::abs(*this); }
Tensor Tensor::relu() const { return tiny::relu(*this); }
Tensor Tensor::sigmoid() const { return tiny::sigmoid(*this); }
Tensor Tensor::tanh() const { return tiny::tanh(*this); }
Tensor Tensor::clamp(std::optional<Scalar> min, std::optional<Scalar> max) const {
  return tiny::clamp(*this, min, max);
}
Tensor Tensor::sum() const { return tiny::sum(*this); }
Tensor Tensor::sum(const IntArrayRef& dims, bool keepdim) const { return tiny::sum(*this, dims, keepdim); }
Tensor Tensor::mean() const { return tiny::mean(*this); }
Tensor Tensor::mean(const IntArrayRef& dims, bool keepdim) const { return tiny::mean(*this, dims, keepdim); }
Tensor Tensor::var(const IntArrayRef& dims, double correction, bool keepdim) const {
  return tiny::var(*this, dims, correction, keepdim);
}
Tensor Tensor::std(const IntArrayRef& dims, double correction, bool keepdim) const {
  return tiny::std_dev(*this, dims, correction, keepdim);
}
Tensor Tensor::logsumexp(const IntArrayRef& dims, bool keepdim) const { return tiny::logsumexp(*this, dims, keepdim); }
Tensor Tensor::prod() const { return tiny::prod(*this); }
Tensor Tensor::prod(int64_t dim, bool keepdim) const { return tiny::prod(*this, dim, keepdim); }
Tensor Tensor::cumsum(int64_t dim) const { return tiny::cumsum(*this, dim); }
std::tuple<Tensor, Tensor> Tensor::sort(int64_t dim, bool descending) const { return tiny::sort(*this, dim, descending); }
std::tuple<Tensor, Tensor> Tensor::topk(int64_t k, int64_t dim, bool largest, bool sorted) const {
  return tiny::topk(*this, k, dim, largest, sorted);
}
Tensor Tensor::gather(int64_t dim, const Tensor& index) const { return tiny::gather(*this, dim, index); }
Tensor Tensor::repeat(const IntArrayRef& repeats) const { return tiny::repeat(*this, repeats); }
std::vector<Tensor> Tensor::split(int64_t split_size, int64_t dim) const { return tiny::split(*this, split_size, dim); }
std::vector<Tensor> Tensor::split(const IntArrayRef& split_sizes, int64_t dim) const {
  return tiny::split(*this, split_sizes, dim);
}
std::vector<Tensor> Tensor::chunk(int64_t chunks, int64_t dim) const { return tiny::chunk(*this, chunks, dim); }
Tensor Tensor::max() const { return tiny::max(*this); }
std::tuple<Tensor, Tensor> Tensor::max(int64_t dim, bool keepdim) const { return tiny::max(*this, dim, keepdim); }
Tensor Tensor::min() const { return tiny::min(*this); }
std::tuple<Tensor, Tensor> Tensor::min(int64_t dim, bool keepdim) const { return tiny::min(*this, dim, keepdim); }
Tensor Tensor::argmax() const { return tiny::argmax(*this); }
Tensor Tensor::argmax(int64_t dim, bool keepdim) const { return tiny::argmax(*this, dim, keepdim); }
Tensor Tensor::matmul(const Tensor& other) const { return tiny::matmul(*this, other); }
Tensor Tensor::mm(const Tensor& other) const { return tiny::mm(*this, other); }
Tensor Tensor::eq(const Tensor& other) const { return tiny::eq(*this, other); }
Tensor Tensor::ne(const Tensor& other) const { return tiny::ne(*this, other); }
Tensor Tensor::lt(const Tensor& other) const { return tiny::lt(*this, other); }
Tensor Tensor::le(const Tensor& other) const { return tiny::le(*this, other); }
Tensor Tensor::gt(const Tensor& other) const { return tiny::gt(*this, other); }
Tensor Tensor::ge(const Tensor& other) const { return tiny::ge(*this, other); }

}  // namespace tiny
