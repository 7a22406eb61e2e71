/// @file nn/container.h
/// @brief `tiny::nn::Sequential`: modules applied one after another (PyTorch's `torch.nn.Sequential`).
#pragma once

#include <cstddef>
#include <initializer_list>
#include <memory>
#include <optional>
#include <string>

#include "tiny/nn/module.h"

namespace tiny::nn {

/// @brief Runs its children in order, each on the previous one's output (PyTorch's `nn.Sequential`).
///
/// Children are named "0", "1", ... so parameters are "0.weight", "2.bias", as in PyTorch:
/// @code
/// auto model = std::make_shared<nn::Sequential>(std::make_shared<nn::Linear>(784, 512),
///                                               std::make_shared<nn::ReLU>(),
///                                               std::make_shared<nn::Linear>(512, 10));
/// @endcode
class Sequential : public Module {
 public:
  /// @brief An empty Sequential (forward is the identity).
  Sequential() = default;
  /// @brief The given modules in order: `nn::Sequential seq{a, b, c}`.
  Sequential(std::initializer_list<std::shared_ptr<Module>> modules);
  /// @brief The given modules in order; works with `std::make_shared<nn::Sequential>(a, b, c)`.
  template <class M, class... Ms>
  explicit Sequential(std::shared_ptr<M> first, std::shared_ptr<Ms>... rest) {
    push_back(std::move(first));
    (push_back(std::move(rest)), ...);
  }

  /// @brief Appends a module named after its position (PyTorch's `append`).
  void push_back(std::shared_ptr<Module> module);
  /// @brief Number of modules (PyTorch's `len(seq)`).
  size_t size() const { return modules_.size(); }
  /// @brief The module at `index`; negative counts from the end (PyTorch's `seq[i]`).
  std::shared_ptr<Module> operator[](int64_t index) const;
  /// @brief The module at `index` as its own type (throws tiny::Error when it is another type).
  template <class T>
  std::shared_ptr<T> at(int64_t index) const {
    auto typed = std::dynamic_pointer_cast<T>((*this)[index]);
    TINY_CHECK(typed != nullptr, Error, "Sequential::at: module ", index, " is a ", (*this)[index]->name(),
               ", not the type asked for");
    return typed;
  }
  /// @brief Iterates the modules in order.
  auto begin() const { return modules_.begin(); }
  /// @brief End of the iteration.
  auto end() const { return modules_.end(); }

  /// @brief Applies each module in turn.
  Tensor forward(const Tensor& x) override;
  /// @brief "Sequential".
  std::string name() const override { return "Sequential"; }
  /// @brief A deep copy on `device` (or where this one is), drawing no random numbers (LibTorch's `clone`).
  std::shared_ptr<Module> clone(const std::optional<Device>& device = std::nullopt) const override;

 private:
  std::vector<std::shared_ptr<Module>> modules_;
};

}  // namespace tiny::nn
