#include <cstring>

#include "core/tensor_impl.h"
#include "io/npy_format.h"
#include "tiny/autograd.h"
#include "tiny/io.h"
#include "tiny/ops.h"

namespace tiny::io {

namespace {

const char* descr_of(Dtype dtype) {
  switch (dtype) {
    case Dtype::Bool: return "|b1";
    case Dtype::Int64: return "<i8";
    case Dtype::Int32: return "<i4";
    case Dtype::UInt8: return "|u1";
    case Dtype::Float32: return "<f4";
    case Dtype::Float64: return "<f8";
    case Dtype::Float16: return "<f2";
    case Dtype::BFloat16: return "<u2";  // numpy has no bfloat16: the raw bits (see io.h)
  }
  return "";
}

template <typename From>
Tensor widen_to_int64(const detail::NpyArray& array) {
  Tensor t = empty(array.shape, kInt64);
  int64_t* out = t.data_ptr<int64_t>();
  for (int64_t i = 0; i < t.numel(); ++i) {
    From v;
    std::memcpy(&v, array.data.data() + i * sizeof(From), sizeof(From));
    out[i] = static_cast<int64_t>(v);
  }
  return t;
}

}  // namespace

void save_npy(const std::string& path, const Tensor& tensor) {
  TINY_CHECK(tensor.defined(), ValueError, "save_npy: the tensor to write to ", path, " is undefined");
  NoGradGuard no_grad;
  const Tensor host = tensor.detach().cpu().contiguous();
  detail::write_npy_file(path, descr_of(host.dtype()), host.sizes(), host.numel() ? host.raw_data_ptr() : nullptr,
                         static_cast<size_t>(host.numel()) * host.element_size());
}

Tensor load_npy(const std::string& path) {
  const detail::NpyArray array = detail::read_npy_file(path);
  Tensor t;
  const std::string& d = array.descr;
  if (d == "<f4") t = empty(array.shape, kFloat32);
  else if (d == "<f8") t = empty(array.shape, kFloat64);
  else if (d == "<f2") t = empty(array.shape, kFloat16);
  else if (d == "<u2") t = empty(array.shape, kBFloat16);
  else if (d == "<i8") t = empty(array.shape, kInt64);
  else if (d == "|b1") t = empty(array.shape, kBool);
  else if (d == "<i4") t = empty(array.shape, kInt32);
  else if (d == "|u1") t = empty(array.shape, kUInt8);
  else if (d == "<i2") t = widen_to_int64<int16_t>(array);
  else if (d == "|i1") t = widen_to_int64<int8_t>(array);
  else
    TINY_THROW(IOError, path, ": arrays of numpy dtype '", d, "' cannot be loaded into a tensor (supported: float16, "
               "float32, float64, int8-int64, uint8, bool, and uint16 read as bfloat16 bits); convert in numpy first, e.g. arr.astype('<f4')");
  if (d == "<f4" || d == "<f8" || d == "<i8" || d == "<i4" || d == "|u1" || d == "<f2" || d == "<u2") {
    if (!array.data.empty()) std::memcpy(t.raw_data_ptr(), array.data.data(), array.data.size());
  } else if (d == "|b1") {
    // numpy writes 0 or 1, but the file is untrusted: any other byte would be an invalid C++ bool.
    bool* out = t.data_ptr<bool>();
    for (size_t i = 0; i < array.data.size(); ++i) out[i] = array.data[i] != 0;
  }
  if (array.fortran_order && t.dim() > 1) {
    // Column-major data: read it as the reversed shape, then reverse the dims back.
    IntArrayRef reversed(array.shape.rbegin(), array.shape.rend());
    IntArrayRef order;
    for (int64_t i = t.dim() - 1; i >= 0; --i) order.push_back(i);
    t = t.view(reversed).permute(order).contiguous();
  }
  return t;
}

}  // namespace tiny::io
