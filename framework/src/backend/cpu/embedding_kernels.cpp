// CPU embedding lookup (a row gather) and its backward (a row scatter-add).
//
// The backward is deterministic: each column of grad_weight is summed in the
// order of the indices, and the parallel loop cuts the columns, never the
// indices, so two threads never add into the same element and the result is
// bitwise the same with any thread count.
#include <algorithm>
#include <cstring>
#include <type_traits>
#include <vector>

#include "backend/stubs/embedding.h"
#include "backend/cpu/loops.h"
#include "backend/dtype_dispatch.h"

namespace tiny::cpu {

namespace {

// Copied elements per parallel chunk of the gather (rows * dim).
constexpr int64_t kGatherGrain = kPointwiseGrain;

void check_index(int64_t index, int64_t position, int64_t num_embeddings) {
  TINY_CHECK(index >= 0 && index < num_embeddings, IndexError, "embedding: index ", index, " (at position ", position,
             " of the flattened indices) is out of range for an embedding with num_embeddings=", num_embeddings,
             " (valid indices are 0..", num_embeddings - 1, ")");
}

// out [n, dim] (contiguous) = weight[indices[i], :]; weight may be strided.
void embedding_kernel(const Tensor& out, const Tensor& weight, const Tensor& indices) {
  const int64_t n = indices.numel();
  const int64_t num = weight.size(0), dim = weight.size(1);
  const int64_t* idx = indices.data_ptr<int64_t>();
  for (int64_t i = 0; i < n; ++i) check_index(idx[i], i, num);
  if (n == 0 || dim == 0) return;
  const int64_t s0 = weight.stride(0), s1 = weight.stride(1);
  const int64_t grain = std::max<int64_t>(1, kGatherGrain / dim);
  TINY_DISPATCH_FLOATING(weight.dtype(), "embedding", [&] {
    const scalar_t* w = weight.data_ptr<scalar_t>();
    scalar_t* o = out.data_ptr<scalar_t>();
    runtime::parallel_for(0, n, grain, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) {
        const scalar_t* src = w + idx[i] * s0;
        scalar_t* dst = o + i * dim;
        if (s1 == 1) {
          std::memcpy(dst, src, static_cast<size_t>(dim) * sizeof(scalar_t));
        } else {
          for (int64_t c = 0; c < dim; ++c) dst[c] = src[c * s1];
        }
      }
    });
  });
}

// grad_weight [num, dim] (contiguous, zero-filled by the caller) += grad_out [n, dim] (contiguous) by rows.
void embedding_backward_kernel(const Tensor& grad_weight, const Tensor& grad_out, const Tensor& indices,
                               int64_t padding_idx) {
  const int64_t n = indices.numel();
  const int64_t num = grad_weight.size(0), dim = grad_weight.size(1);
  const int64_t* idx = indices.data_ptr<int64_t>();
  for (int64_t i = 0; i < n; ++i) check_index(idx[i], i, num);
  if (n == 0 || dim == 0) return;
  // Columns per chunk: about kPointwiseGrain additions each.
  const int64_t grain = std::max<int64_t>(1, kPointwiseGrain / n);
  TINY_DISPATCH_FLOATING(grad_weight.dtype(), "embedding_backward", [&] {
    scalar_t* gw = grad_weight.data_ptr<scalar_t>();
    const scalar_t* go = grad_out.data_ptr<scalar_t>();
    // 16-bit gradients are summed in a float copy and rounded once at the end.
    std::vector<opmath_t> widened;
    opmath_t* acc = nullptr;
    if constexpr (std::is_same_v<opmath_t, scalar_t>) {
      acc = reinterpret_cast<opmath_t*>(gw);  // the same type: accumulate in place
    } else {
      widened.assign(static_cast<size_t>(num * dim), opmath_t(0));
      acc = widened.data();
    }
    runtime::parallel_for(0, dim, grain, [&](int64_t c_begin, int64_t c_end) {
      for (int64_t i = 0; i < n; ++i) {
        if (idx[i] == padding_idx) continue;
        opmath_t* dst = acc + idx[i] * dim;
        const scalar_t* src = go + i * dim;
        for (int64_t c = c_begin; c < c_end; ++c) dst[c] += static_cast<opmath_t>(src[c]);
      }
      if constexpr (!std::is_same_v<opmath_t, scalar_t>) {
        for (int64_t r = 0; r < num; ++r) {
          for (int64_t c = c_begin; c < c_end; ++c) gw[r * dim + c] = scalar_t(acc[r * dim + c]);
        }
      }
    });
  });
}

}  // namespace

TINY_REGISTER_KERNEL(embedding_stub, CPU, embedding_kernel);
TINY_REGISTER_KERNEL(embedding_backward_stub, CPU, embedding_backward_kernel);

}  // namespace tiny::cpu
