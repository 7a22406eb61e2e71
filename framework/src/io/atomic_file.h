/// @file atomic_file.h
/// @brief Atomic file replacement (write a temporary file, fsync, rename, fsync the directory).
///
/// Shared by the `.npy` writer and the safetensors checkpoint writer: a crash or
/// an error at any point leaves either the old file or the complete new one at
/// the target path, never half a file, and never a stray temporary file after
/// an error that the process survives.
#pragma once

#include <cstddef>
#include <string>

namespace tiny::io::detail {

/// @brief Writes a file atomically: bytes go to a temporary file that `commit()` renames over the target.
///
/// The constructor checks the target (a directory or a non-regular file is
/// refused; a symbolic link is written through, replacing the file it points
/// to) and creates `.tiny-<kind>-<pid>-<n>.tmp` in the target's directory, so
/// that `rename()` is atomic. `write()` appends; `commit()` fsyncs and closes
/// the temporary file, renames it over the target and fsyncs the directory.
/// Destroying the writer before `commit()` (an exception, an early return)
/// removes the temporary file and leaves the target as it was. Every failure
/// throws `tiny::IOError` naming the target path and what to do.
class AtomicFileWriter {
 public:
  /// @brief Opens a temporary file beside `path`; `kind` ("npy") names it, `example_name` ("array.npy") is the
  /// file name suggested when `path` is a directory.
  AtomicFileWriter(const std::string& path, const std::string& kind, const std::string& example_name);
  /// @brief Removes the temporary file unless `commit()` succeeded.
  ~AtomicFileWriter();
  AtomicFileWriter(const AtomicFileWriter&) = delete;
  AtomicFileWriter& operator=(const AtomicFileWriter&) = delete;

  /// @brief Appends `n` bytes to the temporary file (throws tiny::IOError, e.g. when the disk is full).
  void write(const void* data, size_t n);
  /// @brief Makes the new contents durable and visible at the target path.
  void commit();

 private:
  std::string path_;    // as the caller gave it, for messages
  std::string target_;  // the file actually replaced (through a symbolic link)
  std::string dir_;
  std::string tmp_;
  std::string example_;
  int fd_ = -1;
  bool committed_ = false;
};

}  // namespace tiny::io::detail
