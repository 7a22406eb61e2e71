// Tensor's metadata and element access: what a Tensor is, read from its
// TensorImpl. Copies and conversions (ops/copy.cpp), the autograd methods
// (autograd/tensor_autograd.cpp) and the methods that forward to the ops
// (ops/tensor_methods.cpp) live in the layers that own them, so that core
// includes nothing above it.
#include "core/tensor_impl.h"

namespace tiny {

const TensorImpl& defined_impl(const std::shared_ptr<TensorImpl>& impl, const char* call) {
  TINY_CHECK(impl != nullptr, ValueError, call ? call : "", call ? " on an undefined tensor" : "this tensor is undefined",
             " (default-constructed, like None in PyTorch). A .grad() stays undefined until backward() reaches its "
             "tensor, as PyTorch's .grad is None, and a non-leaf tensor (the output of an op) keeps one only after "
             ".retain_grad(); otherwise create the tensor with tiny::zeros/empty/... or check .defined() first");
  return *impl;
}

const IntArrayRef& Tensor::sizes() const { return defined_impl(impl_).sizes; }
const IntArrayRef& Tensor::strides() const { return defined_impl(impl_).strides; }
int64_t Tensor::size(int64_t dim) const { return sizes()[static_cast<size_t>(wrap_dim(dim, this->dim()))]; }
int64_t Tensor::stride(int64_t dim) const { return strides()[static_cast<size_t>(wrap_dim(dim, this->dim()))]; }
int64_t Tensor::storage_offset() const { return defined_impl(impl_).offset; }
int64_t Tensor::dim() const { return static_cast<int64_t>(sizes().size()); }
int64_t Tensor::numel() const { return defined_impl(impl_).numel(); }
Dtype Tensor::dtype() const { return defined_impl(impl_).dtype; }
Device Tensor::device() const { return defined_impl(impl_).storage->device; }
size_t Tensor::element_size() const { return tiny::element_size(dtype()); }
int Tensor::get_device() const { return is_cpu() ? -1 : device().index(); }
uint32_t Tensor::version() const { return defined_impl(impl_).storage->version.load(std::memory_order_relaxed); }

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
  defined_impl(impl_, what);
  TINY_CHECK(is_cpu(), DeviceError, "cannot read the elements of a tensor on ", device(),
             " from host code: copy it to the CPU first with .cpu() (then ", what, "/item works)");
  TINY_CHECK(dtype() == expected, DtypeError, what, ": expected a tensor of dtype ", dtype_name(expected),
             " but this one is ", dtype_name(dtype()), " (convert with .to(", dtype_name(expected), "))");
}

void* Tensor::raw_data_ptr() const {
  defined_impl(impl_);
  TINY_CHECK(is_cpu(), DeviceError, "cannot read the elements of a tensor on ", device(),
             " from host code: copy it to the CPU first with .cpu()");
  return impl_->data();
}

Scalar Tensor::item() const {
  defined_impl(impl_, "item()");
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
    case Dtype::Int32: return Scalar(*reinterpret_cast<const int32_t*>(p));
    case Dtype::UInt8: return Scalar(*reinterpret_cast<const uint8_t*>(p));
  }
  TINY_THROW(DtypeError, "item(): unknown dtype");
}

template <typename T>
std::vector<T> Tensor::to_vector() const {
  const Tensor host = detach().cpu().to(dtype_of<T>()).contiguous();  // detached: nothing to record
  const T* p = reinterpret_cast<const T*>(host.unsafe_impl()->data());
  return std::vector<T>(p, p + host.numel());
}

template std::vector<float> Tensor::to_vector<float>() const;
template std::vector<double> Tensor::to_vector<double>() const;
template std::vector<int64_t> Tensor::to_vector<int64_t>() const;
template std::vector<int32_t> Tensor::to_vector<int32_t>() const;
template std::vector<uint8_t> Tensor::to_vector<uint8_t>() const;
template std::vector<bool> Tensor::to_vector<bool>() const;
template std::vector<Half> Tensor::to_vector<Half>() const;
template std::vector<BFloat16> Tensor::to_vector<BFloat16>() const;

Tensor Tensor::detach() const { return make_view(*this, sizes(), strides(), storage_offset()); }

}  // namespace tiny
