// The matrix product (see backend/dispatch.h); ops/linalg.cpp defines the stub.
#pragma once

#include <cstdint>

#include "backend/dispatch.h"
#include "tiny/dtype.h"

namespace tiny {

// Column-major GEMM with cuBLAS's arguments: C = alpha * op(A) * op(B) + beta * C,
// on the device's memory (the pointers are where the tensors' data is).
using GemmFn = void (*)(Dtype dtype, bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, double alpha,
                        const void* a, int64_t lda, const void* b, int64_t ldb, double beta, void* c, int64_t ldc);

TINY_DECLARE_DISPATCH(GemmFn, gemm_stub);

}  // namespace tiny
