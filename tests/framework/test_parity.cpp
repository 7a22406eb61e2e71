// Parity with PyTorch: every case under tests/parity/fixtures/ (written by
// tests/parity/make_fixtures.py with PyTorch 1.13, see tests/parity/README.md)
// is recomputed with tiny from the saved inputs, and the forward output and
// every saved input gradient are compared with PyTorch's.
//
// The table below maps each fixture directory to a lambda that mirrors the
// Python statement of that case. The test list is the union of the fixture
// directories and the table, so a new fixture without a table entry (or an
// entry without a fixture) shows up as a failing test named after it, and
// ParityTable.CoversEveryFixture fails as well: no fixture is skipped silently.
//
// Every case runs twice (DESIGN.md sections 4 and 5): on "cpu" (Matches/mm_cpu)
// and on "cuda:0" (Matches/mm_cuda0), by default the host-emulated GPU. On the
// device the inputs loaded from .npy are copied there and made leaves there,
// outputs and gradients must stay on the device, and they are compared with
// PyTorch after .cpu() with the same tolerances; they must also equal the CPU
// run's bit for bit, since the emulator runs the CPU kernels. (On a real GPU
// that last check would not hold: cuBLAS and CUDA reductions order sums
// differently; the tolerances against PyTorch would.)
//
// Tolerances (|tiny - torch| <= atol + rtol * |torch| per element), DESIGN.md
// section 5 (about 1e-5 relative for fp32):
//   pointwise fp32        rtol 1e-5, atol 1e-6  (a few ulp of libm differences; gradients chain 2-3 ops)
//   reductions fp32       rtol 1e-5, atol 1e-5  (sums of up to 120 terms: tiny's summation order is not
//                                                PyTorch's vectorised one, so a rounding of ~n*eps*|sum| is allowed)
//   matmul fp32           rtol 1e-4, atol 1e-4  (dot products over k up to 78 with terms of size ~1: PyTorch's
//                                                BLAS blocks and orders the k sum differently; an output near 0
//                                                cancels terms of size ~sqrt(k), so the bound must be absolute)
//   float64               rtol 1e-12, atol 1e-12 (same reasons, with eps = 2.2e-16)
// Indices (argmax, max/min indices) must be equal exactly.
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <filesystem>
#include <functional>
#include <iomanip>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include "tiny/cuda.h"
#include "tiny/io.h"
#include "tiny/nn/functional.h"
#include "tiny/ops.h"
#include "tiny/tensor.h"

#ifndef TINY_PARITY_DIR
#define TINY_PARITY_DIR "tests/parity/fixtures"
#endif

namespace fs = std::filesystem;
namespace F = tiny::nn::functional;
using tiny::Tensor;

namespace {

struct Tolerance {
  double rtol;
  double atol;
};

constexpr Tolerance kPointwise{1e-5, 1e-6};
constexpr Tolerance kReduction{1e-5, 1e-5};
constexpr Tolerance kMatmul{1e-4, 1e-4};
constexpr Tolerance kFloat64{1e-12, 1e-12};

// The loaded inputs of one case, by file stem ("a", "b", "x", "target", ...).
class Inputs {
 public:
  explicit Inputs(std::map<std::string, Tensor> tensors) : tensors_(std::move(tensors)) {}
  const Tensor& operator[](const std::string& name) const {
    auto it = tensors_.find(name);
    if (it == tensors_.end()) throw std::runtime_error("the fixture has no input '" + name + ".npy'");
    return it->second;
  }
  const std::map<std::string, Tensor>& all() const { return tensors_; }

 private:
  std::map<std::string, Tensor> tensors_;
};

// Returns {out} or, for ops with two outputs, {values, indices}.
using Forward = std::function<std::vector<Tensor>(const Inputs&)>;

struct ParityCase {
  Forward forward;
  Tolerance tol;
};

F::CrossEntropyOptions reduction(F::Reduction r) {
  F::CrossEntropyOptions o;
  o.reduction = r;
  return o;
}

// Each lambda mirrors the `computation` column of tests/parity/README.md.
const std::map<std::string, ParityCase>& parity_table() {
  static const std::map<std::string, ParityCase> table = {
      // pointwise
      {"add_broadcast", {[](const Inputs& in) -> std::vector<Tensor> { return {in["a"] + in["b"]}; }, kPointwise}},
      {"sub_broadcast", {[](const Inputs& in) -> std::vector<Tensor> { return {in["a"] - in["b"]}; }, kPointwise}},
      // mul_broadcast: grad_b sums 8 products over the broadcast dims
      {"mul_broadcast", {[](const Inputs& in) -> std::vector<Tensor> { return {in["a"] * in["b"]}; }, kReduction}},
      {"div", {[](const Inputs& in) -> std::vector<Tensor> { return {in["a"] / in["b"]}; }, kPointwise}},
      {"neg", {[](const Inputs& in) -> std::vector<Tensor> { return {-in["a"]}; }, kPointwise}},
      {"pow_scalar", {[](const Inputs& in) -> std::vector<Tensor> { return {in["a"].pow(2.5)}; }, kPointwise}},
      {"pow_tensor", {[](const Inputs& in) -> std::vector<Tensor> { return {in["a"].pow(in["b"])}; }, kPointwise}},
      {"exp", {[](const Inputs& in) -> std::vector<Tensor> { return {tiny::exp(in["a"])}; }, kPointwise}},
      {"log", {[](const Inputs& in) -> std::vector<Tensor> { return {tiny::log(in["a"])}; }, kPointwise}},
      {"sqrt", {[](const Inputs& in) -> std::vector<Tensor> { return {tiny::sqrt(in["a"])}; }, kPointwise}},
      {"abs", {[](const Inputs& in) -> std::vector<Tensor> { return {tiny::abs(in["a"])}; }, kPointwise}},
      {"relu", {[](const Inputs& in) -> std::vector<Tensor> { return {tiny::relu(in["a"])}; }, kPointwise}},
      {"sigmoid", {[](const Inputs& in) -> std::vector<Tensor> { return {tiny::sigmoid(in["a"])}; }, kPointwise}},
      {"tanh", {[](const Inputs& in) -> std::vector<Tensor> { return {tiny::tanh(in["a"])}; }, kPointwise}},
      {"gelu", {[](const Inputs& in) -> std::vector<Tensor> { return {F::gelu(in["a"])}; }, kPointwise}},
      {"clamp", {[](const Inputs& in) -> std::vector<Tensor> { return {tiny::clamp(in["a"], -0.5, 0.5)}; },
                 kPointwise}},
      {"where", {[](const Inputs& in) -> std::vector<Tensor> { return {tiny::where(in["cond"], in["a"], in["b"])}; },
                 kPointwise}},
      {"add_scalar", {[](const Inputs& in) -> std::vector<Tensor> { return {in["a"] + 2.5}; }, kPointwise}},
      {"rsub_scalar", {[](const Inputs& in) -> std::vector<Tensor> { return {1 - in["a"]}; }, kPointwise}},
      {"div_scalar", {[](const Inputs& in) -> std::vector<Tensor> { return {in["a"] / 4}; }, kPointwise}},
      {"sin", {[](const Inputs& in) -> std::vector<Tensor> { return {tiny::sin(in["a"])}; }, kPointwise}},
      {"cos", {[](const Inputs& in) -> std::vector<Tensor> { return {tiny::cos(in["a"])}; }, kPointwise}},
      {"log1p", {[](const Inputs& in) -> std::vector<Tensor> { return {tiny::log1p(in["a"])}; }, kPointwise}},
      {"expm1", {[](const Inputs& in) -> std::vector<Tensor> { return {tiny::expm1(in["a"])}; }, kPointwise}},
      {"rsqrt", {[](const Inputs& in) -> std::vector<Tensor> { return {tiny::rsqrt(in["a"])}; }, kPointwise}},
      {"floor", {[](const Inputs& in) -> std::vector<Tensor> { return {tiny::floor(in["a"])}; }, kPointwise}},
      {"round_halves", {[](const Inputs& in) -> std::vector<Tensor> { return {tiny::round(in["a"])}; }, kPointwise}},
      {"sign", {[](const Inputs& in) -> std::vector<Tensor> { return {tiny::sign(in["a"])}; }, kPointwise}},
      {"isnan", {[](const Inputs& in) -> std::vector<Tensor> { return {tiny::isnan(tiny::log(in["a"]))}; }, kPointwise}},
      {"isfinite", {[](const Inputs& in) -> std::vector<Tensor> { return {tiny::isfinite(tiny::log(in["a"]) / in["m"])}; }, kPointwise}},
      {"masked_fill_broadcast", {[](const Inputs& in) -> std::vector<Tensor> { return {tiny::masked_fill(in["a"], in["m"], -1.5)}; }, kPointwise}},
      {"tril", {[](const Inputs& in) -> std::vector<Tensor> { return {tiny::tril(in["a"], 1)}; }, kPointwise}},
      {"triu_batched", {[](const Inputs& in) -> std::vector<Tensor> { return {tiny::triu(in["a"], -1)}; }, kPointwise}},
      {"linspace", {[](const Inputs& in) -> std::vector<Tensor> { return {in["a"] * tiny::linspace(-1.0, 2.0, 7, in["a"].device())}; }, kPointwise}},
      {"eye", {[](const Inputs& in) -> std::vector<Tensor> { return {in["a"] * 2 + tiny::eye(3, 5, in["a"].device())}; }, kPointwise}},
      {"softplus",
       {[](const Inputs& in) -> std::vector<Tensor> { return {F::softplus(in["a"], 2.0, 5.0)}; }, kPointwise}},
      // indexing (index_select's gradient adds the repeated index's rows)
      {"index_select_dim0", {[](const Inputs& in) -> std::vector<Tensor> { return {tiny::index_select(in["a"], 0, in["index"])}; }, kReduction}},
      {"index_select_dim1", {[](const Inputs& in) -> std::vector<Tensor> { return {tiny::index_select(in["a"], 1, in["index"])}; }, kReduction}},
      {"flip", {[](const Inputs& in) -> std::vector<Tensor> { return {tiny::flip(in["a"], {0, 2})}; }, kPointwise}},
      {"unbind",
       {[](const Inputs& in) -> std::vector<Tensor> {
          std::vector<Tensor> columns = tiny::unbind(in["a"], 1);
          std::reverse(columns.begin(), columns.end());
          return {tiny::stack(columns, 0)};
        },
        kPointwise}},
      // repeat, split, chunk (views and copies: the gradient lands exactly where the pieces came from)
      {"repeat_more_dims", {[](const Inputs& in) -> std::vector<Tensor> { return {in["a"].t().repeat({2, 1, 3})}; }, kReduction}},
      {"split_size",
       {[](const Inputs& in) -> std::vector<Tensor> {
          std::vector<Tensor> sums;
          for (const Tensor& p : tiny::split(in["a"], 2)) sums.push_back(p.sum({0}) * static_cast<double>(sums.size() + 1));
          return {tiny::stack(sums, 0)};
        },
        kReduction}},
      {"split_sizes",
       {[](const Inputs& in) -> std::vector<Tensor> {
          std::vector<Tensor> parts;
          for (const Tensor& p : in["a"].t().split(tiny::IntArrayRef{1, 2, 4}, 1)) {
            parts.push_back(p * static_cast<double>(parts.size() + 1));
          }
          return {tiny::cat(parts, 1)};
        },
        kPointwise}},
      {"chunk",
       {[](const Inputs& in) -> std::vector<Tensor> {
          std::vector<Tensor> parts = tiny::chunk(in["a"], 3, -1);
          std::reverse(parts.begin(), parts.end());
          return {tiny::cat(parts, 1)};
        },
        kPointwise}},
      // gather (repeated indices add their gradients), sort and topk (indices equal exactly)
      {"gather_dim1", {[](const Inputs& in) -> std::vector<Tensor> { return {tiny::gather(in["a"], 1, in["index"])}; }, kReduction}},
      {"gather_dim0_smaller",
       {[](const Inputs& in) -> std::vector<Tensor> { return {in["a"].transpose(0, 2).gather(0, in["index"])}; }, kReduction}},
      // masked_select (the mask broadcast; a transposed input) and nonzero (row-major order)
      {"masked_select_broadcast",
       {[](const Inputs& in) -> std::vector<Tensor> { return {tiny::masked_select(in["a"], in["m"])}; }, kReduction}},
      {"masked_select_transposed",
       {[](const Inputs& in) -> std::vector<Tensor> { return {in["a"].t().masked_select(in["m"])}; }, kReduction}},
      {"nonzero", {[](const Inputs& in) -> std::vector<Tensor> { return {tiny::nonzero(in["a"])}; }, kPointwise}},
      {"sort_dim1",
       {[](const Inputs& in) -> std::vector<Tensor> {
          auto [values, indices] = tiny::sort(in["a"], 1);
          return {values, indices};
        },
        kPointwise}},
      {"sort_descending_ties",
       {[](const Inputs& in) -> std::vector<Tensor> {
          auto [values, indices] = in["a"].t().sort(0, /*descending=*/true);
          return {values, indices};
        },
        kPointwise}},
      {"sort_ascending_ties",
       {[](const Inputs& in) -> std::vector<Tensor> {
          auto [values, indices] = in["a"].sort(-1);
          return {values, indices};
        },
        kPointwise}},
      {"topk_largest",
       {[](const Inputs& in) -> std::vector<Tensor> {
          auto [values, indices] = tiny::topk(in["a"], 3, 1);
          return {values, indices};
        },
        kPointwise}},
      {"topk_smallest",
       {[](const Inputs& in) -> std::vector<Tensor> {
          auto [values, indices] = in["a"].t().topk(2, 1, /*largest=*/false);
          return {values, indices};
        },
        kPointwise}},
      // reductions
      {"sum_all", {[](const Inputs& in) -> std::vector<Tensor> { return {in["a"].sum()}; }, kReduction}},
      {"sum_dim", {[](const Inputs& in) -> std::vector<Tensor> { return {in["a"].sum({1})}; }, kReduction}},
      {"sum_dims_keepdim",
       {[](const Inputs& in) -> std::vector<Tensor> { return {in["a"].sum({0, 2}, /*keepdim=*/true)}; }, kReduction}},
      {"mean_all", {[](const Inputs& in) -> std::vector<Tensor> { return {in["a"].mean()}; }, kReduction}},
      {"mean_dim", {[](const Inputs& in) -> std::vector<Tensor> { return {in["a"].mean({-1})}; }, kReduction}},
      {"max_all", {[](const Inputs& in) -> std::vector<Tensor> { return {in["a"].max()}; }, kPointwise}},
      {"max_dim",
       {[](const Inputs& in) -> std::vector<Tensor> {
          auto [values, indices] = in["a"].max(1);
          return {values, indices};
        },
        kPointwise}},
      {"min_dim",
       {[](const Inputs& in) -> std::vector<Tensor> {
          auto [values, indices] = in["a"].min(0);
          return {values, indices};
        },
        kPointwise}},
      {"argmax_dim", {[](const Inputs& in) -> std::vector<Tensor> { return {in["a"].argmax(1)}; }, kPointwise}},
      {"argmax_all", {[](const Inputs& in) -> std::vector<Tensor> { return {in["a"].argmax()}; }, kPointwise}},
      {"amax_dims", {[](const Inputs& in) -> std::vector<Tensor> { return {tiny::amax(in["a"], {0, 2})}; }, kPointwise}},
      // two maxima in row 0: each gets half the gradient, as in PyTorch
      {"amax_ties", {[](const Inputs& in) -> std::vector<Tensor> { return {tiny::amax(in["a"], {1})}; }, kPointwise}},
      {"amin_keepdim", {[](const Inputs& in) -> std::vector<Tensor> { return {tiny::amin(in["a"], {-1}, /*keepdim=*/true)}; }, kPointwise}},
      {"any_dim", {[](const Inputs& in) -> std::vector<Tensor> { return {tiny::any(in["a"] > 1, 1)}; }, kPointwise}},
      {"all_full", {[](const Inputs& in) -> std::vector<Tensor> { return {tiny::all(in["a"] > -2)}; }, kPointwise}},
      // cumsum and prod: tiny adds and multiplies in a tree, PyTorch's CPU in a loop (rounding differs)
      {"cumsum_dim1", {[](const Inputs& in) -> std::vector<Tensor> { return {tiny::cumsum(in["a"], 1)}; }, kReduction}},
      {"cumsum_transposed", {[](const Inputs& in) -> std::vector<Tensor> { return {in["a"].t().cumsum(-1)}; }, kReduction}},
      {"prod_dim", {[](const Inputs& in) -> std::vector<Tensor> { return {tiny::prod(in["a"], 1)}; }, kReduction}},
      // one zero in row 0 (its gradient is the product of the others), two in row 1 (all gradients 0)
      {"prod_zeros_keepdim",
       {[](const Inputs& in) -> std::vector<Tensor> { return {tiny::prod(in["a"].t(), 0, /*keepdim=*/true)}; }, kReduction}},
      {"prod_all", {[](const Inputs& in) -> std::vector<Tensor> { return {in["a"].prod()}; }, kReduction}},
      {"prod_all_one_zero", {[](const Inputs& in) -> std::vector<Tensor> { return {in["a"].prod()}; }, kReduction}},
      // linear algebra (Python's `a @ b` is torch.matmul)
      {"mm", {[](const Inputs& in) -> std::vector<Tensor> { return {tiny::matmul(in["a"], in["b"])}; }, kMatmul}},
      {"mm_transposed",
       {[](const Inputs& in) -> std::vector<Tensor> { return {tiny::matmul(in["a"].t(), in["b"])}; }, kMatmul}},
      {"matmul_batched",
       {[](const Inputs& in) -> std::vector<Tensor> { return {tiny::matmul(in["a"], in["b"])}; }, kMatmul}},
      {"matmul_batched_broadcast",
       {[](const Inputs& in) -> std::vector<Tensor> { return {tiny::matmul(in["a"], in["b"])}; }, kMatmul}},
      {"matmul_vec",
       {[](const Inputs& in) -> std::vector<Tensor> { return {tiny::matmul(in["a"], in["b"])}; }, kMatmul}},
      {"matmul_dot",
       {[](const Inputs& in) -> std::vector<Tensor> { return {tiny::matmul(in["a"], in["b"])}; }, kMatmul}},
      {"addmm",
       {[](const Inputs& in) -> std::vector<Tensor> { return {tiny::addmm(in["bias"], in["a"], in["b"])}; },
        kMatmul}},
      // softmax (the backward sums over the softmax dim)
      {"softmax_dim1", {[](const Inputs& in) -> std::vector<Tensor> { return {F::softmax(in["x"], 1)}; }, kReduction}},
      {"log_softmax_last",
       {[](const Inputs& in) -> std::vector<Tensor> { return {F::log_softmax(in["x"], -1)}; }, kReduction}},
      {"softmax_dim0_3d",
       {[](const Inputs& in) -> std::vector<Tensor> { return {F::softmax(in["x"], 0)}; }, kReduction}},
      {"softmax_large_values",
       {[](const Inputs& in) -> std::vector<Tensor> { return {F::softmax(in["x"], -1)}; }, kReduction}},
      // losses
      {"cross_entropy_mean",
       {[](const Inputs& in) -> std::vector<Tensor> { return {F::cross_entropy(in["x"], in["target"])}; },
        kReduction}},
      {"cross_entropy_sum",
       {[](const Inputs& in) -> std::vector<Tensor> {
          return {F::cross_entropy(in["x"], in["target"], reduction(F::Reduction::Sum))};
        },
        kReduction}},
      {"cross_entropy_none",
       {[](const Inputs& in) -> std::vector<Tensor> {
          return {F::cross_entropy(in["x"], in["target"], reduction(F::Reduction::None))};
        },
        kReduction}},
      {"cross_entropy_label_smoothing",
       {[](const Inputs& in) -> std::vector<Tensor> {
          F::CrossEntropyOptions o;
          o.label_smoothing = 0.1;
          return {F::cross_entropy(in["x"], in["target"], o)};
        },
        kReduction}},
      {"cross_entropy_ignore_index",
       {[](const Inputs& in) -> std::vector<Tensor> { return {F::cross_entropy(in["x"], in["target"])}; },
        kReduction}},
      {"nll_loss_mean",
       {[](const Inputs& in) -> std::vector<Tensor> { return {F::nll_loss(in["x"], in["target"])}; }, kReduction}},
      {"mse_loss_mean",
       {[](const Inputs& in) -> std::vector<Tensor> { return {F::mse_loss(in["x"], in["target"])}; }, kReduction}},
      {"mse_loss_sum",
       {[](const Inputs& in) -> std::vector<Tensor> {
          return {F::mse_loss(in["x"], in["target"], F::Reduction::Sum)};
        },
        kReduction}},
      // float64
      {"gelu_f64", {[](const Inputs& in) -> std::vector<Tensor> { return {F::gelu(in["a"])}; }, kFloat64}},
      {"mm_f64", {[](const Inputs& in) -> std::vector<Tensor> { return {tiny::matmul(in["a"], in["b"])}; }, kFloat64}},
      {"cumsum_f64", {[](const Inputs& in) -> std::vector<Tensor> { return {in["a"].cumsum(0)}; }, kFloat64}},
      {"prod_f64", {[](const Inputs& in) -> std::vector<Tensor> { return {in["a"].prod(-1)}; }, kFloat64}},
      {"gather_f64", {[](const Inputs& in) -> std::vector<Tensor> { return {in["a"].gather(0, in["index"])}; }, kFloat64}},
      {"cross_entropy_f64",
       {[](const Inputs& in) -> std::vector<Tensor> { return {F::cross_entropy(in["x"], in["target"])}; }, kFloat64}},
      // composite: matmuls over k = 12 and 16, then a cross-entropy mean
      {"mlp_step",
       {[](const Inputs& in) -> std::vector<Tensor> {
          Tensor h = tiny::relu(tiny::matmul(in["x"], in["w1"]) + in["b1"]);
          return {F::cross_entropy(tiny::matmul(h, in["w2"]) + in["b2"], in["target"])};
        },
        kMatmul}},
  };
  return table;
}

std::vector<std::string> fixture_dirs() {
  std::vector<std::string> names;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(TINY_PARITY_DIR, ec)) {
    if (entry.is_directory()) names.push_back(entry.path().filename().string());
  }
  std::sort(names.begin(), names.end());
  return names;
}

// Every fixture directory and every table entry, so that either one missing its
// counterpart becomes a failing test named after it.
std::vector<std::string> all_case_names() {
  std::set<std::string> names;
  for (const auto& n : fixture_dirs()) names.insert(n);
  for (const auto& [n, c] : parity_table()) names.insert(n);
  return {names.begin(), names.end()};
}

std::string index_str(int64_t flat, const tiny::IntArrayRef& shape) {
  std::vector<int64_t> idx(shape.size());
  for (size_t d = shape.size(); d-- > 0;) {
    idx[d] = shape[d] ? flat % shape[d] : 0;
    flat = shape[d] ? flat / shape[d] : 0;
  }
  std::ostringstream s;
  s << "[";
  for (size_t d = 0; d < idx.size(); ++d) s << (d ? ", " : "") << idx[d];
  return s.str() + "]";
}

// Compares tiny's `actual` with PyTorch's `expected`: dtype, shape, then every
// element; floats within `tol`, integers and bools exactly. On failure names the
// worst element (the largest |diff| / (atol + rtol * |expected|)).
::testing::AssertionResult matches(const std::string& what, const Tensor& actual, const Tensor& expected,
                                   Tolerance tol) {
  if (!actual.defined()) return ::testing::AssertionFailure() << what << ": tiny's tensor is undefined";
  if (actual.dtype() != expected.dtype()) {
    return ::testing::AssertionFailure() << what << ": dtype " << actual.dtype() << ", PyTorch's is "
                                         << expected.dtype();
  }
  if (actual.sizes() != expected.sizes()) {
    return ::testing::AssertionFailure() << what << ": shape " << tiny::shape_str(actual.sizes())
                                         << ", PyTorch's is " << tiny::shape_str(expected.sizes());
  }
  const Tensor a_cpu = actual.detach().cpu();
  if (!expected.is_floating_point()) {
    const auto a = a_cpu.to_vector<int64_t>(), e = expected.to_vector<int64_t>();
    for (size_t i = 0; i < a.size(); ++i) {
      if (a[i] != e[i]) {
        return ::testing::AssertionFailure() << what << ": first mismatch at index "
                                             << index_str(static_cast<int64_t>(i), expected.sizes()) << ": tiny "
                                             << a[i] << ", PyTorch " << e[i] << " (must be equal)";
      }
    }
    return ::testing::AssertionSuccess();
  }
  const auto a = a_cpu.to_vector<double>(), e = expected.to_vector<double>();
  double worst_ratio = 0.0;
  int64_t worst = -1, bad = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    const double bound = tol.atol + tol.rtol * std::fabs(e[i]);
    const double diff = std::fabs(a[i] - e[i]);
    const double ratio = std::isnan(diff) ? INFINITY : diff / bound;
    if (!(diff <= bound)) ++bad;
    if (worst < 0 || ratio > worst_ratio) {
      worst_ratio = ratio;
      worst = static_cast<int64_t>(i);
    }
  }
  if (bad == 0) return ::testing::AssertionSuccess();
  std::ostringstream msg;
  msg << what << ": " << bad << " of " << a.size() << " elements differ by more than atol " << tol.atol << " + rtol "
      << tol.rtol << " * |PyTorch|; worst at " << index_str(worst, expected.sizes()) << ": "
      << std::setprecision(expected.dtype() == tiny::kFloat64 ? 17 : 9) << "tiny " << a[worst] << ", PyTorch "
      << e[worst] << " (|diff| " << std::setprecision(3) << std::fabs(a[worst] - e[worst]) << ")";
  return ::testing::AssertionFailure() << msg.str();
}

bool is_output_file(const std::string& stem) {
  return stem == "out" || stem == "values" || stem == "indices" || stem.rfind("grad_", 0) == 0;
}

// What one run of a case produced, copied to the CPU: the forward outputs and
// the gradient of every floating-point input, by input name.
struct CaseResult {
  std::vector<Tensor> outputs;
  std::map<std::string, Tensor> grads;
};

// The parameter: a fixture name and the device the case runs on ("cpu" or "cuda:0").
using ParityParam = std::tuple<std::string, std::string>;

class PyTorch : public ::testing::TestWithParam<ParityParam> {};

// Runs case `name` on `device`: the inputs loaded from .npy (CPU) are moved to
// the device and made leaves there, the forward and backward passes run there,
// and outputs and gradients are checked to live on the device before they are
// copied back. Fatal failures (ASSERT_*) end the caller through HasFatalFailure().
void run_case(const std::string& name, const tiny::Device& device, const std::map<std::string, Tensor>& files,
              CaseResult& result) {
  const fs::path dir = fs::path(TINY_PARITY_DIR) / name;
  const auto& table = parity_table();
  const auto entry = table.find(name);
  ASSERT_NE(entry, table.end());
  std::map<std::string, Tensor> inputs;
  for (const auto& [stem, t] : files) {
    if (is_output_file(stem)) continue;
    Tensor on_device = t.to(device).detach();  // a leaf on the device (a fresh one on the CPU too)
    ASSERT_EQ(on_device.device(), device) << stem;
    if (on_device.is_floating_point()) on_device.requires_grad_(true);  // as make_fixtures.py does
    inputs[stem] = on_device;
  }
  ASSERT_FALSE(inputs.empty()) << dir << " holds no input files";

  std::vector<Tensor> outputs;
  try {
    outputs = entry->second.forward(Inputs(inputs));
  } catch (const std::exception& e) {
    FAIL() << name << " on " << device << ": the forward pass threw: " << e.what();
  }
  for (size_t i = 0; i < outputs.size(); ++i) {
    ASSERT_TRUE(outputs[i].defined()) << name << ": output " << i << " is undefined";
    EXPECT_EQ(outputs[i].device(), device) << name << ": output " << i << " left the device it was computed on";
    result.outputs.push_back(outputs[i].detach().cpu());
  }
  ASSERT_FALSE(outputs.empty());
  const Tensor& out = outputs[0];  // values for (values, indices) pairs
  if (!out.is_floating_point()) return;

  // Backward, as make_fixtures.py runs it.
  try {
    if (files.count("grad_out")) {
      out.backward(files.at("grad_out").to(device));
    } else {
      ASSERT_EQ(out.dim(), 0) << "no grad_out.npy, so the output must be 0-d (README: scalar outputs)";
      out.backward();
    }
  } catch (const std::exception& e) {
    FAIL() << name << " on " << device << ": backward threw: " << e.what();
  }
  for (const auto& [input_name, t] : inputs) {
    if (!t.is_floating_point()) {
      EXPECT_FALSE(t.grad().defined()) << input_name << " is not floating point but got a gradient";
      continue;
    }
    const Tensor grad = t.grad();
    if (!grad.defined()) continue;  // reported by the caller, which knows whether a grad_ file exists
    EXPECT_EQ(grad.device(), device) << name << ": the gradient of '" << input_name
                                     << "' is not on the device its input lives on";
    result.grads[input_name] = grad.cpu();
  }
}

TEST_P(PyTorch, Matches) {
  const auto& [name, device_name] = GetParam();
  const tiny::Device device(device_name);
  if (device.is_cuda() && !(tiny::cuda::is_available() && device.index() < tiny::cuda::device_count())) {
    GTEST_SKIP() << device << " is not available (TINY_EMULATED_GPUS=0 and no GPU?)";
  }
  const fs::path dir = fs::path(TINY_PARITY_DIR) / name;
  const auto& table = parity_table();
  const auto entry = table.find(name);
  ASSERT_NE(entry, table.end()) << "fixture directory " << dir
                                << " has no entry in parity_table() of tests/framework/test_parity.cpp: add one "
                                   "that mirrors its computation in tests/parity/README.md";
  ASSERT_TRUE(fs::is_directory(dir)) << "parity_table() has an entry '" << name << "' but there is no fixture "
                                     << dir << " (regenerate with tests/parity/make_fixtures.py)";

  std::map<std::string, Tensor> files;
  for (const auto& f : fs::directory_iterator(dir)) {
    if (f.path().extension() != ".npy") continue;
    files[f.path().stem().string()] = tiny::io::load_npy(f.path().string());
  }
  std::set<std::string> input_names;
  for (const auto& [stem, t] : files) {
    if (!is_output_file(stem)) input_names.insert(stem);
  }

  CaseResult got;
  run_case(name, device, files, got);
  if (HasFatalFailure()) return;
  const std::vector<Tensor>& outputs = got.outputs;
  const Tolerance tol = entry->second.tol;

  // Forward outputs.
  if (files.count("values")) {
    ASSERT_EQ(outputs.size(), 2u) << "the fixture has values.npy and indices.npy: the lambda must return both";
    ASSERT_TRUE(files.count("indices")) << dir << " has values.npy but no indices.npy";
    EXPECT_TRUE(matches(name + " values", outputs[0], files.at("values"), tol));
    EXPECT_TRUE(matches(name + " indices", outputs[1], files.at("indices"), tol));
  } else {
    ASSERT_TRUE(files.count("out")) << dir << " has neither out.npy nor values.npy";
    ASSERT_EQ(outputs.size(), 1u);
    EXPECT_TRUE(matches(name + " out", outputs[0], files.at("out"), tol));
  }

  if (!files.at(files.count("values") ? "values" : "out").is_floating_point()) {
    for (const auto& [stem, t] : files) {
      EXPECT_TRUE(stem.rfind("grad_", 0) != 0) << dir << " has an integer output but a gradient file " << stem;
    }
  } else {
    // Gradients, against PyTorch's.
    int compared = 0;
    for (const std::string& input_name : input_names) {
      const std::string grad_file = "grad_" + input_name;
      if (!files.at(input_name).is_floating_point()) {
        EXPECT_FALSE(files.count(grad_file)) << dir << " has " << grad_file << ".npy for a non-float input";
        continue;
      }
      ASSERT_TRUE(files.count(grad_file)) << dir << " lacks " << grad_file << ".npy for float input " << input_name;
      const auto g = got.grads.find(input_name);
      if (g == got.grads.end()) {
        ADD_FAILURE() << name << " " << grad_file << ": backward left no gradient in input '" << input_name << "'";
        continue;
      }
      EXPECT_TRUE(matches(name + " " + grad_file, g->second, files.at(grad_file), tol));
      ++compared;
    }
    // Every grad_<x>.npy except grad_out belongs to an input that was compared.
    for (const auto& [stem, t] : files) {
      if (stem.rfind("grad_", 0) != 0 || stem == "grad_out") continue;
      EXPECT_TRUE(input_names.count(stem.substr(5))) << dir << " has " << stem << ".npy but no input "
                                                     << stem.substr(5);
    }
    EXPECT_GT(compared, 0) << name << ": a floating-point output but no gradient was compared";
  }

  // On a device, the same kernels run as on the CPU (DESIGN.md section 4), so
  // beyond the tolerance against PyTorch, every output and gradient must equal
  // the CPU's bit for bit.
  if (device.is_cuda()) {
    CaseResult on_cpu;
    run_case(name, tiny::Device(), files, on_cpu);
    if (HasFatalFailure()) return;
    ASSERT_EQ(on_cpu.outputs.size(), outputs.size());
    for (size_t i = 0; i < outputs.size(); ++i) {
      EXPECT_TRUE(tiny::equal(outputs[i], on_cpu.outputs[i]))
          << name << ": output " << i << " on " << device << " differs from the CPU's\n"
          << device << ": " << outputs[i] << "\ncpu: " << on_cpu.outputs[i];
    }
    ASSERT_EQ(on_cpu.grads.size(), got.grads.size());
    for (const auto& [input_name, g] : on_cpu.grads) {
      ASSERT_TRUE(got.grads.count(input_name)) << input_name;
      EXPECT_TRUE(tiny::equal(got.grads.at(input_name), g))
          << name << ": the gradient of '" << input_name << "' on " << device << " differs from the CPU's";
    }
  }
}

std::string case_param_name(const ::testing::TestParamInfo<ParityParam>& info) {
  std::string s = std::get<0>(info.param) + "_" + std::get<1>(info.param);
  std::string out;
  for (char c : s) {
    if (c == ':') continue;  // cuda:0 -> cuda0
    out += std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
  }
  return out;
}

// Every case on the CPU and on the first (emulated, by default) GPU.
INSTANTIATE_TEST_SUITE_P(Parity, PyTorch,
                         ::testing::Combine(::testing::ValuesIn(all_case_names()), ::testing::Values("cpu", "cuda:0")),
                         case_param_name);

TEST(ParityTable, CoversEveryFixture) {
  const auto dirs = fixture_dirs();
  ASSERT_GE(dirs.size(), 50u) << "expected the ~54 fixture directories under " << TINY_PARITY_DIR;
  const auto& table = parity_table();
  for (const auto& d : dirs) {
    EXPECT_TRUE(table.count(d)) << "fixture " << d << " has no entry in parity_table(): it would not be compared";
  }
  for (const auto& [n, c] : table) {
    EXPECT_TRUE(std::find(dirs.begin(), dirs.end(), n) != dirs.end()) << "table entry " << n << " has no fixture";
  }
}

TEST(ParityTable, ComparisonDetectsAMismatch) {
  // The comparison itself must be able to fail: one element off by 1e-4 relative.
  Tensor e = tiny::tensor({1.0, 2.0, 3.0});
  Tensor a = tiny::tensor({1.0, 2.0002, 3.0});
  const auto r = matches("probe", a, e, kPointwise);
  EXPECT_FALSE(r);
  EXPECT_NE(std::string(r.message()).find("[1]"), std::string::npos) << r.message();
  EXPECT_TRUE(matches("probe", e, e, kPointwise));
  EXPECT_FALSE(matches("probe", tiny::tensor({1.0, 2.0}), e, kPointwise));                  // shape
  EXPECT_FALSE(matches("probe", e.to(tiny::kFloat64), e, kPointwise));                     // dtype
  EXPECT_FALSE(matches("probe", tiny::tensor({1.0, NAN, 3.0}), e, kPointwise));            // NaN
  EXPECT_FALSE(matches("probe", tiny::arange(3) + 1, tiny::arange(3), kPointwise));        // indices exactly
}

}  // namespace
