/// @file ops.h
/// @brief Creating tensors and the math on them: `torch.foo(...)` is `tiny::foo(...)`.
#pragma once

#include <initializer_list>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "tiny/generator.h"
#include "tiny/matmul_precision.h"
#include "tiny/tensor.h"

namespace tiny {

/// @brief dtype, device and requires_grad of a new tensor (PyTorch's keyword arguments).
///
/// Converts from a Dtype or a Device, so `zeros({2, 3}, kFloat64)` and
/// `randn({3, 4}, Device("cuda:0"))` both work; chain for more:
/// `TensorOptions().dtype(kFloat64).requires_grad(true)`.
struct TensorOptions {
  /// @brief float32 on the CPU, no gradient.
  TensorOptions() = default;
  /// @brief Only the dtype.
  TensorOptions(Dtype d) : dtype_(d) {}  // NOLINT
  /// @brief Only the device.
  TensorOptions(Device d) : device_(d) {}  // NOLINT
  /// @brief Only the device, parsed: "cpu", "cuda:0".
  TensorOptions(const char* d) : device_(d) {}  // NOLINT
  /// @brief Sets the dtype.
  TensorOptions dtype(Dtype d) const { TensorOptions o = *this; o.dtype_ = d; return o; }
  /// @brief Sets the device.
  TensorOptions device(Device d) const { TensorOptions o = *this; o.device_ = d; return o; }
  /// @brief Sets requires_grad.
  TensorOptions requires_grad(bool r) const { TensorOptions o = *this; o.requires_grad_ = r; return o; }
  /// @brief The dtype: float32 when none was given (see has_dtype).
  Dtype dtype() const { return dtype_.value_or(kFloat32); }
  /// @brief Whether a dtype was given. Ops whose PyTorch default is not
  /// float32 (`arange(end)` and `randint`: int64) use theirs only when none was.
  bool has_dtype() const { return dtype_.has_value(); }
  /// @brief The device.
  Device device() const { return device_; }
  /// @brief Whether the new tensor tracks gradients.
  bool requires_grad() const { return requires_grad_; }

 private:
  std::optional<Dtype> dtype_;
  Device device_;
  bool requires_grad_ = false;
};

// ---- creation ------------------------------------------------------------
/// @brief Uninitialised memory of the given shape (contents are arbitrary).
Tensor empty(const IntArrayRef& shape, TensorOptions options = {});
/// @brief All zeros.
Tensor zeros(const IntArrayRef& shape, TensorOptions options = {});
/// @brief All ones.
Tensor ones(const IntArrayRef& shape, TensorOptions options = {});
/// @brief Every element equal to `value`.
Tensor full(const IntArrayRef& shape, const Scalar& value, TensorOptions options = {});
/// @brief `[0, 1, ..., end-1]` as int64 unless options give a dtype (`arange(5, Device("cuda:0"))` is int64).
Tensor arange(int64_t end, TensorOptions options = {});
/// @brief `start, start+step, ...` below `end` (float32 unless options say otherwise).
Tensor arange(double start, double end, double step = 1.0, TensorOptions options = {});
/// @brief `steps` points from `start` to `end`, both included, evenly spaced (`torch.linspace`; float32 by default).
Tensor linspace(double start, double end, int64_t steps, TensorOptions options = {});
/// @brief The n x m identity matrix (m = n when negative), `torch.eye`.
Tensor eye(int64_t n, int64_t m = -1, TensorOptions options = {});
/// @brief Uniform in [0, 1) (Philox; reproducible with `manual_seed`).
Tensor rand(const IntArrayRef& shape, TensorOptions options = {}, std::optional<Generator> generator = std::nullopt);
/// @brief Standard normal.
Tensor randn(const IntArrayRef& shape, TensorOptions options = {}, std::optional<Generator> generator = std::nullopt);
/// @brief Integers uniform in [low, high), int64 unless options give a dtype.
Tensor randint(int64_t low, int64_t high, const IntArrayRef& shape, TensorOptions options = {},
               std::optional<Generator> generator = std::nullopt);
/// @brief A random permutation of `0..n-1` (int64).
Tensor randperm(int64_t n, std::optional<Generator> generator = std::nullopt);
/// @brief A tensor from nested values with the given shape: `tensor({1, 2, 3, 4}, {2, 2})`.
Tensor tensor(const std::vector<double>& values, const IntArrayRef& shape, TensorOptions options = {});
/// @brief A 1-D float32 tensor (PyTorch's `torch.tensor([1.0, 2.0])`).
Tensor tensor(std::initializer_list<double> values, TensorOptions options = {});
/// @brief A 1-D tensor from a vector of float, double, int64 or bool, keeping its dtype.
template <typename T>
Tensor from_vector(const std::vector<T>& values, const IntArrayRef& shape = {}, TensorOptions options = TensorOptions(dtype_of<T>()));
/// @brief A 0-d tensor holding `value`.
Tensor scalar_tensor(const Scalar& value, TensorOptions options = {});
/// @brief `empty` with the shape, dtype and device of `like`.
Tensor empty_like(const Tensor& like);
/// @brief `zeros` shaped like `like`.
Tensor zeros_like(const Tensor& like);
/// @brief `ones` shaped like `like`.
Tensor ones_like(const Tensor& like);
/// @brief `full` shaped like `like`.
Tensor full_like(const Tensor& like, const Scalar& value);
/// @brief `rand` shaped like `like`.
Tensor rand_like(const Tensor& like, std::optional<Generator> generator = std::nullopt);
/// @brief `randn` shaped like `like`.
Tensor randn_like(const Tensor& like, std::optional<Generator> generator = std::nullopt);

// ---- pointwise, with broadcasting ---------------------------------------
/// @brief `a + alpha * b`.
Tensor add(const Tensor& a, const Tensor& b, const Scalar& alpha = 1);
/// @brief `a + b` for a scalar b.
Tensor add(const Tensor& a, const Scalar& b);
/// @brief `a - alpha * b`.
Tensor sub(const Tensor& a, const Tensor& b, const Scalar& alpha = 1);
/// @brief `a - b` for a scalar b.
Tensor sub(const Tensor& a, const Scalar& b);
/// @brief `a * b`.
Tensor mul(const Tensor& a, const Tensor& b);
/// @brief `a * b` for a scalar b.
Tensor mul(const Tensor& a, const Scalar& b);
/// @brief `a / b` (true division).
Tensor div(const Tensor& a, const Tensor& b);
/// @brief `a / b` for a scalar b.
Tensor div(const Tensor& a, const Scalar& b);
/// @brief `a ** exponent`.
Tensor pow(const Tensor& a, const Scalar& exponent);
/// @brief `a ** b`.
Tensor pow(const Tensor& a, const Tensor& b);
/// @brief `-a`.
Tensor neg(const Tensor& a);
/// @brief `e^a`.
Tensor exp(const Tensor& a);
/// @brief Natural log.
Tensor log(const Tensor& a);
/// @brief Square root.
Tensor sqrt(const Tensor& a);
/// @brief Absolute value.
Tensor abs(const Tensor& a);
/// @brief Sine, elementwise (`torch.sin`).
Tensor sin(const Tensor& a);
/// @brief Cosine, elementwise (`torch.cos`).
Tensor cos(const Tensor& a);
/// @brief `log(1 + a)`, accurate for small `a` (`torch.log1p`); runs in float32 under autocast.
Tensor log1p(const Tensor& a);
/// @brief `e^a - 1`, accurate for small `a` (`torch.expm1`); runs in float32 under autocast.
Tensor expm1(const Tensor& a);
/// @brief `1 / sqrt(a)` (`torch.rsqrt`); runs in float32 under autocast.
Tensor rsqrt(const Tensor& a);
/// @brief Largest integer not greater than `a`, kept in a's floating dtype (`torch.floor`); gradient zero. Integer tensors are returned unchanged.
Tensor floor(const Tensor& a);
/// @brief Nearest integer, halves to even as `torch.round` (2.5 -> 2, 3.5 -> 4); gradient zero. Integer tensors are returned unchanged.
Tensor round(const Tensor& a);
/// @brief -1, 0 or 1 by the sign of `a` (`torch.sign`); gradient zero.
Tensor sign(const Tensor& a);
/// @brief True where `a` is NaN (`torch.isnan`); a bool tensor, all false for integers.
Tensor isnan(const Tensor& a);
/// @brief True where `a` is neither NaN nor infinite (`torch.isfinite`); a bool tensor, all true for integers.
Tensor isfinite(const Tensor& a);
/// @brief `max(a, 0)`.
Tensor relu(const Tensor& a);
/// @brief Logistic sigmoid.
Tensor sigmoid(const Tensor& a);
/// @brief Hyperbolic tangent.
Tensor tanh(const Tensor& a);
/// @brief GELU; `approximate` is "none" (erf, PyTorch's default) or "tanh".
Tensor gelu(const Tensor& a, const std::string& approximate = "none");
/// @brief Limits to [min, max]; either may be omitted.
Tensor clamp(const Tensor& a, std::optional<Scalar> min, std::optional<Scalar> max = std::nullopt);
/// @brief Elementwise larger of a and b.
Tensor maximum(const Tensor& a, const Tensor& b);
/// @brief Elementwise smaller of a and b.
Tensor minimum(const Tensor& a, const Tensor& b);
/// @brief `condition ? a : b` elementwise; condition must be bool.
Tensor where(const Tensor& condition, const Tensor& a, const Tensor& b);
/// @brief Elementwise `a == b` (bool).
Tensor eq(const Tensor& a, const Tensor& b);
/// @brief Elementwise `a != b`.
Tensor ne(const Tensor& a, const Tensor& b);
/// @brief Elementwise `a < b`.
Tensor lt(const Tensor& a, const Tensor& b);
/// @brief Elementwise `a <= b`.
Tensor le(const Tensor& a, const Tensor& b);
/// @brief Elementwise `a > b`.
Tensor gt(const Tensor& a, const Tensor& b);
/// @brief Elementwise `a >= b`.
Tensor ge(const Tensor& a, const Tensor& b);
/// @brief True where `|a - b| <= atol + rtol * |b|` everywhere (NaNs unequal).
bool allclose(const Tensor& a, const Tensor& b, double rtol = 1e-5, double atol = 1e-8);
/// @brief True when same shape and all elements equal.
bool equal(const Tensor& a, const Tensor& b);

// ---- reductions ------------------------------------------------------------
/// @brief Sum of all elements (int and bool sum to int64).
Tensor sum(const Tensor& a);
/// @brief Sum over `dims`.
Tensor sum(const Tensor& a, const IntArrayRef& dims, bool keepdim = false);
/// @brief Mean of all elements (floating dtypes only).
Tensor mean(const Tensor& a);
/// @brief Mean over `dims`.
Tensor mean(const Tensor& a, const IntArrayRef& dims, bool keepdim = false);
/// @brief Variance over `dims` (all when empty), dividing by N - correction (PyTorch's `torch.var(a, dims, correction=1)`).
///
/// correction 1 is the unbiased estimate (PyTorch's default), 0 the population
/// variance. N - correction <= 0 gives inf or NaN, as in PyTorch.
Tensor var(const Tensor& a, const IntArrayRef& dims = {}, double correction = 1, bool keepdim = false);
/// @brief Standard deviation, sqrt(var(a, dims, correction)) (PyTorch's `torch.std(a, dims, correction=1)`).
Tensor std_dev(const Tensor& a, const IntArrayRef& dims = {}, double correction = 1, bool keepdim = false);
/// @brief log(sum(exp(a))) over `dims`, computed stably with the maximum subtracted (PyTorch's `torch.logsumexp`).
Tensor logsumexp(const Tensor& a, const IntArrayRef& dims, bool keepdim = false);
/// @brief Largest element (NaN if any is NaN).
Tensor max(const Tensor& a);
/// @brief Largest along `dim`: (values, indices).
std::tuple<Tensor, Tensor> max(const Tensor& a, int64_t dim, bool keepdim = false);
/// @brief Smallest element.
Tensor min(const Tensor& a);
/// @brief Smallest along `dim`: (values, indices).
std::tuple<Tensor, Tensor> min(const Tensor& a, int64_t dim, bool keepdim = false);
/// @brief Largest value over `dims` (all dims when empty), PyTorch's `torch.amax`: values only, and ties
/// share the gradient evenly (max(dim) gives it to the one index it returns).
Tensor amax(const Tensor& a, const IntArrayRef& dims = {}, bool keepdim = false);
/// @brief Smallest value over `dims` (all dims when empty), PyTorch's `torch.amin`; ties share the gradient.
Tensor amin(const Tensor& a, const IntArrayRef& dims = {}, bool keepdim = false);
/// @brief True if any element is nonzero (NaN counts), `torch.any`; a 0-d bool tensor.
Tensor any(const Tensor& a);
/// @brief True where any element along `dim` is nonzero, `torch.any(a, dim)`.
Tensor any(const Tensor& a, int64_t dim, bool keepdim = false);
/// @brief True if every element is nonzero, `torch.all`; a 0-d bool tensor (true for an empty tensor).
Tensor all(const Tensor& a);
/// @brief True where every element along `dim` is nonzero, `torch.all(a, dim)`.
Tensor all(const Tensor& a, int64_t dim, bool keepdim = false);
/// @brief Product of all elements (`torch.prod(a)`; int and bool multiply to int64, like sum).
///
/// The gradient is the product of the other elements, exact when some are zero
/// (it never divides by the input), as PyTorch's.
Tensor prod(const Tensor& a);
/// @brief Product along `dim` (`torch.prod(a, dim, keepdim)`), same dtype rules and gradient as prod(a).
Tensor prod(const Tensor& a, int64_t dim, bool keepdim = false);
/// @brief Running sum along `dim`: out[i] = a[0] + ... + a[i] (`torch.cumsum(a, dim)`; int and bool give int64).
///
/// Float sums are added in a tree (log2(n) passes of whole-tensor adds), so
/// they can differ from PyTorch's CPU loop in the last bits, as a GPU's do.
Tensor cumsum(const Tensor& a, int64_t dim);
/// @brief `a` sorted along `dim`: (values, indices) with `values = gather(a, dim, indices)` (`torch.sort`).
///
/// Stable: equal elements keep their order, as PyTorch's `sort(stable=True)`
/// (descending too); NaN sorts as the largest value, as in PyTorch. The
/// gradient flows through the values to the picked positions. Its own kernel
/// family: std::stable_sort of each row on the CPU (and the emulated GPU), a
/// rank count on CUDA (n^2 comparisons a row: made for rows up to about 10^4).
std::tuple<Tensor, Tensor> sort(const Tensor& a, int64_t dim = -1, bool descending = false);
/// @brief The k largest (or smallest) elements along `dim` and their indices (`torch.topk`).
///
/// Always in sorted order, whatever `sorted` says (PyTorch leaves the order
/// unspecified when sorted=false); ties keep the lower index first. Found in k
/// passes that each take the best element left (top-5 of [256, 1000]: about
/// 15 ms on a 2-core CPU). The gradient flows through the values.
std::tuple<Tensor, Tensor> topk(const Tensor& a, int64_t k, int64_t dim = -1, bool largest = true,
                                bool sorted = true);
/// @brief Index into the flattened tensor of the largest element.
Tensor argmax(const Tensor& a);
/// @brief Indices of the largest elements along `dim`.
Tensor argmax(const Tensor& a, int64_t dim, bool keepdim = false);
/// @brief Index into the flattened tensor of the smallest element.
Tensor argmin(const Tensor& a);
/// @brief Indices of the smallest elements along `dim`.
Tensor argmin(const Tensor& a, int64_t dim, bool keepdim = false);

// ---- linear algebra --------------------------------------------------------
/// @brief `a @ b` for 2-D matrices.
Tensor mm(const Tensor& a, const Tensor& b);
/// @brief Batched `a @ b` of [batch, m, k] and [batch, k, n] tensors (PyTorch's `torch.bmm`).
Tensor bmm(const Tensor& a, const Tensor& b);
/// @brief `a @ b` with PyTorch's rules: dot, matrix-vector, batched with broadcasting.
Tensor matmul(const Tensor& a, const Tensor& b);
/// @brief `beta * bias + alpha * (a @ b)` (bias broadcast to the result).
Tensor addmm(const Tensor& bias, const Tensor& a, const Tensor& b, const Scalar& beta = 1, const Scalar& alpha = 1);

// ---- shape -----------------------------------------------------------------
/// @brief Joins tensors along an existing dimension.
Tensor cat(const std::vector<Tensor>& tensors, int64_t dim = 0);
/// @brief Joins tensors along a new dimension.
Tensor stack(const std::vector<Tensor>& tensors, int64_t dim = 0);
/// @brief The slices of `a` along `dim` picked by the int64 vector `index`, in its order (`torch.index_select`);
/// an index may repeat. The gradient adds back into the picked slices.
Tensor index_select(const Tensor& a, int64_t dim, const Tensor& index);
/// @brief `a` with `value` where the bool `mask` (broadcast to a's shape) is true (`Tensor.masked_fill`); the
/// gradient flows only where the mask is false.
Tensor masked_fill(const Tensor& a, const Tensor& mask, const Scalar& value);
/// @brief The elements of `a` where the bool `mask` is true, as a 1-D tensor in row-major order
/// (`torch.masked_select`, and `a[mask]` in Python); `a` and `mask` broadcast together. The
/// gradient flows back into the picked elements. On a GPU the count of true elements is read on
/// the host first (one wait, as in PyTorch: the output's size depends on it).
Tensor masked_select(const Tensor& a, const Tensor& mask);
/// @brief The indices of the nonzero elements of `a`, an int64 tensor [count, a.dim()] in row-major
/// order (`torch.nonzero`); on a GPU it waits for `a` to be read on the host, as PyTorch's does.
Tensor nonzero(const Tensor& a);
/// @brief `a` reversed along each of `dims` (`torch.flip`): a copy, as in PyTorch.
Tensor flip(const Tensor& a, const IntArrayRef& dims);
/// @brief The lower triangle of the last two dims, on and below the `diagonal`-th diagonal (`torch.tril`);
/// the rest is zero. diagonal > 0 keeps diagonals above the main one, < 0 drops some below it.
Tensor tril(const Tensor& a, int64_t diagonal = 0);
/// @brief The upper triangle of the last two dims, on and above the `diagonal`-th diagonal (`torch.triu`).
Tensor triu(const Tensor& a, int64_t diagonal = 0);
/// @brief The slices of `a` along `dim`, each a view with that dim removed (`torch.unbind`).
std::vector<Tensor> unbind(const Tensor& a, int64_t dim = 0);
/// @brief `a` tiled `repeats[i]` times along each dim (`Tensor.repeat`): a copy.
///
/// `repeats` may be longer than a.dim(): `a` is then treated as having leading
/// dims of size 1, so a (3,) tensor repeated {2, 2} is (2, 6). Fewer repeats
/// than dims is an error, as in PyTorch.
Tensor repeat(const Tensor& a, const IntArrayRef& repeats);
/// @brief `a` cut along `dim` into views of `split_size` elements, the last one shorter (`torch.split(a, 2)`).
std::vector<Tensor> split(const Tensor& a, int64_t split_size, int64_t dim = 0);
/// @brief `a` cut along `dim` into views of the given sizes, which must add up to a.size(dim)
/// (`torch.split(a, [2, 3])`). A one-element list {n} reads as split_size n: write split_with_sizes to be explicit.
std::vector<Tensor> split(const Tensor& a, const IntArrayRef& split_sizes, int64_t dim = 0);
/// @brief `torch.split_with_sizes`: the list form of split.
std::vector<Tensor> split_with_sizes(const Tensor& a, const IntArrayRef& split_sizes, int64_t dim = 0);
/// @brief `a` cut along `dim` into at most `chunks` views of ceil(size / chunks) elements (`torch.chunk`).
///
/// As in PyTorch, fewer chunks may come back (chunk(6 elements, 4) gives 3 of 2).
std::vector<Tensor> chunk(const Tensor& a, int64_t chunks, int64_t dim = 0);
/// @brief Picks along `dim` by an int64 index of the same number of dims (`torch.gather`):
/// out[i][j][k] = a[i][index[i][j][k]][k] for dim 1.
///
/// index.size(d) <= a.size(d) for every d != dim; the output has index's shape.
/// The gradient adds into zeros at the picked places (a scatter_add), so
/// repeated indices accumulate. An index outside [0, a.size(dim)) throws
/// tiny::IndexError naming the value, the dim and its size.
Tensor gather(const Tensor& a, int64_t dim, const Tensor& index);

// ---- operators -------------------------------------------------------------
/// @brief `a + b`.
inline Tensor operator+(const Tensor& a, const Tensor& b) { return add(a, b); }
/// @brief `a + s`.
inline Tensor operator+(const Tensor& a, const Scalar& s) { return add(a, s); }
/// @brief `s + a`.
inline Tensor operator+(const Scalar& s, const Tensor& a) { return add(a, s); }
/// @brief `a - b`.
inline Tensor operator-(const Tensor& a, const Tensor& b) { return sub(a, b); }
/// @brief `a - s`.
inline Tensor operator-(const Tensor& a, const Scalar& s) { return sub(a, s); }
/// @brief `s - a`.
Tensor operator-(const Scalar& s, const Tensor& a);
/// @brief `-a`.
inline Tensor operator-(const Tensor& a) { return neg(a); }
/// @brief `a * b`.
inline Tensor operator*(const Tensor& a, const Tensor& b) { return mul(a, b); }
/// @brief `a * s`.
inline Tensor operator*(const Tensor& a, const Scalar& s) { return mul(a, s); }
/// @brief `s * a`.
inline Tensor operator*(const Scalar& s, const Tensor& a) { return mul(a, s); }
/// @brief `a / b`.
inline Tensor operator/(const Tensor& a, const Tensor& b) { return div(a, b); }
/// @brief `a / s`.
inline Tensor operator/(const Tensor& a, const Scalar& s) { return div(a, s); }
/// @brief `s / a`.
Tensor operator/(const Scalar& s, const Tensor& a);
/// @brief Elementwise `a == b` as a bool tensor (like libtorch: not a C++ bool; see `equal`).
inline Tensor operator==(const Tensor& a, const Tensor& b) { return eq(a, b); }
/// @brief Elementwise `a != b`.
inline Tensor operator!=(const Tensor& a, const Tensor& b) { return ne(a, b); }
/// @brief Elementwise `a < b`.
inline Tensor operator<(const Tensor& a, const Tensor& b) { return lt(a, b); }
/// @brief Elementwise `a <= b`.
inline Tensor operator<=(const Tensor& a, const Tensor& b) { return le(a, b); }
/// @brief Elementwise `a > b`.
inline Tensor operator>(const Tensor& a, const Tensor& b) { return gt(a, b); }
/// @brief Elementwise `a >= b`.
inline Tensor operator>=(const Tensor& a, const Tensor& b) { return ge(a, b); }
/// @brief Elementwise `a == s`.
Tensor operator==(const Tensor& a, const Scalar& s);
/// @brief Elementwise `a != s`.
Tensor operator!=(const Tensor& a, const Scalar& s);
/// @brief Elementwise `a < s`.
Tensor operator<(const Tensor& a, const Scalar& s);
/// @brief Elementwise `a <= s`.
Tensor operator<=(const Tensor& a, const Scalar& s);
/// @brief Elementwise `a > s`.
Tensor operator>(const Tensor& a, const Scalar& s);
/// @brief Elementwise `a >= s`.
Tensor operator>=(const Tensor& a, const Scalar& s);
/// @brief `a += b`: `a.add_(b)` (in place; autograd records it as add_).
inline Tensor& operator+=(Tensor& a, const Tensor& b) {
  a.add_(b);
  return a;
}
/// @brief `a -= b`.
inline Tensor& operator-=(Tensor& a, const Tensor& b) {
  a.sub_(b);
  return a;
}
/// @brief `a *= b`.
inline Tensor& operator*=(Tensor& a, const Tensor& b) {
  a.mul_(b);
  return a;
}
/// @brief `a /= b`.
inline Tensor& operator/=(Tensor& a, const Tensor& b) {
  a.div_(b);
  return a;
}

}  // namespace tiny
