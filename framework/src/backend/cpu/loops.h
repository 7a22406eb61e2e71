// The CPU drivers: run a host+device op struct over a TensorIter or a
// ReduceIter. Work is cut into chunks of a fixed number of elements, never
// into "one piece per thread", so a result never depends on the thread count.
#pragma once

#include <algorithm>
#include <cstdint>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "backend/cpu/half_convert.h"
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

// A contiguous row of a pointwise op that computes in float, with float16
// operands: Half inputs are widened and a Half output narrowed a tile at a
// time by the bulk converters (F16C: about 10x the scalar conversions), and
// the op runs on float tiles. Bit for bit what the scalar loop gives.
template <typename T>
using tile_value_t = std::conditional_t<std::is_same_v<T, Half>, float, T>;

template <typename out_t, typename... in_t, typename F, size_t... I>
void pointwise_row_via_float(char** ptrs, int64_t n, const F& f, std::index_sequence<I...>) {
  constexpr int64_t kTile = 256;
  constexpr bool kHalfOut = std::is_same_v<out_t, Half>;
  static_assert(!kHalfOut || std::is_same_v<std::invoke_result_t<F, tile_value_t<in_t>...>, float>,
                "a float16 output needs an op that returns float");
  float in_tile[sizeof...(in_t)][kTile];
  float out_tile[kTile];
  out_t* out = reinterpret_cast<out_t*>(ptrs[0]);
  for (int64_t t = 0; t < n; t += kTile) {
    const int64_t len = std::min(kTile, n - t);
    (
        [&] {
          if constexpr (std::is_same_v<in_t, Half>) {
            half_to_float(reinterpret_cast<const Half*>(ptrs[I + 1]) + t, in_tile[I], len);
          }
        }(),
        ...);
    auto arg = [&](auto index, int64_t i) {
      constexpr size_t k = decltype(index)::value;
      using T = std::tuple_element_t<k, std::tuple<in_t...>>;
      if constexpr (std::is_same_v<T, Half>) {
        return in_tile[k][i];
      } else {
        return reinterpret_cast<const T*>(ptrs[k + 1])[t + i];
      }
    };
    if constexpr (kHalfOut) {
      for (int64_t i = 0; i < len; ++i) out_tile[i] = f(arg(std::integral_constant<size_t, I>{}, i)...);
      float_to_half(out_tile, out + t, len);
    } else {
      for (int64_t i = 0; i < len; ++i) out[t + i] = f(arg(std::integral_constant<size_t, I>{}, i)...);
    }
  }
}

// out[i] = f(in0[i], ...) with a flat loop the compiler vectorises when all
// operands are contiguous, and a strided loop otherwise. kOpmath says that f
// takes float for each float16 input and returns float for a float16 output
// (the op structs instantiated on opmath_t): contiguous rows with float16
// operands then go through pointwise_row_via_float.
template <bool kOpmath, typename out_t, typename... in_t, typename F, size_t... I>
void pointwise_loop_impl(const TensorIter& iter, const F& f, std::index_sequence<I...>) {
  constexpr int N = 1 + sizeof...(in_t);
  constexpr bool kViaFloat =
      kOpmath && (std::is_same_v<out_t, Half> || (std::is_same_v<in_t, Half> || ...)) && sizeof...(in_t) > 0;
  runtime::parallel_for(0, iter.numel, kPointwiseGrain, [&](int64_t begin, int64_t end) {
    for_each_row<N>(iter, begin, end, [&](char** ptrs, const int64_t* step, int64_t n) {
      const bool contiguous = step[0] == static_cast<int64_t>(sizeof(out_t)) &&
                              ((step[I + 1] == static_cast<int64_t>(sizeof(in_t))) && ...);
      out_t* out = reinterpret_cast<out_t*>(ptrs[0]);
      if (contiguous) {
        if constexpr (kViaFloat) {
          pointwise_row_via_float<out_t, in_t...>(ptrs, n, f, std::index_sequence<I...>{});
        } else {
          for (int64_t i = 0; i < n; ++i) out[i] = f(reinterpret_cast<const in_t*>(ptrs[I + 1])[i]...);
        }
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
  pointwise_loop_impl<false, out_t, in_t...>(iter, f, std::index_sequence_for<in_t...>{});
}

// pointwise_loop for an op that computes in opmath_t (float for float16):
// f must take float for each float16 input and return float for a float16
// output, which lets float16 rows convert in bulk.
template <typename out_t, typename... in_t, typename F>
void pointwise_loop_opmath(const TensorIter& iter, const F& f) {
  pointwise_loop_impl<true, out_t, in_t...>(iter, f, std::index_sequence_for<in_t...>{});
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
