/// @file bundle.h
/// @brief What the checker and a lesson's runner exchange: a folder with
/// `values.json` (strings, numbers, facts about tensors) and one `.npy` file per tensor.
///
/// A tensor is saved with the facts a check needs about it (device, dtype,
/// shape, requires_grad), and its values as a CPU copy, so a check can say
/// "the labels are still on cpu" and compare numbers in the same breath.
#pragma once

#include <filesystem>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "tiny/tiny.h"

namespace workbook {

/// @brief The most bytes of exchange data (a values.json, or what a runner sends
/// the checker) that are read: more is refused before parsing, as nlohmann's
/// tree takes many times the text's size.
inline constexpr size_t kMaxExchangeBytes = size_t{16} << 20;
/// @brief The deepest nesting of arrays and objects accepted in exchange data.
inline constexpr int kMaxExchangeDepth = 64;
/// @brief The most bytes of one message from a student's run (an exception's
/// text, a compiler's output, a check's message) that go into results and reports.
inline constexpr size_t kMaxMessageBytes = 4096;
/// @brief The most bytes of one line of such a message.
inline constexpr size_t kMaxLineBytes = 2048;

/// @brief "" when `text` is within kMaxExchangeBytes and kMaxExchangeDepth, else
/// what is wrong, with the figures: "is 62.0 MiB, more than the 16 MiB the grader reads".
std::string exchange_limits_problem(std::string_view text);

/// @brief `text` with each line cut to `max_line` bytes and the whole to
/// `max_total`, each cut marked "... (N bytes cut)" (never inside a UTF-8 character).
std::string cut_text(const std::string& text, size_t max_total = kMaxMessageBytes, size_t max_line = kMaxLineBytes);

/// @brief "62.0 MiB", "512 bytes".
std::string bytes_text(size_t bytes);

/// @brief The facts a check needs about a tensor, beside its values.
struct TensorInfo {
  std::string device;           ///< "cpu", "cuda:0"
  std::string dtype;            ///< "float32", ...
  std::vector<int64_t> shape;   ///< sizes
  bool requires_grad = false;   ///< as Tensor::requires_grad()
  bool is_pinned = false;       ///< page-locked host memory
  bool defined = true;          ///< false for an undefined (default-constructed) Tensor
};

/// @brief Named values and tensors, saved to and loaded from a folder.
class Bundle {
 public:
  /// @brief Strings and numbers (anything JSON holds); keys starting with `_` belong to the harness.
  nlohmann::json values = nlohmann::json::object();

  /// @brief Stores `tensor` (an undefined one is allowed and recorded as such).
  ///
  /// The facts are taken now; the values are copied to the CPU only by save(),
  /// so storing a GPU result does not synchronize or count as a copy.
  void put(const std::string& name, const tiny::Tensor& tensor);
  /// @brief Stores every tensor of a state dict under `prefix.` + its key.
  void put_state(const std::string& prefix, const tiny::StateDict& state);

  /// @brief The tensor's values, on the CPU. Throws tiny::IndexError when absent.
  tiny::Tensor tensor(const std::string& name) const;
  /// @brief The tensor's device, dtype and other facts. Throws tiny::IndexError when absent.
  const TensorInfo& info(const std::string& name) const;
  /// @brief True when a tensor of that name was stored.
  bool has(const std::string& name) const { return infos_.count(name) != 0; }
  /// @brief The tensors stored under `prefix.` (put_state), keys without the prefix, in stored order.
  tiny::StateDict state(const std::string& prefix) const;
  /// @brief Names of all tensors, in stored order.
  const std::vector<std::string>& tensor_names() const { return order_; }

  /// @brief Writes the folder (created if missing).
  void save(const std::filesystem::path& dir) const;
  /// @brief Writes the tensors' .npy files into `dir` (created if missing) and
  /// returns the text of values.json, which lists them with a digest of each
  /// file: what save() writes, and what a graded runner sends the checker.
  std::string save_tensors(const std::filesystem::path& dir) const;
  /// @brief Reads a folder written by save(). Throws tiny::IOError for a missing or damaged one.
  static Bundle load(const std::filesystem::path& dir);
  /// @brief Reads `text` (a values.json, named `source` in messages) and the
  /// .npy files it lists in `dir`. Throws tiny::IOError for text over the
  /// exchange limits (checked before parsing), damaged text, a file listed
  /// twice, or a file that differs from its digest.
  static Bundle parse(const std::filesystem::path& dir, const std::string& text, const std::string& source);

 private:
  std::map<std::string, tiny::Tensor> tensors_;
  std::map<std::string, TensorInfo> infos_;
  std::vector<std::string> order_;
};

}  // namespace workbook
