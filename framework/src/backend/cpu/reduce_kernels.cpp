// CPU drivers for reductions (sum/max/min and argmax/argmin).
#include "backend/stubs/reduce.h"
#include "backend/cpu/loops.h"
#include "backend/dtype_dispatch.h"

namespace tiny::cpu {

using namespace kernels;

void reduce_kernel(ReduceIter& iter, ReduceKind kind) {
  TINY_DISPATCH_NUMERIC(iter.input.dtype(), "reduce", [&] {
    char* out = iter.outputs[0].unsafe_impl()->data();
    // A 16-bit input may have a float32 output (mean sums in float32 before it
    // divides, as PyTorch): then the accumulator is stored without rounding.
    auto run = [&](auto out_value) {
      using out_t = decltype(out_value);
      auto store = [&](int64_t o, opmath_t value) {
        int64_t offs[3];
        iter.out_calc.get(o, offs);
        reinterpret_cast<out_t*>(out)[offs[1]] = static_cast<out_t>(value);
      };
      // 16-bit floats accumulate in float (opmath_t) and round once per output.
      switch (kind) {
        case ReduceKind::Sum: reduce_loop<scalar_t>(iter, SumOp<opmath_t>{}, store); break;
        case ReduceKind::Max: reduce_loop<scalar_t>(iter, MaxOp<opmath_t>{}, store); break;
        case ReduceKind::Min: reduce_loop<scalar_t>(iter, MinOp<opmath_t>{}, store); break;
      }
    };
    // ops/reduce.cpp owns the dtype rule: the output has the input's dtype,
    // or float32 for a 16-bit input (its accumulator, stored without rounding).
    if constexpr (is_reduced_float_v<scalar_t>) {
      if (iter.outputs[0].dtype() != iter.input.dtype()) return run(opmath_t{});
    }
    run(scalar_t{});
  });
}

void arg_reduce_kernel(ReduceIter& iter, bool is_max) {
  TINY_DISPATCH_NUMERIC(iter.input.dtype(), "argmax", [&] {
    char* values = iter.outputs[0].unsafe_impl()->data();
    char* indices = iter.num_outputs > 1 ? iter.outputs[1].unsafe_impl()->data() : nullptr;
    // outputs[0] holds values, outputs[1] (optional) the int64 indices; for
    // argmax alone outputs[0] is the int64 index tensor.
    const bool values_are_indices = iter.num_outputs == 1;
    auto store = [&](int64_t o, ValueIndex<opmath_t> acc) {
      int64_t offs[3];
      iter.out_calc.get(o, offs);
      if (values_are_indices) {
        reinterpret_cast<int64_t*>(values)[offs[1]] = acc.index;
      } else {
        reinterpret_cast<scalar_t*>(values)[offs[1]] = acc.value;
        reinterpret_cast<int64_t*>(indices)[offs[2]] = acc.index;
      }
    };
    if (is_max) {
      reduce_loop<scalar_t>(iter, ArgExtremumOp<opmath_t, true>{}, store);
    } else {
      reduce_loop<scalar_t>(iter, ArgExtremumOp<opmath_t, false>{}, store);
    }
  });
}

TINY_REGISTER_KERNEL(reduce_stub, CPU, reduce_kernel);
TINY_REGISTER_KERNEL(arg_reduce_stub, CPU, arg_reduce_kernel);

}  // namespace tiny::cpu
