/// @file error.h
/// @brief The error types every `tiny` function throws, and the checking macros.
///
/// Every message says what was wrong, with the values (shapes, devices, dtypes,
/// sizes), and how to fix it, in PyTorch's words where PyTorch has them.
#pragma once

#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>

namespace tiny {

/// @brief Base class of every error `tiny` raises (PyTorch's `RuntimeError`).
class Error : public std::runtime_error {
 public:
  /// @brief Creates an error with a complete, human-readable message.
  explicit Error(const std::string& message) : std::runtime_error(message) {}
};

/// @brief Shapes that do not fit together (matmul, broadcasting, view).
class ShapeError : public Error {
 public:
  using Error::Error;
};

/// @brief Tensors on different or unusable devices.
class DeviceError : public Error {
 public:
  using Error::Error;
};

/// @brief An operation that does not support the dtype it was given (PyTorch's `TypeError`).
class DtypeError : public Error {
 public:
  using Error::Error;
};

/// @brief An index or dimension out of range (PyTorch's `IndexError`).
class IndexError : public Error {
 public:
  using Error::Error;
};

/// @brief An argument with a bad value: a negative size, a probability above 1 (PyTorch's `ValueError`).
class ValueError : public Error {
 public:
  using Error::Error;
};

/// @brief A file that is missing, unreadable or malformed.
class IOError : public Error {
 public:
  using Error::Error;
};

/// @brief A device allocation that cannot be satisfied (PyTorch's `torch.cuda.OutOfMemoryError`).
///
/// The program can catch it, free memory (drop tensors, call `empty_cache()`)
/// and continue, as in PyTorch.
class OutOfMemoryError : public Error {
 public:
  using Error::Error;
};

/// @brief Misuse of a stateful API in the wrong order, such as GradScaler's unscale_() twice before update()
/// (PyTorch raises these as `RuntimeError` with the same message).
class RuntimeError : public Error {
 public:
  using Error::Error;
};

/// @brief Thrown by the lesson stubs (`TINY_TODO`) and by features not built yet.
class NotImplemented : public Error {
 public:
  using Error::Error;
};

namespace detail {
/// Streams every argument into one string.
template <typename... Args>
std::string concat(Args&&... args) {
  std::ostringstream out;
  (out << ... << std::forward<Args>(args));
  return out.str();
}

/// @cond
// Where TINY_CHECK and TINY_THROW look their error type up: `ValueError` and
// `tiny::ValueError` both name tiny's (the alias is only visible here; Doxygen
// skips it, taking it for a recursive alias).
namespace error_types {
using namespace ::tiny;
namespace tiny = ::tiny;
}  // namespace error_types
/// @endcond
}  // namespace detail

}  // namespace tiny

/// @brief Throws `ErrorType` with the streamed message when `cond` is false.
///
/// `ErrorType` is one of tiny's errors, written `ShapeError` or `tiny::ShapeError`.
/// Example: `TINY_CHECK(a.dim() == 2, ShapeError, "mm: expected a 2-D tensor, got ", a.dim(), "-D");`
#define TINY_CHECK(cond, ErrorType, ...)                                  \
  do {                                                                    \
    if (!(cond)) throw ::tiny::detail::error_types::ErrorType(::tiny::detail::concat(__VA_ARGS__)); \
  } while (0)

/// @brief Throws `ErrorType` (`ShapeError` or `tiny::ShapeError`) with the streamed message.
#define TINY_THROW(ErrorType, ...) throw ::tiny::detail::error_types::ErrorType(::tiny::detail::concat(__VA_ARGS__))

/// @brief Marks a lesson stub: throws `tiny::NotImplemented` with the task to do.
#define TINY_TODO(what) throw ::tiny::NotImplemented(::tiny::detail::concat("not done yet: ", what))
