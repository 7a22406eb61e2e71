#include "core/tensor_iterator.h"

#include <algorithm>

namespace tiny {

namespace {

bool same_layout(const Tensor& a, const Tensor& b) {
  return a.sizes() == b.sizes() && a.strides() == b.strides() && a.storage_offset() == b.storage_offset();
}

bool shares_storage(const Tensor& a, const Tensor& b) {
  return a.unsafe_impl()->storage == b.unsafe_impl()->storage;
}

// Element strides of `t` viewed in the broadcast shape `shape` (0 where broadcast).
IntArrayRef broadcast_strides(const Tensor& t, const IntArrayRef& shape) {
  const size_t nd = shape.size();
  const size_t td = t.sizes().size();
  IntArrayRef strides(nd, 0);
  for (size_t i = 0; i < td; ++i) {
    const size_t d = nd - td + i;
    strides[d] = t.sizes()[i] == 1 ? 0 : t.strides()[i];
  }
  return strides;
}

// Removes size-1 dims and merges neighbours that are contiguous for every
// operand; fills `calc` fastest dim first.
template <int N>
int coalesce(const IntArrayRef& shape, const std::vector<IntArrayRef>& strides, kernels::OffsetCalculator<N>& calc) {
  std::vector<int64_t> sizes;
  std::vector<std::vector<int64_t>> st(strides.size());
  for (size_t i = shape.size(); i-- > 0;) {  // fastest (last) dim first
    if (shape[i] == 1) continue;
    bool merge = !sizes.empty();
    for (size_t k = 0; merge && k < strides.size(); ++k) {
      merge = strides[k][i] == st[k].back() * sizes.back();
    }
    if (merge) {
      sizes.back() *= shape[i];
    } else {
      sizes.push_back(shape[i]);
      for (size_t k = 0; k < strides.size(); ++k) st[k].push_back(strides[k][i]);
    }
  }
  TINY_CHECK(static_cast<int>(sizes.size()) <= kernels::kMaxDims, ShapeError, "tensors with more than ",
             kernels::kMaxDims, " non-mergeable dimensions are not supported (shape ", shape_str(shape),
             "); call .contiguous() first");
  calc = kernels::OffsetCalculator<N>{};
  calc.ndim = static_cast<int>(sizes.size());
  for (size_t d = 0; d < sizes.size(); ++d) {
    calc.sizes[d] = sizes[d];
    for (size_t k = 0; k < strides.size(); ++k) calc.strides[k][d] = st[k][d];
  }
  return calc.ndim;
}

}  // namespace

IntArrayRef broadcast_all(const std::vector<Tensor>& inputs) {
  IntArrayRef shape;
  for (const Tensor& t : inputs) shape = broadcast_shapes(shape, t.sizes());
  return shape;
}

bool TensorIter::is_flat() const {
  if (calc.ndim > 1) return false;
  for (int k = 0; k < num_operands; ++k) {
    if (calc.ndim == 1 && calc.strides[k][0] != 1 && calc.strides[k][0] != 0) return false;
  }
  return true;
}

TensorIter make_tensor_iter(const Tensor& out, const std::vector<Tensor>& inputs) {
  TINY_CHECK(inputs.size() + 1 <= TensorIter::kMaxOperands, Error, "internal: too many operands");
  const IntArrayRef& shape = out.sizes();
  for (int64_t d = 0; d < out.dim(); ++d) {
    TINY_CHECK(out.stride(d) != 0 || out.size(d) <= 1, ValueError,
               "unsupported operation: more than one element of the written-to tensor refers to a single memory "
               "location. Please clone() the tensor before performing the operation.");
  }
  TensorIter iter;
  iter.num_operands = static_cast<int>(inputs.size()) + 1;
  iter.operands[0] = out;
  for (size_t i = 0; i < inputs.size(); ++i) {
    Tensor in = inputs[i];
    TINY_CHECK(in.device() == out.device(), DeviceError,
               "Expected all tensors to be on the same device, but found at least two devices, ", out.device(),
               " and ", in.device(), "!");
    if (shares_storage(in, out) && !same_layout(in, out)) in = in.clone();
    iter.operands[i + 1] = in;
  }
  iter.numel = out.numel();
  std::vector<IntArrayRef> strides;
  for (int k = 0; k < iter.num_operands; ++k) {
    strides.push_back(broadcast_strides(iter.operands[k], shape));
    iter.data[k] = iter.operands[k].unsafe_impl()->data();
  }
  coalesce(shape, strides, iter.calc);
  return iter;
}

ReduceIter make_reduce_iter(const Tensor& input, const std::vector<bool>& reduced, const Tensor& out0,
                            const Tensor& out1) {
  ReduceIter iter;
  iter.input = input;
  iter.outputs[0] = out0;
  iter.outputs[1] = out1;
  iter.num_outputs = out1.defined() ? 2 : 1;
  const IntArrayRef& shape = input.sizes();
  const size_t nd = shape.size();
  // Kept dims: sizes of the input with reduced dims set to 1.
  IntArrayRef kept_shape(nd), red_shape(nd);
  for (size_t d = 0; d < nd; ++d) {
    kept_shape[d] = reduced[d] ? 1 : shape[d];
    red_shape[d] = reduced[d] ? shape[d] : 1;
  }
  std::vector<IntArrayRef> kept_strides;
  kept_strides.push_back(input.strides());
  for (int k = 0; k < iter.num_outputs; ++k) {
    IntArrayRef s = iter.outputs[k].strides();
    kept_strides.push_back(s.size() == nd ? s : IntArrayRef(nd, 0));
  }
  kept_strides.resize(3, IntArrayRef(nd, 0));
  coalesce(kept_shape, kept_strides, iter.out_calc);
  coalesce(red_shape, {input.strides()}, iter.red_calc);
  iter.num_out = checked_numel(kept_shape);
  iter.reduce_size = checked_numel(red_shape);
  if (nd == 0) {
    iter.num_out = 1;
    iter.reduce_size = 1;
  }
  return iter;
}

}  // namespace tiny
