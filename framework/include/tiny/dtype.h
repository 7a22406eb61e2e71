/// @file dtype.h
/// @brief Element types of tensors (PyTorch's `torch.dtype`) and type promotion.
#pragma once

#include <cstddef>
#include <cstdint>
#include <iosfwd>
#include <string>

namespace tiny {

/// @brief The element type of a tensor.
///
/// The order is the promotion order inside a category: an op on an int64 and a
/// float32 tensor gives float32, as in PyTorch. Float16 and BFloat16 take their
/// place here when mixed precision arrives; code switches on Dtype through
/// TINY_DISPATCH_* so a new type is one line per dispatch macro.
enum class Dtype : int8_t {
  Bool = 0,     ///< `torch.bool`: one byte, 0 or 1
  Int64 = 1,    ///< `torch.int64` (`torch.long`): class indices, counts
  Float32 = 2,  ///< `torch.float32` (`torch.float`): the default
  Float64 = 3,  ///< `torch.float64` (`torch.double`): gradient checks
};

/// @brief `torch.bool`.
inline constexpr Dtype kBool = Dtype::Bool;
/// @brief `torch.int64` / `torch.long`.
inline constexpr Dtype kInt64 = Dtype::Int64;
/// @brief `torch.float32` / `torch.float`, the default dtype.
inline constexpr Dtype kFloat32 = Dtype::Float32;
/// @brief `torch.float64` / `torch.double`.
inline constexpr Dtype kFloat64 = Dtype::Float64;

/// @brief Bytes per element.
size_t element_size(Dtype dtype);
/// @brief The name PyTorch prints, e.g. "float32".
const char* dtype_name(Dtype dtype);
/// @brief True for float32 and float64 (and later float16, bfloat16).
bool is_floating_point(Dtype dtype);
/// @brief The dtype of `a op b` for two tensors (PyTorch's `torch.promote_types`).
Dtype promote_types(Dtype a, Dtype b);
/// @brief Prints `float32`, `int64`, ...
std::ostream& operator<<(std::ostream& out, Dtype dtype);

/// @brief Maps a C++ type to its Dtype: `dtype_of<float>() == kFloat32`.
template <typename T>
constexpr Dtype dtype_of();
/// @cond
template <> constexpr Dtype dtype_of<bool>() { return Dtype::Bool; }
template <> constexpr Dtype dtype_of<int64_t>() { return Dtype::Int64; }
template <> constexpr Dtype dtype_of<float>() { return Dtype::Float32; }
template <> constexpr Dtype dtype_of<double>() { return Dtype::Float64; }
/// @endcond

}  // namespace tiny
