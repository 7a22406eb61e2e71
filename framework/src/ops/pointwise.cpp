// Pointwise math with broadcasting, and its gradients.
#include <cmath>

#include "amp/autocast_policy.h"
#include "backend/define_dispatch.h"
#include "backend/stubs/pointwise.h"
#include "ops/op_helpers.h"

// The kernels these ops call, each with the work of one call on the modelled GPU.
namespace tiny {
namespace {
KernelWork unary_work(const TensorIter& iter, kernels::UnaryKind, const kernels::OpParams&) {
  return {"unary", cost_of(iter)};
}
KernelWork binary_work(const TensorIter& iter, kernels::BinaryKind, const kernels::OpParams&) {
  return {"binary", cost_of(iter)};
}
KernelWork where_work(const TensorIter& iter) { return {"where", cost_of(iter)}; }
}  // namespace

TINY_DEFINE_DISPATCH(unary_stub, "unary", unary_work);
TINY_DEFINE_DISPATCH(binary_stub, "binary", binary_work);
TINY_DEFINE_DISPATCH(where_stub, "where", where_work);
}  // namespace tiny

namespace tiny {

using autograd::BackwardArgs;
using autograd::record;
using autograd::save;
using autograd::save_if;
using autograd::save_output;
using autograd::should_record;
using ops::BinaryKind;
using ops::OpParams;
using ops::reduce_grad;
using ops::UnaryKind;

namespace ops {

void check_same_device(const Tensor& a, const Tensor& b, const char* op) {
  // The fix to suggest: onto the GPU when one of them is a CPU tensor (what training on a GPU wants).
  const bool move_a = a.is_cpu() && !b.is_cpu();
  TINY_CHECK(a.device() == b.device(), DeviceError,
             "Expected all tensors to be on the same device, but found at least two devices, ", a.device(), " and ",
             b.device(), "! (in ", op, "; move the ", move_a ? a.device() : b.device(), " tensor with .to(",
             move_a ? b.device() : a.device(), "))");
}

OpParams scalar_params(const Scalar& a) { return scalar_params(a, std::nullopt); }

OpParams scalar_params(std::optional<Scalar> a, std::optional<Scalar> b) {
  OpParams p;
  if (a) {
    p.has_a = true;
    p.a = a->to_double();
    p.ia = a->to_int64();
  }
  if (b) {
    p.has_b = true;
    p.b = b->to_double();
    p.ib = b->to_int64();
  }
  return p;
}

Dtype result_type(const Tensor& t, const Scalar& s) {
  const Dtype d = t.dtype();
  if (s.is_floating_point() && !is_floating_point(d)) return kFloat32;
  if (s.is_integral() && d == kBool) return kInt64;
  return d;
}

Tensor unary_kernel(const Tensor& a, UnaryKind kind, const OpParams& params) {
  TINY_OP_SCOPE(kind_name(kind), a);
  Tensor out = make_tensor(a.sizes(), a.dtype(), a.device());
  TensorIter iter = make_tensor_iter(out, {a});
  unary_stub(a.device())(iter, kind, params);
  return out;
}

Tensor binary_kernel(const Tensor& a, const Tensor& b, BinaryKind kind, Dtype compute, const OpParams& params) {
  TINY_OP_SCOPE(kind_name(kind), a, b);
  check_same_device(a, b, "a pointwise op");
  const Dtype out_dtype = kernels::binary_returns_bool(kind) ? kBool : compute;
  Tensor out = make_tensor(broadcast_shapes(a.sizes(), b.sizes()), out_dtype, a.device());
  TensorIter iter = make_tensor_iter(out, {a.to(compute), b.to(compute)});
  binary_stub(a.device())(iter, kind, params);
  return out;
}

Tensor binary_kernel(const Tensor& a, const Tensor& b, BinaryKind kind, const OpParams& params) {
  return binary_kernel(a, b, kind, promote_types(a.dtype(), b.dtype()), params);
}

Tensor reduce_grad(const Tensor& grad, const Tensor& input) {
  return autograd::sum_to(grad, input.sizes()).to(input.dtype());
}

}  // namespace ops

namespace {

// Float-only math on an integer tensor works on its float32 copy, as PyTorch promotes.
Tensor as_floating(const Tensor& a) { return a.is_floating_point() ? a : a.to(kFloat32); }

// PyTorch's result type of `a op b`: a 0-d tensor beside a dimensioned one
// counts only when its category (bool < integer < floating) is higher, so
// float32 [3] + float64 0-d stays float32, while int64 [3] + float64 0-d is float64.
int category(Dtype d) { return d == kBool ? 0 : is_floating_point(d) ? 2 : 1; }
Dtype result_type(const Tensor& a, const Tensor& b) {
  if ((a.dim() == 0) == (b.dim() == 0)) return promote_types(a.dtype(), b.dtype());
  const Tensor& dimensioned = a.dim() == 0 ? b : a;
  const Tensor& zero_dim = a.dim() == 0 ? a : b;
  return category(zero_dim.dtype()) > category(dimensioned.dtype()) ? zero_dim.dtype() : dimensioned.dtype();
}

// What a gradient formula needs of an operand it did not save: its shape and dtype.
struct Operand {
  explicit Operand(const Tensor& t) : sizes(t.sizes()), dtype(t.dtype()) {}
  // A gradient shaped like the broadcast result, summed and converted for this operand.
  Tensor grad(const Tensor& g) const { return autograd::sum_to(g, sizes).to(dtype); }
  IntArrayRef sizes;
  Dtype dtype;
};

// Unary op whose backward is a BinaryKind on (grad, saved).
Tensor unary_with_backward(const Tensor& a, UnaryKind kind, const char* name, BinaryKind backward_kind,
                           bool save_result, const OpParams& p = {}) {
  Tensor x = as_floating(a);
  Tensor out = ops::unary_kernel(x, kind, p);
  if (should_record({a})) {
    record(name, {a}, {out}, {save_result ? save_output(out) : save(x)}, [backward_kind, p](const BackwardArgs& args) {
      return std::vector<Tensor>{ops::binary_kernel(args.grad(), args.saved[0], backward_kind, p)};
    });
  }
  return out;
}

}  // namespace

// ---- tensor (op) tensor ----------------------------------------------------------

Tensor add(const Tensor& a, const Tensor& b, const Scalar& alpha) {
  Tensor out = ops::binary_kernel(a, b, BinaryKind::Add, result_type(a, b), ops::scalar_params(alpha));
  if (should_record({a, b})) {
    const double al = alpha.to_double();
    // Saves no tensor (PyTorch's AddBackward0 neither): changing a or b in place later is fine.
    const Operand x(a), y(b);
    record("AddBackward0", {a, b}, {out}, {}, [al, x, y](const BackwardArgs& args) {
      const Tensor& g = args.grad();
      return std::vector<Tensor>{args.needs[0] ? x.grad(g) : Tensor(),
                                 args.needs[1] ? y.grad(al == 1.0 ? g : g * al) : Tensor()};
    });
  }
  return out;
}

Tensor sub(const Tensor& a, const Tensor& b, const Scalar& alpha) {
  TINY_CHECK(!(a.dtype() == kBool && b.dtype() == kBool), DtypeError,
             "Subtraction, the `-` operator, with two bool tensors is not supported. Use the `^` or `logical_xor()` "
             "operator instead.");
  Tensor out = ops::binary_kernel(a, b, BinaryKind::Sub, result_type(a, b), ops::scalar_params(alpha));
  if (should_record({a, b})) {
    const double al = alpha.to_double();
    const Operand x(a), y(b);
    record("SubBackward0", {a, b}, {out}, {}, [al, x, y](const BackwardArgs& args) {
      const Tensor& g = args.grad();
      return std::vector<Tensor>{args.needs[0] ? x.grad(g) : Tensor(), args.needs[1] ? y.grad(g * (-al)) : Tensor()};
    });
  }
  return out;
}

Tensor mul(const Tensor& a, const Tensor& b) {
  Tensor out = ops::binary_kernel(a, b, BinaryKind::Mul, result_type(a, b));
  if (should_record({a, b})) {
    // As PyTorch: a is saved only when b's gradient needs it, and b only when a's does.
    const Operand ia(a), ib(b);
    record("MulBackward0", {a, b}, {out}, {save_if(a, b.requires_grad()), save_if(b, a.requires_grad())},
           [ia, ib](const BackwardArgs& args) {
      const Tensor& g = args.grad();
      const Tensor& x = args.saved[0];
      const Tensor& y = args.saved[1];
      return std::vector<Tensor>{args.needs[0] ? ia.grad(g * y) : Tensor(), args.needs[1] ? ib.grad(g * x) : Tensor()};
    });
  }
  return out;
}

Tensor div(const Tensor& a, const Tensor& b) {
  Dtype compute = result_type(a, b);
  if (!is_floating_point(compute)) compute = kFloat32;  // true division, as PyTorch's `/`
  Tensor out = ops::binary_kernel(a, b, BinaryKind::Div, compute);
  if (should_record({a, b})) {
    // As PyTorch: b is always saved, a only when b's gradient needs it.
    const Operand ia(a), ib(b);
    record("DivBackward0", {a, b}, {out}, {save_if(a, b.requires_grad()), save(b)}, [ia, ib](const BackwardArgs& args) {
      const Tensor& g = args.grad();
      const Tensor& x = args.saved[0];
      const Tensor& y = args.saved[1];
      return std::vector<Tensor>{args.needs[0] ? ia.grad(g / y) : Tensor(),
                                 args.needs[1] ? ib.grad(-g * x / (y * y)) : Tensor()};
    });
  }
  return out;
}

Tensor pow(const Tensor& a_in, const Tensor& b_in) {
  const Tensor a = amp::detail::upcast(a_in), b = amp::detail::upcast(b_in);
  Tensor out = ops::binary_kernel(a, b, BinaryKind::Pow, result_type(a, b));
  if (should_record({a, b})) {
    record("PowBackward1", {a, b}, {out}, {save(a), save(b), save_output(out)}, [](const BackwardArgs& args) {
      const Tensor& g = args.grad();
      const Tensor& x = args.saved[0];
      const Tensor& y = args.saved[1];
      const Tensor& r = args.saved[2];
      Tensor ga, gb;
      if (args.needs[0]) ga = reduce_grad(g * y * pow(x, y - 1.0), x);
      if (args.needs[1]) {
        // d/dy x^y = x^y log x; PyTorch defines it as 0 where x == 0 and y >= 0.
        Tensor mask = ops::binary_kernel(x == 0.0, y >= 0.0, BinaryKind::LogicalAnd);
        gb = reduce_grad(where(mask, zeros_like(r), g * r * log(x)), y);
      }
      return std::vector<Tensor>{ga, gb};
    });
  }
  return out;
}

Tensor maximum(const Tensor& a, const Tensor& b) {
  Tensor out = ops::binary_kernel(a, b, BinaryKind::Maximum, result_type(a, b));
  if (should_record({a, b})) {
    record("MaximumBackward0", {a, b}, {out}, {save(a), save(b)}, [](const BackwardArgs& args) {
      const Tensor& g = args.grad();
      const Tensor& x = args.saved[0];
      const Tensor& y = args.saved[1];
      // Ties split the gradient evenly, as PyTorch does.
      Tensor half = g * 0.5;
      Tensor zero = zeros_like(g);
      return std::vector<Tensor>{reduce_grad(where(x > y, g, where(x == y, half, zero)), x),
                                 reduce_grad(where(y > x, g, where(x == y, half, zero)), y)};
    });
  }
  return out;
}

Tensor minimum(const Tensor& a, const Tensor& b) {
  Tensor out = ops::binary_kernel(a, b, BinaryKind::Minimum, result_type(a, b));
  if (should_record({a, b})) {
    record("MinimumBackward0", {a, b}, {out}, {save(a), save(b)}, [](const BackwardArgs& args) {
      const Tensor& g = args.grad();
      const Tensor& x = args.saved[0];
      const Tensor& y = args.saved[1];
      Tensor half = g * 0.5;
      Tensor zero = zeros_like(g);
      return std::vector<Tensor>{reduce_grad(where(x < y, g, where(x == y, half, zero)), x),
                                 reduce_grad(where(y < x, g, where(x == y, half, zero)), y)};
    });
  }
  return out;
}

Tensor where(const Tensor& condition, const Tensor& a, const Tensor& b) {
  TINY_CHECK(condition.dtype() == kBool, DtypeError, "where expected condition to be a boolean tensor, but got a "
             "tensor with dtype ", dtype_name(condition.dtype()), " (compare first, e.g. x > 0)");
  ops::check_same_device(condition, a, "where");
  ops::check_same_device(a, b, "where");
  const Dtype dtype = result_type(a, b);
  Tensor out = make_tensor(broadcast_all({condition, a, b}), dtype, a.device());
  TensorIter iter = make_tensor_iter(out, {condition, a.to(dtype), b.to(dtype)});
  where_stub(a.device())(iter);
  if (should_record({a, b})) {
    const Operand x(a), y(b);
    record("WhereBackward0", {a, b}, {out}, {save(condition)}, [x, y](const BackwardArgs& args) {
      const Tensor& g = args.grad();
      const Tensor& c = args.saved[0];
      Tensor zero = zeros_like(g);
      return std::vector<Tensor>{args.needs[0] ? x.grad(where(c, g, zero)) : Tensor(),
                                 args.needs[1] ? y.grad(where(c, zero, g)) : Tensor()};
    });
  }
  return out;
}

Tensor eq(const Tensor& a, const Tensor& b) { return ops::binary_kernel(a, b, BinaryKind::Eq, result_type(a, b)); }
Tensor ne(const Tensor& a, const Tensor& b) { return ops::binary_kernel(a, b, BinaryKind::Ne, result_type(a, b)); }
Tensor lt(const Tensor& a, const Tensor& b) { return ops::binary_kernel(a, b, BinaryKind::Lt, result_type(a, b)); }
Tensor le(const Tensor& a, const Tensor& b) { return ops::binary_kernel(a, b, BinaryKind::Le, result_type(a, b)); }
Tensor gt(const Tensor& a, const Tensor& b) { return ops::binary_kernel(a, b, BinaryKind::Gt, result_type(a, b)); }
Tensor ge(const Tensor& a, const Tensor& b) { return ops::binary_kernel(a, b, BinaryKind::Ge, result_type(a, b)); }

namespace {
Tensor compare_scalar(const Tensor& a, const Scalar& s, BinaryKind kind) {
  const Dtype dtype = ops::result_type(a, s);
  return ops::binary_kernel(a, scalar_tensor(s, TensorOptions(dtype).device(a.device())), kind, dtype);
}
}  // namespace

Tensor operator==(const Tensor& a, const Scalar& s) { return compare_scalar(a, s, BinaryKind::Eq); }
Tensor operator!=(const Tensor& a, const Scalar& s) { return compare_scalar(a, s, BinaryKind::Ne); }
Tensor operator<(const Tensor& a, const Scalar& s) { return compare_scalar(a, s, BinaryKind::Lt); }
Tensor operator<=(const Tensor& a, const Scalar& s) { return compare_scalar(a, s, BinaryKind::Le); }
Tensor operator>(const Tensor& a, const Scalar& s) { return compare_scalar(a, s, BinaryKind::Gt); }
Tensor operator>=(const Tensor& a, const Scalar& s) { return compare_scalar(a, s, BinaryKind::Ge); }

// ---- tensor (op) scalar ----------------------------------------------------------

namespace {
// A scalar op on the tensor converted to the result dtype.
Tensor scalar_op(const Tensor& a, const Scalar& s, UnaryKind kind, Dtype dtype) {
  return ops::unary_kernel(a.to(dtype), kind, ops::scalar_params(s));
}
}  // namespace

Tensor add(const Tensor& a, const Scalar& b) {
  Tensor out = scalar_op(a, b, UnaryKind::AddScalar, ops::result_type(a, b));
  if (should_record({a})) {
    const Dtype dtype = a.dtype();
    record("AddBackward0", {a}, {out}, {}, [dtype](const BackwardArgs& args) {
      return std::vector<Tensor>{args.grad().to(dtype)};
    });
  }
  return out;
}

Tensor sub(const Tensor& a, const Scalar& b) {
  if (b.is_floating_point()) return add(a, -b.to_double());
  if (b.is_bool()) return add(a, -static_cast<int64_t>(b.to_bool()));
  return add(a, -b.to_int64());
}

Tensor operator-(const Scalar& s, const Tensor& a) {
  Tensor out = scalar_op(a, s, UnaryKind::RSubScalar, ops::result_type(a, s));
  if (should_record({a})) {
    const Dtype dtype = a.dtype();
    record("RsubBackward1", {a}, {out}, {}, [dtype](const BackwardArgs& args) {
      return std::vector<Tensor>{(-args.grad()).to(dtype)};
    });
  }
  return out;
}

Tensor mul(const Tensor& a, const Scalar& b) {
  Tensor out = scalar_op(a, b, UnaryKind::MulScalar, ops::result_type(a, b));
  if (should_record({a})) {
    const double c = b.to_double();
    const Dtype dtype = a.dtype();
    record("MulBackward0", {a}, {out}, {}, [c, dtype](const BackwardArgs& args) {
      return std::vector<Tensor>{(args.grad() * c).to(dtype)};
    });
  }
  return out;
}

Tensor div(const Tensor& a, const Scalar& b) {
  Dtype dtype = ops::result_type(a, b);
  if (!is_floating_point(dtype)) dtype = kFloat32;
  // True division, as PyTorch's CPU path (a reciprocal multiply can differ by an ulp).
  Tensor out = ops::unary_kernel(a.to(dtype), UnaryKind::DivScalar, ops::scalar_params(b));
  if (should_record({a})) {
    const double c = b.to_double();
    const Dtype dtype = a.dtype();
    record("DivBackward0", {a}, {out}, {}, [c, dtype](const BackwardArgs& args) {
      return std::vector<Tensor>{(args.grad() / c).to(dtype)};
    });
  }
  return out;
}

Tensor operator/(const Scalar& s, const Tensor& a) {
  Dtype dtype = ops::result_type(a, s);
  if (!is_floating_point(dtype)) dtype = kFloat32;
  Tensor out = scalar_op(a, s, UnaryKind::RDivScalar, dtype);
  if (should_record({a})) {
    record("ReciprocalBackward0", {a}, {out}, {save(a), save_output(out)}, [](const BackwardArgs& args) {
      // d(c/x)/dx = -c/x^2 = -out/x
      return std::vector<Tensor>{(-args.grad() * args.saved[1] / args.saved[0]).to(args.saved[0].dtype())};
    });
  }
  return out;
}

Tensor pow(const Tensor& a_in, const Scalar& exponent) {
  const Tensor a = amp::detail::upcast(a_in);
  const Dtype dtype = ops::result_type(a, exponent);
  TINY_CHECK(is_floating_point(dtype) || exponent.to_int64() >= 0, ValueError,
             "Integers to negative integer powers are not allowed (exponent ", exponent.to_int64(),
             "); convert first: x.to(tiny::kFloat32).pow(", exponent.to_int64(), ")");
  Tensor out = scalar_op(a, exponent, UnaryKind::PowScalar, dtype);
  if (should_record({a})) {
    const double e = exponent.to_double();
    record("PowBackward0", {a}, {out}, {save(a)}, [e](const BackwardArgs& args) {
      const Tensor& x = args.saved[0];
      if (e == 0.0) return std::vector<Tensor>{zeros_like(x)};
      return std::vector<Tensor>{args.grad() * (pow(x, e - 1.0) * e)};
    });
  }
  return out;
}

// ---- unary -------------------------------------------------------------------------

Tensor neg(const Tensor& a) {
  TINY_CHECK(a.dtype() != kBool, DtypeError, "Negation, the `-` operator, on a bool tensor is not supported. If you "
             "are trying to invert a mask, use the `~` or `logical_not()` operator instead.");
  Tensor out = ops::unary_kernel(a, UnaryKind::Neg);
  if (should_record({a})) {
    record("NegBackward0", {a}, {out}, {}, [](const BackwardArgs& args) { return std::vector<Tensor>{-args.grad()}; });
  }
  return out;
}

Tensor exp(const Tensor& a_in) {
  const Tensor a = amp::detail::upcast(a_in);
  Tensor out = ops::unary_kernel(as_floating(a), UnaryKind::Exp);
  if (should_record({a})) {
    record("ExpBackward0", {a}, {out}, {save_output(out)},
           [](const BackwardArgs& args) { return std::vector<Tensor>{args.grad() * args.saved[0]}; });
  }
  return out;
}

Tensor log(const Tensor& a_in) {
  const Tensor a = amp::detail::upcast(a_in);
  Tensor x = as_floating(a);
  Tensor out = ops::unary_kernel(x, UnaryKind::Log);
  if (should_record({a})) {
    record("LogBackward0", {a}, {out}, {save(x)},
           [](const BackwardArgs& args) { return std::vector<Tensor>{args.grad() / args.saved[0]}; });
  }
  return out;
}

Tensor sqrt(const Tensor& a) {
  Tensor out = ops::unary_kernel(as_floating(a), UnaryKind::Sqrt);
  if (should_record({a})) {
    record("SqrtBackward0", {a}, {out}, {save_output(out)},
           [](const BackwardArgs& args) { return std::vector<Tensor>{args.grad() / (args.saved[0] * 2.0)}; });
  }
  return out;
}

Tensor abs(const Tensor& a) {
  Tensor out = ops::unary_kernel(a, UnaryKind::Abs);
  if (should_record({a})) {
    record("AbsBackward0", {a}, {out}, {save(a)}, [](const BackwardArgs& args) {
      return std::vector<Tensor>{args.grad() * ops::unary_kernel(args.saved[0], UnaryKind::Sign)};
    });
  }
  return out;
}

Tensor sin(const Tensor& a) {
  Tensor x = as_floating(a);
  Tensor out = ops::unary_kernel(x, UnaryKind::Sin);
  if (should_record({a})) {
    record("SinBackward0", {a}, {out}, {save(x)}, [](const BackwardArgs& args) {
      return std::vector<Tensor>{args.grad() * ops::unary_kernel(args.saved[0], UnaryKind::Cos)};
    });
  }
  return out;
}

Tensor cos(const Tensor& a) {
  Tensor x = as_floating(a);
  Tensor out = ops::unary_kernel(x, UnaryKind::Cos);
  if (should_record({a})) {
    record("CosBackward0", {a}, {out}, {save(x)}, [](const BackwardArgs& args) {
      return std::vector<Tensor>{-(args.grad() * ops::unary_kernel(args.saved[0], UnaryKind::Sin))};
    });
  }
  return out;
}

Tensor log1p(const Tensor& a_in) {
  const Tensor a = amp::detail::upcast(a_in);
  Tensor x = as_floating(a);
  Tensor out = ops::unary_kernel(x, UnaryKind::Log1p);
  if (should_record({a})) {
    record("Log1PBackward0", {a}, {out}, {save(x)},
           [](const BackwardArgs& args) { return std::vector<Tensor>{args.grad() / (args.saved[0] + 1.0)}; });
  }
  return out;
}

Tensor expm1(const Tensor& a_in) {
  const Tensor a = amp::detail::upcast(a_in);
  Tensor out = ops::unary_kernel(as_floating(a), UnaryKind::Expm1);
  if (should_record({a})) {
    record("Expm1Backward0", {a}, {out}, {save_output(out)},
           [](const BackwardArgs& args) { return std::vector<Tensor>{args.grad() * (args.saved[0] + 1.0)}; });
  }
  return out;
}

Tensor rsqrt(const Tensor& a_in) {
  const Tensor a = amp::detail::upcast(a_in);
  Tensor out = ops::unary_kernel(as_floating(a), UnaryKind::Rsqrt);
  if (should_record({a})) {
    // d/dx x^(-1/2) = -1/2 x^(-3/2) = -1/2 out^3, PyTorch's formula.
    record("RsqrtBackward0", {a}, {out}, {save_output(out)}, [](const BackwardArgs& args) {
      const Tensor& y = args.saved[0];
      return std::vector<Tensor>{args.grad() * (y * y * y) * -0.5};
    });
  }
  return out;
}

namespace {

// floor, round and sign: piecewise constant, so their gradient is zero
// everywhere (PyTorch defines it so, too, rather than leaving it undefined).
Tensor piecewise_constant(const Tensor& a, UnaryKind kind, const char* node) {
  TINY_CHECK(a.dtype() != kBool, DtypeError, "\"", ops::kind_name(kind), "\" is not implemented for 'bool' tensors; "
             "convert first, e.g. mask.to(tiny::kFloat32).");
  Tensor out = a.is_floating_point() || kind == UnaryKind::Sign ? ops::unary_kernel(a, kind) : a.clone();
  if (should_record({a})) {
    record(node, {a}, {out}, {}, [](const BackwardArgs& args) { return std::vector<Tensor>{zeros_like(args.grad())}; });
  }
  return out;
}

}  // namespace

Tensor floor(const Tensor& a) { return piecewise_constant(a, UnaryKind::Floor, "FloorBackward0"); }

Tensor round(const Tensor& a) { return piecewise_constant(a, UnaryKind::Round, "RoundBackward0"); }

Tensor sign(const Tensor& a) { return piecewise_constant(a, UnaryKind::Sign, "SignBackward0"); }

Tensor isnan(const Tensor& a) {
  // NaN is the one value not equal to itself.
  if (!a.is_floating_point()) return zeros(a.sizes(), TensorOptions(kBool).device(a.device()));
  NoGradGuard no_grad;
  return ne(a, a);
}

Tensor isfinite(const Tensor& a) {
  // a - a is 0 for every finite value and NaN for +-inf and NaN.
  if (!a.is_floating_point()) return ones(a.sizes(), TensorOptions(kBool).device(a.device()));
  NoGradGuard no_grad;
  return sub(a, a) == 0;
}

Tensor relu(const Tensor& a) {
  TINY_CHECK(a.dtype() != kBool, DtypeError, "\"relu\" not implemented for 'bool'");
  Tensor out = ops::unary_kernel(a, UnaryKind::Relu);
  if (should_record({a})) {
    record("ReluBackward0", {a}, {out}, {save_output(out)}, [](const BackwardArgs& args) {
      return std::vector<Tensor>{ops::binary_kernel(args.grad(), args.saved[0], BinaryKind::ReluBackward)};
    });
  }
  return out;
}

Tensor sigmoid(const Tensor& a) {
  return unary_with_backward(a, UnaryKind::Sigmoid, "SigmoidBackward0", BinaryKind::SigmoidBackward, true);
}

Tensor tanh(const Tensor& a) {
  return unary_with_backward(a, UnaryKind::Tanh, "TanhBackward0", BinaryKind::TanhBackward, true);
}

Tensor gelu(const Tensor& a, const std::string& approximate) {
  TINY_CHECK(approximate == "none" || approximate == "tanh", ValueError, "approximate argument must be either none "
             "or tanh, got '", approximate, "'");
  if (approximate == "tanh") {
    return unary_with_backward(a, UnaryKind::GeluTanh, "GeluBackward0", BinaryKind::GeluTanhBackward, false);
  }
  return unary_with_backward(a, UnaryKind::Gelu, "GeluBackward0", BinaryKind::GeluBackward, false);
}

Tensor clamp(const Tensor& a, std::optional<Scalar> min, std::optional<Scalar> max) {
  TINY_CHECK(min.has_value() || max.has_value(), ValueError, "torch.clamp: At least one of 'min' or 'max' must not "
             "be None");
  const OpParams p = ops::scalar_params(min, max);
  Dtype dtype = a.dtype();
  if (min) dtype = promote_types(dtype, ops::result_type(a, *min));
  if (max) dtype = promote_types(dtype, ops::result_type(a, *max));
  Tensor x = a.to(dtype);
  Tensor out = ops::unary_kernel(x, UnaryKind::Clamp, p);
  if (should_record({a})) {
    record("ClampBackward1", {a}, {out}, {save(x)}, [p](const BackwardArgs& args) {
      return std::vector<Tensor>{ops::binary_kernel(args.grad(), args.saved[0], BinaryKind::ClampBackward, p)};
    });
  }
  return out;
}

// ---- comparisons of whole tensors ------------------------------------------------

bool allclose(const Tensor& a, const Tensor& b, double rtol, double atol) {
  ops::check_same_device(a, b, "allclose");
  NoGradGuard no_grad;
  const Dtype dtype = is_floating_point(promote_types(a.dtype(), b.dtype())) ? promote_types(a.dtype(), b.dtype())
                                                                             : kFloat64;
  Tensor x = a.to(dtype), y = b.to(dtype);
  Tensor close = abs(x - y) <= abs(y) * rtol + atol;
  // NaN never compares <=, so any NaN makes the result false.
  return close.numel() == 0 || (close.to(kInt64).sum().item<int64_t>() == close.numel());
}

bool equal(const Tensor& a, const Tensor& b) {
  if (a.sizes() != b.sizes()) return false;
  NoGradGuard no_grad;
  Tensor same = eq(a, b);
  return same.numel() == 0 || same.to(kInt64).sum().item<int64_t>() == same.numel();
}

}  // namespace tiny
