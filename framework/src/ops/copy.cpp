// Copies and conversions of tensors: clone, contiguous, to(dtype), to(device),
// cpu, pin_memory, and copy_'s data path (copy_values), with their autograd
// rules. The bytes between devices travel through gpu/device_copy.h.
#include "autograd/function.h"
#include "backend/define_dispatch.h"
#include "backend/stubs/pointwise.h"
#include "gpu/device_copy.h"
#include "gpu/pinned_allocator.h"
#include "ops/op_helpers.h"
#include "tiny/cuda.h"

// The kernels these ops call, each with the work of one call on the modelled GPU.
namespace tiny {
namespace {
KernelWork copy_work(const TensorIter& iter) { return {"copy_", cost_of(iter)}; }
}  // namespace

TINY_DEFINE_DISPATCH(copy_stub, "copy", copy_work);
}  // namespace tiny

namespace tiny {

using autograd::BackwardArgs;
using autograd::record;
using autograd::should_record;

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

Tensor Tensor::contiguous() const { return is_contiguous() ? *this : clone(); }

Tensor Tensor::to(Dtype target) const {
  if (defined_impl(impl_, "to(dtype)").dtype == target) return *this;
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
  defined_impl(impl_, "to(device)");
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
                   ? gpu::empty_pinned(sizes(), dtype())
                   : make_tensor(sizes(), dtype(), dst_device);
  gpu::copy_between_devices(out, src, non_blocking);
  if (should_record({*this})) {
    const Device source = device();
    record("ToCopyBackward0", {*this}, {out}, {}, [source](const BackwardArgs& args) {
      return std::vector<Tensor>{args.grad().to(source)};
    });
  }
  return out;
}

Tensor Tensor::cpu() const {
  defined_impl(impl_, "cpu()");
  return to(Device());
}


Tensor Tensor::pin_memory() const {
  TINY_CHECK(is_cpu(), DeviceError, "cannot pin a tensor on ", device(), ": only CPU tensors can be pinned");
  if (is_pinned()) return *this;
  Tensor out = gpu::empty_pinned(sizes(), dtype());
  {
    NoGradGuard no_grad;
    out.copy_(*this);
  }
  return out;
}

bool Tensor::is_pinned() const { return gpu::storage_is_pinned(*this); }

void Tensor::record_stream(const cuda::Stream& stream) const { cuda::record_stream(*this, stream); }

void copy_values(const Tensor& dst, const Tensor& src, bool non_blocking) {
  if (src.device() != dst.device()) {
    // Across devices the bytes travel as they are: shape and dtype are made to
    // match on the source's device, then one copy through the runtime.
    NoGradGuard no_grad;
    const Tensor s = src.detach().to(dst.dtype()).expand(dst.sizes()).contiguous();
    if (dst.is_contiguous()) {
      gpu::copy_between_devices(dst, s, non_blocking);
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

}  // namespace tiny
