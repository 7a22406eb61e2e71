// CPU drivers for pointwise ops: pick the op struct, run pointwise_loop.
#include "backend/stubs/pointwise.h"
#include "kernels/kind_names.h"
#include "backend/cpu/loops.h"
#include "backend/dtype_dispatch.h"

namespace tiny::cpu {

using namespace kernels;

void unary_kernel(TensorIter& iter, UnaryKind kind, const OpParams& params) {
  TINY_DISPATCH_ALL(iter.dtype(1), "unary op", [&] {
    // 16-bit floats: the op runs on float (opmath_t); loads widen, the store rounds.
    const bool found = visit_unary_op<opmath_t>(kind, params, [&](auto op) {
      pointwise_loop_opmath<scalar_t, scalar_t>(iter, op);
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
      pointwise_loop_opmath<out_t, scalar_t, scalar_t>(iter, op);
    });
    TINY_CHECK(found, DtypeError, "\"", kind_name(kind), "\" not implemented for '", dtype_name(in),
               "'");
  });
}

void where_kernel(TensorIter& iter) {
  TINY_DISPATCH_ALL(iter.dtype(0), "where", [&] {
    pointwise_loop<scalar_t, bool, scalar_t, scalar_t>(iter, WhereOp<scalar_t>{});
  });
}

void copy_kernel(TensorIter& iter) {
  TINY_DISPATCH_ALL(iter.dtype(0), "copy_", [&] {
    using dst_t = scalar_t;
    TINY_DISPATCH_ALL(iter.dtype(1), "copy_", [&] {
      if constexpr (std::is_same_v<dst_t, Half> != std::is_same_v<scalar_t, Half>) {
        // To or from float16, through float (as Half's conversions go): the
        // float16 side converts in bulk. Half to Half stays a copy of bits.
        using src_t = tile_value_t<scalar_t>;
        using result_t = tile_value_t<dst_t>;
        pointwise_loop_opmath<dst_t, scalar_t>(iter, [](src_t x) { return static_cast<result_t>(x); });
      } else {
        pointwise_loop<dst_t, scalar_t>(iter, [](scalar_t x) { return static_cast<dst_t>(x); });
      }
    });
  });
}

void fill_kernel(TensorIter& iter, const Scalar& value) {
  TINY_DISPATCH_ALL(iter.dtype(0), "fill_", [&] {
    const scalar_t v = value.to<scalar_t>();
    pointwise_loop<scalar_t>(iter, [v]() { return v; });
  });
}

void arange_kernel(const Tensor& out, double start, double step) {
  TINY_DISPATCH_NUMERIC(out.dtype(), "arange", [&] {
    scalar_t* data = out.data_ptr<scalar_t>();
    runtime::parallel_for(0, out.numel(), kPointwiseGrain, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) data[i] = static_cast<scalar_t>(start + static_cast<double>(i) * step);
    });
  });
}

TINY_REGISTER_KERNEL(unary_stub, CPU, unary_kernel);
TINY_REGISTER_KERNEL(binary_stub, CPU, binary_kernel);
TINY_REGISTER_KERNEL(where_stub, CPU, where_kernel);
TINY_REGISTER_KERNEL(copy_stub, CPU, copy_kernel);
TINY_REGISTER_KERNEL(fill_stub, CPU, fill_kernel);
TINY_REGISTER_KERNEL(arange_stub, CPU, arange_kernel);

}  // namespace tiny::cpu
