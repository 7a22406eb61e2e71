// The arithmetic of every pointwise op, written once as host+device structs.
// A backend's driver picks the struct for an op kind with visit_unary_op /
// visit_binary_op and runs it over a TensorIter; the CUDA drivers reuse the
// very same structs inside their grid-stride loops.
#pragma once

#include <cstdint>
#include <type_traits>

#include "kernels/macros.h"
#include "kernels/math.h"

namespace tiny::kernels {

// Numbers some ops need besides their inputs (alpha of add, clamp bounds, ...).
// Integers are kept exactly beside the doubles: an int64 tensor plus
// 2^53 + 1 must not round through a double.
struct OpParams {
  double a = 0.0;
  double b = 0.0;
  int64_t ia = 0;
  int64_t ib = 0;
  bool has_a = false;
  bool has_b = false;
};

// The parameter as the op's element type: the exact integer for integer ops.
template <typename T>
T param_as(double d, int64_t i) {
  if constexpr (std::is_integral_v<T>) {
    return static_cast<T>(i);
  } else {
    return static_cast<T>(d);
  }
}

enum class UnaryKind : uint8_t {
  Neg, Exp, Log, Sqrt, Abs, Sign, Relu, Sigmoid, Tanh, Gelu, GeluTanh, Clamp,
  PowScalar, AddScalar, MulScalar, DivScalar, RSubScalar, RDivScalar, LogicalNot,
  Sin, Cos, Log1p, Expm1, Rsqrt, Floor, Round,
};

enum class BinaryKind : uint8_t {
  Add, Sub, Mul, Div, Pow, Maximum, Minimum,
  Eq, Ne, Lt, Le, Gt, Ge, LogicalAnd, LogicalOr,
  // Backward formulas that would otherwise need several passes over memory.
  ReluBackward, SigmoidBackward, TanhBackward, GeluBackward, GeluTanhBackward, ClampBackward,
};

// True for the kinds whose result is bool whatever the inputs.
inline bool binary_returns_bool(BinaryKind k) {
  return k >= BinaryKind::Eq && k <= BinaryKind::LogicalOr;
}

constexpr double kSqrt1_2 = 0.70710678118654752440;
constexpr double kSqrt2OverPi = 0.79788456080286535588;
constexpr double kInvSqrt2Pi = 0.39894228040143267794;

// ---- unary -----------------------------------------------------------------
template <typename T> struct NegOp { TINY_HOST_DEVICE T operator()(T x) const { return -x; } };
template <typename T> struct ExpOp { TINY_HOST_DEVICE T operator()(T x) const { return t_exp(x); } };
template <typename T> struct LogOp { TINY_HOST_DEVICE T operator()(T x) const { return t_log(x); } };
template <typename T> struct SqrtOp { TINY_HOST_DEVICE T operator()(T x) const { return t_sqrt(x); } };
template <typename T> struct SinOp { TINY_HOST_DEVICE T operator()(T x) const { return t_sin(x); } };
template <typename T> struct CosOp { TINY_HOST_DEVICE T operator()(T x) const { return t_cos(x); } };
template <typename T> struct Log1pOp { TINY_HOST_DEVICE T operator()(T x) const { return t_log1p(x); } };
template <typename T> struct Expm1Op { TINY_HOST_DEVICE T operator()(T x) const { return t_expm1(x); } };
template <typename T> struct RsqrtOp { TINY_HOST_DEVICE T operator()(T x) const { return T(1) / t_sqrt(x); } };
template <typename T> struct FloorOp { TINY_HOST_DEVICE T operator()(T x) const { return t_floor(x); } };
template <typename T> struct RoundOp { TINY_HOST_DEVICE T operator()(T x) const { return t_round(x); } };
template <typename T> struct AbsOp { TINY_HOST_DEVICE T operator()(T x) const { return t_abs(x); } };
template <typename T> struct SignOp {
  TINY_HOST_DEVICE T operator()(T x) const {
    if constexpr (std::is_unsigned_v<T>) {
      return static_cast<T>(x != T(0));
    } else {
      return static_cast<T>((T(0) < x) - (x < T(0)));
    }
  }
};
template <typename T> struct ReluOp {
  // NaN stays NaN, as PyTorch's clamp_min(0) does.
  TINY_HOST_DEVICE T operator()(T x) const { return (t_isnan(x) || x > T(0)) ? x : T(0); }
};
template <typename T> struct SigmoidOp {
  TINY_HOST_DEVICE T operator()(T x) const { return T(1) / (T(1) + t_exp(-x)); }
};
template <typename T> struct TanhOp { TINY_HOST_DEVICE T operator()(T x) const { return t_tanh(x); } };
template <typename T> struct GeluOp {
  TINY_HOST_DEVICE T operator()(T x) const { return T(0.5) * x * (T(1) + t_erf(x * T(kSqrt1_2))); }
};
template <typename T> struct GeluTanhOp {
  TINY_HOST_DEVICE T operator()(T x) const {
    const T inner = T(kSqrt2OverPi) * (x + T(0.044715) * x * x * x);
    return T(0.5) * x * (T(1) + t_tanh(inner));
  }
};
template <typename T> struct ClampOp {
  T lo, hi;
  bool has_lo, has_hi;
  TINY_HOST_DEVICE T operator()(T x) const {
    if (t_isnan(x)) return x;
    if (has_lo && x < lo) x = lo;
    if (has_hi && x > hi) x = hi;
    return x;
  }
};
template <typename T> struct PowScalarOp {
  T e;
  TINY_HOST_DEVICE T operator()(T x) const {
    if constexpr (std::is_integral_v<T>) {
      return t_pow(x, e);
    } else {
      // The common exponents are exact and cheaper than pow().
      if (e == T(2)) return x * x;
      if (e == T(1)) return x;
      if (e == T(0.5)) return t_sqrt(x);
      if (e == T(-1)) return T(1) / x;
      return t_pow(x, e);
    }
  }
};
template <typename T> struct AddScalarOp { T c; TINY_HOST_DEVICE T operator()(T x) const { return x + c; } };
template <typename T> struct MulScalarOp { T c; TINY_HOST_DEVICE T operator()(T x) const { return x * c; } };
template <typename T> struct DivScalarOp { T c; TINY_HOST_DEVICE T operator()(T x) const { return x / c; } };
template <typename T> struct RSubScalarOp { T c; TINY_HOST_DEVICE T operator()(T x) const { return c - x; } };
template <typename T> struct RDivScalarOp { T c; TINY_HOST_DEVICE T operator()(T x) const { return c / x; } };
struct LogicalNotOp { TINY_HOST_DEVICE bool operator()(bool x) const { return !x; } };

// ---- binary ----------------------------------------------------------------
template <typename T> struct AddOp { T alpha; TINY_HOST_DEVICE T operator()(T a, T b) const { return a + alpha * b; } };
template <typename T> struct SubOp { T alpha; TINY_HOST_DEVICE T operator()(T a, T b) const { return a - alpha * b; } };
template <typename T> struct MulOp { TINY_HOST_DEVICE T operator()(T a, T b) const { return a * b; } };
template <typename T> struct DivOp { TINY_HOST_DEVICE T operator()(T a, T b) const { return a / b; } };
template <typename T> struct PowOp { TINY_HOST_DEVICE T operator()(T a, T b) const { return t_pow(a, b); } };
template <typename T> struct MaximumOp {
  TINY_HOST_DEVICE T operator()(T a, T b) const { return t_isnan(a) ? a : (t_isnan(b) ? b : (a > b ? a : b)); }
};
template <typename T> struct MinimumOp {
  TINY_HOST_DEVICE T operator()(T a, T b) const { return t_isnan(a) ? a : (t_isnan(b) ? b : (a < b ? a : b)); }
};
template <typename T> struct EqOp { TINY_HOST_DEVICE bool operator()(T a, T b) const { return a == b; } };
template <typename T> struct NeOp { TINY_HOST_DEVICE bool operator()(T a, T b) const { return a != b; } };
template <typename T> struct LtOp { TINY_HOST_DEVICE bool operator()(T a, T b) const { return a < b; } };
template <typename T> struct LeOp { TINY_HOST_DEVICE bool operator()(T a, T b) const { return a <= b; } };
template <typename T> struct GtOp { TINY_HOST_DEVICE bool operator()(T a, T b) const { return a > b; } };
template <typename T> struct GeOp { TINY_HOST_DEVICE bool operator()(T a, T b) const { return a >= b; } };
template <typename T> struct LogicalAndOp { TINY_HOST_DEVICE bool operator()(T a, T b) const { return a && b; } };
template <typename T> struct LogicalOrOp { TINY_HOST_DEVICE bool operator()(T a, T b) const { return a || b; } };

// grad * relu'(x), given the forward output y = relu(x).
template <typename T> struct ReluBackwardOp {
  TINY_HOST_DEVICE T operator()(T grad, T y) const { return y > T(0) ? grad : T(0); }
};
// grad * sigmoid'(x), given y = sigmoid(x).
template <typename T> struct SigmoidBackwardOp {
  TINY_HOST_DEVICE T operator()(T grad, T y) const { return grad * y * (T(1) - y); }
};
// grad * tanh'(x), given y = tanh(x).
template <typename T> struct TanhBackwardOp {
  TINY_HOST_DEVICE T operator()(T grad, T y) const { return grad * (T(1) - y * y); }
};
// grad * gelu'(x) for the exact (erf) form.
template <typename T> struct GeluBackwardOp {
  TINY_HOST_DEVICE T operator()(T grad, T x) const {
    const T cdf = T(0.5) * (T(1) + t_erf(x * T(kSqrt1_2)));
    const T pdf = T(kInvSqrt2Pi) * t_exp(T(-0.5) * x * x);
    return grad * (cdf + x * pdf);
  }
};
// grad * gelu'(x) for the tanh approximation.
template <typename T> struct GeluTanhBackwardOp {
  TINY_HOST_DEVICE T operator()(T grad, T x) const {
    const T x3 = x * x * x;
    const T inner = T(kSqrt2OverPi) * (x + T(0.044715) * x3);
    const T th = t_tanh(inner);
    const T dinner = T(kSqrt2OverPi) * (T(1) + T(3) * T(0.044715) * x * x);
    return grad * (T(0.5) * (T(1) + th) + T(0.5) * x * (T(1) - th * th) * dinner);
  }
};
// grad where min <= x <= max (bounds included, as in PyTorch), else 0.
template <typename T> struct ClampBackwardOp {
  T lo, hi;
  bool has_lo, has_hi;
  TINY_HOST_DEVICE T operator()(T grad, T x) const {
    const bool inside = (!has_lo || x >= lo) && (!has_hi || x <= hi);
    return inside ? grad : T(0);
  }
};

// ---- ternary ---------------------------------------------------------------
template <typename T> struct WhereOp {
  TINY_HOST_DEVICE T operator()(bool c, T a, T b) const { return c ? a : b; }
};

// ---- visitors: op kind -> struct ---------------------------------------------
// `fn` receives the op struct; the visitors run on the host and pick the struct
// once per call, so the loops that use it are compiled per op.

// Calls fn(op) for unary ops whose result has the input's dtype T.
template <typename T, typename Fn>
bool visit_unary_op(UnaryKind kind, const OpParams& p, Fn&& fn) {
  const T a = param_as<T>(p.a, p.ia);
  switch (kind) {
    case UnaryKind::Neg: if constexpr (!std::is_same_v<T, bool>) { fn(NegOp<T>{}); return true; } break;
    case UnaryKind::Abs: if constexpr (!std::is_same_v<T, bool>) { fn(AbsOp<T>{}); return true; } break;
    case UnaryKind::Sign: if constexpr (!std::is_same_v<T, bool>) { fn(SignOp<T>{}); return true; } break;
    case UnaryKind::Relu: if constexpr (!std::is_same_v<T, bool>) { fn(ReluOp<T>{}); return true; } break;
    case UnaryKind::Clamp:
      if constexpr (!std::is_same_v<T, bool>) {
        fn(ClampOp<T>{a, param_as<T>(p.b, p.ib), p.has_a, p.has_b});
        return true;
      }
      break;
    case UnaryKind::PowScalar: if constexpr (!std::is_same_v<T, bool>) { fn(PowScalarOp<T>{a}); return true; } break;
    case UnaryKind::AddScalar: if constexpr (!std::is_same_v<T, bool>) { fn(AddScalarOp<T>{a}); return true; } break;
    case UnaryKind::MulScalar: if constexpr (!std::is_same_v<T, bool>) { fn(MulScalarOp<T>{a}); return true; } break;
    case UnaryKind::RSubScalar: if constexpr (!std::is_same_v<T, bool>) { fn(RSubScalarOp<T>{a}); return true; } break;
    case UnaryKind::DivScalar: if constexpr (std::is_floating_point_v<T>) { fn(DivScalarOp<T>{a}); return true; } break;
    case UnaryKind::RDivScalar: if constexpr (std::is_floating_point_v<T>) { fn(RDivScalarOp<T>{a}); return true; } break;
    case UnaryKind::Exp: if constexpr (std::is_floating_point_v<T>) { fn(ExpOp<T>{}); return true; } break;
    case UnaryKind::Log: if constexpr (std::is_floating_point_v<T>) { fn(LogOp<T>{}); return true; } break;
    case UnaryKind::Sqrt: if constexpr (std::is_floating_point_v<T>) { fn(SqrtOp<T>{}); return true; } break;
    case UnaryKind::Sigmoid: if constexpr (std::is_floating_point_v<T>) { fn(SigmoidOp<T>{}); return true; } break;
    case UnaryKind::Tanh: if constexpr (std::is_floating_point_v<T>) { fn(TanhOp<T>{}); return true; } break;
    case UnaryKind::Gelu: if constexpr (std::is_floating_point_v<T>) { fn(GeluOp<T>{}); return true; } break;
    case UnaryKind::GeluTanh: if constexpr (std::is_floating_point_v<T>) { fn(GeluTanhOp<T>{}); return true; } break;
    case UnaryKind::LogicalNot: if constexpr (std::is_same_v<T, bool>) { fn(LogicalNotOp{}); return true; } break;
    case UnaryKind::Sin: if constexpr (std::is_floating_point_v<T>) { fn(SinOp<T>{}); return true; } break;
    case UnaryKind::Cos: if constexpr (std::is_floating_point_v<T>) { fn(CosOp<T>{}); return true; } break;
    case UnaryKind::Log1p: if constexpr (std::is_floating_point_v<T>) { fn(Log1pOp<T>{}); return true; } break;
    case UnaryKind::Expm1: if constexpr (std::is_floating_point_v<T>) { fn(Expm1Op<T>{}); return true; } break;
    case UnaryKind::Rsqrt: if constexpr (std::is_floating_point_v<T>) { fn(RsqrtOp<T>{}); return true; } break;
    case UnaryKind::Floor: if constexpr (std::is_floating_point_v<T>) { fn(FloorOp<T>{}); return true; } break;
    case UnaryKind::Round: if constexpr (std::is_floating_point_v<T>) { fn(RoundOp<T>{}); return true; } break;
  }
  return false;
}

// Calls fn(op) for binary ops on two T inputs; the result is T or bool.
template <typename T, typename Fn>
bool visit_binary_op(BinaryKind kind, const OpParams& p, Fn&& fn) {
  constexpr bool kArith = !std::is_same_v<T, bool>;
  constexpr bool kFloat = std::is_floating_point_v<T>;
  const T a = param_as<T>(p.a, p.ia);
  const T b = param_as<T>(p.b, p.ib);
  switch (kind) {
    // On bool, + and max are logical or, * and min logical and (as in PyTorch).
    case BinaryKind::Add: if constexpr (kArith) fn(AddOp<T>{a}); else fn(LogicalOrOp<T>{}); return true;
    case BinaryKind::Sub: if constexpr (kArith) { fn(SubOp<T>{a}); return true; } break;
    case BinaryKind::Mul: if constexpr (kArith) fn(MulOp<T>{}); else fn(LogicalAndOp<T>{}); return true;
    case BinaryKind::Div: if constexpr (kFloat) { fn(DivOp<T>{}); return true; } break;
    case BinaryKind::Pow: if constexpr (kArith) { fn(PowOp<T>{}); return true; } break;
    case BinaryKind::Maximum: if constexpr (kArith) fn(MaximumOp<T>{}); else fn(LogicalOrOp<T>{}); return true;
    case BinaryKind::Minimum: if constexpr (kArith) fn(MinimumOp<T>{}); else fn(LogicalAndOp<T>{}); return true;
    case BinaryKind::Eq: fn(EqOp<T>{}); return true;
    case BinaryKind::Ne: fn(NeOp<T>{}); return true;
    case BinaryKind::Lt: fn(LtOp<T>{}); return true;
    case BinaryKind::Le: fn(LeOp<T>{}); return true;
    case BinaryKind::Gt: fn(GtOp<T>{}); return true;
    case BinaryKind::Ge: fn(GeOp<T>{}); return true;
    case BinaryKind::LogicalAnd: fn(LogicalAndOp<T>{}); return true;
    case BinaryKind::LogicalOr: fn(LogicalOrOp<T>{}); return true;
    case BinaryKind::ReluBackward: if constexpr (kFloat) { fn(ReluBackwardOp<T>{}); return true; } break;
    case BinaryKind::SigmoidBackward: if constexpr (kFloat) { fn(SigmoidBackwardOp<T>{}); return true; } break;
    case BinaryKind::TanhBackward: if constexpr (kFloat) { fn(TanhBackwardOp<T>{}); return true; } break;
    case BinaryKind::GeluBackward: if constexpr (kFloat) { fn(GeluBackwardOp<T>{}); return true; } break;
    case BinaryKind::GeluTanhBackward: if constexpr (kFloat) { fn(GeluTanhBackwardOp<T>{}); return true; } break;
    case BinaryKind::ClampBackward:
      if constexpr (kFloat) { fn(ClampBackwardOp<T>{a, b, p.has_a, p.has_b}); return true; }
      break;
  }
  return false;
}

}  // namespace tiny::kernels
