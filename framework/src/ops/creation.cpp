// Factory functions: empty, zeros, full, arange, random tensors, from data.
#include <cmath>
#include <type_traits>

#include "backend/define_dispatch.h"
#include "backend/stubs/pointwise.h"
#include "backend/stubs/random.h"
#include "kernels/philox.h"
#include "ops/op_helpers.h"

// The kernels these ops call, each with the work of one call on the modelled GPU.
namespace tiny {
namespace {
KernelWork arange_work(const Tensor& out, double, double) { return {"arange", cost_of({out})}; }
KernelWork random_work(const Tensor& out, RandomKind, PhiloxState, double, double) {
  return {"random", cost_of({out})};
}
}  // namespace

TINY_DEFINE_DISPATCH(arange_stub, "arange", arange_work);
TINY_DEFINE_DISPATCH(random_stub, "random", random_work);
}  // namespace tiny

namespace tiny {

namespace {

Tensor finish(Tensor t, const TensorOptions& options) {
  if (options.requires_grad()) t.requires_grad_(true);
  return t;
}

Tensor random_tensor(const IntArrayRef& shape, const TensorOptions& options, std::optional<Generator> generator,
                     RandomKind kind, uint64_t draws_per_element, double a = 0.0, double b = 0.0) {
  Tensor out = make_tensor(shape, options.dtype(), options.device());
  Generator gen = generator ? *generator : default_generator(out.device());
  const PhiloxState state = gen.reserve(kernels::philox_counters_needed(static_cast<uint64_t>(out.numel()),
                                                                        draws_per_element));
  random_stub(out.device())(out, kind, state, a, b);
  return out;
}

void check_floating(const TensorOptions& options, const char* op) {
  TINY_CHECK(is_floating_point(options.dtype()), DtypeError, "\"", op, "\" not implemented for '",
             dtype_name(options.dtype()), "' (use a floating dtype: kFloat32, kFloat64, kFloat16 or kBFloat16)");
}

}  // namespace

Tensor empty(const IntArrayRef& shape, TensorOptions options) {
  TINY_OP_SCOPE("empty");
  return finish(make_tensor(shape, options.dtype(), options.device()), options);
}

Tensor full(const IntArrayRef& shape, const Scalar& value, TensorOptions options) {
  TINY_OP_SCOPE("full");
  Tensor t = make_tensor(shape, options.dtype(), options.device());
  t.fill_(value);
  return finish(t, options);
}

Tensor zeros(const IntArrayRef& shape, TensorOptions options) {
  TINY_OP_SCOPE("zeros");
  return full(shape, 0, options);
}
Tensor ones(const IntArrayRef& shape, TensorOptions options) {
  TINY_OP_SCOPE("ones");
  return full(shape, 1, options);
}

Tensor arange(int64_t end, TensorOptions options) {
  return arange(0.0, static_cast<double>(end), 1.0, options.has_dtype() ? options : options.dtype(kInt64));
}

Tensor arange(double start, double end, double step, TensorOptions options) {
  TINY_OP_SCOPE("arange");
  TINY_CHECK(step != 0.0, ValueError, "arange: step must be nonzero");
  TINY_CHECK(std::isfinite(start) && std::isfinite(end), ValueError, "arange: unsupported range: ", start, " -> ", end);
  TINY_CHECK((step > 0 && end >= start) || (step < 0 && end <= start), ValueError,
             "arange: upper bound and larger bound inconsistent with step sign (start ", start, ", end ", end,
             ", step ", step, ")");
  const int64_t n = static_cast<int64_t>(std::ceil((end - start) / step));
  Tensor t = make_tensor({n}, options.dtype(), options.device());
  arange_stub(t.device())(t, start, step);
  return finish(t, options);
}

Tensor linspace(double start, double end, int64_t steps, TensorOptions options) {
  TINY_OP_SCOPE("linspace");
  TINY_CHECK(steps >= 0, ValueError, "linspace: number of steps must be non-negative, got ", steps);
  TINY_CHECK(std::isfinite(start) && std::isfinite(end), ValueError, "linspace: start and end must be finite, got ",
             start, " and ", end);
  Tensor t = make_tensor({steps}, options.dtype(), options.device());
  if (steps == 1) {
    t.fill_(start);
  } else if (steps > 1) {
    // As PyTorch, the first half counts up from start and the second down from
    // end, so both ends are exact and the points are symmetric.
    const double step = (end - start) / static_cast<double>(steps - 1);
    const int64_t half = steps / 2;
    arange_stub(t.device())(t.narrow(0, 0, half), start, step);
    const int64_t rest = steps - half;
    arange_stub(t.device())(t.narrow(0, half, rest), end - step * static_cast<double>(rest - 1), step);
    t.narrow(0, steps - 1, 1).fill_(end);
  }
  return finish(t, options);
}

Tensor eye(int64_t n, int64_t m, TensorOptions options) {
  TINY_OP_SCOPE("eye");
  if (m < 0) m = n;
  TINY_CHECK(n >= 0, ValueError, "eye: n must be greater or equal to 0, got ", n);
  const TensorOptions index = TensorOptions(kInt64).device(options.device());
  const Tensor rows = arange(n, index).view({n, 1});
  const Tensor cols = arange(m, index).view({1, m});
  return finish((rows == cols).to(options.dtype()), options);
}

Tensor rand(const IntArrayRef& shape, TensorOptions options, std::optional<Generator> generator) {
  TINY_OP_SCOPE("rand");
  check_floating(options, "rand");
  const uint64_t draws = options.dtype() == kFloat64 ? kernels::kDrawsUniformDouble : kernels::kDrawsUniformFloat;
  return finish(random_tensor(shape, options, generator, RandomKind::Uniform, draws), options);
}

Tensor randn(const IntArrayRef& shape, TensorOptions options, std::optional<Generator> generator) {
  TINY_OP_SCOPE("randn");
  check_floating(options, "randn");
  return finish(random_tensor(shape, options, generator, RandomKind::Normal, kernels::kDrawsNormal), options);
}

Tensor randint(int64_t low, int64_t high, const IntArrayRef& shape, TensorOptions options,
               std::optional<Generator> generator) {
  TINY_OP_SCOPE("randint");
  if (!options.has_dtype()) options = options.dtype(kInt64);
  TINY_CHECK(low < high, ValueError, "random_ expects 'from' to be less than 'to', but got from=", low,
             " >= to=", high);
  TINY_CHECK(options.dtype() != kBool || (low >= 0 && high <= 2), ValueError,
             "randint for a bool tensor needs 0 <= low < high <= 2, got [", low, ", ", high, ")");
  return finish(random_tensor(shape, options, generator, RandomKind::Randint, kernels::kDrawsRandint,
                              static_cast<double>(low), static_cast<double>(high)),
                options);
}

Tensor randperm(int64_t n, std::optional<Generator> generator) {
  TINY_CHECK(n >= 0, ValueError, "randperm: n must be non-negative, got ", n);
  // Fisher-Yates driven by one Philox draw pair per step: reproducible with the seed.
  Generator gen = generator ? *generator : default_cpu_generator();
  const PhiloxState state = gen.reserve(kernels::philox_counters_needed(static_cast<uint64_t>(n), 2));
  Tensor out = arange(n);
  int64_t* p = out.data_ptr<int64_t>();
  for (int64_t i = n - 1; i > 0; --i) {
    const uint64_t pos = 2 * static_cast<uint64_t>(i);
    const int64_t j = kernels::randint_from(kernels::philox_draw(state.seed, state.offset, pos),
                                            kernels::philox_draw(state.seed, state.offset, pos + 1), 0, i + 1);
    std::swap(p[i], p[j]);
  }
  return out;
}

Tensor tensor(const std::vector<double>& values, const IntArrayRef& shape, TensorOptions options) {
  TINY_OP_SCOPE("tensor");
  const int64_t n = checked_numel(shape);
  TINY_CHECK(n == static_cast<int64_t>(values.size()), ShapeError, "tensor(): shape ", shape_str(shape), " holds ", n,
             " elements but ", values.size(), " values were given");
  Tensor host = make_tensor(shape, kFloat64, Device());
  std::copy(values.begin(), values.end(), host.data_ptr<double>());
  return finish(host.to(options.dtype()).to(options.device()), options);
}

Tensor tensor(std::initializer_list<double> values, TensorOptions options) {
  return tensor(std::vector<double>(values), {static_cast<int64_t>(values.size())}, options);
}

template <typename T>
Tensor from_vector(const std::vector<T>& values, const IntArrayRef& shape, TensorOptions options) {
  TINY_OP_SCOPE("from_vector");
  const IntArrayRef s = shape.empty() ? IntArrayRef{static_cast<int64_t>(values.size())} : shape;
  const int64_t n = checked_numel(s);
  TINY_CHECK(n == static_cast<int64_t>(values.size()), ShapeError, "from_vector(): shape ", shape_str(s), " holds ",
             n, " elements but ", values.size(), " values were given");
  Tensor host = make_tensor(s, dtype_of<T>(), Device());
  T* p = host.data_ptr<T>();
  for (size_t i = 0; i < values.size(); ++i) p[i] = values[i];
  return finish(host.to(options.dtype()).to(options.device()), options);
}

template Tensor from_vector<float>(const std::vector<float>&, const IntArrayRef&, TensorOptions);
template Tensor from_vector<double>(const std::vector<double>&, const IntArrayRef&, TensorOptions);
template Tensor from_vector<int64_t>(const std::vector<int64_t>&, const IntArrayRef&, TensorOptions);
template Tensor from_vector<int32_t>(const std::vector<int32_t>&, const IntArrayRef&, TensorOptions);
template Tensor from_vector<uint8_t>(const std::vector<uint8_t>&, const IntArrayRef&, TensorOptions);
template Tensor from_vector<bool>(const std::vector<bool>&, const IntArrayRef&, TensorOptions);

Tensor scalar_tensor(const Scalar& value, TensorOptions options) { return full({}, value, options); }

Tensor empty_like(const Tensor& like) { return empty(like.sizes(), TensorOptions(like.dtype()).device(like.device())); }
Tensor zeros_like(const Tensor& like) { return zeros(like.sizes(), TensorOptions(like.dtype()).device(like.device())); }
Tensor ones_like(const Tensor& like) { return ones(like.sizes(), TensorOptions(like.dtype()).device(like.device())); }
Tensor full_like(const Tensor& like, const Scalar& value) {
  return full(like.sizes(), value, TensorOptions(like.dtype()).device(like.device()));
}
Tensor rand_like(const Tensor& like, std::optional<Generator> generator) {
  return rand(like.sizes(), TensorOptions(like.dtype()).device(like.device()), generator);
}
Tensor randn_like(const Tensor& like, std::optional<Generator> generator) {
  return randn(like.sizes(), TensorOptions(like.dtype()).device(like.device()), generator);
}

}  // namespace tiny
