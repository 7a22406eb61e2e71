// The reduction kernel families (see backend/dispatch.h): the accumulators are
// in kernels/reduce_ops.h; ops/reduce.cpp defines these stubs and owns the
// dtype rules (a 16-bit input may accumulate into a float32 output).
#pragma once

#include "backend/dispatch.h"
#include "core/tensor_iterator.h"
#include "kernels/reduce_ops.h"

namespace tiny {

using ReduceFn = void (*)(ReduceIter& iter, kernels::ReduceKind kind);
// outputs[0] the values and outputs[1] the int64 indices, or outputs[0] the
// indices alone (argmax, argmin).
using ArgReduceFn = void (*)(ReduceIter& iter, bool is_max);

TINY_DECLARE_DISPATCH(ReduceFn, reduce_stub);
TINY_DECLARE_DISPATCH(ArgReduceFn, arg_reduce_stub);

}  // namespace tiny
