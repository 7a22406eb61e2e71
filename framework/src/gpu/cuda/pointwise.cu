// CUDA drivers for pointwise ops: the model the other CUDA drivers follow.
// The arithmetic is the op structs of kernels/pointwise_ops.h, the very ones
// the CPU drivers run; this file holds only the loop (grid-stride over an
// OffsetCalculator) and the launcher.
//
// Not used by tiny yet: the CUDA backend's op registration comes later. For
// now the GPU-only tests run it, and every CUDA build compiles it for the
// configured architectures (80 in CI).
#include "gpu/cuda/pointwise.h"

#include "backend/dtype_dispatch.h"
#include "gpu/cuda/launch.cuh"

namespace tiny::cuda_backend {

using kernels::OffsetCalculator;

// ---- kernels ---------------------------------------------------------------------

// Any layout: each element's offsets come from the calculator (broadcasting, strides).
template <typename T, typename Op>
__global__ void unary_kernel(T* out, const T* in, int64_t n, OffsetCalculator<2> calc, Op op) {
  grid_stride_for(n, [&](int64_t i) {
    int64_t offsets[2];
    calc.get(i, offsets);
    out[offsets[0]] = op(in[offsets[1]]);
  });
}

// Both operands contiguous: no index arithmetic beyond i.
template <typename T, typename Op>
__global__ void unary_kernel_contiguous(T* out, const T* in, int64_t n, Op op) {
  grid_stride_for(n, [&](int64_t i) { out[i] = op(in[i]); });
}

// ---- launchers -------------------------------------------------------------------

namespace {

bool is_contiguous(const OffsetCalculator<2>& calc) {
  return calc.ndim == 0 || (calc.ndim == 1 && calc.strides[0][0] == 1 && calc.strides[1][0] == 1);
}

}  // namespace

void launch_unary(void* out, const void* in, Dtype dtype, kernels::UnaryKind kind, const kernels::OpParams& params,
                  const OffsetCalculator<2>& calc, int64_t numel, cudaStream_t stream) {
  TINY_DISPATCH_ALL(dtype, "launch_unary", [&] {
    auto* o = static_cast<scalar_t*>(out);
    const auto* x = static_cast<const scalar_t*>(in);
    // 16-bit floats: the op struct computes in float; loads widen, stores round.
    const bool found = kernels::visit_unary_op<opmath_t>(kind, params, [&](auto op) {
      if (numel == 0) return;
      const unsigned int grid = grid_size(numel);
      if (is_contiguous(calc)) {
        unary_kernel_contiguous<<<grid, kBlockSize, 0, stream>>>(o, x, numel, op);
        check_launch("unary_kernel_contiguous");
      } else {
        unary_kernel<<<grid, kBlockSize, 0, stream>>>(o, x, numel, calc, op);
        check_launch("unary_kernel");
      }
    });
    TINY_CHECK(found, DtypeError, "launch_unary: unary op ", static_cast<int>(kind),
               " is not defined for dtype code ", static_cast<int>(dtype));
  });
}

}  // namespace tiny::cuda_backend
