// Embedding lookups and their gradient (see backend/dispatch.h);
// ops/embedding.cpp defines the stubs.
#pragma once

#include <cstdint>

#include "backend/dispatch.h"
#include "tiny/tensor.h"

namespace tiny {

// out[i, :] = weight[indices[i], :] (indices int64, any shape flattened; out contiguous [n, dim]).
using EmbeddingFn = void (*)(const Tensor& out, const Tensor& weight, const Tensor& indices);
// grad_weight[indices[i], :] += grad_out[i, :] (deterministic order; padding_idx rows skipped when >= 0).
using EmbeddingBackwardFn = void (*)(const Tensor& grad_weight, const Tensor& grad_out, const Tensor& indices,
                                     int64_t padding_idx);

TINY_DECLARE_DISPATCH(EmbeddingFn, embedding_stub);
TINY_DECLARE_DISPATCH(EmbeddingBackwardFn, embedding_backward_stub);

}  // namespace tiny
