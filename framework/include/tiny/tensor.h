/// @file tensor.h
/// @brief `tiny::Tensor`: a cheap handle to an n-dimensional array with autograd.
///
/// The names follow PyTorch: a `torch.Tensor` method `x.foo(...)` is
/// `x.foo(...)` here, and `torch.foo(x, ...)` is `tiny::foo(x, ...)` (see ops.h).
#pragma once

#include <cstdint>
#include <functional>
#include <initializer_list>
#include <iosfwd>
#include <memory>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "tiny/device.h"
#include "tiny/dtype.h"
#include "tiny/error.h"
#include "tiny/scalar.h"

namespace tiny {

class Tensor;
struct TensorImpl;
namespace autograd {
class Node;
}
namespace cuda {
class Stream;
}

/// @brief A shape or a list of strides: `{64, 784}`.
using IntArrayRef = std::vector<int64_t>;

/// @brief A gradient hook: receives the gradient, returns a replacement or an undefined tensor to keep it.
using GradHook = std::function<Tensor(const Tensor& grad)>;
/// @brief Runs after a leaf's `.grad()` was updated by backward (DDP's gradient buckets use it).
using PostAccumulateGradHook = std::function<void(Tensor& param)>;

/// @brief A handle to a registered hook; pass it to `remove_hook` to unregister.
struct HookHandle {
  int64_t id = -1;  ///< -1 when no hook was registered
};

/// @brief An n-dimensional array on a device, with an optional autograd history.
///
/// Copying a Tensor copies the handle, not the data (like assigning a Python
/// variable): use `clone()` for a copy. A default-constructed Tensor is
/// "undefined", like `None`.
class Tensor {
 public:
  /// @brief An undefined tensor (check with `defined()`).
  Tensor() = default;
  /// @brief Wraps an implementation (internal).
  explicit Tensor(std::shared_ptr<TensorImpl> impl) : impl_(std::move(impl)) {}

  // ---- metadata ---------------------------------------------------------
  /// @brief False for a default-constructed tensor.
  bool defined() const { return impl_ != nullptr; }
  /// @brief The shape, e.g. `{64, 784}` (PyTorch's `x.shape`).
  const IntArrayRef& sizes() const;
  /// @brief Same as sizes().
  const IntArrayRef& shape() const { return sizes(); }
  /// @brief The size of dimension `dim` (negative counts from the end).
  int64_t size(int64_t dim) const;
  /// @brief Elements to skip to move one step along each dimension.
  const IntArrayRef& strides() const;
  /// @brief The stride of dimension `dim`.
  int64_t stride(int64_t dim) const;
  /// @brief Offset of the first element in the storage, in elements.
  int64_t storage_offset() const;
  /// @brief Number of dimensions.
  int64_t dim() const;
  /// @brief Number of elements.
  int64_t numel() const;
  /// @brief The element type.
  Dtype dtype() const;
  /// @brief The device the data lives on.
  Device device() const;
  /// @brief Bytes per element.
  size_t element_size() const;
  /// @brief True when the elements are laid out in row-major order without gaps.
  bool is_contiguous() const;
  /// @brief True when on the CPU.
  bool is_cpu() const { return device().is_cpu(); }
  /// @brief True when on a GPU (real or emulated).
  bool is_cuda() const { return device().is_cuda(); }
  /// @brief The GPU index, or -1 for a CPU tensor (PyTorch's `get_device`).
  int get_device() const;
  /// @brief True for float16, bfloat16, float32 and float64 tensors.
  bool is_floating_point() const { return tiny::is_floating_point(dtype()); }
  /// @brief True when both handles share one implementation.
  bool is_same(const Tensor& other) const { return impl_ == other.impl_; }
  /// @brief Counter bumped by every in-place change of the data (shared by views).
  uint32_t version() const;

  // ---- element access (CPU tensors only) --------------------------------
  /// @brief Pointer to the first element; T must match the dtype and the tensor must be on the CPU.
  template <typename T>
  T* data_ptr() const {
    check_data_access(dtype_of<T>(), "data_ptr");
    return static_cast<T*>(raw_data_ptr());
  }
  /// @brief Untyped pointer to the first element (CPU tensors only).
  void* raw_data_ptr() const;
  /// @brief The value of a one-element tensor (PyTorch's `x.item()`).
  Scalar item() const;
  /// @brief The value of a one-element tensor converted to T: `loss.item<float>()`.
  template <typename T>
  T item() const {
    return item().to<T>();
  }
  /// @brief All elements in row-major order, converted to T (copies; works on any CPU layout).
  template <typename T>
  std::vector<T> to_vector() const;

  // ---- conversions and copies ------------------------------------------
  /// @brief A copy with its own storage; gradients flow back to this tensor.
  Tensor clone() const;
  /// @brief The same data, cut from the autograd graph (shares storage).
  Tensor detach() const;
  /// @brief This tensor if contiguous, else a contiguous copy.
  Tensor contiguous() const;
  /// @brief Converts to another dtype (returns this tensor when it already has it).
  [[nodiscard]] Tensor to(Dtype dtype) const;
  /// @brief `to(kFloat16)` (PyTorch's `x.half()`).
  [[nodiscard]] Tensor half() const { return to(kFloat16); }
  /// @brief `to(kBFloat16)` (PyTorch's `x.bfloat16()`).
  [[nodiscard]] Tensor bfloat16() const { return to(kBFloat16); }
  /// @brief `to(kFloat32)`: PyTorch's `x.float()` (`float` is a C++ keyword).
  [[nodiscard]] Tensor float32() const { return to(kFloat32); }
  /// @brief Moves to another device (returns this tensor when already there).
  [[nodiscard]] Tensor to(const Device& device, bool non_blocking = false) const;
  /// @brief Same as `to(Device::cpu)`.
  [[nodiscard]] Tensor cpu() const;
  /// @brief `to(Device("cuda"), non_blocking)`: to the current GPU (PyTorch's `x.cuda()`).
  [[nodiscard]] Tensor cuda(bool non_blocking = false) const { return to(Device("cuda"), non_blocking); }
  /// @brief A copy in page-locked (pinned) host memory, so copies to and from a GPU can be asynchronous.
  ///
  /// PyTorch's `x.pin_memory()`. Returns this tensor when it is already pinned.
  /// With `to(device, non_blocking=true)` from a pinned tensor, the copy runs
  /// later on the GPU's stream: changing the source before synchronizing
  /// changes what arrives (on real hardware that is a race; the emulator makes
  /// it repeatable).
  [[nodiscard]] Tensor pin_memory() const;
  /// @brief True for a CPU tensor in pinned memory (PyTorch's `is_pinned`).
  bool is_pinned() const;
  /// @brief Tells the allocator this GPU tensor is used on `stream` too (PyTorch's `record_stream`).
  ///
  /// Its memory is then reused only after the work queued on `stream` by the
  /// time the tensor is freed has run.
  void record_stream(const cuda::Stream& stream) const;

  // ---- views (share storage with this tensor) ---------------------------
  /// @brief A view with a new shape; one size may be -1. Needs compatible strides.
  Tensor view(const IntArrayRef& shape) const;
  /// @brief A view when possible, otherwise a copy, with a new shape.
  Tensor reshape(const IntArrayRef& shape) const;
  /// @brief Swaps two dimensions.
  Tensor transpose(int64_t dim0, int64_t dim1) const;
  /// @brief Transpose of a tensor with at most 2 dimensions.
  Tensor t() const;
  /// @brief Reorders dimensions: `x.permute({0, 2, 1})`.
  Tensor permute(const IntArrayRef& dims) const;
  /// @brief `length` elements of `dim` from `start`.
  Tensor narrow(int64_t dim, int64_t start, int64_t length) const;
  /// @brief Python's `x[start:end:step]` along `dim` (bounds clamp like Python slices).
  Tensor slice(int64_t dim, int64_t start, int64_t end, int64_t step = 1) const;
  /// @brief Index `index` of dimension `dim`, removing that dimension.
  Tensor select(int64_t dim, int64_t index) const;
  /// @brief `x[i]`: select along dimension 0.
  Tensor operator[](int64_t index) const { return select(0, index); }
  /// @brief Inserts a dimension of size 1 at `dim`.
  Tensor unsqueeze(int64_t dim) const;
  /// @brief Removes every dimension of size 1.
  Tensor squeeze() const;
  /// @brief Removes `dim` if its size is 1.
  Tensor squeeze(int64_t dim) const;
  /// @brief Merges dimensions `start_dim`..`end_dim` into one.
  Tensor flatten(int64_t start_dim = 0, int64_t end_dim = -1) const;
  /// @brief Repeats size-1 dimensions without copying (-1 keeps a size).
  Tensor expand(const IntArrayRef& shape) const;
  /// @brief `expand(other.sizes())`.
  Tensor expand_as(const Tensor& other) const { return expand(other.sizes()); }

  // ---- autograd -----------------------------------------------------------
  /// @brief True when gradients are tracked for this tensor.
  bool requires_grad() const;
  /// @brief Starts or stops tracking gradients of a leaf tensor; returns *this.
  Tensor& requires_grad_(bool requires_grad = true);
  /// @brief The accumulated gradient (undefined until a backward reaches this leaf).
  Tensor grad() const;
  /// @brief Replaces the gradient (an undefined tensor clears it, like `x.grad = None`).
  void set_grad(const Tensor& grad) const;
  /// @brief True for tensors created by the user rather than by an op with gradient tracking.
  bool is_leaf() const;
  /// @brief The node that created this tensor, or nullptr for leaves.
  std::shared_ptr<autograd::Node> grad_fn() const;
  /// @brief Computes gradients of this tensor with respect to the graph's leaves.
  ///
  /// `gradient` may be omitted only for a one-element tensor. The graph is freed
  /// afterwards unless `retain_graph` is true.
  void backward(const Tensor& gradient = Tensor(), bool retain_graph = false) const;
  /// @brief Keeps `.grad()` for this non-leaf tensor after backward.
  void retain_grad() const;
  /// @brief Registers a hook run with this tensor's gradient before it is used.
  HookHandle register_hook(GradHook hook) const;
  /// @brief Registers a hook run after backward accumulated into this leaf's `.grad()`.
  HookHandle register_post_accumulate_grad_hook(PostAccumulateGradHook hook) const;
  /// @brief Unregisters a hook returned by one of the register functions.
  void remove_hook(HookHandle handle) const;

  // ---- math (also free functions in ops.h) ------------------------------
  /// @brief `self + alpha * other` with broadcasting.
  Tensor add(const Tensor& other, const Scalar& alpha = 1) const;
  /// @brief `self - alpha * other`.
  Tensor sub(const Tensor& other, const Scalar& alpha = 1) const;
  /// @brief Elementwise product.
  Tensor mul(const Tensor& other) const;
  /// @brief Elementwise true division (integers give floats).
  Tensor div(const Tensor& other) const;
  /// @brief `self + other` for a number.
  Tensor add(const Scalar& other) const;
  /// @brief `self - other` for a number.
  Tensor sub(const Scalar& other) const;
  /// @brief `self * other` for a number: `w.mul(0.01)`.
  Tensor mul(const Scalar& other) const;
  /// @brief `self / other` for a number.
  Tensor div(const Scalar& other) const;
  /// @brief Elementwise power with a scalar exponent.
  Tensor pow(const Scalar& exponent) const;
  /// @brief Elementwise power with a tensor exponent.
  Tensor pow(const Tensor& exponent) const;
  /// @brief `-self`.
  Tensor neg() const;
  /// @brief `e^self`.
  Tensor exp() const;
  /// @brief Natural logarithm.
  Tensor log() const;
  /// @brief Square root.
  Tensor sqrt() const;
  /// @brief Absolute value.
  Tensor abs() const;
  /// @brief `max(self, 0)`.
  Tensor relu() const;
  /// @brief `1 / (1 + e^-self)`.
  Tensor sigmoid() const;
  /// @brief Hyperbolic tangent.
  Tensor tanh() const;
  /// @brief Limits values to [min, max]; either bound may be omitted.
  Tensor clamp(std::optional<Scalar> min, std::optional<Scalar> max = std::nullopt) const;
  /// @brief Sum of all elements.
  Tensor sum() const;
  /// @brief Sum over `dims`.
  Tensor sum(const IntArrayRef& dims, bool keepdim = false) const;
  /// @brief Mean of all elements.
  Tensor mean() const;
  /// @brief Mean over `dims`.
  Tensor mean(const IntArrayRef& dims, bool keepdim = false) const;
  /// @brief `tiny::var(*this, dims, correction, keepdim)` (PyTorch's `x.var(dims, correction=1)`).
  Tensor var(const IntArrayRef& dims = {}, double correction = 1, bool keepdim = false) const;
  /// @brief `tiny::std_dev(*this, dims, correction, keepdim)` (PyTorch's `x.std(dims, correction=1)`).
  Tensor std(const IntArrayRef& dims = {}, double correction = 1, bool keepdim = false) const;
  /// @brief `tiny::logsumexp(*this, dims, keepdim)` (PyTorch's `x.logsumexp(dims)`).
  Tensor logsumexp(const IntArrayRef& dims, bool keepdim = false) const;
  /// @brief Largest element.
  Tensor max() const;
  /// @brief Largest elements along `dim` and their indices.
  std::tuple<Tensor, Tensor> max(int64_t dim, bool keepdim = false) const;
  /// @brief Smallest element.
  Tensor min() const;
  /// @brief Smallest elements along `dim` and their indices.
  std::tuple<Tensor, Tensor> min(int64_t dim, bool keepdim = false) const;
  /// @brief `tiny::prod(*this)`: product of all elements.
  Tensor prod() const;
  /// @brief `tiny::prod(*this, dim, keepdim)`: product along `dim`.
  Tensor prod(int64_t dim, bool keepdim = false) const;
  /// @brief `tiny::cumsum(*this, dim)`: running sum along `dim`.
  Tensor cumsum(int64_t dim) const;
  /// @brief `tiny::sort(*this, dim, descending)`: (values, indices), stable.
  std::tuple<Tensor, Tensor> sort(int64_t dim = -1, bool descending = false) const;
  /// @brief `tiny::topk(*this, k, dim, largest, sorted)`: the k largest (or smallest) and their indices.
  std::tuple<Tensor, Tensor> topk(int64_t k, int64_t dim = -1, bool largest = true, bool sorted = true) const;
  /// @brief `tiny::gather(*this, dim, index)`: picks along `dim` by an int64 index.
  Tensor gather(int64_t dim, const Tensor& index) const;
  /// @brief The elements where the bool `mask` is true, 1-D (`Tensor.masked_select`, `x[mask]`); see tiny::masked_select.
  Tensor masked_select(const Tensor& mask) const;
  /// @brief `tiny::masked_fill(*this, mask, value)`: `value` where the bool `mask` is true (`Tensor.masked_fill`).
  Tensor masked_fill(const Tensor& mask, const Scalar& value) const;
  /// @brief `value` where the bool `mask` is true, in place (`Tensor.masked_fill_`).
  const Tensor& masked_fill_(const Tensor& mask, const Scalar& value) const;
  /// @brief `tiny::flip(*this, dims)`: reversed along each of `dims`, a copy (`Tensor.flip`).
  Tensor flip(const IntArrayRef& dims) const;
  /// @brief `tiny::tril(*this, diagonal)`: the lower triangle of the last two dims (`Tensor.tril`).
  Tensor tril(int64_t diagonal = 0) const;
  /// @brief `tiny::triu(*this, diagonal)`: the upper triangle of the last two dims (`Tensor.triu`).
  Tensor triu(int64_t diagonal = 0) const;
  /// @brief The indices of the nonzero elements, int64 [count, dim()] (`Tensor.nonzero`); see tiny::nonzero.
  Tensor nonzero() const;
  /// @brief `tiny::repeat(*this, repeats)`: tiled copies (`x.repeat({2, 1})`).
  Tensor repeat(const IntArrayRef& repeats) const;
  /// @brief `tiny::split(*this, split_size, dim)`: views of `split_size` elements, the last shorter.
  std::vector<Tensor> split(int64_t split_size, int64_t dim = 0) const;
  /// @brief `tiny::split(*this, split_sizes, dim)`: views of the given sizes.
  std::vector<Tensor> split(const IntArrayRef& split_sizes, int64_t dim = 0) const;
  /// @brief `tiny::chunk(*this, chunks, dim)`: at most `chunks` views.
  std::vector<Tensor> chunk(int64_t chunks, int64_t dim = 0) const;
  /// @brief Index of the largest element of the flattened tensor.
  Tensor argmax() const;
  /// @brief Indices of the largest elements along `dim` (ties: the lowest index).
  Tensor argmax(int64_t dim, bool keepdim = false) const;
  /// @brief Matrix product with PyTorch's `matmul` rules (batching, 1-D operands).
  Tensor matmul(const Tensor& other) const;
  /// @brief Product of two 2-D matrices.
  Tensor mm(const Tensor& other) const;
  /// @brief Softmax along `dim`.
  Tensor softmax(int64_t dim) const;
  /// @brief Log of softmax along `dim`, computed stably.
  Tensor log_softmax(int64_t dim) const;
  /// @brief Elementwise `==` as a bool tensor.
  Tensor eq(const Tensor& other) const;
  /// @brief Elementwise `!=`.
  Tensor ne(const Tensor& other) const;
  /// @brief Elementwise `<`.
  Tensor lt(const Tensor& other) const;
  /// @brief Elementwise `<=`.
  Tensor le(const Tensor& other) const;
  /// @brief Elementwise `>`.
  Tensor gt(const Tensor& other) const;
  /// @brief Elementwise `>=`.
  Tensor ge(const Tensor& other) const;

  // ---- in-place -------------------------------------------------------------
  // Each changes this tensor's data and bumps its version(). With grad mode on,
  // autograd records it as PyTorch does: the op becomes this tensor's grad_fn
  // (for a view, its base's history is rewritten through CopySlices). Refused
  // with grad mode on: a leaf that requires grad, a view of one, a view made
  // under NoGradGuard of a tensor that requires grad. A tensor that an op saved
  // for backward (relu's and sigmoid's output, mul's inputs...) and that is
  // changed in place afterwards makes backward() raise "one of the variables
  // needed for gradient computation has been modified by an inplace operation".

  /// @brief `self += alpha * other` (PyTorch's `x.add_(other, alpha=1)`).
  const Tensor& add_(const Tensor& other, const Scalar& alpha = 1) const;
  /// @brief `self += value`.
  const Tensor& add_(const Scalar& value) const;
  /// @brief `self -= alpha * other`.
  const Tensor& sub_(const Tensor& other, const Scalar& alpha = 1) const;
  /// @brief `self *= other` (its backward saves `other`, and self's old values when other requires grad).
  const Tensor& mul_(const Tensor& other) const;
  /// @brief `self *= value`.
  const Tensor& mul_(const Scalar& value) const;
  /// @brief `self /= other` (its backward saves `other`, and self's old values when other requires grad).
  const Tensor& div_(const Tensor& other) const;
  /// @brief `self /= value`.
  const Tensor& div_(const Scalar& value) const;
  /// @brief Sets every element to 0 (its gradient to the old values is 0).
  const Tensor& zero_() const;
  /// @brief Sets every element to `value`.
  const Tensor& fill_(const Scalar& value) const;
  /// @brief Copies `src` (broadcast, converted to this dtype, from any device) into this tensor.
  ///
  /// `non_blocking` between the CPU and a GPU returns before the copy has run
  /// when the CPU side is pinned; synchronize before reading the result. The
  /// gradient flows to `src` (summed over broadcast dimensions), none to the old values.
  const Tensor& copy_(const Tensor& src, bool non_blocking = false) const;
  /// @brief Limits values to [min, max] in place (its backward saves a copy of the old values).
  const Tensor& clamp_(std::optional<Scalar> min, std::optional<Scalar> max = std::nullopt) const;
  /// @brief `max(self, 0)` in place (PyTorch's `x.relu_()`; its backward saves the result: this tensor).
  const Tensor& relu_() const;
  /// @brief `1 / (1 + e^-self)` in place (its backward saves the result: this tensor).
  const Tensor& sigmoid_() const;
  /// @brief Hyperbolic tangent in place (its backward saves the result: this tensor).
  const Tensor& tanh_() const;

  /// @brief The implementation (internal).
  TensorImpl* unsafe_impl() const { return impl_.get(); }
  /// @brief The shared implementation (internal).
  const std::shared_ptr<TensorImpl>& impl_ptr() const { return impl_; }

 private:
  void check_data_access(Dtype expected, const char* what) const;
  std::shared_ptr<TensorImpl> impl_;
};

/// @brief Prints like PyTorch: `tensor([[1.0000, 2.0000]], requires_grad=True)`.
std::ostream& operator<<(std::ostream& out, const Tensor& tensor);
/// @brief Prints a shape as `[64, 784]`.
std::string shape_str(const IntArrayRef& shape);
/// @brief The shape that `a` and `b` broadcast to (throws ShapeError when they cannot).
IntArrayRef broadcast_shapes(const IntArrayRef& a, const IntArrayRef& b);

/// @cond
extern template std::vector<float> Tensor::to_vector<float>() const;
extern template std::vector<double> Tensor::to_vector<double>() const;
extern template std::vector<int64_t> Tensor::to_vector<int64_t>() const;
extern template std::vector<bool> Tensor::to_vector<bool>() const;
extern template std::vector<Half> Tensor::to_vector<Half>() const;
extern template std::vector<BFloat16> Tensor::to_vector<BFloat16>() const;
/// @endcond

}  // namespace tiny
