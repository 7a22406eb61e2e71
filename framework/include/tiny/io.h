/// @file io.h
/// @brief Reading and writing tensors as NumPy `.npy` files (`np.save` / `np.load`).
#pragma once

#include <string>

#include "tiny/tensor.h"

namespace tiny::io {

/// @brief Writes `tensor` to `path` as a `.npy` file, atomically (a crash never leaves half a file).
///
/// float32, float64, int64 and bool map to numpy's `<f4`, `<f8`, `<i8` and `|b1`,
/// float16 to `<f2` (numpy's float16). numpy has no bfloat16: a bfloat16 tensor
/// is written as its raw bits, uint16 `<u2` (read it in numpy with
/// `(a.astype('<u4') << 16).view('<f4')`, or `torch.from_numpy(a.view('<i2')).view(torch.bfloat16)`).
/// Device tensors are copied to the CPU first.
void save_npy(const std::string& path, const Tensor& tensor);

/// @brief Reads a `.npy` file written by numpy or `save_npy` into a CPU tensor.
///
/// Accepts float16/32/64, int8/16/32/64, uint8 and bool arrays, in C or Fortran
/// order. int32 and uint8 keep their dtype (as `torch.from_numpy`); int8 and
/// int16, which tiny lacks, become int64.
/// A uint16 `<u2` array is read as bfloat16 bit patterns, the way save_npy
/// writes bfloat16 (tiny has no uint16 dtype), so every dtype survives a
/// round trip; for real uint16 data convert in numpy first: `a.astype('<i8')`.
/// Throws tiny::IOError naming the file and what is wrong with it.
Tensor load_npy(const std::string& path);

}  // namespace tiny::io
