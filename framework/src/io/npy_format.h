/// @file npy_format.h
/// @brief Reading and writing numpy's `.npy` format (versions 1.0, 2.0, 3.0), without tensors.
///
/// This layer knows bytes, dtype strings and shapes only; the Tensor wrapper in
/// `io` converts to and from `tiny::Tensor`. Everything here treats its input
/// as untrusted: a malformed file raises `tiny::IOError` naming the file, what
/// is wrong and how to fix it, and never reads out of bounds or allocates more
/// than the file holds.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace tiny::io::detail {

/// @brief One array read from a `.npy` file: its dtype string, layout flag, shape and raw bytes.
struct NpyArray {
  /// numpy dtype string as numpy writes it: "<f2" "<f4" "<f8" "|i1" "<i2" "<i4" "<i8"
  /// "|u1" "<u2" "<u4" "<u8" "|b1". The reader normalizes equivalent spellings a header
  /// may use ("|f4", "=f4", "<b1") to this form, so comparing strings is enough.
  std::string descr;
  /// True when `data` is in column-major (Fortran) order; the reader does not reorder it.
  bool fortran_order = false;
  /// Dimensions; empty for a 0-d (scalar) array.
  std::vector<int64_t> shape;
  /// Raw little-endian element bytes, exactly numel * itemsize of them.
  std::vector<char> data;

  /// @brief Bytes per element of `descr` (0 if `descr` is not a supported dtype string).
  size_t itemsize() const;
  /// @brief Number of elements: the product of `shape` (1 for a 0-d array).
  int64_t numel() const;
};

/// @brief Bytes per element of a supported numpy descr ("<f4" -> 4), or 0 if unsupported.
size_t descr_itemsize(const std::string& descr);

/// @brief Parses a whole `.npy` file held in memory; `name_for_errors` names it in messages.
NpyArray parse_npy(const char* bytes, size_t size, const std::string& name_for_errors);

/// @brief Reads and parses the `.npy` file at `path`.
NpyArray read_npy_file(const std::string& path);

/// @brief Writes a C-order array as a `.npy` file, atomically.
///
/// The bytes go to a temporary file in the same directory, which is fsynced and
/// renamed over `path`; then the directory is fsynced. A failure never leaves a
/// half-written file at `path` nor destroys an existing one. The header is the
/// one numpy 1.24 writes (format 1.0, or 2.0 if it does not fit), padded so
/// that the data starts on a 64-byte boundary.
void write_npy_file(const std::string& path, const std::string& descr, const std::vector<int64_t>& shape,
                    const void* data, size_t nbytes);

/// @brief The exact bytes `write_npy_file` writes (header then data), for writing to memory.
std::vector<char> serialize_npy(const std::string& descr, const std::vector<int64_t>& shape, const void* data,
                                size_t nbytes, const std::string& name_for_errors);

}  // namespace tiny::io::detail
