// The pointwise kernel families (see backend/dispatch.h): the op structs they
// run are in kernels/pointwise_ops.h; the ops in ops/pointwise.cpp,
// ops/inplace.cpp, ops/copy.cpp and ops/creation.cpp define these stubs.
#pragma once

#include "backend/dispatch.h"
#include "core/tensor_iterator.h"
#include "kernels/pointwise_ops.h"
#include "tiny/scalar.h"

namespace tiny {

using UnaryFn = void (*)(TensorIter& iter, kernels::UnaryKind kind, const kernels::OpParams& params);
using BinaryFn = void (*)(TensorIter& iter, kernels::BinaryKind kind, const kernels::OpParams& params);
using IterFn = void (*)(TensorIter& iter);
using FillFn = void (*)(TensorIter& iter, const Scalar& value);
using ArangeFn = void (*)(const Tensor& out, double start, double step);

TINY_DECLARE_DISPATCH(UnaryFn, unary_stub);
TINY_DECLARE_DISPATCH(BinaryFn, binary_stub);
TINY_DECLARE_DISPATCH(IterFn, where_stub);
TINY_DECLARE_DISPATCH(IterFn, copy_stub);  // converts dtypes; same device
TINY_DECLARE_DISPATCH(FillFn, fill_stub);
TINY_DECLARE_DISPATCH(ArangeFn, arange_stub);

}  // namespace tiny
