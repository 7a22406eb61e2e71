/// @file file_common.h
/// @brief What the `.npy` and safetensors readers (and the atomic writer) share: a file descriptor
/// owner, POSIX reads that retry, the errors of a failed open, and untrusted bytes shown safely in
/// messages.
///
/// Internal to libtiny (namespace tiny::io::detail). The readers trust nothing in the file: every
/// helper here reports a failure as tiny::IOError naming the path.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace tiny::io::detail {

/// @brief A file descriptor closed on scope exit (-1: none).
class Fd {
 public:
  /// @brief Owns `fd` (the result of ::open(); -1 when it failed).
  explicit Fd(int fd = -1) : fd_(fd) {}
  /// @brief Closes the descriptor, if any.
  ~Fd() { reset(); }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  /// @brief The descriptor, -1 when none.
  int get() const { return fd_; }
  /// @brief Closes the descriptor held and owns `fd` instead.
  void reset(int fd = -1);

 private:
  int fd_;
};

/// @brief strerror(err) as a std::string.
std::string errno_text(int err);

/// @brief Throws the tiny::IOError for a failed open(): "No such file" and "Permission denied" with
/// their fix, otherwise "cannot <doing> <path>: <strerror>".
[[noreturn]] void throw_open_error(const std::string& path, int err, const char* doing);

/// @brief Reads exactly `n` bytes at `offset` (retrying after EINTR, in chunks of at most 1 GiB);
/// returns how many were read before the end of the file. Throws tiny::IOError naming `path` on errors.
size_t pread_full(int fd, char* buf, size_t n, uint64_t offset, const std::string& path);

/// @brief Reads a pipe or device to its end (it has no size to check against beforehand).
std::vector<char> read_to_end(int fd, const std::string& path);

/// @brief How printable() shows the bytes outside printable ASCII.
enum class ShowBytes {
  /// Every byte outside printable ASCII as \\xNN, a newline as \\n (.npy headers: ASCII text ending in one).
  kAscii,
  /// Bytes of 0x80 and up as they are, control bytes as \\xNN, cut at a character boundary (text
  /// already checked to be UTF-8: safetensors names).
  kUtf8,
};

/// @brief Shows untrusted bytes safely in a message: at most `limit` bytes, then "..."; a backslash as \\\\.
std::string printable(const char* p, size_t n, size_t limit, ShowBytes show);
/// @brief printable() of a string.
inline std::string printable(const std::string& s, size_t limit, ShowBytes show) {
  return printable(s.data(), s.size(), limit, show);
}

}  // namespace tiny::io::detail
