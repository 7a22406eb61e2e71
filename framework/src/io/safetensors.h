/// @file safetensors.h
/// @brief Internals of the safetensors checkpoint format, for tests and fuzzers.
///
/// The public API is `tiny::save` / `tiny::load` in tiny/serialize.h. This
/// header exposes the dtype table, the header validator and a loader from
/// memory, so that tests can check them directly and a fuzzer can feed bytes
/// without touching the disk. Everything treats its input as hostile: a
/// malformed file raises `tiny::IOError` naming the file and what is wrong,
/// and never reads out of bounds, overflows, or allocates more than the
/// file's own size (plus a bounded parsing overhead for the JSON header).
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "tiny/dtype.h"
#include "tiny/state_dict.h"

namespace tiny::io::detail {

/// @brief Largest header accepted, in bytes: the reference implementation's limit (100 MB).
inline constexpr uint64_t kSafetensorsMaxHeader = 100'000'000;
/// @brief Most dimensions a tensor in a safetensors file may have here.
inline constexpr size_t kSafetensorsMaxDims = 64;

/// @brief One dtype of the safetensors format.
struct SafetensorsDtype {
  /// Its name in the header: "F32", "BF16", "BOOL", ...
  const char* name;
  /// Bytes per element.
  size_t itemsize;
  /// The tiny dtype it loads as, if tiny has one.
  std::optional<Dtype> tiny;
};

/// @brief The entry of `name` in the table of every safetensors dtype, or nullptr if there is none.
const SafetensorsDtype* find_safetensors_dtype(const std::string& name);
/// @brief The safetensors name of a tiny dtype ("F32" for float32).
const char* safetensors_dtype_name(Dtype dtype);

/// @brief One tensor's entry in a validated header.
struct SafetensorsEntry {
  /// The tensor's name (the JSON key).
  std::string name;
  /// The dtype table entry (always one tiny can load).
  const SafetensorsDtype* dtype = nullptr;
  /// Dimensions, each in [0, 2^63); empty for a 0-d tensor.
  std::vector<int64_t> shape;
  /// Byte range [begin, end) within the data section (after the header).
  uint64_t begin = 0;
  /// One past the last byte.
  uint64_t end = 0;
};

/// @brief A validated header: the entries in data order, and the `__metadata__` strings.
struct SafetensorsHeader {
  /// Sorted by data offset (ties, i.e. empty tensors, in header order): the order the bytes were written.
  std::vector<SafetensorsEntry> tensors;
  /// The `__metadata__` object (empty if absent).
  std::map<std::string, std::string> metadata;
};

/// @brief Validates the 8-byte length prefix of a file of `file_size` bytes and returns the header length N.
///
/// `prefix` points at min(8, file_size) bytes. Checks the file is at least 8
/// bytes, N is at most the 100 MB limit and fits in the file.
uint64_t check_safetensors_prefix(const char* prefix, uint64_t file_size, const std::string& name_for_errors);

/// @brief Parses and validates the JSON header (the N bytes after the prefix) against a data section of
/// `data_size` bytes: fields, dtypes, shapes, offsets, coverage of the data section, duplicate names.
SafetensorsHeader parse_safetensors_header(const char* json, size_t n, uint64_t data_size,
                                           const std::string& name_for_errors);

/// @brief Loads a whole safetensors file held in memory into CPU tensors.
StateDict parse_safetensors(const char* bytes, size_t size, const std::string& name_for_errors);

/// @brief The header `tiny::save` writes for `state`: JSON padded with spaces to a multiple of 8, without the
/// 8-byte length prefix. Throws tiny::ValueError for a state that cannot be written.
std::string make_safetensors_header(const StateDict& state, const std::string& name_for_errors);

}  // namespace tiny::io::detail
