// PyTorch's names of the pointwise and reduction kernels' kinds, the one
// table beside the enums: every backend's error messages and the memory
// tools (the shared kernel entries unary_kernel, binary_kernel and reduce
// name their allocation after them, core/op_scope.h) use it.
#pragma once

#include "kernels/pointwise_ops.h"
#include "kernels/reduce_ops.h"

namespace tiny::kernels {

inline const char* kind_name(UnaryKind kind) {
  using K = kernels::UnaryKind;
  switch (kind) {
    case K::Neg: return "neg";
    case K::Exp: return "exp";
    case K::Log: return "log";
    case K::Sqrt: return "sqrt";
    case K::Abs: return "abs";
    case K::Sign: return "sign";
    case K::Relu: return "relu";
    case K::Sigmoid: return "sigmoid";
    case K::Tanh: return "tanh";
    case K::Gelu:
    case K::GeluTanh: return "gelu";
    case K::Clamp: return "clamp";
    case K::PowScalar: return "pow";
    case K::AddScalar: return "add";
    case K::MulScalar: return "mul";
    case K::DivScalar:
    case K::RDivScalar: return "div";
    case K::RSubScalar: return "sub";
    case K::LogicalNot: return "logical_not";
    case K::Sin: return "sin";
    case K::Cos: return "cos";
    case K::Log1p: return "log1p";
    case K::Expm1: return "expm1";
    case K::Rsqrt: return "rsqrt";
    case K::Floor: return "floor";
    case K::Round: return "round";
  }
  return "unknown";
}

inline const char* kind_name(BinaryKind kind) {
  using K = kernels::BinaryKind;
  switch (kind) {
    case K::Add: return "add";
    case K::Sub: return "sub";
    case K::Mul: return "mul";
    case K::Div: return "div";
    case K::Pow: return "pow";
    case K::Maximum: return "maximum";
    case K::Minimum: return "minimum";
    case K::Eq: return "eq";
    case K::Ne: return "ne";
    case K::Lt: return "lt";
    case K::Le: return "le";
    case K::Gt: return "gt";
    case K::Ge: return "ge";
    case K::LogicalAnd: return "logical_and";
    case K::LogicalOr: return "logical_or";
    case K::ReluBackward: return "threshold_backward";
    case K::SigmoidBackward: return "sigmoid_backward";
    case K::TanhBackward: return "tanh_backward";
    case K::GeluBackward:
    case K::GeluTanhBackward: return "gelu_backward";
    case K::ClampBackward: return "clamp_backward";
  }
  return "unknown";
}

inline const char* kind_name(ReduceKind kind) {
  using K = kernels::ReduceKind;
  switch (kind) {
    case K::Sum: return "sum";
    case K::Max: return "max";
    case K::Min: return "min";
  }
  return "unknown";
}

}  // namespace tiny::kernels
