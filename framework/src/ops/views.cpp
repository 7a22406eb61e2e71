// Views share storage with their base: view, reshape, transpose, permute,
// narrow/slice/select, squeeze/unsqueeze, flatten, expand; plus cat and stack.
#include <numeric>

#include "ops/op_helpers.h"

namespace tiny {

using autograd::BackwardArgs;
using autograd::record;
using autograd::should_record;

namespace {

// A view of `self` recorded so that gradients flow back through `backward`.
Tensor view_of(const Tensor& self, IntArrayRef sizes, IntArrayRef strides, int64_t offset, const char* name,
               std::function<Tensor(const Tensor&)> backward) {
  Tensor out = make_view(self, std::move(sizes), std::move(strides), offset);
  // Remember the base, so that an in-place op on the view can rewrite the base's history.
  TensorImpl& view = *out.unsafe_impl();
  const TensorImpl& source = *self.unsafe_impl();
  view.view_base = source.view_base ? source.view_base : self.impl_ptr();
  view.view_version = source.storage->version.load(std::memory_order_relaxed);
  view.view_made_in_no_grad = !is_grad_enabled() && self.requires_grad();
  if (should_record({self})) {
    record(name, {self}, {out}, {}, [backward](const BackwardArgs& args) {
      return std::vector<Tensor>{backward(args.grad())};
    });
  }
  return out;
}

// Resolves one -1 in a requested shape against `numel`.
IntArrayRef infer_shape(const IntArrayRef& shape, int64_t numel) {
  IntArrayRef out = shape;
  int64_t known = 1;
  int infer = -1;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] == -1) {
      TINY_CHECK(infer < 0, ShapeError, "only one dimension can be inferred (shape ", shape_str(shape), ")");
      infer = static_cast<int>(i);
    } else {
      TINY_CHECK(shape[i] >= 0, ShapeError, "invalid shape dimension ", shape[i], " in ", shape_str(shape));
      known *= shape[i];
    }
  }
  if (infer >= 0) {
    TINY_CHECK(known != 0 && numel % known == 0, ShapeError, "shape '", shape_str(shape),
               "' is invalid for input of size ", numel);
    out[infer] = numel / known;
  } else {
    TINY_CHECK(known == numel, ShapeError, "shape '", shape_str(shape), "' is invalid for input of size ", numel);
  }
  return out;
}

// Strides for viewing (sizes, strides) as `shape` without copying, if possible (PyTorch's computeStride).
std::optional<IntArrayRef> view_strides(const IntArrayRef& sizes, const IntArrayRef& strides,
                                        const IntArrayRef& shape) {
  IntArrayRef out(shape.size());
  int64_t numel = 1;
  for (int64_t s : sizes) numel *= s;
  if (numel == 0 || sizes.empty()) return contiguous_strides(shape);
  int64_t view_d = static_cast<int64_t>(shape.size()) - 1;
  int64_t chunk_base_stride = strides.empty() ? 1 : strides.back();
  int64_t tensor_numel = 1, view_numel = 1;
  for (int64_t d = static_cast<int64_t>(sizes.size()) - 1; d >= 0; --d) {
    tensor_numel *= sizes[d];
    if (d == 0 || (sizes[d - 1] != 1 && strides[d - 1] != tensor_numel * chunk_base_stride)) {
      while (view_d >= 0 && (view_numel < tensor_numel || shape[view_d] == 1)) {
        out[view_d] = view_numel * chunk_base_stride;
        view_numel *= shape[view_d];
        --view_d;
      }
      if (view_numel != tensor_numel) return std::nullopt;
      if (d > 0) {
        chunk_base_stride = strides[d - 1];
        tensor_numel = 1;
        view_numel = 1;
      }
    }
  }
  if (view_d != -1) return std::nullopt;
  return out;
}

}  // namespace

Tensor Tensor::view(const IntArrayRef& shape) const {
  const IntArrayRef target = infer_shape(shape, numel());
  auto strides_opt = view_strides(sizes(), strides(), target);
  TINY_CHECK(strides_opt.has_value(), ShapeError, "view size is not compatible with input tensor's size and stride "
             "(at least one dimension spans across two contiguous subspaces). Use .reshape(...) instead.");
  const IntArrayRef original = sizes();
  return view_of(*this, target, *strides_opt, storage_offset(), "ViewBackward0",
                 [original](const Tensor& g) { return g.reshape(original); });
}

Tensor Tensor::reshape(const IntArrayRef& shape) const {
  const IntArrayRef target = infer_shape(shape, numel());
  if (view_strides(sizes(), strides(), target)) return view(target);
  return clone().view(target);
}

Tensor Tensor::transpose(int64_t dim0, int64_t dim1) const {
  const int64_t a = wrap_dim(dim0, dim()), b = wrap_dim(dim1, dim());
  if (dim() == 0) return view_of(*this, sizes(), strides(), storage_offset(), "TransposeBackward0",
                                 [](const Tensor& g) { return g; });
  IntArrayRef s = sizes(), st = strides();
  std::swap(s[a], s[b]);
  std::swap(st[a], st[b]);
  return view_of(*this, s, st, storage_offset(), "TransposeBackward0",
                 [a, b](const Tensor& g) { return g.transpose(a, b); });
}

Tensor Tensor::t() const {
  TINY_CHECK(dim() <= 2, ShapeError, "t() expects a tensor with <= 2 dimensions, but self is ", dim(),
             "D (use transpose(dim0, dim1) or permute)");
  return dim() < 2 ? transpose(0, 0) : transpose(0, 1);
}

Tensor Tensor::permute(const IntArrayRef& dims) const {
  TINY_CHECK(static_cast<int64_t>(dims.size()) == dim(), ShapeError, "permute(sparse_coo): number of dimensions in "
             "the tensor input does not match the length of the desired ordering of dimensions i.e. input.dim() = ",
             dim(), " is not equal to len(dims) = ", dims.size());
  IntArrayRef s(dims.size()), st(dims.size()), inverse(dims.size());
  std::vector<bool> seen(dims.size(), false);
  for (size_t i = 0; i < dims.size(); ++i) {
    const int64_t d = wrap_dim(dims[i], dim());
    TINY_CHECK(!seen[d], ValueError, "permute(): duplicate dims are not allowed (dims ", shape_str(dims), ")");
    seen[d] = true;
    s[i] = sizes()[d];
    st[i] = strides()[d];
    inverse[d] = static_cast<int64_t>(i);
  }
  return view_of(*this, s, st, storage_offset(), "PermuteBackward0",
                 [inverse](const Tensor& g) { return g.permute(inverse); });
}

Tensor Tensor::slice(int64_t dim_, int64_t start, int64_t end, int64_t step) const {
  TINY_CHECK(dim() > 0, IndexError, "slice() cannot be applied to a 0-dim tensor.");
  TINY_CHECK(step > 0, ValueError, "slice step must be positive, got ", step);
  const int64_t d = wrap_dim(dim_, dim());
  const int64_t n = size(d);
  auto clampi = [n](int64_t i) { return std::min(std::max(i < 0 ? i + n : i, int64_t{0}), n); };
  const int64_t b = clampi(start), e = std::max(clampi(end), b);
  IntArrayRef s = sizes(), st = strides();
  s[d] = (e - b + step - 1) / step;
  st[d] *= step;
  const IntArrayRef original = sizes();
  return view_of(*this, s, st, storage_offset() + b * stride(d), "SliceBackward0",
                 [original, d, b, e, step](const Tensor& g) {
                   Tensor full = zeros(original, TensorOptions(g.dtype()).device(g.device()));
                   full.slice(d, b, e, step).copy_(g);
                   return full;
                 });
}

Tensor Tensor::narrow(int64_t dim_, int64_t start, int64_t length) const {
  TINY_CHECK(dim() > 0, IndexError, "narrow() cannot be applied to a 0-dim tensor.");
  const int64_t d = wrap_dim(dim_, dim());
  const int64_t n = size(d);
  const int64_t s = start < 0 ? start + n : start;
  TINY_CHECK(s >= 0 && s <= n, IndexError, "start (", start, ") is out of bounds for dimension ", d, " of size ", n);
  TINY_CHECK(length >= 0 && s + length <= n, IndexError, "start (", s, ") + length (", length,
             ") exceeds dimension size (", n, ").");
  return slice(d, s, s + length);
}

Tensor Tensor::select(int64_t dim_, int64_t index) const {
  TINY_CHECK(dim() > 0, IndexError, "select() cannot be applied to a 0-dim tensor.");
  const int64_t d = wrap_dim(dim_, dim());
  const int64_t n = size(d);
  TINY_CHECK(index >= -n && index < n, IndexError, "index ", index, " is out of bounds for dimension ", d,
             " with size ", n);
  const int64_t i = index < 0 ? index + n : index;
  IntArrayRef s = sizes(), st = strides();
  const int64_t offset = storage_offset() + i * st[d];
  s.erase(s.begin() + d);
  st.erase(st.begin() + d);
  const IntArrayRef original = sizes();
  return view_of(*this, s, st, offset, "SelectBackward0", [original, d, i](const Tensor& g) {
    Tensor full = zeros(original, TensorOptions(g.dtype()).device(g.device()));
    full.select(d, i).copy_(g);
    return full;
  });
}

Tensor Tensor::unsqueeze(int64_t dim_) const {
  const int64_t d = wrap_dim(dim_, dim() + 1);
  IntArrayRef s = sizes(), st = strides();
  const int64_t new_stride = d < dim() ? st[d] * s[d] : 1;
  s.insert(s.begin() + d, 1);
  st.insert(st.begin() + d, new_stride);
  return view_of(*this, s, st, storage_offset(), "UnsqueezeBackward0",
                 [d](const Tensor& g) { return g.squeeze(d); });
}

Tensor Tensor::squeeze() const {
  IntArrayRef s, st;
  for (int64_t d = 0; d < dim(); ++d) {
    if (size(d) != 1) {
      s.push_back(size(d));
      st.push_back(stride(d));
    }
  }
  const IntArrayRef original = sizes();
  return view_of(*this, s, st, storage_offset(), "SqueezeBackward0",
                 [original](const Tensor& g) { return g.reshape(original); });
}

Tensor Tensor::squeeze(int64_t dim_) const {
  if (dim() == 0) return view_of(*this, {}, {}, storage_offset(), "SqueezeBackward1", [](const Tensor& g) { return g; });
  const int64_t d = wrap_dim(dim_, dim());
  if (size(d) != 1) return view_of(*this, sizes(), strides(), storage_offset(), "SqueezeBackward1",
                                   [](const Tensor& g) { return g; });
  IntArrayRef s = sizes(), st = strides();
  s.erase(s.begin() + d);
  st.erase(st.begin() + d);
  return view_of(*this, s, st, storage_offset(), "SqueezeBackward1", [d](const Tensor& g) { return g.unsqueeze(d); });
}

Tensor Tensor::flatten(int64_t start_dim, int64_t end_dim) const {
  if (dim() == 0) return reshape({1});
  const int64_t s = wrap_dim(start_dim, dim()), e = wrap_dim(end_dim, dim());
  TINY_CHECK(s <= e, ValueError, "flatten() has invalid args: start_dim (", s, ") cannot come after end_dim (", e, ")");
  IntArrayRef shape(sizes().begin(), sizes().begin() + s);
  int64_t merged = 1;
  for (int64_t d = s; d <= e; ++d) merged *= size(d);
  shape.push_back(merged);
  shape.insert(shape.end(), sizes().begin() + e + 1, sizes().end());
  return reshape(shape);
}

Tensor Tensor::expand(const IntArrayRef& shape) const {
  TINY_CHECK(shape.size() >= sizes().size(), ShapeError, "expand: the number of sizes provided (", shape.size(),
             ") must be greater or equal to the number of dimensions in the tensor (", dim(), ")");
  const size_t lead = shape.size() - sizes().size();
  IntArrayRef s(shape.size()), st(shape.size());
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i < lead) {
      TINY_CHECK(shape[i] >= 0, ShapeError, "expand: the expanded size ", shape[i],
                 " is not allowed in a leading, non-existing dimension ", i);
      s[i] = shape[i];
      st[i] = 0;
      continue;
    }
    const int64_t have = sizes()[i - lead];
    const int64_t want = shape[i] == -1 ? have : shape[i];
    TINY_CHECK(have == want || have == 1, ShapeError, "The expanded size of the tensor (", want,
               ") must match the existing size (", have, ") at non-singleton dimension ", i, ".  Target sizes: ",
               shape_str(shape), ".  Tensor sizes: ", shape_str(sizes()));
    s[i] = want;
    st[i] = have == want ? strides()[i - lead] : 0;
  }
  const IntArrayRef original = sizes();
  return view_of(*this, s, st, storage_offset(), "ExpandBackward0",
                 [original](const Tensor& g) { return autograd::sum_to(g, original); });
}

Tensor cat(const std::vector<Tensor>& tensors, int64_t dim) {
  TINY_CHECK(!tensors.empty(), ValueError, "cat(): expected a non-empty list of Tensors");
  const Tensor& first = tensors[0];
  TINY_CHECK(first.dim() > 0, ShapeError, "zero-dimensional tensor (at position 0) cannot be concatenated");
  const int64_t d = wrap_dim(dim, first.dim());
  Dtype dtype = first.dtype();
  int64_t total = 0;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const Tensor& t = tensors[i];
    TINY_CHECK(t.dim() == first.dim(), ShapeError, "Tensors must have same number of dimensions: got ", first.dim(),
               " and ", t.dim(), " (tensor ", i, ")");
    ops::check_same_device(first, t, "cat");
    for (int64_t k = 0; k < t.dim(); ++k) {
      TINY_CHECK(k == d || t.size(k) == first.size(k), ShapeError, "Sizes of tensors must match except in dimension ",
                 d, ". Expected size ", first.size(k), " but got size ", t.size(k), " for tensor number ", i,
                 " in the list.");
    }
    dtype = promote_types(dtype, t.dtype());
    total += t.size(d);
  }
  IntArrayRef shape = first.sizes();
  shape[d] = total;
  Tensor out = make_tensor(shape, dtype, first.device());
  std::vector<int64_t> sizes;
  {
    NoGradGuard no_grad;
    int64_t at = 0;
    for (const Tensor& t : tensors) {
      out.narrow(d, at, t.size(d)).copy_(t);
      at += t.size(d);
      sizes.push_back(t.size(d));
    }
  }
  if (should_record(tensors)) {
    record("CatBackward0", tensors, {out}, {}, [d, sizes](const BackwardArgs& args) {
      std::vector<Tensor> grads;
      int64_t at = 0;
      for (int64_t s : sizes) {
        grads.push_back(args.grad().narrow(d, at, s));
        at += s;
      }
      return grads;
    });
  }
  return out;
}

Tensor stack(const std::vector<Tensor>& tensors, int64_t dim) {
  TINY_CHECK(!tensors.empty(), ValueError, "stack expects a non-empty TensorList");
  const int64_t d = wrap_dim(dim, tensors[0].dim() + 1);
  std::vector<Tensor> parts;
  for (size_t i = 0; i < tensors.size(); ++i) {
    TINY_CHECK(tensors[i].sizes() == tensors[0].sizes(), ShapeError, "stack expects each tensor to be equal size, but "
               "got ", shape_str(tensors[0].sizes()), " at entry 0 and ", shape_str(tensors[i].sizes()), " at entry ", i);
    parts.push_back(tensors[i].unsqueeze(d));
  }
  return cat(parts, d);
}

}  // namespace tiny
