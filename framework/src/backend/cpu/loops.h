// The CPU drivers: run a host+device op struct over a TensorIter or a
// ReduceIter. Work is cut into chunks of a fixed number of elements, never
// into "one piece per thread", so a result never depends on the thread count.
#pragma once

#include <algorithm>
#include <cstdint>
#include <utility>
#include <vector>

#include "core/tensor_iterator.h"
#include "runtime/thread_pool.h"

namespace tiny::cpu {

// Elements per parallel chunk of a pointwise loop: big enough that the
// pool's hand-off (a few microseconds) is noise.
constexpr int64_t kPointwiseGrain = 32768;
// Elements folded sequentially before partial results are combined.
constexpr int64_t kReduceBlock = 4096;

// Calls row(ptrs, strides_in_bytes, n) for each run of the fastest dim inside [begin, end).
template <int N, typename RowFn>
void for_each_row(const TensorIter& iter, int64_t begin, int64_t end, RowFn&& row) {
  const auto& calc = iter.calc;
  int64_t elsize[N];
  for (int k = 0; k < N; ++k) elsize[k] = static_cast<int64_t>(element_size(iter.operands[k].dtype()));
  const int64_t inner = calc.ndim == 0 ? 1 : calc.sizes[0];
  int64_t step[N];
  for (int k = 0; k < N; ++k) step[k] = calc.ndim == 0 ? 0 : calc.strides[k][0] * elsize[k];
  int64_t i = begin;
  while (i < end) {
    int64_t offsets[TensorIter::kMaxOperands];
    calc.get(i, offsets);
    const int64_t n = std::min(inner - i % inner, end - i);
    char* ptrs[N];
    for (int k = 0; k < N; ++k) ptrs[k] = iter.data[k] + offsets[k] * elsize[k];
    row(ptrs, step, n);
    i += n;
  }
}

// out[i] = f(in0[i], ...) with a flat loop the compiler vectorises when all
// operands are contiguous, and a strided loop otherwise.
template <typename out_t, typename... in_t, typename F, size_t... I>
void pointwise_loop_impl(const TensorIter& iter, const F& f, std::index_sequence<I...>) {
  constexpr int N = 1 + sizeof...(in_t);
  runtime::parallel_for(0, iter.numel, kPointwiseGrain, [&](int64_t begin, int64_t end) {
    for_each_row<N>(iter, begin, end, [&](char** ptrs, const int64_t* step, int64_t n) {
      const bool contiguous = step[0] == static_cast<int64_t>(sizeof(out_t)) &&
                              ((step[I + 1] == static_cast<int64_t>(sizeof(in_t))) && ...);
      out_t* out = reinterpret_cast<out_t*>(ptrs[0]);
      if (contiguous) {
        for (int64_t i = 0; i < n; ++i) out[i] = f(reinterpret_cast<const in_t*>(ptrs[I + 1])[i]...);
      } else {
        for (int64_t i = 0; i < n; ++i) {
          *reinterpret_cast<out_t*>(ptrs[0] + i * step[0]) =
              f(*reinterpret_cast<const in_t*>(ptrs[I + 1] + i * step[I + 1])...);
        }
      }
    });
  });
}

template <typename out_t, typename... in_t, typename F>
void pointwise_loop(const TensorIter& iter, const F& f) {
  pointwise_loop_impl<out_t, in_t...>(iter, f, std::index_sequence_for<in_t...>{});
}

// Folds `op` over the reduced elements of every output element. Each output's
// elements are folded in blocks of kReduceBlock, and blocks are combined in
// order, whichever thread computed them.
template <typename T, typename Op, typename Store>
void reduce_loop(const ReduceIter& iter, const Op& op, const Store& store) {
  using acc_t = typename Op::acc_t;
  const int64_t num_out = iter.num_out;
  const int64_t size = iter.reduce_size;
  const char* in_base = iter.input.unsafe_impl()->data();
  const auto& rc = iter.red_calc;
  const bool flat = rc.ndim <= 1;
  const int64_t flat_stride = rc.ndim == 1 ? rc.strides[0][0] : 0;

  auto fold = [&](int64_t out_index, int64_t r_begin, int64_t r_end) {
    int64_t offs[3];
    iter.out_calc.get(out_index, offs);
    const T* base = reinterpret_cast<const T*>(in_base) + offs[0];
    acc_t acc = op.identity();
    if (flat) {
      for (int64_t r = r_begin; r < r_end; ++r) acc = op.reduce(acc, base[r * flat_stride], r);
    } else {
      for (int64_t r = r_begin; r < r_end; ++r) {
        int64_t roff[1];
        rc.get(r, roff);
        acc = op.reduce(acc, base[roff[0]], r);
      }
    }
    return acc;
  };

  const int64_t blocks = size <= kReduceBlock ? 1 : (size + kReduceBlock - 1) / kReduceBlock;

  // Column reductions (a bias gradient: sum over the batch of [B, N]): the
  // kept elements are adjacent in memory, so walk rows and update a strip of
  // accumulators instead of striding down each column. Each output still folds
  // its elements in order, in the same blocks as fold(), so the result is the
  // same as the general path's.
  const auto& oc = iter.out_calc;
  if (flat && rc.ndim == 1 && oc.ndim == 1 && oc.strides[0][0] == 1 && num_out > 1) {
    constexpr int64_t kStrip = 256;
    runtime::parallel_for(0, num_out, kStrip, [&](int64_t o0, int64_t o1) {
      acc_t total[kStrip], block[kStrip];
      const T* base = reinterpret_cast<const T*>(in_base);
      for (int64_t blk = 0; blk < blocks; ++blk) {
        for (int64_t o = o0; o < o1; ++o) block[o - o0] = op.identity();
        const int64_t r_end = std::min(size, (blk + 1) * kReduceBlock);
        for (int64_t r = blk * kReduceBlock; r < r_end; ++r) {
          const T* row = base + r * flat_stride;
          for (int64_t o = o0; o < o1; ++o) block[o - o0] = op.reduce(block[o - o0], row[o], r);
        }
        for (int64_t o = o0; o < o1; ++o) total[o - o0] = blk == 0 ? block[o - o0] : op.combine(total[o - o0], block[o - o0]);
      }
      for (int64_t o = o0; o < o1; ++o) store(o, op.project(total[o - o0]));
    });
    return;
  }

  if (blocks == 1) {
    const int64_t grain = std::max<int64_t>(1, kPointwiseGrain / std::max<int64_t>(size, 1));
    runtime::parallel_for(0, num_out, grain, [&](int64_t b, int64_t e) {
      for (int64_t o = b; o < e; ++o) store(o, op.project(fold(o, 0, size)));
    });
    return;
  }
  std::vector<acc_t> partial(static_cast<size_t>(num_out * blocks));
  const int64_t grain = std::max<int64_t>(1, kPointwiseGrain / kReduceBlock);
  runtime::parallel_for(0, num_out * blocks, grain, [&](int64_t b, int64_t e) {
    for (int64_t t = b; t < e; ++t) {
      const int64_t o = t / blocks, blk = t % blocks;
      partial[t] = fold(o, blk * kReduceBlock, std::min(size, (blk + 1) * kReduceBlock));
    }
  });
  for (int64_t o = 0; o < num_out; ++o) {
    acc_t acc = partial[o * blocks];
    for (int64_t blk = 1; blk < blocks; ++blk) acc = op.combine(acc, partial[o * blocks + blk]);
    store(o, op.project(acc));
  }
}

}  // namespace tiny::cpu
