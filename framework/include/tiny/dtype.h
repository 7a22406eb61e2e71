/// @file dtype.h
/// @brief Element types of tensors (PyTorch's `torch.dtype`) and type promotion.
#pragma once

#include <cstddef>
#include <cstdint>
#include <iosfwd>
#include <string>

#include "tiny/half.h"

namespace tiny {

/// @brief The element type of a tensor.
///
/// Type promotion is PyTorch's (promote_types): bool < uint8 < int32 < int64 < any float;
/// among floats float16 and bfloat16 < float32 < float64, and float16 with
/// bfloat16 gives float32 (neither holds the other). The codes are stable
/// (they never change when a dtype is added); code switches on Dtype through
/// TINY_DISPATCH_*.
enum class Dtype : int8_t {
  Bool = 0,      ///< `torch.bool`: one byte, 0 or 1
  Int64 = 1,     ///< `torch.int64` (`torch.long`): class indices, counts
  Float32 = 2,   ///< `torch.float32` (`torch.float`): the default
  Float64 = 3,   ///< `torch.float64` (`torch.double`): gradient checks
  Float16 = 4,   ///< `torch.float16` (`torch.half`): tiny::Half, IEEE binary16
  BFloat16 = 5,  ///< `torch.bfloat16`: tiny::BFloat16, the top half of a float32
  Int32 = 6,     ///< `torch.int32` (`torch.int`): compact indices and labels
  UInt8 = 7,     ///< `torch.uint8`: raw image pixels (0-255); arithmetic wraps modulo 256
};

/// @brief `torch.bool`.
inline constexpr Dtype kBool = Dtype::Bool;
/// @brief `torch.int64` / `torch.long`.
inline constexpr Dtype kInt64 = Dtype::Int64;
/// @brief `torch.long`, the same dtype as kInt64 (LibTorch's `torch::kLong`).
inline constexpr Dtype kLong = Dtype::Int64;
/// @brief `torch.int32` / `torch.int`.
inline constexpr Dtype kInt32 = Dtype::Int32;
/// @brief `torch.int`, the same dtype as kInt32.
inline constexpr Dtype kInt = Dtype::Int32;
/// @brief `torch.uint8`.
inline constexpr Dtype kUInt8 = Dtype::UInt8;
/// @brief `torch.float32` / `torch.float`, the default dtype.
inline constexpr Dtype kFloat32 = Dtype::Float32;
/// @brief `torch.float`, the same dtype as kFloat32 (LibTorch's `torch::kFloat`).
inline constexpr Dtype kFloat = Dtype::Float32;
/// @brief `torch.float64` / `torch.double`.
inline constexpr Dtype kFloat64 = Dtype::Float64;
/// @brief `torch.double`, the same dtype as kFloat64 (LibTorch's `torch::kDouble`).
inline constexpr Dtype kDouble = Dtype::Float64;
/// @brief `torch.float16` / `torch.half`.
inline constexpr Dtype kFloat16 = Dtype::Float16;
/// @brief `torch.half`, the same dtype as kFloat16.
inline constexpr Dtype kHalf = Dtype::Float16;
/// @brief `torch.bfloat16`.
inline constexpr Dtype kBFloat16 = Dtype::BFloat16;

/// @brief Bytes per element.
size_t element_size(Dtype dtype);
/// @brief The name PyTorch prints, e.g. "float32".
const char* dtype_name(Dtype dtype);
/// @brief True for uint8, int32 and int64 (not bool, as PyTorch's `is_integral(include_bool=False)`).
bool is_integral(Dtype dtype);
/// @brief True for float16, bfloat16, float32 and float64.
bool is_floating_point(Dtype dtype);
/// @brief True for the 16-bit floats (float16, bfloat16), which compute in float32.
bool is_reduced_floating_point(Dtype dtype);
/// @brief The dtype of `a op b` for two tensors (PyTorch's `torch.promote_types`):
/// float16 with bfloat16 gives float32, float16 with int64 gives float16, uint8 with int32 gives int32.
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
template <> constexpr Dtype dtype_of<Half>() { return Dtype::Float16; }
template <> constexpr Dtype dtype_of<BFloat16>() { return Dtype::BFloat16; }
template <> constexpr Dtype dtype_of<int32_t>() { return Dtype::Int32; }
template <> constexpr Dtype dtype_of<uint8_t>() { return Dtype::UInt8; }
/// @endcond

}  // namespace tiny
