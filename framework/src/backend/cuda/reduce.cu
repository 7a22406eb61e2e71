// CUDA drivers for reductions (sum/max/min, argmax/argmin) over a ReduceIter.
// The arithmetic is the identity/reduce/combine/project structs of
// kernels/reduce_ops.h. Two loops: one thread per output when each output
// folds few elements (every thread busy, neighbouring outputs read
// neighbouring memory), one block per output otherwise, its threads folding
// interleaved elements and merging them with block_reduce. Sums therefore add
// in another order than the CPU's blocks: equal within rounding (DESIGN.md
// section 5); max/min/argmax pick the same element (ties to the lowest index).
#include "backend/cuda/common.cuh"
#include "backend/stubs/reduce.h"
#include "tiny/ops.h"

namespace tiny::cuda_backend {

using namespace kernels;

namespace {

struct ReduceArgs {
  const char* input;
  OffsetCalculator<3> out_calc;  // kept dims: 0 = input offset, 1 and 2 = the outputs' offsets
  OffsetCalculator<1> red_calc;  // reduced dims: the input offset of each reduced element
  int64_t num_out;
  int64_t reduce_size;
};

// Folds the reduced elements begin, begin + step, ... of one output.
template <typename T, typename Op>
__device__ typename Op::acc_t fold(const ReduceArgs& a, const Op& op, const T* base, int64_t begin, int64_t step) {
  typename Op::acc_t acc = op.identity();
  const bool flat = a.red_calc.ndim <= 1;
  const int64_t flat_stride = a.red_calc.ndim == 1 ? a.red_calc.strides[0][0] : 0;
  for (int64_t r = begin; r < a.reduce_size; r += step) {
    int64_t offset[1];
    if (flat) {
      offset[0] = r * flat_stride;
    } else {
      a.red_calc.get(r, offset);
    }
    acc = op.reduce(acc, base[offset[0]], r);
  }
  return acc;
}

template <typename T, typename Op, typename Store>
__global__ void reduce_thread_per_output(ReduceArgs a, Op op, Store store) {
  grid_stride_for(a.num_out, [&](int64_t o) {
    int64_t offsets[3];
    a.out_calc.get(o, offsets);
    const T* base = reinterpret_cast<const T*>(a.input) + offsets[0];
    store(offsets, op.project(fold(a, op, base, 0, 1)));
  });
}

template <typename T, typename Op, typename Store>
__global__ void reduce_block_per_output(ReduceArgs a, Op op, Store store) {
  using acc_t = typename Op::acc_t;
  __shared__ acc_t shared[kReduceThreads];
  // Every thread of a block runs the same iterations (o depends on the block
  // only), as block_reduce requires.
  for (int64_t o = blockIdx.x; o < a.num_out; o += gridDim.x) {
    int64_t offsets[3];
    a.out_calc.get(o, offsets);
    const T* base = reinterpret_cast<const T*>(a.input) + offsets[0];
    acc_t acc = fold(a, op, base, threadIdx.x, blockDim.x);
    acc = block_reduce(acc, shared, [&](const acc_t& x, const acc_t& y) { return op.combine(x, y); });
    if (threadIdx.x == 0) store(offsets, op.project(acc));
  }
}

// Few outputs that each fold very many elements (a full sum: one output)
// would leave all but a few SMs idle with a block per output (a sum of 64M
// floats took 101 ms on an H100, PyTorch 95 us): each output is then split
// into `chunks` pieces, a block each, whose partial accumulators a second
// kernel combines (as PyTorch's split reductions do).
template <typename T, typename Op>
__global__ void reduce_split_partials(ReduceArgs a, Op op, int64_t chunks, typename Op::acc_t* partials) {
  using acc_t = typename Op::acc_t;
  __shared__ acc_t shared[kReduceThreads];
  const int64_t o = blockIdx.x / chunks, c = blockIdx.x % chunks;
  int64_t offsets[3];
  a.out_calc.get(o, offsets);
  const T* base = reinterpret_cast<const T*>(a.input) + offsets[0];
  acc_t acc = fold(a, op, base, c * blockDim.x + threadIdx.x, chunks * blockDim.x);
  acc = block_reduce(acc, shared, [&](const acc_t& x, const acc_t& y) { return op.combine(x, y); });
  if (threadIdx.x == 0) partials[blockIdx.x] = acc;
}

template <typename Op, typename Store>
__global__ void reduce_split_finish(ReduceArgs a, Op op, int64_t chunks, const typename Op::acc_t* partials,
                                    Store store) {
  using acc_t = typename Op::acc_t;
  __shared__ acc_t shared[kReduceThreads];
  const int64_t o = blockIdx.x;
  acc_t acc = op.identity();
  for (int64_t c = threadIdx.x; c < chunks; c += blockDim.x) acc = op.combine(acc, partials[o * chunks + c]);
  acc = block_reduce(acc, shared, [&](const acc_t& x, const acc_t& y) { return op.combine(x, y); });
  if (threadIdx.x == 0) {
    int64_t offsets[3];
    a.out_calc.get(o, offsets);
    store(offsets, op.project(acc));
  }
}

// Stores a reduced value, rounded once to the output's dtype.
template <typename out_t>
struct ValueStore {
  char* out;
  template <typename V>
  __device__ void operator()(const int64_t* offsets, V value) const {
    reinterpret_cast<out_t*>(out)[offsets[1]] = static_cast<out_t>(value);
  }
};

// Stores argmax/argmin: the index alone (outputs[0] is int64), or the value
// and the index (max/min along a dim).
template <typename scalar_t>
struct ArgStore {
  char* values;
  char* indices;
  bool values_are_indices;
  template <typename V>
  __device__ void operator()(const int64_t* offsets, ValueIndex<V> acc) const {
    if (values_are_indices) {
      reinterpret_cast<int64_t*>(values)[offsets[1]] = acc.index;
    } else {
      reinterpret_cast<scalar_t*>(values)[offsets[1]] = static_cast<scalar_t>(acc.value);
      reinterpret_cast<int64_t*>(indices)[offsets[2]] = acc.index;
    }
  }
};

ReduceArgs reduce_args(const ReduceIter& iter) {
  ReduceArgs a{};
  a.input = iter.input.unsafe_impl()->data();
  a.out_calc = iter.out_calc;
  a.red_calc = iter.red_calc;
  a.num_out = iter.num_out;
  a.reduce_size = iter.reduce_size;
  return a;
}

template <typename T, typename Op, typename Store>
void launch_reduce(const ReduceIter& iter, const Op& op, const Store& store, const char* name) {
  if (iter.num_out == 0) return;
  const ReduceArgs a = reduce_args(iter);
  const LaunchContext ctx(device_of(iter.input));
  // A block per output pays off when an output folds many elements and there
  // are not so many outputs that one thread each would already fill the GPU.
  const bool block_per_output = a.reduce_size > 64 && (a.num_out <= 4096 || a.reduce_size > 4096);
  // Split an output over several blocks when the outputs alone cannot keep the SMs busy.
  const int64_t chunks = std::min<int64_t>(ceil_div(a.reduce_size, int64_t{kReduceThreads} * 16),
                                           std::max<int64_t>(1, 4096 / a.num_out));
  if (block_per_output && a.num_out < 256 && chunks >= 4) {
    using acc_t = typename Op::acc_t;
    const int64_t blocks = a.num_out * chunks;  // at most 4096 + num_out
    const Tensor scratch = tiny::empty({ceil_div(blocks * static_cast<int64_t>(sizeof(acc_t)), int64_t{8})},
                                       TensorOptions(kInt64).device(iter.input.device()));
    auto* partials = reinterpret_cast<acc_t*>(scratch.unsafe_impl()->data());
    reduce_split_partials<T><<<static_cast<unsigned int>(blocks), kReduceThreads, 0, ctx.stream>>>(a, op, chunks,
                                                                                                  partials);
    ctx.launched(name);
    reduce_split_finish<<<static_cast<unsigned int>(a.num_out), reduce_threads(chunks), 0, ctx.stream>>>(
        a, op, chunks, partials, store);
    ctx.launched(name);
    return;  // the scratch goes back to the stream's pool, reusable by work queued after these kernels
  }
  if (block_per_output) {
    const unsigned int blocks = static_cast<unsigned int>(std::min<int64_t>(a.num_out, kMaxGridBlocks));
    reduce_block_per_output<T><<<blocks, reduce_threads(a.reduce_size), 0, ctx.stream>>>(a, op, store);
  } else {
    reduce_thread_per_output<T><<<grid_size(a.num_out), kBlockSize, 0, ctx.stream>>>(a, op, store);
  }
  ctx.launched(name);
}

}  // namespace

void reduce_kernel(ReduceIter& iter, ReduceKind kind) {
  TINY_DISPATCH_NUMERIC(iter.input.dtype(), "reduce", [&] {
    char* out = iter.outputs[0].unsafe_impl()->data();
    // A 16-bit input may have a float32 output (mean sums in float32 before it
    // divides, as PyTorch): then the accumulator is stored without rounding.
    auto run = [&](auto out_value) {
      using out_t = decltype(out_value);
      const ValueStore<out_t> store{out};
      // 16-bit floats accumulate in float (opmath_t) and round once per output.
      switch (kind) {
        case ReduceKind::Sum: launch_reduce<scalar_t>(iter, SumOp<opmath_t>{}, store, "sum"); break;
        case ReduceKind::Max: launch_reduce<scalar_t>(iter, MaxOp<opmath_t>{}, store, "max"); break;
        case ReduceKind::Min: launch_reduce<scalar_t>(iter, MinOp<opmath_t>{}, store, "min"); break;
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
    const ArgStore<scalar_t> store{iter.outputs[0].unsafe_impl()->data(),
                                   iter.num_outputs > 1 ? iter.outputs[1].unsafe_impl()->data() : nullptr,
                                   iter.num_outputs == 1};
    if (is_max) {
      launch_reduce<scalar_t>(iter, ArgExtremumOp<opmath_t, true>{}, store, "argmax");
    } else {
      launch_reduce<scalar_t>(iter, ArgExtremumOp<opmath_t, false>{}, store, "argmin");
    }
  });
}

TINY_REGISTER_KERNEL(reduce_stub, CUDA, reduce_kernel);
TINY_REGISTER_KERNEL(arg_reduce_stub, CUDA, arg_reduce_kernel);

}  // namespace tiny::cuda_backend
