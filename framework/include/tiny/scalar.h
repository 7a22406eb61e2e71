/// @file scalar.h
/// @brief A single number of any dtype, as passed to `full`, `add(x, 2.5)` or returned by `item()`.
#pragma once

#include <cstdint>
#include <iosfwd>
#include <type_traits>

#include "tiny/dtype.h"

namespace tiny {

/// @brief A number that remembers whether it was a bool, an integer or a floating value.
///
/// Like a Python number passed to PyTorch: `x + 2` keeps an int64 tensor int64,
/// `x + 2.5` gives a float tensor.
class Scalar {
 public:
  /// @brief Zero (an integer).
  Scalar() = default;
  /// @brief A boolean.
  Scalar(bool v) : kind_(Kind::Bool), i_(v) {}  // NOLINT
  /// @brief An integer of any width.
  template <typename T, std::enable_if_t<std::is_integral_v<T> && !std::is_same_v<T, bool>, int> = 0>
  Scalar(T v) : kind_(Kind::Int), i_(static_cast<int64_t>(v)) {}  // NOLINT
  /// @brief A floating-point number.
  template <typename T, std::enable_if_t<std::is_floating_point_v<T>, int> = 0>
  Scalar(T v) : kind_(Kind::Float), d_(static_cast<double>(v)) {}  // NOLINT
  /// @brief A float16 value (exactly, as a floating number).
  Scalar(Half v) : kind_(Kind::Float), d_(static_cast<float>(v)) {}  // NOLINT
  /// @brief A bfloat16 value (exactly, as a floating number).
  Scalar(BFloat16 v) : kind_(Kind::Float), d_(static_cast<float>(v)) {}  // NOLINT

  /// @brief True when made from a bool.
  bool is_bool() const { return kind_ == Kind::Bool; }
  /// @brief True when made from an integer.
  bool is_integral() const { return kind_ == Kind::Int; }
  /// @brief True when made from a float or double.
  bool is_floating_point() const { return kind_ == Kind::Float; }
  /// @brief The value as a double.
  double to_double() const { return kind_ == Kind::Float ? d_ : static_cast<double>(i_); }
  /// @brief The value as an int64 (floats truncate toward zero).
  int64_t to_int64() const { return kind_ == Kind::Float ? static_cast<int64_t>(d_) : i_; }
  /// @brief The value as a bool (non-zero is true).
  bool to_bool() const { return kind_ == Kind::Float ? d_ != 0.0 : i_ != 0; }
  /// @brief The value converted to T (to Half or BFloat16 through float, as PyTorch's `static_cast<Half>`).
  template <typename T>
  T to() const {
    if constexpr (std::is_same_v<T, bool>) return to_bool();
    else if constexpr (std::is_integral_v<T>) return static_cast<T>(to_int64());
    else return static_cast<T>(to_double());
  }
  /// @brief The dtype a tensor made from this scalar alone would have (bool, int64 or float32).
  Dtype natural_dtype() const {
    return kind_ == Kind::Bool ? kBool : kind_ == Kind::Int ? kInt64 : kFloat32;
  }

 private:
  enum class Kind : int8_t { Bool, Int, Float };
  Kind kind_ = Kind::Int;
  int64_t i_ = 0;
  double d_ = 0.0;
};

/// @brief Prints the value as PyTorch would (`2`, `2.5000`, `True`).
std::ostream& operator<<(std::ostream& out, const Scalar& s);

}  // namespace tiny
