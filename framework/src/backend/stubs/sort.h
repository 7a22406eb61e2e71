// Sorting rows (see backend/dispatch.h): the order is kernels::sorts_before
// (kernels/sort_ops.h); ops/select_sort.cpp defines the stub and builds sort's
// values and gradient from the permutation with gather.
#pragma once

#include "backend/dispatch.h"
#include "tiny/tensor.h"

namespace tiny {

// indices (int64 [R, n], contiguous) = the stable permutation that sorts each
// row of rows ([R, n], contiguous, any dtype), ascending or descending.
using SortFn = void (*)(const Tensor& indices, const Tensor& rows, bool descending);

TINY_DECLARE_DISPATCH(SortFn, sort_stub);

}  // namespace tiny
