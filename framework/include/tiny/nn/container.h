/// @file nn/container.h
/// @brief Containers of modules: `Sequential` (applied one after another), `ModuleList` and `ModuleDict`
/// (held and registered, called by your own forward), as PyTorch's `torch.nn` ones.
#pragma once

#include <cstddef>
#include <initializer_list>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

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

/// @brief A list of modules whose parameters belong to the parent, called however your forward likes
/// (PyTorch's `nn.ModuleList`).
///
/// Children are named "0", "1", ... as in PyTorch. It has no forward of its own:
/// @code
/// struct Tower : nn::Module {
///   std::shared_ptr<nn::ModuleList> blocks = register_module("blocks", std::make_shared<nn::ModuleList>());
///   Tensor forward(const Tensor& x) override {
///     Tensor h = x;
///     for (const auto& block : *blocks) h = h + (*block)(h);  // a residual stack
///     return h;
///   }
/// };
/// @endcode
class ModuleList : public Module {
 public:
  /// @brief An empty list.
  ModuleList() = default;
  /// @brief The given modules in order: `nn::ModuleList list{a, b}`.
  ModuleList(std::initializer_list<std::shared_ptr<Module>> modules);
  /// @brief Appends a module named after its position (PyTorch's `append`).
  void push_back(std::shared_ptr<Module> module);
  /// @brief Same as push_back (PyTorch's name).
  void append(std::shared_ptr<Module> module) { push_back(std::move(module)); }
  /// @brief Number of modules (PyTorch's `len(list)`).
  size_t size() const { return modules_.size(); }
  /// @brief The module at `index`; negative counts from the end (PyTorch's `list[i]`).
  std::shared_ptr<Module> operator[](int64_t index) const;
  /// @brief Iterates the modules in order.
  auto begin() const { return modules_.begin(); }
  /// @brief End of the iteration.
  auto end() const { return modules_.end(); }
  /// @brief Throws tiny::NotImplemented: a ModuleList is called by its parent's forward, module by module.
  Tensor forward(const Tensor& x) override;
  /// @brief "ModuleList".
  std::string name() const override { return "ModuleList"; }
  /// @brief A deep copy on `device` (or where this one is), drawing no random numbers (LibTorch's `clone`).
  std::shared_ptr<Module> clone(const std::optional<Device>& device = std::nullopt) const override;

 private:
  std::vector<std::shared_ptr<Module>> modules_;
};

/// @brief Modules by name, in insertion order, registered under those names (PyTorch's `nn.ModuleDict`).
///
/// `heads->insert("digits", std::make_shared<nn::Linear>(64, 10))` makes parameters named
/// "heads.digits.weight"; `(*(*heads)["digits"])(h)` calls it.
class ModuleDict : public Module {
 public:
  /// @brief An empty dict.
  ModuleDict() = default;
  /// @brief The given (name, module) pairs in order.
  ModuleDict(std::initializer_list<std::pair<std::string, std::shared_ptr<Module>>> items);
  /// @brief Adds `module` under `key` (PyTorch's `dict[key] = module`); a key already present is an error.
  void insert(const std::string& key, std::shared_ptr<Module> module);
  /// @brief The module under `key`; a missing key throws tiny::IndexError listing the keys.
  std::shared_ptr<Module> operator[](const std::string& key) const;
  /// @brief True when `key` is present (PyTorch's `key in dict`).
  bool contains(const std::string& key) const;
  /// @brief The keys in insertion order.
  std::vector<std::string> keys() const;
  /// @brief (key, module) pairs in insertion order (PyTorch's `items()`).
  const std::vector<std::pair<std::string, std::shared_ptr<Module>>>& items() const { return items_; }
  /// @brief Number of modules.
  size_t size() const { return items_.size(); }
  /// @brief Throws tiny::NotImplemented: a ModuleDict is called by its parent's forward, module by module.
  Tensor forward(const Tensor& x) override;
  /// @brief "ModuleDict".
  std::string name() const override { return "ModuleDict"; }
  /// @brief A deep copy on `device` (or where this one is), drawing no random numbers (LibTorch's `clone`).
  std::shared_ptr<Module> clone(const std::optional<Device>& device = std::nullopt) const override;

 private:
  std::vector<std::pair<std::string, std::shared_ptr<Module>>> items_;
};

}  // namespace tiny::nn
