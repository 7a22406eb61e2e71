// CPU drivers for reductions (sum/max/min and argmax/argmin).
#include "backend/cpu/kernels.h"
#include "backend/cpu/loops.h"
#include "backend/dtype_dispatch.h"

namespace tiny::cpu {

using namespace kernels;

void reduce_kernel(ReduceIter& iter, ReduceKind kind) {
  TINY_DISPATCH_NUMERIC(iter.input.dtype(), "reduce", [&] {
    char* out = iter.outputs[0].unsafe_impl()->data();
    auto store = [&](int64_t o, scalar_t value) {
      int64_t offs[3];
      iter.out_calc.get(o, offs);
      reinterpret_cast<scalar_t*>(out)[offs[1]] = value;
    };
    switch (kind) {
      case ReduceKind::Sum: reduce_loop<scalar_t>(iter, SumOp<scalar_t>{}, store); break;
      case ReduceKind::Max: reduce_loop<scalar_t>(iter, MaxOp<scalar_t>{}, store); break;
      case ReduceKind::Min: reduce_loop<scalar_t>(iter, MinOp<scalar_t>{}, store); break;
    }
  });
}

void arg_reduce_kernel(ReduceIter& iter, bool is_max) {
  TINY_DISPATCH_NUMERIC(iter.input.dtype(), "argmax", [&] {
    char* values = iter.outputs[0].unsafe_impl()->data();
    char* indices = iter.num_outputs > 1 ? iter.outputs[1].unsafe_impl()->data() : nullptr;
    // outputs[0] holds values, outputs[1] (optional) the int64 indices; for
    // argmax alone outputs[0] is the int64 index tensor.
    const bool values_are_indices = iter.num_outputs == 1;
    auto store = [&](int64_t o, ValueIndex<scalar_t> acc) {
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
      reduce_loop<scalar_t>(iter, ArgExtremumOp<scalar_t, true>{}, store);
    } else {
      reduce_loop<scalar_t>(iter, ArgExtremumOp<scalar_t, false>{}, store);
    }
  });
}

}  // namespace tiny::cpu
