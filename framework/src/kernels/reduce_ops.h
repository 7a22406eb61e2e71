// Reductions as four host+device functions, the shape PyTorch's Reduce uses:
//   identity()            the starting accumulator
//   reduce(acc, x, idx)   folds one element (idx = its position along the reduction)
//   combine(a, b)         merges two partial accumulators, `a` covering lower indices
//   project(acc)          the final value
// A driver may fold any contiguous run of elements and combine runs in index
// order; the CPU driver's runs have a fixed length so results never depend on
// the number of threads.
#pragma once

#include <cstdint>
#include <limits>

#include "kernels/macros.h"
#include "kernels/math.h"

namespace tiny::kernels {

enum class ReduceKind : uint8_t { Sum, Max, Min };

template <typename T>
struct SumOp {
  using acc_t = T;
  TINY_HOST_DEVICE acc_t identity() const { return acc_t(0); }
  TINY_HOST_DEVICE acc_t reduce(acc_t acc, T x, int64_t) const { return acc + x; }
  TINY_HOST_DEVICE acc_t combine(acc_t a, acc_t b) const { return a + b; }
  TINY_HOST_DEVICE T project(acc_t acc) const { return acc; }
};

// max/min propagate NaN: once an accumulator is NaN it stays NaN.
template <typename T>
struct MaxOp {
  using acc_t = T;
  TINY_HOST_DEVICE acc_t identity() const { return std::numeric_limits<T>::lowest(); }
  TINY_HOST_DEVICE acc_t reduce(acc_t acc, T x, int64_t) const { return combine(acc, x); }
  TINY_HOST_DEVICE acc_t combine(acc_t a, acc_t b) const { return (t_isnan(a) || a >= b) ? a : b; }
  TINY_HOST_DEVICE T project(acc_t acc) const { return acc; }
};

template <typename T>
struct MinOp {
  using acc_t = T;
  TINY_HOST_DEVICE acc_t identity() const { return std::numeric_limits<T>::max(); }
  TINY_HOST_DEVICE acc_t reduce(acc_t acc, T x, int64_t) const { return combine(acc, x); }
  TINY_HOST_DEVICE acc_t combine(acc_t a, acc_t b) const { return (t_isnan(a) || a <= b) ? a : b; }
  TINY_HOST_DEVICE T project(acc_t acc) const { return acc; }
};

// A value and where it was found.
template <typename T>
struct ValueIndex {
  T value;
  int64_t index;
};

// argmax/argmin: ties go to the lowest index; a NaN wins (PyTorch: the first NaN).
template <typename T, bool kIsMax>
struct ArgExtremumOp {
  using acc_t = ValueIndex<T>;
  TINY_HOST_DEVICE acc_t identity() const {
    return {kIsMax ? std::numeric_limits<T>::lowest() : std::numeric_limits<T>::max(), -1};
  }
  TINY_HOST_DEVICE acc_t reduce(acc_t acc, T x, int64_t idx) const { return combine(acc, acc_t{x, idx}); }
  TINY_HOST_DEVICE acc_t combine(acc_t a, acc_t b) const {
    if (a.index < 0) return b;
    if (b.index < 0) return a;
    if (t_isnan(a.value)) return (t_isnan(b.value) && b.index < a.index) ? b : a;
    if (t_isnan(b.value)) return b;
    const bool b_better = kIsMax ? b.value > a.value : b.value < a.value;
    if (b_better) return b;
    if (b.value == a.value && b.index < a.index) return b;
    return a;
  }
  TINY_HOST_DEVICE acc_t project(acc_t acc) const { return acc; }
};

// Online softmax statistics of one row: the running max and the sum of
// exp(x - max). Merging two partial rows rescales the smaller-max sum, so a
// row is read once (Milakov & Gimelshein, 2018).
template <typename T>
struct SoftmaxStats {
  T max;
  T sum;
};

template <typename T>
struct OnlineSoftmaxOp {
  using acc_t = SoftmaxStats<T>;
  TINY_HOST_DEVICE acc_t identity() const { return {-std::numeric_limits<T>::infinity(), T(0)}; }
  TINY_HOST_DEVICE acc_t reduce(acc_t acc, T x, int64_t) const { return combine(acc, acc_t{x, T(1)}); }
  TINY_HOST_DEVICE acc_t combine(acc_t a, acc_t b) const {
    if (t_isnan(a.max) || t_isnan(b.max)) {
      const T nan = std::numeric_limits<T>::quiet_NaN();
      return {nan, nan};
    }
    if (b.max == -std::numeric_limits<T>::infinity()) return a;
    if (a.max == -std::numeric_limits<T>::infinity()) return b;
    if (a.max >= b.max) return {a.max, a.sum + b.sum * t_exp(b.max - a.max)};
    return {b.max, b.sum + a.sum * t_exp(a.max - b.max)};
  }
  TINY_HOST_DEVICE acc_t project(acc_t acc) const { return acc; }
};

}  // namespace tiny::kernels
