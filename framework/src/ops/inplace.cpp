// In-place ops (add_, mul_, relu_, copy_, ...): the kernel writes into the
// tensor, bumps its version, and, when autograd must see it, the op's node
// becomes the tensor's grad_fn (autograd/inplace.cpp rebases the history).
//
// Each backward saves what PyTorch's saves, and nothing more: add_ saves
// nothing, so changing its inputs later is fine; relu_/sigmoid_/tanh_ save
// their result (the tensor itself, at its new version); mul_/div_ by a tensor
// save the other tensor and, when it needs a gradient, a clone of self's old
// values; clamp_ saves a clone of self's old values.
#include "backend/define_dispatch.h"
#include "backend/stubs/pointwise.h"
#include "ops/op_helpers.h"

// The kernels these ops call, each with the work of one call on the modelled GPU.
namespace tiny {
namespace {
KernelWork fill_work(const TensorIter& iter, const Scalar&) { return {"fill_", cost_of(iter, Work::memset)}; }
}  // namespace

TINY_DEFINE_DISPATCH(fill_stub, "fill", fill_work);
}  // namespace tiny

namespace tiny {

using autograd::BackwardArgs;
using autograd::record_inplace;
using autograd::save;
using autograd::save_output;
using autograd::SavedTensor;
using ops::BinaryKind;
using ops::OpParams;
using ops::UnaryKind;

namespace {

// Checks that `other` can be written into `self` by `op` (device, dtype cast, broadcast).
void check_binary_inplace(const Tensor& self, const Tensor& other, const char* op) {
  ops::check_same_device(self, other, op);
  const Dtype result = promote_types(self.dtype(), other.dtype());
  // PyTorch's canCast: never from floating to integral, nor from integral to bool.
  const bool castable = !(is_floating_point(result) && !is_floating_point(self.dtype())) &&
                        !(result != kBool && self.dtype() == kBool);
  TINY_CHECK(castable, DtypeError, "result type ", dtype_name(result), " can't be cast to the desired output type ",
             dtype_name(self.dtype()), " (in ", op, ")");
  const IntArrayRef shape = broadcast_shapes(self.sizes(), other.sizes());
  TINY_CHECK(shape == self.sizes(), ShapeError, "output with shape ", shape_str(self.sizes()),
             " doesn't match the broadcast shape ", shape_str(shape), " (in ", op, ")");
}

// Runs `kind` with `self` as output; `other` is converted to self's dtype.
void binary_kernel_inplace(const Tensor& self, const Tensor& other, BinaryKind kind, const OpParams& p) {
  TensorIter iter = make_tensor_iter(self, {self, other.to(self.dtype())});
  binary_stub(self.device())(iter, kind, p);
  bump_version(self);
}

void unary_kernel_inplace(const Tensor& self, UnaryKind kind, const OpParams& p) {
  TensorIter iter = make_tensor_iter(self, {self});
  unary_stub(self.device())(iter, kind, p);
  bump_version(self);
}

// Self's values before the write, for a backward that needs them.
Tensor original_values(const Tensor& self) {
  NoGradGuard no_grad;
  return self.detach().clone();
}

// The gradient for an input of shape `sizes` and dtype `dtype` from one shaped like self.
Tensor grad_for(const Tensor& grad, const IntArrayRef& sizes, Dtype dtype) {
  return autograd::sum_to(grad, sizes).to(dtype);
}

// add_ and sub_ (sign -1): self += sign * alpha * other.
void add_inplace(const Tensor& self, const Tensor& other, const Scalar& alpha, double sign, const char* op,
                 const char* node) {
  check_binary_inplace(self, other, op);
  const bool record = autograd::inplace_needs_record(self, {other});
  binary_kernel_inplace(self, other, sign > 0 ? BinaryKind::Add : BinaryKind::Sub, ops::scalar_params(alpha));
  if (!record) return;
  const double factor = sign * alpha.to_double();
  const IntArrayRef other_sizes = other.sizes();
  const Dtype other_dtype = other.dtype();
  record_inplace(node, self, {other}, {}, [factor, other_sizes, other_dtype](const BackwardArgs& args) {
    const Tensor& g = args.grad();
    return std::vector<Tensor>{args.needs[0] ? g : Tensor(),
                               args.needs[1] ? grad_for(factor == 1.0 ? g : g * factor, other_sizes, other_dtype)
                                             : Tensor()};
  });
}

// add_, mul_ and div_ by a number c: the gradient is grad, grad * c, grad / c.
void scalar_inplace(const Tensor& self, UnaryKind kind, const Scalar& value, const char* node) {
  const bool record = autograd::inplace_needs_record(self, {});
  unary_kernel_inplace(self, kind, ops::scalar_params(value));
  if (!record) return;
  const double c = value.to_double();
  record_inplace(node, self, {}, {}, [kind, c](const BackwardArgs& args) {
    const Tensor& g = args.grad();
    if (kind == UnaryKind::MulScalar) return std::vector<Tensor>{g * c};
    if (kind == UnaryKind::DivScalar) return std::vector<Tensor>{g / c};
    return std::vector<Tensor>{g};
  });
}

// relu_, sigmoid_, tanh_: the backward reads the result, which is self after the write.
void activation_inplace(const Tensor& self, UnaryKind kind, BinaryKind backward_kind, const char* node) {
  const bool record = autograd::inplace_needs_record(self, {});
  unary_kernel_inplace(self, kind, {});
  if (!record) return;
  record_inplace(node, self, {}, {save_output(self)}, [backward_kind](const BackwardArgs& args) {
    return std::vector<Tensor>{ops::binary_kernel(args.grad(), args.saved[0], backward_kind)};
  });
}

// fill_ and zero_: self's old values no longer matter.
void fill_inplace(const Tensor& self, const Scalar& value, const char* node) {
  const bool record = autograd::inplace_needs_record(self, {});
  TensorIter iter = make_tensor_iter(self, {});
  fill_stub(self.device())(iter, value);
  bump_version(self);
  if (!record) return;
  record_inplace(node, self, {}, {}, [](const BackwardArgs& args) {
    return std::vector<Tensor>{args.needs[0] ? zeros_like(args.grad()) : Tensor()};
  });
}

void check_floating_result(const Tensor& self, bool floating_operand, const char* op) {
  TINY_CHECK(self.is_floating_point() || !floating_operand, DtypeError, "result type Float can't be cast to the "
             "desired output type ", dtype_name(self.dtype()), " (", op, " of an integer tensor: convert it first)");
}

}  // namespace

const Tensor& Tensor::add_(const Tensor& other, const Scalar& alpha) const {
  add_inplace(*this, other, alpha, 1.0, "add_", "AddBackward0");
  return *this;
}

const Tensor& Tensor::sub_(const Tensor& other, const Scalar& alpha) const {
  add_inplace(*this, other, alpha, -1.0, "sub_", "SubBackward0");
  return *this;
}

const Tensor& Tensor::mul_(const Tensor& other) const {
  check_binary_inplace(*this, other, "mul_");
  const bool record = autograd::inplace_needs_record(*this, {other});
  // d(self * other)/d(other) reads self's values from before the write.
  const bool other_needs = record && other.requires_grad();
  const Tensor original = other_needs ? original_values(*this) : Tensor();
  binary_kernel_inplace(*this, other, BinaryKind::Mul, {});
  if (!record) return *this;
  const Dtype self_dtype = dtype();
  record_inplace("MulBackward0", *this, {other}, {save(other), save(original)},
                 [self_dtype](const BackwardArgs& args) {
                   const Tensor& g = args.grad();
                   const Tensor& y = args.saved[0];
                   const Tensor& x = args.saved[1];
                   return std::vector<Tensor>{args.needs[0] ? (g * y).to(self_dtype) : Tensor(),
                                              args.needs[1] ? ops::reduce_grad(g * x, y) : Tensor()};
                 });
  return *this;
}

const Tensor& Tensor::div_(const Tensor& other) const {
  check_floating_result(*this, true, "div_");
  check_binary_inplace(*this, other, "div_");
  const bool record = autograd::inplace_needs_record(*this, {other});
  const bool other_needs = record && other.requires_grad();
  const Tensor original = other_needs ? original_values(*this) : Tensor();
  binary_kernel_inplace(*this, other, BinaryKind::Div, {});
  if (!record) return *this;
  const Dtype self_dtype = dtype();
  record_inplace("DivBackward0", *this, {other}, {save(other), save(original)},
                 [self_dtype](const BackwardArgs& args) {
                   const Tensor& g = args.grad();
                   const Tensor& y = args.saved[0];
                   const Tensor& x = args.saved[1];
                   return std::vector<Tensor>{args.needs[0] ? (g / y).to(self_dtype) : Tensor(),
                                              args.needs[1] ? ops::reduce_grad(-g * x / (y * y), y) : Tensor()};
                 });
  return *this;
}

const Tensor& Tensor::add_(const Scalar& value) const {
  check_floating_result(*this, value.is_floating_point(), "add_");
  scalar_inplace(*this, UnaryKind::AddScalar, value, "AddBackward0");
  return *this;
}

const Tensor& Tensor::mul_(const Scalar& value) const {
  check_floating_result(*this, value.is_floating_point(), "mul_");
  scalar_inplace(*this, UnaryKind::MulScalar, value, "MulBackward0");
  return *this;
}

const Tensor& Tensor::div_(const Scalar& value) const {
  check_floating_result(*this, true, "div_");
  scalar_inplace(*this, UnaryKind::DivScalar, value, "DivBackward0");
  return *this;
}

const Tensor& Tensor::clamp_(std::optional<Scalar> min, std::optional<Scalar> max) const {
  TINY_CHECK(min.has_value() || max.has_value(), ValueError, "clamp_: At least one of 'min' or 'max' must not be "
             "None");
  const OpParams p = ops::scalar_params(min, max);
  const bool record = autograd::inplace_needs_record(*this, {});
  const Tensor original = record ? original_values(*this) : Tensor();
  unary_kernel_inplace(*this, UnaryKind::Clamp, p);
  if (!record) return *this;
  record_inplace("ClampBackward1", *this, {}, {save(original)}, [p](const BackwardArgs& args) {
    return std::vector<Tensor>{ops::binary_kernel(args.grad(), args.saved[0], BinaryKind::ClampBackward, p)};
  });
  return *this;
}

const Tensor& Tensor::relu_() const {
  TINY_CHECK(dtype() != kBool, DtypeError, "\"relu\" not implemented for 'bool'");
  activation_inplace(*this, UnaryKind::Relu, BinaryKind::ReluBackward, "ReluBackward0");
  return *this;
}

const Tensor& Tensor::sigmoid_() const {
  check_floating_result(*this, true, "sigmoid_");
  activation_inplace(*this, UnaryKind::Sigmoid, BinaryKind::SigmoidBackward, "SigmoidBackward0");
  return *this;
}

const Tensor& Tensor::tanh_() const {
  check_floating_result(*this, true, "tanh_");
  activation_inplace(*this, UnaryKind::Tanh, BinaryKind::TanhBackward, "TanhBackward0");
  return *this;
}

const Tensor& Tensor::zero_() const {
  fill_inplace(*this, 0, "ZeroBackward0");
  return *this;
}

const Tensor& Tensor::fill_(const Scalar& value) const {
  fill_inplace(*this, value, "FillBackward0");
  return *this;
}

const Tensor& Tensor::copy_(const Tensor& src, bool non_blocking) const {
  TINY_CHECK(broadcast_shapes(sizes(), src.sizes()) == sizes(), ShapeError, "copy_: the source of shape ",
             shape_str(src.sizes()), " cannot be broadcast to the destination's shape ", shape_str(sizes()));
  const bool record = autograd::inplace_needs_record(*this, {src});
  copy_values(*this, src, non_blocking);
  if (!record) return *this;
  const IntArrayRef src_sizes = src.sizes();
  const Dtype src_dtype = src.dtype();
  const Device src_device = src.device();
  record_inplace("CopyBackwards", *this, {src}, {}, [src_sizes, src_dtype, src_device](const BackwardArgs& args) {
    const Tensor& g = args.grad();
    return std::vector<Tensor>{args.needs[0] ? zeros_like(g) : Tensor(),
                               args.needs[1] ? grad_for(g, src_sizes, src_dtype).to(src_device) : Tensor()};
  });
  return *this;
}

}  // namespace tiny
