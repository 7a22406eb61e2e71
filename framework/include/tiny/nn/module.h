/// @file nn/module.h
/// @brief `tiny::nn::Module`: the base class of every layer and model (PyTorch's `torch.nn.Module`).
///
/// A module owns named parameters (trained tensors), named buffers (saved and
/// moved with the module, not trained) and named child modules. Everything
/// that walks the tree (parameters(), state_dict(), train(), to()) follows
/// the order of registration, as PyTorch does, and builds dotted names such as
/// "fc1.weight" or "0.bias".
///
/// A model of your own is a subclass that registers its pieces in its
/// constructor and implements forward() (see docs/custom_module.md):
/// @code
/// struct MLP : tiny::nn::Module {
///   MLP() {
///     fc1 = register_module("fc1", std::make_shared<tiny::nn::Linear>(784, 128));
///     fc2 = register_module("fc2", std::make_shared<tiny::nn::Linear>(128, 10));
///   }
///   tiny::Tensor forward(const tiny::Tensor& x) override { return (*fc2)(tiny::relu((*fc1)(x))); }
///   std::shared_ptr<tiny::nn::Linear> fc1, fc2;
/// };
/// @endcode
#pragma once

#include <cstdint>
#include <functional>
#include <iosfwd>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "tiny/device.h"
#include "tiny/dtype.h"
#include "tiny/error.h"
#include "tiny/generator.h"
#include "tiny/state_dict.h"
#include "tiny/tensor.h"

namespace tiny::nn {

/// @brief What `load_state_dict(..., strict=false)` skipped (PyTorch's `_IncompatibleKeys`).
struct LoadStateDictResult {
  std::vector<std::string> missing_keys;     ///< keys the module has but the state dict lacks
  std::vector<std::string> unexpected_keys;  ///< keys the state dict has but the module lacks
};

/// @brief The base class of layers and models (PyTorch's `torch.nn.Module`).
///
/// Modules are held by `std::shared_ptr` (children are shared, like Python
/// references); copying one is disabled because a copy would silently share
/// its parameters. A module holds Tensors, never raw pointers, so moving it
/// to another device or dtype only swaps what those Tensors point to.
class Module : public std::enable_shared_from_this<Module> {
 public:
  /// @brief An empty module (PyTorch's `nn.Module()`).
  Module() = default;
  /// @brief Virtual: modules are used through base-class pointers.
  virtual ~Module() = default;
  Module(const Module&) = delete;
  Module& operator=(const Module&) = delete;

  // ---- registration -------------------------------------------------------
  /// @brief Adds a trainable tensor under `name` and returns it (PyTorch's `register_parameter`).
  ///
  /// The tensor becomes a leaf with `requires_grad` set as asked (a non-leaf is
  /// detached first, as `nn.Parameter(t)` does). An undefined tensor registers
  /// an empty slot (PyTorch's `register_parameter("bias", None)`), skipped by
  /// parameters() and state_dict().
  Tensor register_parameter(const std::string& name, Tensor tensor, bool requires_grad = true);
  /// @brief Adds a non-trained tensor (running statistics, masks) under `name` and returns it (PyTorch's `register_buffer`).
  ///
  /// Buffers are moved by to() and, when `persistent`, saved by state_dict().
  Tensor register_buffer(const std::string& name, Tensor tensor, bool persistent = true);
  /// @brief Adds a child module under `name` and returns it with its own type (PyTorch's `add_module`).
  template <class M>
  std::shared_ptr<M> register_module(const std::string& name, std::shared_ptr<M> module) {
    register_module_impl(name, module);
    return module;
  }

  // ---- traversal ----------------------------------------------------------
  /// @brief Parameters of this module and, when `recurse`, of its descendants (PyTorch's `parameters()`).
  std::vector<Tensor> parameters(bool recurse = true) const;
  /// @brief (dotted name, parameter) pairs in registration order (PyTorch's `named_parameters()`).
  ///
  /// A tensor registered twice (tied weights) is listed once, under its first name.
  std::vector<std::pair<std::string, Tensor>> named_parameters(bool recurse = true) const;
  /// @brief Buffers of this module and, when `recurse`, of its descendants (PyTorch's `buffers()`).
  std::vector<Tensor> buffers(bool recurse = true) const;
  /// @brief (dotted name, buffer) pairs in registration order (PyTorch's `named_buffers()`).
  std::vector<std::pair<std::string, Tensor>> named_buffers(bool recurse = true) const;
  /// @brief The direct children in registration order (PyTorch's `children()`).
  std::vector<std::shared_ptr<Module>> children() const;
  /// @brief (name, child) pairs of the direct children (PyTorch's `named_children()`).
  std::vector<std::pair<std::string, std::shared_ptr<Module>>> named_children() const;
  /// @brief This module's descendants with dotted names, depth first (PyTorch's `named_modules()` minus the root).
  std::vector<std::pair<std::string, std::shared_ptr<Module>>> named_modules() const;

  // ---- modes and gradients ------------------------------------------------
  /// @brief Sets training mode on this module and every descendant (PyTorch's `train(mode)`).
  Module& train(bool on = true);
  /// @brief Same as `train(false)`: Dropout becomes the identity (PyTorch's `eval()`).
  Module& eval() { return train(false); }
  /// @brief True in training mode (PyTorch's `module.training`).
  bool is_training() const { return training_; }
  /// @brief Clears every parameter's gradient: undefined when `set_to_none`, else zeros (PyTorch's `zero_grad`).
  void zero_grad(bool set_to_none = true);

  // ---- saving and loading ---------------------------------------------------
  /// @brief Parameters then persistent buffers of each module, depth first, with dotted names (PyTorch's `state_dict()`).
  ///
  /// The tensors are detached handles sharing the module's memory, as in PyTorch:
  /// clone them to keep a snapshot that later training does not change.
  StateDict state_dict() const;
  /// @brief Copies values from `state` into the existing tensors, in place (PyTorch's `load_state_dict`).
  ///
  /// Nothing is allocated or replaced, so an optimizer that holds the
  /// parameters keeps working. All keys are checked before anything is
  /// copied: with `strict`, missing or unexpected keys throw tiny::Error listing
  /// them; a shape mismatch throws even when not strict (as in PyTorch). Values
  /// are converted to each tensor's dtype.
  LoadStateDictResult load_state_dict(const StateDict& state, bool strict = true);

  // ---- dtype and device -------------------------------------------------------
  /// @brief Converts every floating-point parameter and buffer (and gradient) to `dtype`, in place (PyTorch's `module.to(dtype)`).
  ///
  /// "In place" means the Tensor handles stay the same: an optimizer holding
  /// them sees the new dtype and data. Integer buffers are left unchanged.
  Module& to(Dtype dtype);
  /// @brief Moves every parameter and buffer (and gradient) to `device`, in place (PyTorch's `module.to(device)`).
  ///
  /// Throws the tensor layer's tiny::DeviceError when the device is unusable.
  Module& to(const Device& device);
  /// @brief `to(Device("cuda"))`: to the current GPU (PyTorch's `module.cuda()`).
  Module& cuda() { return to(Device("cuda")); }
  /// @brief `to(Device::cpu)` (PyTorch's `module.cpu()`).
  Module& cpu() { return to(Device()); }

  // ---- copying ----------------------------------------------------------------
  /// @brief A deep copy of this module with its own parameters and buffers, on `device` or where they are now (LibTorch's `module->clone(device)`).
  ///
  /// The copy has the same type, structure, values and training mode, and
  /// draws no random numbers; gradients are not copied. DataParallel uses it
  /// to put a replica of the model on each device. The library's modules
  /// implement it; the default throws tiny::NotImplemented naming the module
  /// and how to add it: derive from `tiny::nn::Cloneable<YourModule>` when it
  /// has a default constructor, or override clone() with copy_state_into().
  virtual std::shared_ptr<Module> clone(const std::optional<Device>& device = std::nullopt) const;

  // ---- computing ------------------------------------------------------------
  /// @brief The computation of the module; the default throws tiny::NotImplemented naming the module.
  virtual Tensor forward(const Tensor& input);
  /// @brief Calls forward() between the forward pre-hooks and hooks: `model(x)` (PyTorch's `__call__`).
  ///
  /// Call a child as `(*child)(x)`, not `child->forward(x)`, when its hooks must run (as in PyTorch).
  Tensor operator()(const Tensor& input);

  // ---- hooks ----------------------------------------------------------------
  /// @brief Called before forward() with the module and its input; a returned tensor replaces the input.
  using ForwardPreHook = std::function<std::optional<Tensor>(Module& module, const Tensor& input)>;
  /// @brief Called after forward() with the module, its input and output; a returned tensor replaces the output.
  using ForwardHook = std::function<std::optional<Tensor>(Module& module, const Tensor& input, const Tensor& output)>;
  /// @brief The hooks of one module, by registration number (what a RemovableHandle points at).
  struct ForwardHooks {
    std::map<int64_t, ForwardPreHook> pre;  ///< run before forward(), in registration order
    std::map<int64_t, ForwardHook> post;    ///< run after forward(), in registration order
    int64_t next_id = 0;                    ///< the number the next hook gets
  };
  /// @brief Removes the hook it was returned for (PyTorch's `RemovableHandle`); removing twice does nothing.
  class RemovableHandle {
   public:
    /// @brief An empty handle: remove() does nothing.
    RemovableHandle() = default;
    /// @brief Unregisters the hook, if its module still exists.
    void remove();

   private:
    friend class Module;
    RemovableHandle(std::weak_ptr<ForwardHooks> hooks, int64_t id) : hooks_(std::move(hooks)), id_(id) {}
    std::weak_ptr<ForwardHooks> hooks_;
    int64_t id_ = -1;
  };
  /// @brief Runs `hook` after every call of this module, in registration order (PyTorch's `register_forward_hook`).
  ///
  /// For example, to keep a layer's activations: `layer->register_forward_hook([&](nn::Module&, const Tensor&,
  /// const Tensor& out) { saved = out.detach(); return std::nullopt; })`. clone() (and so DataParallel's
  /// replicas) does not copy hooks.
  RemovableHandle register_forward_hook(ForwardHook hook);
  /// @brief Runs `hook` before every call of this module, in registration order (PyTorch's `register_forward_pre_hook`).
  RemovableHandle register_forward_pre_hook(ForwardPreHook hook);
  /// @brief Calls `fn` on every descendant, children before parents, then on this module (PyTorch's `apply`),
  /// e.g. to initialise every Linear's weights.
  Module& apply(const std::function<void(Module&)>& fn);

  // ---- printing -------------------------------------------------------------
  /// @brief The class name printed by `operator<<` (PyTorch's `_get_name()`).
  ///
  /// By default the C++ class name without namespaces ("MLP" for `struct MLP : nn::Module`);
  /// override it to print something else.
  virtual std::string name() const;
  /// @brief The arguments printed inside the parentheses, e.g. "in_features=4, out_features=2, bias=True".
  virtual std::string extra_repr() const { return ""; }

 protected:
  /// @brief Gives `copy` (a module of the same type and structure) this module's values, for clone().
  ///
  /// Every parameter and buffer of `copy` is given a copy of the same-named
  /// tensor of this module (on `device`, or on the same device), with the same
  /// `requires_grad`, and the training mode; with `recurse`, children are
  /// matched by name and treated the same way. The handles of `copy` stay the
  /// same, so fields such as `copy->weight` see the values. Throws tiny::Error
  /// when the names or their order differ.
  void copy_state_into(Module& copy, const std::optional<Device>& device, bool recurse = true) const;

 private:
  void register_module_impl(const std::string& name, std::shared_ptr<Module> module);
  void check_new_name(const std::string& name, const char* what) const;
  // Calls fn(prefix, module) for this module and every descendant, depth first.
  template <class Fn>
  void visit(const std::string& prefix, Fn&& fn) const;
  // Applies convert() to every unique parameter, buffer and gradient of the tree, swapping the result into each handle.
  template <class Convert>
  void convert_in_place(Convert&& convert);

  struct Buffer {
    std::string name;
    Tensor tensor;
    bool persistent = true;
  };
  std::vector<std::pair<std::string, Tensor>> parameters_;
  std::vector<Buffer> buffers_;
  std::vector<std::pair<std::string, std::shared_ptr<Module>>> children_;
  bool training_ = true;
  std::shared_ptr<ForwardHooks> hooks_;  // made by the first register_forward_*hook
};

namespace detail {
/// @brief Restores the CPU default generator's state when destroyed.
///
/// clone() builds a skeleton module with its constructor, which initialises
/// weights randomly; this guard makes that invisible to the rest of the program.
class GeneratorStateGuard {
 public:
  /// @brief Remembers the CPU default generator's state.
  GeneratorStateGuard() : state_(default_cpu_generator().get_state()) {}
  /// @brief Puts the remembered state back.
  ~GeneratorStateGuard() { default_cpu_generator().set_state(state_); }
  GeneratorStateGuard(const GeneratorStateGuard&) = delete;
  GeneratorStateGuard& operator=(const GeneratorStateGuard&) = delete;

 private:
  PhiloxState state_;
};
}  // namespace detail

/// @brief Gives a module with a default constructor its clone() (LibTorch's `torch::nn::Cloneable`).
///
/// @code
/// struct MLP : tiny::nn::Cloneable<MLP> {
///   MLP() { fc = register_module("fc", std::make_shared<tiny::nn::Linear>(4, 2)); }
///   tiny::Tensor forward(const tiny::Tensor& x) override { return (*fc)(x); }
///   std::shared_ptr<tiny::nn::Linear> fc;
/// };
/// @endcode
/// clone() default-constructs a `Derived` (with the random generators restored
/// afterwards, so the program's random numbers do not change), then copies
/// every parameter, buffer and the training mode into it by name.
template <class Derived>
class Cloneable : public Module {
 public:
  /// @brief A deep copy on `device` (or where this module is): a fresh `Derived` given this module's values.
  std::shared_ptr<Module> clone(const std::optional<Device>& device = std::nullopt) const override {
    std::shared_ptr<Derived> copy;
    {
      nn::detail::GeneratorStateGuard keep_random_state;
      copy = std::make_shared<Derived>();
    }
    copy_state_into(*copy, device);
    return copy;
  }
};

/// @brief Prints the module tree exactly as PyTorch's `print(model)` does.
///
/// @code
/// Sequential(
///   (0): Linear(in_features=784, out_features=512, bias=True)
///   (1): ReLU()
/// )
/// @endcode
std::ostream& operator<<(std::ostream& out, const Module& module);
/// @brief The text `operator<<` prints (PyTorch's `repr(model)`).
std::string repr(const Module& module);

namespace detail {
/// @brief Python's `repr(float)`: the shortest text that reads back the same value ("1e-05", "0.2", "1.0").
std::string python_float_repr(double value);
/// @brief Python's "True" or "False".
inline const char* python_bool(bool value) { return value ? "True" : "False"; }
}  // namespace detail

}  // namespace tiny::nn
