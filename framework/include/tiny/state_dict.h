/// @file state_dict.h
/// @brief `tiny::StateDict`: named tensors in insertion order, as PyTorch's `state_dict()` returns.
#pragma once

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "tiny/tensor.h"

namespace tiny {

/// @brief An ordered map from dotted names ("0.weight") to tensors, plus string metadata.
///
/// `Module::state_dict()` fills only the tensors; an optimizer also stores its
/// hyperparameters and step counts in `metadata`. `tiny::save` writes both to a
/// safetensors file (the metadata as its `__metadata__`).
class StateDict {
 public:
  /// @brief Adds `value` under `key` (throws tiny::ValueError if the key exists).
  void insert(const std::string& key, const Tensor& value);
  /// @brief The tensor under `key` (throws tiny::IndexError naming the key and a few existing ones).
  const Tensor& at(const std::string& key) const;
  /// @brief True when `key` is present.
  bool contains(const std::string& key) const { return index_.count(key) != 0; }
  /// @brief Number of tensors.
  size_t size() const { return items_.size(); }
  /// @brief True when there are no tensors.
  bool empty() const { return items_.empty(); }
  /// @brief The (name, tensor) pairs in insertion order.
  const std::vector<std::pair<std::string, Tensor>>& items() const { return items_; }
  /// @brief Iterates the (name, tensor) pairs in insertion order.
  auto begin() const { return items_.begin(); }
  /// @brief End of the iteration.
  auto end() const { return items_.end(); }

  /// @brief Non-tensor values (hyperparameters, step counts) as strings.
  std::map<std::string, std::string> metadata;

 private:
  std::vector<std::pair<std::string, Tensor>> items_;
  std::map<std::string, size_t> index_;
};

}  // namespace tiny
