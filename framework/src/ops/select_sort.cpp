// repeat, split/chunk, gather, cumsum, prod, sort and topk (issue 23, item 5),
// composed (but for sort's permutation) from ops that already have kernels on
// every backend (CPU, emulated GPU, CUDA) and an autograd rule, so each runs everywhere with the same bits
// on the CPU and the emulated GPU, is costed on the modelled clock by the
// kernels it runs, and differentiates without a hand-written backward:
//   repeat       = reshape + expand + contiguous copy (gradient: expand's sum)
//   split/chunk  = narrow views (gradient: into the viewed slices)
//   gather       = a row gather (embedding) at flat offsets (gradient: its scatter-add)
//   cumsum       = log2(n) passes of shifted adds (a Hillis-Steele scan)
//   prod         = log2(n) passes of pairwise products, so the gradient of
//                  each element is the product of the others, exact with zeros
//   sort         = the sort kernel's stable permutation (the one op here with
//                  its own kernel family: backend/stubs/sort.h), then gather
//                  (gradient: gather's)
//   topk         = k passes that each pick the best element left, then gather
#include <algorithm>
#include <cmath>

#include "amp/autocast_policy.h"
#include "backend/define_dispatch.h"
#include "backend/stubs/sort.h"
#include "ops/op_helpers.h"
#include "tiny/nn/functional.h"

namespace tiny {

namespace {

Dtype accumulate_dtype(Dtype d) { return is_floating_point(d) ? d : kInt64; }

TensorOptions like(const Tensor& a, Dtype dtype) { return TensorOptions(dtype).device(a.device()); }

}  // namespace

// ---- repeat, split, chunk -------------------------------------------------------

Tensor repeat(const Tensor& a, const IntArrayRef& repeats) {
  TINY_OP_SCOPE("repeat", a);
  const int64_t n = static_cast<int64_t>(repeats.size()), k = a.dim();
  TINY_CHECK(n >= k, ShapeError, "repeat: Number of dimensions of repeat dims (", n,
             ") can not be smaller than number of dimensions of tensor (", k, " for shape ", shape_str(a.sizes()),
             "); give one repeat per dim (1 keeps a dim)");
  for (int64_t r : repeats) {
    TINY_CHECK(r >= 0, ValueError, "repeat: Trying to create tensor with negative dimension ", r,
               ": repeats = ", shape_str(repeats));
  }
  // a viewed as (1, s0, 1, s1, ...), expanded to (r0, s0, r1, s1, ...): the
  // copy in that order is the tiling, out[i] = a[i % s] along each dim.
  IntArrayRef padded(static_cast<size_t>(n - k), 1);
  padded.insert(padded.end(), a.sizes().begin(), a.sizes().end());
  IntArrayRef interleaved, expanded, out_shape;
  for (int64_t i = 0; i < n; ++i) {
    interleaved.insert(interleaved.end(), {1, padded[i]});
    expanded.insert(expanded.end(), {repeats[i], padded[i]});
    out_shape.push_back(repeats[i] * padded[i]);
  }
  const Tensor tiled = a.reshape(interleaved).expand(expanded);
  // Always a new tensor, as PyTorch's repeat (contiguous() would alias a contiguous input).
  return (tiled.is_contiguous() ? tiled.clone() : tiled.contiguous()).view(out_shape);
}

namespace {

int64_t split_dim(const Tensor& a, int64_t dim, const char* name) {
  TINY_CHECK(a.dim() >= 1, IndexError, name, ": a 0-d tensor has no dimension to split (a.view({1}) makes one)");
  return wrap_dim(dim, a.dim());
}

}  // namespace

std::vector<Tensor> split(const Tensor& a, int64_t split_size, int64_t dim) {
  const int64_t d = split_dim(a, dim, "split");
  const int64_t n = a.size(d);
  TINY_CHECK(split_size >= 0, ValueError, "split expects split_size be non-negative, but got split_size=", split_size);
  TINY_CHECK(split_size > 0 || n == 0, ValueError, "split_size can only be 0 if dimension size is 0, but got dimension "
             "size of ", n, " (dim ", d, " of shape ", shape_str(a.sizes()), ")");
  // As PyTorch: ceil(n / split_size) pieces, and one (empty) piece when n is 0.
  const int64_t pieces = split_size == 0 ? 1 : std::max<int64_t>((n + split_size - 1) / split_size, 1);
  std::vector<Tensor> out;
  out.reserve(static_cast<size_t>(pieces));
  for (int64_t i = 0; i < pieces; ++i) {
    const int64_t start = i * split_size;
    out.push_back(a.narrow(d, start, std::min(split_size, n - start)));
  }
  return out;
}

std::vector<Tensor> split_with_sizes(const Tensor& a, const IntArrayRef& split_sizes, int64_t dim) {
  const int64_t d = split_dim(a, dim, "split_with_sizes");
  const int64_t n = a.size(d);
  int64_t total = 0;
  for (int64_t s : split_sizes) {
    TINY_CHECK(s >= 0, ValueError, "split_with_sizes expects split_sizes have only non-negative entries, but got "
               "split_sizes=", shape_str(split_sizes));
    total += s;
  }
  TINY_CHECK(total == n, ValueError, "split_with_sizes expects split_sizes to sum exactly to ", n,
             " (input tensor's size at dimension ", d, "), but got split_sizes=", shape_str(split_sizes),
             " (sum ", total, ")");
  std::vector<Tensor> out;
  out.reserve(split_sizes.size());
  int64_t start = 0;
  for (int64_t s : split_sizes) {
    out.push_back(a.narrow(d, start, s));
    start += s;
  }
  return out;
}

std::vector<Tensor> split(const Tensor& a, const IntArrayRef& split_sizes, int64_t dim) {
  return split_with_sizes(a, split_sizes, dim);
}

std::vector<Tensor> chunk(const Tensor& a, int64_t chunks, int64_t dim) {
  const int64_t d = split_dim(a, dim, "chunk");
  TINY_CHECK(chunks > 0, ValueError, "chunk expects `chunks` to be greater than 0, got: ", chunks);
  const int64_t n = a.size(d);
  const int64_t size = (n + chunks - 1) / chunks;
  // An empty dim gives `chunks` empty pieces, as PyTorch's chunk.
  if (size == 0) return split_with_sizes(a, IntArrayRef(static_cast<size_t>(chunks), 0), d);
  return split(a, size, d);
}

// ---- gather -------------------------------------------------------------------------

Tensor gather(const Tensor& a, int64_t dim, const Tensor& index) {
  TINY_OP_SCOPE("gather", a, index);
  TINY_CHECK(index.dtype() == kInt64, DtypeError, "gather(): Expected dtype int64 for index, got ",
             dtype_name(index.dtype()), " (convert it with index.to(tiny::kInt64))");
  ops::check_same_device(a, index, "gather");
  // A 0-d tensor acts as a 1-d one of one element, as in PyTorch.
  const Tensor src = a.dim() == 0 ? a.reshape({1}) : a;
  const Tensor idx = index.dim() == 0 ? index.reshape({1}) : index;
  TINY_CHECK(src.dim() == idx.dim(), IndexError, "gather(): Index tensor must have the same number of dimensions as "
             "input tensor (input ", shape_str(a.sizes()), ", index ", shape_str(index.sizes()),
             "; unsqueeze the index, e.g. index.unsqueeze(1))");
  const int64_t d = wrap_dim(dim, src.dim());
  for (int64_t k = 0; k < src.dim(); ++k) {
    TINY_CHECK(k == d || idx.size(k) <= src.size(k), ShapeError, "gather(): Size does not match at dimension ", k,
               " expected index ", shape_str(index.sizes()), " to be smaller than self ", shape_str(a.sizes()),
               " apart from dimension ", d);
  }
  const int64_t n = src.size(d);
  if (idx.numel() == 0) {
    const Tensor none = zeros(index.sizes(), like(a, a.dtype()));
    // An empty sum (exactly 0) keeps the result in a's graph.
    return a.is_floating_point() ? none + src.reshape({-1}).narrow(0, 0, 0).sum() : none;
  }
  {
    // One read of the smallest and largest index (a synchronisation on a GPU,
    // where PyTorch raises a device-side assert instead).
    const int64_t lo = amin(idx).item<int64_t>(), hi = amax(idx).item<int64_t>();
    TINY_CHECK(lo >= 0 && hi < n, IndexError, "gather(): index ", lo < 0 ? lo : hi, " is out of bounds for dimension ",
               d, " with size ", n);
  }
  // The flat offset of each picked element in a contiguous copy of the input:
  // index * stride[d] + sum over the other dims of position * stride[k].
  const Tensor flat_src = src.contiguous();
  Tensor offset = idx * Scalar(flat_src.stride(d));
  for (int64_t k = 0; k < src.dim(); ++k) {
    if (k == d || idx.size(k) == 1) continue;
    IntArrayRef along(static_cast<size_t>(src.dim()), 1);
    along[k] = idx.size(k);
    offset = offset + arange(idx.size(k), like(a, kInt64)).view(along) * Scalar(flat_src.stride(k));
  }
  const Tensor rows = offset.reshape({-1});
  const Tensor column = flat_src.reshape({-1, 1});
  Tensor picked;
  if (a.is_floating_point()) {
    picked = nn::functional::embedding(rows, column);
  } else {
    // Integer and bool inputs have no gradient; they pass through float64,
    // which holds every integer up to 2^53 exactly.
    const int64_t big = amax(abs(column.to(kInt64))).item<int64_t>();
    TINY_CHECK(big <= (int64_t{1} << 53), ValueError, "gather(): integer values beyond 2^53 (here ", big,
               ") are not supported; gather their positions with arange instead");
    picked = nn::functional::embedding(rows, column.to(kFloat64)).to(a.dtype());
  }
  return picked.reshape(index.sizes());
}

// ---- cumsum, prod ---------------------------------------------------------------------

Tensor cumsum(const Tensor& a_in, int64_t dim) {
  TINY_OP_SCOPE("cumsum", a_in);
  const Tensor a = amp::detail::upcast(a_in);
  const int64_t d = wrap_dim(dim, std::max<int64_t>(a.dim(), 1));
  Tensor x = a.to(accumulate_dtype(a.dtype()));
  const int64_t n = a.dim() == 0 ? 1 : a.size(d);
  if (n <= 1) return x.is_same(a) ? a.clone() : x;
  // After the pass with shift s, x[i] holds the sum of the 2s elements ending at i.
  for (int64_t shift = 1; shift < n; shift *= 2) {
    x = cat({x.narrow(d, 0, shift), x.narrow(d, shift, n - shift) + x.narrow(d, 0, n - shift)}, d);
  }
  return x;
}

Tensor prod(const Tensor& a_in, int64_t dim, bool keepdim) {
  TINY_OP_SCOPE("prod", a_in);
  const Tensor a = amp::detail::upcast(a_in);
  Tensor x = a.to(accumulate_dtype(a.dtype()));
  if (a.dim() == 0) {
    (void)wrap_dim(dim, 1);
    return x.is_same(a) ? a.clone() : x;
  }
  const int64_t d = wrap_dim(dim, a.dim());
  int64_t n = a.size(d);
  if (n == 0) return x.sum({d}, keepdim) + Scalar(1);  // the empty product, still in the graph
  // Pairwise products: log2(n) passes; an odd last element waits for the next pass.
  while (n > 1) {
    const int64_t half = n / 2;
    Tensor pairs = x.narrow(d, 0, half) * x.narrow(d, half, half);
    x = n % 2 == 0 ? pairs : cat({pairs, x.narrow(d, n - 1, 1)}, d);
    n = half + n % 2;
  }
  if (x.is_same(a)) x = a.clone();  // a length-1 dim: a new tensor, as PyTorch's
  return keepdim ? x : x.squeeze(d);
}

Tensor prod(const Tensor& a) {
  TINY_OP_SCOPE("prod", a);
  return prod(a.reshape({-1}), 0).reshape({});
}

// ---- sort, topk -----------------------------------------------------------------------

namespace {

// Bool algebra with where(), which every backend has.
Tensor both(const Tensor& p, const Tensor& q, const Tensor& no) { return where(p, q, no); }
Tensor either(const Tensor& p, const Tensor& q, const Tensor& yes) { return where(p, yes, q); }

// The work of one sort on the modelled GPU, as the CUDA kernel does it
// (backend/cuda/sort.cu): each element compared with its whole row (n^2
// comparisons a row, from the cache), the rows read and the indices written once.
KernelWork sort_work(const Tensor& indices, const Tensor& rows, bool) {
  KernelWork w{"sort", cost_of({rows, indices})};
  w.cost.flops = static_cast<double>(rows.numel()) * static_cast<double>(rows.size(1));
  return w;
}

// The stable sorting permutation of each row of x (R, n): indices[r][p] is
// the column that lands at position p (NaN as the largest value).
Tensor sort_permutation(const Tensor& x, bool descending) {
  Tensor indices = empty(x.sizes(), like(x, kInt64));
  sort_stub(x.device())(indices, x.contiguous(), descending);
  return indices;
}

}  // namespace

TINY_DEFINE_DISPATCH(sort_stub, "sort", sort_work);

std::tuple<Tensor, Tensor> sort(const Tensor& a, int64_t dim, bool descending) {
  TINY_OP_SCOPE("sort", a);
  if (a.dim() == 0) {
    (void)wrap_dim(dim, 1);
    return {a.clone(), zeros({}, like(a, kInt64))};
  }
  const int64_t d = wrap_dim(dim, a.dim());
  Tensor indices;
  {
    NoGradGuard no_grad;
    const Tensor last = a.transpose(d, -1);  // the sorted dim last, then rows of it
    const IntArrayRef last_shape = last.sizes();
    const int64_t n = a.size(d);
    indices = sort_permutation(last.reshape({-1, n}), descending).view(last_shape).transpose(d, -1).contiguous();
  }
  return {gather(a, d, indices), indices};
}

namespace {

// topk's indices for rows x (R, n): k passes, each picking the best element
// not yet taken (NaN counts as the largest; ties: the lowest column), so the
// cost is k passes over the rows instead of sort's n x n comparisons.
Tensor select_top(const Tensor& x, int64_t k, bool largest) {
  const int64_t n = x.size(1);
  const TensorOptions index = like(x, kInt64);
  const Tensor no = zeros({}, like(x, kBool)), yes = ones({}, like(x, kBool));
  const Tensor column = arange(n, index).view({1, n});
  const bool floating = x.is_floating_point();
  const Tensor nan = floating ? isnan(x) : zeros_like(x).to(kBool);
  // A value no remaining element is beyond: -inf/+inf, or the row's own extreme for integers.
  const Tensor worst = floating ? full({}, largest ? -INFINITY : INFINITY, like(x, x.dtype()))
                                : (largest ? std::get<0>(min(x, 1, true)) : std::get<0>(max(x, 1, true)));
  Tensor taken = zeros_like(x).to(kBool);
  std::vector<Tensor> picked;
  picked.reserve(static_cast<size_t>(k));
  for (int64_t step = 0; step < k; ++step) {
    const Tensor out = either(taken, nan, yes);  // taken or NaN: not a value candidate
    const Tensor work = where(out, worst, x);
    const Tensor best = largest ? std::get<0>(max(work, 1, true)) : std::get<0>(min(work, 1, true));
    const Tensor by_value = both(work == best, where(out, no, yes), no);
    const Tensor by_nan = both(nan, where(taken, no, yes), no);
    // Largest: a remaining NaN comes first; smallest: NaNs come only when no value is left.
    const Tensor use_nan = largest ? any(by_nan, 1, true) : where(any(by_value, 1, true), no, yes);
    const Tensor candidate = where(use_nan, by_nan, by_value);
    const Tensor choice = argmax(candidate.to(kInt64), 1, true);  // the lowest candidate column
    picked.push_back(choice);
    taken = either(column == choice, taken, yes);
  }
  return picked.empty() ? empty({x.size(0), 0}, index) : cat(picked, 1);
}

}  // namespace

std::tuple<Tensor, Tensor> topk(const Tensor& a, int64_t k, int64_t dim, bool largest, bool sorted) {
  TINY_OP_SCOPE("topk", a);
  (void)sorted;  // always sorted: one valid order of the unspecified one
  const int64_t d = wrap_dim(dim, std::max<int64_t>(a.dim(), 1));
  const int64_t n = a.dim() == 0 ? 1 : a.size(d);
  TINY_CHECK(k >= 0 && k <= n, IndexError, "topk(): selected index k out of range: k = ", k, " but dimension ", d,
             " of shape ", shape_str(a.sizes()), " has size ", n, " (k must be in [0, ", n, "])");
  if (a.dim() == 0) return sort(a, dim, largest);
  Tensor indices;
  {
    NoGradGuard no_grad;
    const Tensor last = a.transpose(d, -1);
    IntArrayRef out_shape = last.sizes();
    out_shape.back() = k;
    const Tensor rows = last.reshape({-1, n});
    indices = (rows.size(0) == 0 || k == 0 ? empty({rows.size(0), k}, like(a, kInt64)) : select_top(rows, k, largest))
                  .view(out_shape)
                  .transpose(d, -1)
                  .contiguous();
  }
  return {gather(a, d, indices), indices};
}

}  // namespace tiny
