// sum, mean, max, min, argmax, argmin, and their gradients.
#include <algorithm>
#include <cmath>

#include "amp/autocast_policy.h"
#include "backend/define_dispatch.h"
#include "backend/stubs/reduce.h"
#include "ops/op_helpers.h"

// The kernels these ops call, each with the work of one call on the modelled GPU.
namespace tiny {
namespace {
KernelWork reduce_work(const ReduceIter& iter, kernels::ReduceKind) {
  return {"reduce", cost_of({iter.input, iter.outputs[0]}, Work::reduction)};
}
KernelWork arg_reduce_work(const ReduceIter& iter, bool) {
  return {"argmax", cost_of({iter.input, iter.outputs[0], iter.outputs[1]}, Work::reduction)};
}
}  // namespace

TINY_DEFINE_DISPATCH(reduce_stub, "reduce", reduce_work);
TINY_DEFINE_DISPATCH(arg_reduce_stub, "arg_reduce", arg_reduce_work);
}  // namespace tiny

namespace tiny {

using autograd::BackwardArgs;
using autograd::record;
using autograd::save;
using autograd::save_output;
using autograd::should_record;
using kernels::ReduceKind;

namespace {

// Which dims a reduction folds; an empty list means all of them.
std::vector<bool> reduced_mask(const Tensor& a, const IntArrayRef& dims) {
  const int64_t nd = a.dim();
  std::vector<bool> mask(static_cast<size_t>(nd), dims.empty());
  for (int64_t d : dims) {
    const int64_t w = wrap_dim(d, nd);
    if (nd == 0) continue;
    TINY_CHECK(!mask[w] || dims.empty(), ValueError, "dim ", w, " appears multiple times in the list of dims");
    mask[w] = true;
  }
  return mask;
}

IntArrayRef keepdim_shape(const Tensor& a, const std::vector<bool>& mask) {
  IntArrayRef shape = a.sizes();
  for (size_t d = 0; d < shape.size(); ++d) {
    if (mask[d]) shape[d] = 1;
  }
  return shape;
}

IntArrayRef drop_reduced(const IntArrayRef& keep_shape, const std::vector<bool>& mask) {
  IntArrayRef shape;
  for (size_t d = 0; d < keep_shape.size(); ++d) {
    if (!mask[d]) shape.push_back(keep_shape[d]);
  }
  return shape;
}

Tensor reduce(const Tensor& a, const std::vector<bool>& mask, bool keepdim, ReduceKind kind, Dtype out_dtype) {
  TINY_OP_SCOPE(ops::kind_name(kind), a);
  // The dtype rule every backend's reduce kernel relies on: the output has
  // the input's dtype, except that a 16-bit input is read as it is into a
  // float32 result (its accumulator type, stored without rounding).
  const bool widening = is_reduced_floating_point(a.dtype()) && out_dtype == kFloat32;
  Tensor input = widening ? a : a.to(out_dtype);
  const IntArrayRef keep_shape = keepdim_shape(a, mask);
  Tensor out = make_tensor(keep_shape, out_dtype, a.device());
  ReduceIter iter = make_reduce_iter(input, mask, out);
  reduce_stub(a.device())(iter, kind);
  return keepdim ? out : out.view(drop_reduced(keep_shape, mask));
}

// Undoes the dropped dims of a reduction so a gradient broadcasts back.
Tensor restore_dims(const Tensor& grad, const IntArrayRef& keep_shape) { return grad.reshape(keep_shape); }

Dtype sum_dtype(Dtype d) { return is_floating_point(d) ? d : kInt64; }

}  // namespace

Tensor sum(const Tensor& a_in, const IntArrayRef& dims, bool keepdim) {
  const Tensor a = amp::detail::upcast(a_in);
  const std::vector<bool> mask = reduced_mask(a, dims);
  Tensor out = reduce(a, mask, keepdim, ReduceKind::Sum, sum_dtype(a.dtype()));
  if (should_record({a})) {
    const IntArrayRef in_shape = a.sizes();
    const IntArrayRef keep_shape = keepdim_shape(a, mask);
    record("SumBackward1", {a}, {out}, {}, [in_shape, keep_shape](const BackwardArgs& args) {
      return std::vector<Tensor>{restore_dims(args.grad(), keep_shape).expand(in_shape)};
    });
  }
  return out;
}

Tensor sum(const Tensor& a_in) {
  const Tensor a = amp::detail::upcast(a_in);
  Tensor out;
  {
    NoGradGuard no_grad;
    out = sum(a, {}, false);
  }
  if (should_record({a})) {
    const IntArrayRef in_shape = a.sizes();
    record("SumBackward0", {a}, {out}, {}, [in_shape](const BackwardArgs& args) {
      return std::vector<Tensor>{args.grad().expand(in_shape)};
    });
  }
  return out;
}

Tensor mean(const Tensor& a_in, const IntArrayRef& dims, bool keepdim) {
  const Tensor a = amp::detail::upcast(a_in);
  TINY_CHECK(a.is_floating_point(), DtypeError, "mean(): could not infer output dtype. Input dtype must be either a "
             "floating point or complex dtype. Got: ", dtype_name(a.dtype()), " (convert first: x.to(tiny::kFloat32))");
  const std::vector<bool> mask = reduced_mask(a, dims);
  int64_t count = 1;
  for (size_t d = 0; d < mask.size(); ++d) {
    if (mask[d]) count *= a.size(static_cast<int64_t>(d));
  }
  // 16-bit inputs: sum into float32, divide there, round once (PyTorch's CPU
  // mean does the same: a half sum of many elements would overflow or lose digits).
  const Dtype acc_dtype = is_reduced_floating_point(a.dtype()) ? kFloat32 : a.dtype();
  Tensor total;
  {
    NoGradGuard no_grad;
    total = reduce(a, mask, keepdim, ReduceKind::Sum, acc_dtype);
  }
  // An empty mean is NaN, as 0/0 is in PyTorch.
  Tensor out = ops::unary_kernel(total, ops::UnaryKind::MulScalar,
                                 [&] { kernels::OpParams p; p.a = 1.0 / static_cast<double>(count); return p; }());
  if (count == 0) out.fill_(std::nan(""));
  if (acc_dtype != a.dtype()) {
    NoGradGuard no_grad;
    out = out.to(a.dtype());
  }
  if (should_record({a})) {
    const IntArrayRef in_shape = a.sizes();
    const IntArrayRef keep_shape = keepdim_shape(a, mask);
    const double scale = 1.0 / static_cast<double>(count);
    record("MeanBackward1", {a}, {out}, {}, [in_shape, keep_shape, scale](const BackwardArgs& args) {
      return std::vector<Tensor>{(restore_dims(args.grad(), keep_shape) * scale).expand(in_shape)};
    });
  }
  return out;
}

Tensor mean(const Tensor& a_in) {
  const Tensor a = amp::detail::upcast(a_in);
  Tensor out;
  {
    NoGradGuard no_grad;
    out = mean(a, {}, false);
  }
  if (should_record({a})) {
    const IntArrayRef in_shape = a.sizes();
    const double scale = 1.0 / static_cast<double>(a.numel());
    record("MeanBackward0", {a}, {out}, {}, [in_shape, scale](const BackwardArgs& args) {
      return std::vector<Tensor>{(args.grad() * scale).expand(in_shape)};
    });
  }
  return out;
}

namespace {

Tensor full_extremum(const Tensor& a, bool is_max) {
  TINY_CHECK(a.numel() > 0, ValueError, is_max ? "max" : "min", "(): Expected reduction dim to be specified for "
             "input.numel() == 0. Specify the reduction dim with the 'dim' argument.");
  TINY_CHECK(a.dtype() != kBool, DtypeError, is_max ? "max" : "min", "(): not implemented for 'bool'");
  const std::vector<bool> mask(static_cast<size_t>(a.dim()), true);
  Tensor out = reduce(a, mask, false, is_max ? ReduceKind::Max : ReduceKind::Min, a.dtype());
  if (should_record({a})) {
    record(is_max ? "MaxBackward1" : "MinBackward1", {a}, {out}, {save(a), save_output(out)},
           [](const BackwardArgs& args) {
             // Ties share the gradient evenly (PyTorch's evenly_distribute_backward).
             const Tensor& x = args.saved[0];
             Tensor hit = (x == args.saved[1].expand(x.sizes())).to(x.dtype());
             return std::vector<Tensor>{hit * (args.grad() / hit.sum())};
           });
  }
  return out;
}

std::tuple<Tensor, Tensor> dim_extremum(const Tensor& a, int64_t dim, bool keepdim, bool is_max) {
  const int64_t d = wrap_dim(dim, a.dim());
  TINY_CHECK(a.dim() == 0 || a.size(d) > 0, IndexError, is_max ? "max" : "min", "(): Expected reduction dim ", d,
             " to have non-zero size.");
  TINY_CHECK(a.dtype() != kBool, DtypeError, is_max ? "max" : "min", "(): not implemented for 'bool'");
  std::vector<bool> mask(static_cast<size_t>(a.dim()), false);
  if (a.dim() > 0) mask[d] = true;
  const IntArrayRef keep_shape = keepdim_shape(a, mask);
  Tensor values = make_tensor(keep_shape, a.dtype(), a.device());
  Tensor indices = make_tensor(keep_shape, kInt64, a.device());
  ReduceIter iter = make_reduce_iter(a, mask, values, indices);
  arg_reduce_stub(a.device())(iter, is_max);
  if (!keepdim) {
    values = values.view(drop_reduced(keep_shape, mask));
    indices = indices.view(drop_reduced(keep_shape, mask));
  }
  if (should_record({a})) {
    const IntArrayRef in_shape = a.sizes();
    record(is_max ? "MaxBackward0" : "MinBackward0", {a}, {values}, {save(indices)},
           [in_shape, keep_shape, d](const BackwardArgs& args) {
             // The gradient goes to the selected index only.
             Tensor idx = args.saved[0].reshape(keep_shape);
             Tensor positions = arange(in_shape.empty() ? 1 : in_shape[d], TensorOptions(kInt64).device(idx.device()));
             IntArrayRef pshape(in_shape.size(), 1);
             if (!in_shape.empty()) pshape[d] = in_shape[d];
             Tensor hit = (positions.reshape(pshape) == idx).to(args.grad().dtype());
             return std::vector<Tensor>{hit * restore_dims(args.grad(), keep_shape)};
           });
  }
  return {values, indices};
}

Tensor arg_extremum(const Tensor& a, std::optional<int64_t> dim, bool keepdim, bool is_max) {
  const char* name = is_max ? "argmax" : "argmin";
  TINY_CHECK(a.dtype() != kBool, DtypeError, "\"", name, "\" not implemented for 'bool'");
  Tensor input = dim ? a : a.reshape({-1});
  const int64_t d = dim ? wrap_dim(*dim, a.dim()) : 0;
  TINY_CHECK(input.numel() > 0, ValueError, name, "(): Expected reduction dim to be specified for input.numel() == 0.");
  std::vector<bool> mask(static_cast<size_t>(input.dim()), false);
  if (input.dim() > 0) mask[d] = true;
  const IntArrayRef keep_shape = keepdim_shape(input, mask);
  Tensor indices = make_tensor(keep_shape, kInt64, a.device());
  ReduceIter iter = make_reduce_iter(input, mask, indices);
  arg_reduce_stub(a.device())(iter, is_max);
  if (!dim) return keepdim ? indices.reshape(IntArrayRef(a.sizes().size(), 1)) : indices.reshape({});
  return keepdim ? indices : indices.view(drop_reduced(keep_shape, mask));
}

}  // namespace

namespace {

// amax/amin: the reduction kernel over any set of dims; ties share the
// gradient evenly, as PyTorch's amax/amin (unlike max(dim), which gives it all
// to the one index it returns).
Tensor dims_extremum(const Tensor& a, const IntArrayRef& dims, bool keepdim, bool is_max) {
  const char* name = is_max ? "amax" : "amin";
  TINY_CHECK(a.dtype() != kBool, DtypeError, name, "(): not implemented for 'bool'");
  const std::vector<bool> mask = reduced_mask(a, dims);
  for (size_t d = 0; d < mask.size(); ++d) {
    TINY_CHECK(!mask[d] || a.size(static_cast<int64_t>(d)) > 0, IndexError, name, "(): Expected reduction dim ", d,
               " to have non-zero size (the input has shape ", shape_str(a.sizes()), ")");
  }
  const IntArrayRef keep_shape = keepdim_shape(a, mask);
  Tensor out = reduce(a, mask, keepdim, is_max ? ReduceKind::Max : ReduceKind::Min, a.dtype());
  if (should_record({a})) {
    IntArrayRef reduced;
    for (size_t d = 0; d < mask.size(); ++d) {
      if (mask[d]) reduced.push_back(static_cast<int64_t>(d));
    }
    record(is_max ? "AmaxBackward0" : "AminBackward0", {a}, {out}, {save(a), save_output(out)},
           [keep_shape, reduced](const BackwardArgs& args) {
             const Tensor& x = args.saved[0];
             Tensor hit = (x == args.saved[1].reshape(keep_shape).expand(x.sizes())).to(x.dtype());
             Tensor share = restore_dims(args.grad(), keep_shape) / hit.sum(reduced, /*keepdim=*/true);
             return std::vector<Tensor>{hit * share};
           });
  }
  return out;
}

}  // namespace

Tensor amax(const Tensor& a, const IntArrayRef& dims, bool keepdim) { return dims_extremum(a, dims, keepdim, true); }
Tensor amin(const Tensor& a, const IntArrayRef& dims, bool keepdim) { return dims_extremum(a, dims, keepdim, false); }
// any/all: a count of the nonzero (or zero) elements, compared with 0; NaN
// counts as nonzero, as in PyTorch.
Tensor any(const Tensor& a) {
  TINY_OP_SCOPE("any", a);
  return (a != 0).sum() > 0;
}
Tensor any(const Tensor& a, int64_t dim, bool keepdim) {
  TINY_OP_SCOPE("any", a);
  return (a != 0).sum({dim}, keepdim) > 0;
}
Tensor all(const Tensor& a) {
  TINY_OP_SCOPE("all", a);
  return (a == 0).sum() == 0;
}
Tensor all(const Tensor& a, int64_t dim, bool keepdim) {
  TINY_OP_SCOPE("all", a);
  return (a == 0).sum({dim}, keepdim) == 0;
}

Tensor max(const Tensor& a) { return full_extremum(a, true); }
Tensor min(const Tensor& a) { return full_extremum(a, false); }
std::tuple<Tensor, Tensor> max(const Tensor& a, int64_t dim, bool keepdim) { return dim_extremum(a, dim, keepdim, true); }
std::tuple<Tensor, Tensor> min(const Tensor& a, int64_t dim, bool keepdim) {
  return dim_extremum(a, dim, keepdim, false);
}
Tensor argmax(const Tensor& a) { return arg_extremum(a, std::nullopt, false, true); }
Tensor argmax(const Tensor& a, int64_t dim, bool keepdim) { return arg_extremum(a, dim, keepdim, true); }
Tensor argmin(const Tensor& a) { return arg_extremum(a, std::nullopt, false, false); }
Tensor argmin(const Tensor& a, int64_t dim, bool keepdim) { return arg_extremum(a, dim, keepdim, false); }

// var, std and logsumexp, composed from differentiable ops (issue 23, item 5):
// autograd and every backend come with them.
namespace {
IntArrayRef all_dims_if_empty(const Tensor& a, const IntArrayRef& dims) {
  if (!dims.empty()) return dims;
  IntArrayRef all;
  for (int64_t d = 0; d < a.dim(); ++d) all.push_back(d);
  return all;
}
}  // namespace

Tensor var(const Tensor& a, const IntArrayRef& dims_in, double correction, bool keepdim) {
  TINY_CHECK(a.is_floating_point(), DtypeError, "var(): expected a floating-point input, got ", dtype_name(a.dtype()),
             " (convert with .to(tiny::kFloat32))");
  TINY_CHECK(correction >= 0.0, ValueError, "var(): correction must be >= 0, got ", correction,
             " (1: unbiased, PyTorch's default; 0: population variance)");
  if (a.dim() == 0) {
    const Tensor d = a - a.detach();
    return d * d / (1.0 - correction);  // one element: 0 / (1 - correction), as PyTorch
  }
  const IntArrayRef dims = all_dims_if_empty(a, dims_in);
  int64_t n = 1;
  for (int64_t d : dims) n *= a.size(d);
  const Tensor centered = a - a.mean(dims, /*keepdim=*/true);
  return (centered * centered).sum(dims, keepdim) / (static_cast<double>(n) - correction);
}

Tensor std_dev(const Tensor& a, const IntArrayRef& dims, double correction, bool keepdim) {
  return var(a, dims, correction, keepdim).sqrt();
}

Tensor logsumexp(const Tensor& a, const IntArrayRef& dims_in, bool keepdim) {
  TINY_CHECK(a.is_floating_point(), DtypeError, "logsumexp(): expected a floating-point input, got ",
             dtype_name(a.dtype()));
  if (a.dim() == 0) return a.clone();
  const IntArrayRef dims = all_dims_if_empty(a, dims_in);
  // m = max over dims (detached: the gradient of m cancels out); inf maxima are
  // replaced by 0 as PyTorch does, so all -inf gives -inf and +inf gives +inf.
  Tensor m = a.detach();
  for (int64_t d : dims) m = std::get<0>(max(m, d, /*keepdim=*/true));
  m = where(m.abs() == INFINITY, zeros_like(m), m);
  Tensor out = (a - m).exp().sum(dims, /*keepdim=*/true).log() + m;
  if (!keepdim) {
    IntArrayRef sorted = dims;
    for (int64_t& d : sorted) d = d < 0 ? d + a.dim() : d;
    std::sort(sorted.begin(), sorted.end());
    for (auto it = sorted.rbegin(); it != sorted.rend(); ++it) out = out.squeeze(*it);
  }
  return out;
}

}  // namespace tiny
