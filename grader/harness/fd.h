/// @file fd.h
/// @brief Fd: the one owner of a file descriptor, closed when the owner goes
/// (an early return or an exception leaks none).
#pragma once

#include <unistd.h>

#include <utility>

namespace workbook {

/// @brief Owns a file descriptor (or none: -1) and closes it in its destructor; move-only.
class Fd {
 public:
  /// @brief Owns nothing.
  Fd() = default;
  /// @brief Takes `fd` (-1: nothing).
  explicit Fd(int fd) : fd_(fd) {}
  /// @brief Closes what it owns.
  ~Fd() { reset(); }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  /// @brief Takes `other`'s descriptor, leaving it empty.
  Fd(Fd&& other) noexcept : fd_(std::exchange(other.fd_, -1)) {}
  /// @brief Closes ours, then takes `other`'s.
  Fd& operator=(Fd&& other) noexcept {
    if (this != &other) reset(std::exchange(other.fd_, -1));
    return *this;
  }
  /// @brief The descriptor (-1 when none), still owned.
  int get() const { return fd_; }
  /// @brief True when it owns a descriptor.
  bool valid() const { return fd_ >= 0; }
  /// @brief Closes what it owns and takes `fd` instead.
  void reset(int fd = -1) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = fd;
  }
  /// @brief Gives the descriptor up without closing it.
  int release() { return std::exchange(fd_, -1); }

 private:
  int fd_ = -1;
};

}  // namespace workbook
