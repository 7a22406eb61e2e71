// tiny::nn::Module: registration, traversal, state dicts, in-place dtype and device moves, printing.
#include "tiny/nn/module.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <typeinfo>
#if __has_include(<cxxabi.h>)
#include <cxxabi.h>
#endif
#include <ostream>
#include <sstream>
#include <unordered_map>
#include <unordered_set>

#include "core/tensor_impl.h"
#include "tiny/autograd.h"

namespace tiny::nn {

namespace {

std::string join_name(const std::string& prefix, const std::string& name) {
  return prefix.empty() ? name : prefix + "." + name;
}

// Makes `handle`'s TensorImpl describe `src`'s data: storage, layout and
// dtype are swapped in, the autograd meta (requires_grad, grad, hooks) stays.
// Every copy of the handle (an optimizer's list of parameters) sees the change.
void swap_data_into(const Tensor& handle, const Tensor& src) {
  if (src.is_same(handle)) return;
  TensorImpl* dst = handle.unsafe_impl();
  const TensorImpl* from = src.unsafe_impl();
  dst->storage = from->storage;
  dst->sizes = from->sizes;
  dst->strides = from->strides;
  dst->offset = from->offset;
  dst->dtype = from->dtype;
}

}  // namespace

// ---- registration -------------------------------------------------------------

void Module::check_new_name(const std::string& name, const char* what) const {
  TINY_CHECK(!name.empty(), ValueError, what, " name can't be empty string \"\"");
  TINY_CHECK(name.find('.') == std::string::npos, ValueError, what, " name can't contain \".\", got \"", name, "\"");
  bool taken = false;
  for (const auto& p : parameters_) taken = taken || p.first == name;
  for (const auto& b : buffers_) taken = taken || b.name == name;
  for (const auto& c : children_) taken = taken || c.first == name;
  TINY_CHECK(!taken, ValueError, "attribute '", name, "' already exists in this ", this->name(),
             " (each parameter, buffer and child module needs its own name)");
}

Tensor Module::register_parameter(const std::string& name, Tensor tensor, bool requires_grad) {
  check_new_name(name, "parameter");
  if (tensor.defined()) {
    // nn.Parameter(t) is a leaf sharing t's data.
    if (!tensor.is_leaf()) tensor = tensor.detach();
    tensor.requires_grad_(requires_grad);
  }
  parameters_.emplace_back(name, tensor);
  return tensor;
}

Tensor Module::register_buffer(const std::string& name, Tensor tensor, bool persistent) {
  check_new_name(name, "buffer");
  if (tensor.defined() && tensor.requires_grad()) tensor = tensor.detach();
  buffers_.push_back(Buffer{name, tensor, persistent});
  return tensor;
}

void Module::register_module_impl(const std::string& name, std::shared_ptr<Module> module) {
  check_new_name(name, "module");
  TINY_CHECK(module != nullptr, ValueError, "register_module: the module '", name, "' is a null pointer");
  TINY_CHECK(module.get() != this, ValueError, "register_module: a module cannot be its own child ('", name, "')");
  children_.emplace_back(name, std::move(module));
}

// ---- traversal ----------------------------------------------------------------

template <class Fn>
void Module::visit(const std::string& prefix, Fn&& fn) const {
  fn(prefix, *this);
  for (const auto& [name, child] : children_) child->visit(join_name(prefix, name), fn);
}

std::vector<std::pair<std::string, Tensor>> Module::named_parameters(bool recurse) const {
  std::vector<std::pair<std::string, Tensor>> out;
  std::unordered_set<const TensorImpl*> seen;
  auto collect = [&](const std::string& prefix, const Module& m) {
    for (const auto& [name, t] : m.parameters_) {
      if (t.defined() && seen.insert(t.unsafe_impl()).second) out.emplace_back(join_name(prefix, name), t);
    }
  };
  if (recurse) {
    visit("", collect);
  } else {
    collect("", *this);
  }
  return out;
}

std::vector<Tensor> Module::parameters(bool recurse) const {
  std::vector<Tensor> out;
  for (auto& named : named_parameters(recurse)) out.push_back(std::move(named.second));
  return out;
}

std::vector<std::pair<std::string, Tensor>> Module::named_buffers(bool recurse) const {
  std::vector<std::pair<std::string, Tensor>> out;
  std::unordered_set<const TensorImpl*> seen;
  auto collect = [&](const std::string& prefix, const Module& m) {
    for (const auto& b : m.buffers_) {
      if (b.tensor.defined() && seen.insert(b.tensor.unsafe_impl()).second) {
        out.emplace_back(join_name(prefix, b.name), b.tensor);
      }
    }
  };
  if (recurse) {
    visit("", collect);
  } else {
    collect("", *this);
  }
  return out;
}

std::vector<Tensor> Module::buffers(bool recurse) const {
  std::vector<Tensor> out;
  for (auto& named : named_buffers(recurse)) out.push_back(std::move(named.second));
  return out;
}

std::vector<std::shared_ptr<Module>> Module::children() const {
  std::vector<std::shared_ptr<Module>> out;
  for (const auto& c : children_) out.push_back(c.second);
  return out;
}

std::vector<std::pair<std::string, std::shared_ptr<Module>>> Module::named_children() const { return children_; }

std::vector<std::pair<std::string, std::shared_ptr<Module>>> Module::named_modules() const {
  std::vector<std::pair<std::string, std::shared_ptr<Module>>> out;
  for (const auto& [name, child] : children_) {
    out.emplace_back(name, child);
    for (auto& [sub, m] : child->named_modules()) out.emplace_back(join_name(name, sub), m);
  }
  return out;
}

// ---- modes and gradients --------------------------------------------------------

Module& Module::train(bool on) {
  training_ = on;
  for (auto& c : children_) c.second->train(on);
  return *this;
}

void Module::zero_grad(bool set_to_none) {
  NoGradGuard no_grad;
  for (const Tensor& p : parameters()) {
    const Tensor g = p.grad();
    if (!g.defined()) continue;
    if (set_to_none) {
      p.set_grad(Tensor());
    } else {
      g.zero_();
    }
  }
}

// ---- saving and loading ---------------------------------------------------------

StateDict Module::state_dict() const {
  StateDict out;
  visit("", [&](const std::string& prefix, const Module& m) {
    for (const auto& [name, t] : m.parameters_) {
      if (t.defined()) out.insert(join_name(prefix, name), t.detach());
    }
    for (const auto& b : m.buffers_) {
      if (b.tensor.defined() && b.persistent) out.insert(join_name(prefix, b.name), b.tensor.detach());
    }
  });
  return out;
}

LoadStateDictResult Module::load_state_dict(const StateDict& state, bool strict) {
  // The module's own (key, tensor) pairs, in state_dict order. Tied tensors appear under each name.
  std::vector<std::pair<std::string, Tensor>> own;
  visit("", [&](const std::string& prefix, const Module& m) {
    for (const auto& [name, t] : m.parameters_) {
      if (t.defined()) own.emplace_back(join_name(prefix, name), t);
    }
    for (const auto& b : m.buffers_) {
      if (b.tensor.defined() && b.persistent) own.emplace_back(join_name(prefix, b.name), b.tensor);
    }
  });

  LoadStateDictResult result;
  std::vector<std::string> mismatches;
  std::unordered_set<std::string> expected;
  for (const auto& [key, t] : own) {
    expected.insert(key);
    if (!state.contains(key)) {
      result.missing_keys.push_back(key);
      continue;
    }
    const Tensor& src = state.at(key);
    if (!src.defined() || src.sizes() != t.sizes()) {
      mismatches.push_back(tiny::detail::concat("size mismatch for ", key, ": copying a param with shape ",
                                          src.defined() ? shape_str(src.sizes()) : std::string("(undefined)"),
                                          " from checkpoint, the shape in current model is ", shape_str(t.sizes()),
                                          "."));
    }
  }
  for (const auto& [key, t] : state) {
    if (!expected.count(key)) result.unexpected_keys.push_back(key);
  }

  auto quoted = [](const std::vector<std::string>& keys) {
    std::string s;
    for (size_t i = 0; i < keys.size(); ++i) s += (i ? ", \"" : "\"") + keys[i] + "\"";
    return s;
  };
  std::vector<std::string> errors;
  if (strict && !result.missing_keys.empty()) {
    errors.push_back("Missing key(s) in state_dict: " + quoted(result.missing_keys) + ". ");
  }
  if (strict && !result.unexpected_keys.empty()) {
    errors.push_back("Unexpected key(s) in state_dict: " + quoted(result.unexpected_keys) + ". ");
  }
  errors.insert(errors.end(), mismatches.begin(), mismatches.end());
  if (!errors.empty()) {
    std::string msg = "Error(s) in loading state_dict for " + name() + ":";
    for (const auto& e : errors) msg += "\n\t" + e;
    throw Error(msg);
  }

  // Everything checked: copy in place (copy_ converts the dtype).
  NoGradGuard no_grad;
  for (const auto& [key, t] : own) {
    if (state.contains(key)) t.copy_(state.at(key));
  }
  return result;
}

// ---- dtype and device -------------------------------------------------------------

template <class Convert>
void Module::convert_in_place(Convert&& convert) {
  std::vector<Tensor> tensors;
  std::unordered_set<const TensorImpl*> seen;
  visit("", [&](const std::string&, const Module& m) {
    auto add = [&](const Tensor& t) {
      if (t.defined() && seen.insert(t.unsafe_impl()).second) tensors.push_back(t);
    };
    for (const auto& p : m.parameters_) {
      add(p.second);
      if (p.second.defined()) add(p.second.grad());
    }
    for (const auto& b : m.buffers_) add(b.tensor);
  });
  // Convert everything first, then swap: a failure (an unusable device) leaves the module unchanged.
  std::vector<Tensor> converted;
  {
    NoGradGuard no_grad;
    for (const Tensor& t : tensors) converted.push_back(convert(t));
  }
  for (size_t i = 0; i < tensors.size(); ++i) {
    if (converted[i].is_same(tensors[i])) continue;
    swap_data_into(tensors[i], converted[i]);
    bump_version(tensors[i]);
  }
}

Module& Module::to(Dtype dtype) {
  TINY_CHECK(tiny::is_floating_point(dtype), DtypeError, "nn.Module.to only accepts floating point dtypes, but got "
             "desired dtype=", dtype_name(dtype));
  convert_in_place([dtype](const Tensor& t) { return t.is_floating_point() ? t.to(dtype) : t; });
  return *this;
}

Module& Module::to(const Device& device) {
  convert_in_place([&device](const Tensor& t) { return t.to(device); });
  return *this;
}

// ---- copying ----------------------------------------------------------------------------

std::shared_ptr<Module> Module::clone(const std::optional<Device>& /*device*/) const {
  const std::string type = name();
  TINY_THROW(NotImplemented, type, " does not implement clone(), which DataParallel needs to put a replica of the "
             "module on each device. If ", type, " has a default constructor, derive it from tiny::nn::Cloneable<",
             type, "> instead of tiny::nn::Module; otherwise override `std::shared_ptr<tiny::nn::Module> "
             "clone(const std::optional<tiny::Device>& device) const` in ", type, ": build a new ", type,
             " with the same arguments and call copy_state_into(*copy, device) (see nn/module.h).");
}

void Module::copy_state_into(Module& copy, const std::optional<Device>& device, bool recurse) const {
  NoGradGuard no_grad;
  // One copy per tensor, so weights tied in the original stay tied in the copy.
  std::unordered_map<const TensorImpl*, Tensor> copies;
  auto copy_of = [&](const Tensor& t) {
    auto found = copies.find(t.unsafe_impl());
    if (found != copies.end()) return found->second;
    const Tensor source = t.detach();
    Tensor value = device ? source.to(*device) : source;
    if (value.is_same(source)) value = source.clone();  // already there: still a copy of its own
    copies.emplace(t.unsafe_impl(), value);
    return value;
  };
  auto check_same = [](const Module& from, const Module& to, const std::string& prefix, const char* what,
                       size_t from_count, size_t to_count, const std::string& from_name, const std::string& to_name) {
    TINY_CHECK(from_count == to_count && from_name == to_name, Error, "clone(): the copy of ", from.name(),
               prefix.empty() ? "" : " (at '" + prefix + "')", " does not have the structure of the original: its ",
               what, "s are ", to_count, " starting '", to_name, "', the original's ", from_count, " starting '",
               from_name, "'. clone() must build a module of the same type with the same arguments before "
               "copy_state_into (fix ", from.name(), "::clone).");
    (void)to;
  };
  std::function<void(const Module&, Module&, const std::string&)> walk = [&](const Module& from, Module& to,
                                                                              const std::string& prefix) {
    for (size_t i = 0; i < std::max(from.parameters_.size(), to.parameters_.size()); ++i) {
      const bool both = i < from.parameters_.size() && i < to.parameters_.size();
      check_same(from, to, prefix, "parameter", from.parameters_.size(), to.parameters_.size(),
                 i < from.parameters_.size() ? from.parameters_[i].first : "", both ? to.parameters_[i].first : "");
      const Tensor& p = from.parameters_[i].second;
      const Tensor& q = to.parameters_[i].second;
      TINY_CHECK(p.defined() == q.defined(), Error, "clone(): parameter '", join_name(prefix, from.parameters_[i].first),
                 "' is ", p.defined() ? "set" : "empty", " in the original ", from.name(), " but not in its copy: ",
                 "build the copy with the same arguments (fix ", from.name(), "::clone)");
      if (!p.defined()) continue;
      swap_data_into(q, copy_of(p));
      q.unsafe_impl()->autograd_meta().requires_grad = p.requires_grad();
    }
    for (size_t i = 0; i < std::max(from.buffers_.size(), to.buffers_.size()); ++i) {
      const bool both = i < from.buffers_.size() && i < to.buffers_.size();
      check_same(from, to, prefix, "buffer", from.buffers_.size(), to.buffers_.size(),
                 i < from.buffers_.size() ? from.buffers_[i].name : "", both ? to.buffers_[i].name : "");
      const Tensor& b = from.buffers_[i].tensor;
      if (b.defined() && to.buffers_[i].tensor.defined()) {
        swap_data_into(to.buffers_[i].tensor, copy_of(b));
      } else {
        to.buffers_[i].tensor = b.defined() ? copy_of(b) : Tensor();
      }
    }
    to.training_ = from.training_;
    if (!recurse) return;
    for (size_t i = 0; i < std::max(from.children_.size(), to.children_.size()); ++i) {
      const bool both = i < from.children_.size() && i < to.children_.size();
      check_same(from, to, prefix, "child module", from.children_.size(), to.children_.size(),
                 i < from.children_.size() ? from.children_[i].first : "", both ? to.children_[i].first : "");
      walk(*from.children_[i].second, *to.children_[i].second, join_name(prefix, from.children_[i].first));
    }
  };
  walk(*this, copy, "");
}

// ---- naming ---------------------------------------------------------------------------

std::string Module::name() const {
  const char* mangled = typeid(*this).name();
  std::string full = mangled;
#if __has_include(<cxxabi.h>)
  int status = 0;
  char* demangled = abi::__cxa_demangle(mangled, nullptr, nullptr, &status);
  if (status == 0 && demangled != nullptr) full = demangled;
  std::free(demangled);
#endif
  // Drop namespaces and enclosing scopes ("(anonymous namespace)::MLP", "f()::Local"), but not inside
  // template arguments ("Wrapper<tiny::nn::Linear>" stays whole).
  int depth = 0;
  size_t start = 0;
  for (size_t i = 0; i < full.size(); ++i) {
    const char c = full[i];
    if (c == '<' || c == '(') ++depth;
    if (c == '>' || c == ')') --depth;
    if (depth == 0 && c == ':' && i + 1 < full.size() && full[i + 1] == ':') start = i + 2;
  }
  return full.substr(start);
}

// ---- computing --------------------------------------------------------------------

Tensor Module::operator()(const Tensor& input) {
  if (!hooks_ || (hooks_->pre.empty() && hooks_->post.empty())) return forward(input);
  // Copies: a hook may remove itself (or another) while it runs.
  const std::shared_ptr<ForwardHooks> hooks = hooks_;
  const auto pre = hooks->pre;
  Tensor x = input;
  for (const auto& entry : pre) {
    if (std::optional<Tensor> replaced = entry.second(*this, x)) x = *replaced;
  }
  Tensor y = forward(x);
  const auto post = hooks->post;
  for (const auto& entry : post) {
    if (std::optional<Tensor> replaced = entry.second(*this, x, y)) y = *replaced;
  }
  return y;
}

Module::RemovableHandle Module::register_forward_hook(ForwardHook hook) {
  TINY_CHECK(static_cast<bool>(hook), ValueError, "register_forward_hook: the hook is empty (an unset std::function)");
  if (!hooks_) hooks_ = std::make_shared<ForwardHooks>();
  const int64_t id = hooks_->next_id++;
  hooks_->post[id] = std::move(hook);
  return RemovableHandle(hooks_, id);
}

Module::RemovableHandle Module::register_forward_pre_hook(ForwardPreHook hook) {
  TINY_CHECK(static_cast<bool>(hook), ValueError,
             "register_forward_pre_hook: the hook is empty (an unset std::function)");
  if (!hooks_) hooks_ = std::make_shared<ForwardHooks>();
  const int64_t id = hooks_->next_id++;
  hooks_->pre[id] = std::move(hook);
  return RemovableHandle(hooks_, id);
}

void Module::RemovableHandle::remove() {
  if (std::shared_ptr<ForwardHooks> hooks = hooks_.lock()) {
    hooks->pre.erase(id_);
    hooks->post.erase(id_);
  }
  hooks_.reset();
}

Module& Module::apply(const std::function<void(Module&)>& fn) {
  for (const auto& child : children_) child.second->apply(fn);
  fn(*this);
  return *this;
}

Tensor Module::forward(const Tensor& /*input*/) {
  TINY_THROW(NotImplemented, "Module [", name(), "] is missing the required \"forward\" function: override ",
             "`Tensor forward(const Tensor& x)` in your module");
}

// ---- printing -----------------------------------------------------------------------

namespace {

// PyTorch's _addindent: indents every line but the first.
std::string add_indent(const std::string& s, int spaces) {
  std::string out;
  const std::string pad(static_cast<size_t>(spaces), ' ');
  for (char c : s) {
    out += c;
    if (c == '\n') out += pad;
  }
  return out;
}

std::vector<std::string> split_lines(const std::string& s) {
  std::vector<std::string> lines;
  std::string line;
  std::istringstream in(s);
  while (std::getline(in, line)) lines.push_back(line);
  return lines;
}

}  // namespace

std::string repr(const Module& module) {
  std::vector<std::string> extra_lines;
  const std::string extra = module.extra_repr();
  if (!extra.empty()) extra_lines = split_lines(extra);
  std::vector<std::string> child_lines;
  for (const auto& [key, child] : module.named_children()) {
    child_lines.push_back("(" + key + "): " + add_indent(repr(*child), 2));
  }
  std::string s = module.name() + "(";
  if (extra_lines.size() == 1 && child_lines.empty()) {
    s += extra_lines[0];
  } else if (!extra_lines.empty() || !child_lines.empty()) {
    std::vector<std::string> lines = extra_lines;
    lines.insert(lines.end(), child_lines.begin(), child_lines.end());
    s += "\n";
    for (const auto& line : lines) s += "  " + line + "\n";
  }
  return s + ")";
}

std::ostream& operator<<(std::ostream& out, const Module& module) { return out << repr(module); }

namespace detail {

std::string python_float_repr(double value) {
  if (std::isnan(value)) return "nan";
  if (std::isinf(value)) return value > 0 ? "inf" : "-inf";
  if (value == 0.0) return std::signbit(value) ? "-0.0" : "0.0";
  // The shortest %.*e text that reads back exactly (Python's repr is the shortest round trip).
  char buf[64];
  int digits = 1;
  for (; digits <= 17; ++digits) {
    std::snprintf(buf, sizeof buf, "%.*e", digits - 1, value);
    if (std::strtod(buf, nullptr) == value) break;
  }
  const int exponent = std::atoi(std::strchr(buf, 'e') + 1);
  if (exponent < -4 || exponent >= 16) {
    // Python: "1e-05", "1.5e+16": mantissa digits, then e, sign and at least two digits.
    std::string s(buf);
    return s;
  }
  // Fixed notation with exactly the needed decimals, and ".0" for whole numbers.
  const int decimals = std::max(digits - 1 - exponent, 0);
  std::snprintf(buf, sizeof buf, "%.*f", decimals, value);
  std::string s(buf);
  if (s.find('.') == std::string::npos) s += ".0";
  return s;
}

}  // namespace detail

}  // namespace tiny::nn
