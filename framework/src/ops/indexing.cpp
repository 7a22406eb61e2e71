// Picking and masking elements: index_select, masked_fill, masked_select,
// nonzero, flip, tril/triu and unbind, composed from ops that already have
// kernels on every backend and an autograd rule (issue 23, item 5), so each one runs on the CPU, the emulated
// GPU and CUDA, and is costed on the modelled clock by the kernels it runs.
#include "ops/op_helpers.h"
#include "tiny/nn/functional.h"

namespace tiny {

Tensor index_select(const Tensor& a, int64_t dim, const Tensor& index) {
  TINY_OP_SCOPE("index_select", a, index);
  TINY_CHECK(index.dtype() == kInt64 || index.dtype() == kInt32, DtypeError,
             "index_select(): Expected dtype int32 or int64 for index, got ", dtype_name(index.dtype()),
             " (convert it with index.to(tiny::kInt64))");
  TINY_CHECK(index.dim() <= 1, IndexError, "index_select(): Index is supposed to be a vector, got shape ",
             shape_str(index.sizes()));
  TINY_CHECK(a.dim() >= 1, IndexError, "index_select(): the input is a 0-d tensor; index a tensor with at least one "
             "dimension (a.view({1}) makes one)");
  ops::check_same_device(a, index, "index_select");
  const int64_t d = wrap_dim(dim, a.dim());
  const int64_t n = a.size(d);
  const Tensor idx = index.reshape({-1}).to(kInt64);
  if (idx.device().is_cpu() && idx.numel() > 0) {
    // Reading a CPU index costs nothing; a device index is checked by the kernel.
    const int64_t lo = amin(idx).item<int64_t>(), hi = amax(idx).item<int64_t>();
    TINY_CHECK(lo >= 0 && hi < n, IndexError, "index_select(): index ", lo < 0 ? lo : hi, " is out of bounds for ",
               "dimension ", d, " with size ", n);
  }
  // The selected dim first, the rest flattened into rows: a row gather.
  Tensor rows = a.transpose(0, d).contiguous();
  IntArrayRef out_shape = rows.sizes();
  out_shape[0] = idx.numel();
  Tensor picked;
  if (a.is_floating_point()) {
    picked = nn::functional::embedding(idx, rows.reshape({n, rows.numel() / std::max<int64_t>(n, 1)}));
  } else {
    // Integer and bool tensors have no gradient: one select per index.
    std::vector<Tensor> parts;
    const Tensor host = idx.to(Device());
    for (int64_t i = 0; i < host.numel(); ++i) parts.push_back(rows.select(0, host.select(0, i).item<int64_t>()));
    picked = parts.empty() ? empty(out_shape, TensorOptions(a.dtype()).device(a.device())) : stack(parts, 0);
  }
  return picked.reshape(out_shape).transpose(0, d);
}

Tensor masked_fill(const Tensor& a, const Tensor& mask, const Scalar& value) {
  TINY_OP_SCOPE("masked_fill", a, mask);
  TINY_CHECK(mask.dtype() == kBool, DtypeError, "masked_fill: expected a bool mask, got ", dtype_name(mask.dtype()),
             " (make one with a comparison, e.g. x > 0, or mask.to(tiny::kBool))");
  ops::check_same_device(a, mask, "masked_fill");
  TINY_CHECK(broadcast_shapes(a.sizes(), mask.sizes()) == a.sizes(), ShapeError, "masked_fill: the mask of shape ",
             shape_str(mask.sizes()), " does not broadcast to the input's shape ", shape_str(a.sizes()));
  return where(mask, full({}, value, TensorOptions(a.dtype()).device(a.device())), a);
}

Tensor nonzero(const Tensor& a) {
  TINY_OP_SCOPE("nonzero", a);
  // The output's size is the count of nonzero elements: the test runs where a
  // is, and the host reads its answer (the one wait on a GPU, as in PyTorch).
  std::vector<bool> is_nonzero;
  {
    NoGradGuard no_grad;
    is_nonzero = ne(a, zeros({}, TensorOptions(a.dtype()).device(a.device()))).to_vector<bool>();
  }
  const int64_t ndim = a.dim();
  const IntArrayRef strides = contiguous_strides(a.sizes());
  std::vector<int64_t> indices;
  for (size_t flat = 0; flat < is_nonzero.size(); ++flat) {
    if (!is_nonzero[flat]) continue;
    int64_t rest = static_cast<int64_t>(flat);
    for (int64_t d = 0; d < ndim; ++d) {
      indices.push_back(rest / strides[d]);
      rest %= strides[d];
    }
  }
  const int64_t count = ndim == 0 ? static_cast<int64_t>(is_nonzero.size() == 1 && is_nonzero[0]) :
                                    static_cast<int64_t>(indices.size()) / ndim;
  return from_vector(indices, {count, ndim}).to(a.device());
}

Tensor masked_select(const Tensor& a, const Tensor& mask) {
  TINY_OP_SCOPE("masked_select", a, mask);
  TINY_CHECK(mask.dtype() == kBool, DtypeError, "masked_select: expected a bool mask, got ", dtype_name(mask.dtype()),
             " (make one with a comparison, e.g. x > 0, or mask.to(tiny::kBool))");
  ops::check_same_device(a, mask, "masked_select");
  const IntArrayRef shape = broadcast_shapes(a.sizes(), mask.sizes());  // a ShapeError names both shapes
  // The picked positions of the row-major flattened broadcast, then a gather
  // of those elements: its backward adds the gradient back into them.
  const Tensor flat_mask = mask.expand(shape).reshape({-1});
  const Tensor picked = nonzero(flat_mask).reshape({-1});
  return index_select(a.expand(shape).reshape({-1}), 0, picked);
}

Tensor flip(const Tensor& a, const IntArrayRef& dims) {
  TINY_OP_SCOPE("flip", a);
  Tensor out = a;
  std::vector<bool> seen(static_cast<size_t>(a.dim()), false);
  for (int64_t dim : dims) {
    const int64_t d = wrap_dim(dim, a.dim());
    TINY_CHECK(!seen[d], ValueError, "flip: dim ", d, " appears multiple times in the list of dims");
    seen[d] = true;
    const int64_t n = a.size(d);
    if (n > 1) out = index_select(out, d, arange(static_cast<double>(n - 1), -1.0, -1.0,
                                                  TensorOptions(kInt64).device(a.device())));
  }
  return dims.empty() ? a.clone() : out.contiguous();
}

namespace {

// Keeps the elements whose column minus row is within the band, zeros the rest.
Tensor triangle(const Tensor& a, int64_t diagonal, bool lower) {
  const char* name = lower ? "tril" : "triu";
  TINY_CHECK(a.dim() >= 2, ShapeError, name, ": input tensor must have at least 2 dimensions, got shape ",
             shape_str(a.sizes()));
  const int64_t m = a.size(-2), n = a.size(-1);
  const TensorOptions index = TensorOptions(kInt64).device(a.device());
  const Tensor offset = arange(n, index).view({1, n}) - arange(m, index).view({m, 1});
  const Tensor keep = lower ? offset <= Scalar(diagonal) : offset >= Scalar(diagonal);
  return where(keep, a, zeros({}, TensorOptions(a.dtype()).device(a.device())));
}

}  // namespace

Tensor tril(const Tensor& a, int64_t diagonal) {
  TINY_OP_SCOPE("tril", a);
  return triangle(a, diagonal, true);
}

Tensor triu(const Tensor& a, int64_t diagonal) {
  TINY_OP_SCOPE("triu", a);
  return triangle(a, diagonal, false);
}

std::vector<Tensor> unbind(const Tensor& a, int64_t dim) {
  TINY_CHECK(a.dim() >= 1, IndexError, "unbind: a 0-d tensor has no dimension to unbind");
  const int64_t d = wrap_dim(dim, a.dim());
  std::vector<Tensor> parts;
  parts.reserve(static_cast<size_t>(a.size(d)));
  for (int64_t i = 0; i < a.size(d); ++i) parts.push_back(a.select(d, i));
  return parts;
}

}  // namespace tiny
