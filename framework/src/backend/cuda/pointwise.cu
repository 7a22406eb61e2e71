// CUDA drivers for pointwise ops (unary, binary, where, copy/cast, fill) and
// arange. The arithmetic is the op structs of kernels/pointwise_ops.h, the
// very ones the CPU drivers run; here is one grid-stride loop over a
// TensorIter (contiguous operands index by i, any other layout goes through
// the offset calculator) and its launcher.
#include <utility>

#include "backend/cuda/common.cuh"
#include "backend/stubs/pointwise.h"
#include "kernels/kind_names.h"

namespace tiny::cuda_backend {

using namespace kernels;

namespace {

// A TensorIter cut to its first N operands, by value for the kernel.
template <int N>
struct PointwiseArgs {
  char* data[N];
  OffsetCalculator<N> calc;
  int64_t n;
  bool contiguous;  // every operand moves by one element per index: no offset arithmetic
};

template <int N>
PointwiseArgs<N> pointwise_args(const TensorIter& iter) {
  PointwiseArgs<N> args{};
  args.n = iter.numel;
  args.calc.ndim = iter.calc.ndim;
  args.contiguous = iter.calc.ndim <= 1;
  for (int d = 0; d < iter.calc.ndim; ++d) args.calc.sizes[d] = iter.calc.sizes[d];
  for (int k = 0; k < N; ++k) {
    args.data[k] = iter.data[k];
    for (int d = 0; d < iter.calc.ndim; ++d) args.calc.strides[k][d] = iter.calc.strides[k][d];
    if (iter.calc.ndim == 1 && iter.calc.strides[k][0] != 1) args.contiguous = false;
  }
  return args;
}

// out = f(inputs...) at one element, given each operand's element offset.
template <typename out_t, typename... in_t, typename F, size_t... I>
__device__ __forceinline__ void apply_at(char* const* data, const int64_t* offsets, const F& f,
                                         std::index_sequence<I...>) {
  reinterpret_cast<out_t*>(data[0])[offsets[0]] = f(reinterpret_cast<const in_t*>(data[I + 1])[offsets[I + 1]]...);
}

// (CUDA wants a __global__ template's pack last: the functor type comes first.)
template <typename F, typename out_t, typename... in_t>
__global__ void pointwise_kernel(PointwiseArgs<1 + sizeof...(in_t)> args, F f) {
  constexpr int N = 1 + sizeof...(in_t);
  grid_stride_for(args.n, [&](int64_t i) {
    int64_t offsets[N];
    if (args.contiguous) {
      for (int k = 0; k < N; ++k) offsets[k] = i;
    } else {
      args.calc.get(i, offsets);
    }
    apply_at<out_t, in_t...>(args.data, offsets, f, std::index_sequence_for<in_t...>{});
  });
}

// Launches out = f(inputs...) over the iterator on its device's current stream.
template <typename out_t, typename... in_t, typename F>
void launch_pointwise(const TensorIter& iter, const F& f, const char* name) {
  if (iter.numel == 0) return;
  constexpr int N = 1 + sizeof...(in_t);
  const LaunchContext ctx(device_of(iter.operands[0]));
  const PointwiseArgs<N> args = pointwise_args<N>(iter);
  pointwise_kernel<F, out_t, in_t...><<<grid_size(iter.numel), kBlockSize, 0, ctx.stream>>>(args, f);
  ctx.launched(name);
}

// The elementwise functors that pointwise_ops.h leaves to the drivers.
template <typename dst_t, typename src_t>
struct CastOp {
  TINY_HOST_DEVICE dst_t operator()(src_t x) const { return static_cast<dst_t>(x); }
};

template <typename T>
struct FillOp {
  T value;
  TINY_HOST_DEVICE T operator()() const { return value; }
};

// start + i * step in double, rounded once per operation as on the CPU
// (no fused multiply-add), then converted: the same values as cpu::arange_kernel.
template <typename T>
__global__ void arange_kernel_impl(T* out, int64_t n, double start, double step) {
  grid_stride_for(n, [&](int64_t i) { out[i] = static_cast<T>(__dadd_rn(start, __dmul_rn(static_cast<double>(i), step))); });
}

}  // namespace

void unary_kernel(TensorIter& iter, UnaryKind kind, const OpParams& params) {
  TINY_DISPATCH_ALL(iter.dtype(1), "unary op", [&] {
    // 16-bit floats: the op runs on float (opmath_t); loads widen, the store rounds.
    const bool found = visit_unary_op<opmath_t>(kind, params, [&](auto op) {
      launch_pointwise<scalar_t, scalar_t>(iter, op, "unary");
    });
    TINY_CHECK(found, DtypeError, "\"", kind_name(kind), "\" not implemented for '",
               dtype_name(iter.dtype(1)), "'");
  });
}

void binary_kernel(TensorIter& iter, BinaryKind kind, const OpParams& params) {
  const Dtype in = iter.dtype(1);
  TINY_DISPATCH_ALL(in, "binary op", [&] {
    const bool found = visit_binary_op<opmath_t>(kind, params, [&](auto op) {
      using op_out_t = decltype(op(opmath_t{}, opmath_t{}));  // bool for comparisons
      using out_t = std::conditional_t<std::is_same_v<op_out_t, bool>, bool, scalar_t>;
      launch_pointwise<out_t, scalar_t, scalar_t>(iter, op, "binary");
    });
    TINY_CHECK(found, DtypeError, "\"", kind_name(kind), "\" not implemented for '", dtype_name(in),
               "'");
  });
}

void where_kernel(TensorIter& iter) {
  TINY_DISPATCH_ALL(iter.dtype(0), "where", [&] {
    launch_pointwise<scalar_t, bool, scalar_t, scalar_t>(iter, WhereOp<scalar_t>{}, "where");
  });
}

void copy_kernel(TensorIter& iter) {
  TINY_DISPATCH_ALL(iter.dtype(0), "copy_", [&] {
    using dst_t = scalar_t;
    TINY_DISPATCH_ALL(iter.dtype(1), "copy_", [&] {
      launch_pointwise<dst_t, scalar_t>(iter, CastOp<dst_t, scalar_t>{}, "copy_");
    });
  });
}

void fill_kernel(TensorIter& iter, const Scalar& value) {
  TINY_DISPATCH_ALL(iter.dtype(0), "fill_", [&] {
    launch_pointwise<scalar_t>(iter, FillOp<scalar_t>{value.to<scalar_t>()}, "fill_");
  });
}

void arange_kernel(const Tensor& out, double start, double step) {
  const int64_t n = out.numel();
  if (n == 0) return;
  TINY_DISPATCH_NUMERIC(out.dtype(), "arange", [&] {
    const LaunchContext ctx(device_of(out));
    arange_kernel_impl<scalar_t><<<grid_size(n), kBlockSize, 0, ctx.stream>>>(dev_ptr<scalar_t>(out), n, start, step);
    ctx.launched("arange");
  });
}

TINY_REGISTER_KERNEL(unary_stub, CUDA, unary_kernel);
TINY_REGISTER_KERNEL(binary_stub, CUDA, binary_kernel);
TINY_REGISTER_KERNEL(where_stub, CUDA, where_kernel);
TINY_REGISTER_KERNEL(copy_stub, CUDA, copy_kernel);
TINY_REGISTER_KERNEL(fill_stub, CUDA, fill_kernel);
TINY_REGISTER_KERNEL(arange_stub, CUDA, arange_kernel);

}  // namespace tiny::cuda_backend
