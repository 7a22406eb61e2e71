// gradcheck: compares autograd's gradients with central finite differences.
//
// For a function f of some tensors, with a random upstream gradient v shaped
// like f's output, the analytic vector-Jacobian product J^T v (from
// tiny::autograd::grad, and again from backward() into the leaves' .grad())
// must match, element by element of every input that requires grad,
//   (sum(f(x + eps e_j) * v) - sum(f(x - eps e_j) * v)) / (2 eps).
// The random v makes non-scalar outputs count every output element with a
// different weight, so a gradient that is right only "on average" fails.
//
// Inputs may live on a device (cuda:N, real or emulated). Host code cannot
// write a device tensor's elements, so for such an input the finite
// differences go through a host copy: the element is perturbed in a CPU copy
// of the input, which is copied back into the device tensor in place (so the
// input keeps its storage, strides and non-contiguity), f runs on the device,
// and only <f, v> comes back to the host. The analytic side runs on the device
// with v copied there; its gradients must be on the input's device.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "tiny/autograd.h"
#include "tiny/ops.h"
#include "tiny/tensor.h"

namespace tiny_test {

using GradcheckFn = std::function<tiny::Tensor(const std::vector<tiny::Tensor>&)>;

namespace detail {

// Storage offsets (in elements, from data_ptr) of every element in row-major logical order.
inline std::vector<int64_t> element_offsets(const tiny::Tensor& t) {
  std::vector<int64_t> out;
  const int64_t n = t.numel();
  out.reserve(static_cast<size_t>(n));
  const int64_t nd = t.dim();
  std::vector<int64_t> idx(static_cast<size_t>(nd), 0);
  for (int64_t k = 0; k < n; ++k) {
    int64_t off = 0;
    for (int64_t d = 0; d < nd; ++d) off += idx[d] * t.stride(d);
    out.push_back(off);
    for (int64_t d = nd - 1; d >= 0; --d) {
      if (++idx[d] < t.size(d)) break;
      idx[d] = 0;
    }
  }
  return out;
}

inline std::string index_str(const tiny::Tensor& t, int64_t flat) {
  std::vector<int64_t> idx(static_cast<size_t>(t.dim()), 0);
  for (int64_t d = t.dim() - 1; d >= 0; --d) {
    idx[d] = flat % t.size(d);
    flat /= t.size(d);
  }
  std::ostringstream s;
  s << "[";
  for (size_t i = 0; i < idx.size(); ++i) s << (i ? ", " : "") << idx[i];
  s << "]";
  return s.str();
}

inline double read_at(const tiny::Tensor& t, int64_t off) {
  if (t.dtype() == tiny::kFloat64) return t.data_ptr<double>()[off];
  return static_cast<double>(t.data_ptr<float>()[off]);
}

// Writes `value` (rounded to the tensor's dtype) and returns what was stored.
inline double write_at(const tiny::Tensor& t, int64_t off, double value) {
  if (t.dtype() == tiny::kFloat64) {
    t.data_ptr<double>()[off] = value;
    return value;
  }
  t.data_ptr<float>()[off] = static_cast<float>(value);
  return static_cast<double>(t.data_ptr<float>()[off]);
}

// <f(inputs), v> in float64, without recording a graph; `v` is on the CPU and
// f's output is copied there (a no-op for CPU outputs).
inline double weighted_output(const GradcheckFn& fn, const std::vector<tiny::Tensor>& inputs, const tiny::Tensor& v) {
  tiny::NoGradGuard no_grad;
  tiny::Tensor out = fn(inputs).cpu().to(tiny::kFloat64);
  return (out * v).sum().item<double>();
}

// Gradient values in row-major order (an undefined gradient counts as zeros), copied to the host.
inline std::vector<double> grad_values(const tiny::Tensor& g, int64_t numel) {
  if (!g.defined()) return std::vector<double>(static_cast<size_t>(numel), 0.0);
  return g.cpu().to(tiny::kFloat64).to_vector<double>();
}

// Element access for the finite differences. A CPU input is perturbed in place
// through its own memory; a device input through a contiguous host copy
// (`host`, element j at offset j) that commit() copies back into the device
// tensor in place.
class Perturber {
 public:
  explicit Perturber(const tiny::Tensor& x) : x_(x) {
    if (x.is_cpu()) {
      target_ = x;
      offsets_ = element_offsets(x);
    } else {
      target_ = x.detach().cpu();  // contiguous
      offsets_.resize(static_cast<size_t>(x.numel()));
      for (size_t j = 0; j < offsets_.size(); ++j) offsets_[j] = static_cast<int64_t>(j);
    }
  }
  double read(int64_t j) const { return read_at(target_, offsets_[static_cast<size_t>(j)]); }
  // Stores `value` (rounded to the dtype) as element j of the input; returns what was stored.
  double write(int64_t j, double value) const {
    const double stored = write_at(target_, offsets_[static_cast<size_t>(j)], value);
    if (!x_.is_cpu()) {
      tiny::NoGradGuard no_grad;  // an in-place write into a leaf, outside any graph
      x_.copy_(target_);
    }
    return stored;
  }

 private:
  tiny::Tensor x_;
  tiny::Tensor target_;
  std::vector<int64_t> offsets_;
};

}  // namespace detail

/// Uniform values in [lo, hi), float64, from a seeded std::mt19937 (independent of tiny's RNG).
inline tiny::Tensor uniform(const tiny::IntArrayRef& shape, double lo, double hi, uint32_t seed,
                            tiny::Dtype dtype = tiny::kFloat64) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<double> dist(lo, hi);
  int64_t n = 1;
  for (int64_t s : shape) n *= s;
  std::vector<double> v(static_cast<size_t>(n));
  for (double& x : v) x = dist(gen);
  return tiny::tensor(v, shape, tiny::TensorOptions(dtype));
}

/// Values with |x| in [lo, hi) and random signs: keeps kinks (abs, relu at 0) out of reach of eps.
inline tiny::Tensor away_from_zero(const tiny::IntArrayRef& shape, double lo, double hi, uint32_t seed) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<double> dist(lo, hi);
  std::bernoulli_distribution sign(0.5);
  int64_t n = 1;
  for (int64_t s : shape) n *= s;
  std::vector<double> v(static_cast<size_t>(n));
  for (double& x : v) x = sign(gen) ? dist(gen) : -dist(gen);
  return tiny::tensor(v, shape, tiny::TensorOptions(tiny::kFloat64));
}

/// Pairwise distinct values (at least 0.05 apart), shuffled: max/min have no ties.
inline tiny::Tensor distinct(const tiny::IntArrayRef& shape, uint32_t seed) {
  std::mt19937 gen(seed);
  int64_t n = 1;
  for (int64_t s : shape) n *= s;
  std::vector<double> v(static_cast<size_t>(n));
  std::uniform_real_distribution<double> jitter(0.0, 0.04);
  for (int64_t i = 0; i < n; ++i) v[i] = 0.1 * static_cast<double>(i - n / 2) + jitter(gen);
  std::shuffle(v.begin(), v.end(), gen);
  return tiny::tensor(v, shape, tiny::TensorOptions(tiny::kFloat64));
}

/// A leaf requiring grad (marks `t` itself, returns it).
inline tiny::Tensor leaf(tiny::Tensor t) {
  t.requires_grad_(true);
  return t;
}

/// Checks f's gradients w.r.t. every input that requires grad against central differences.
///
/// Inputs are used as given (they may be non-contiguous leaves); those that do
/// not require grad (targets, masks) are passed through unchanged. Fails with
/// the worst element: input number, index, analytic and numeric values.
inline ::testing::AssertionResult gradcheck(const GradcheckFn& fn, const std::vector<tiny::Tensor>& inputs,
                                            double eps = 1e-6, double atol = 1e-5, double rtol = 1e-4,
                                            uint32_t seed = 1234) {
  std::vector<tiny::Tensor> diff;
  std::vector<size_t> diff_pos;
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (inputs[i].defined() && inputs[i].requires_grad()) {
      diff.push_back(inputs[i]);
      diff_pos.push_back(i);
    }
  }
  if (diff.empty()) return ::testing::AssertionFailure() << "gradcheck: no input requires grad";

  tiny::Tensor out = fn(inputs);
  if (!out.requires_grad()) return ::testing::AssertionFailure() << "gradcheck: the output does not require grad";
  const tiny::Tensor v = uniform(out.sizes(), -1.0, 1.0, seed);
  const tiny::Tensor v_out = v.to(out.dtype()).to(out.device());  // the upstream gradient, where out lives

  // Analytic, twice: autograd::grad (leaves' .grad() untouched) and backward().
  std::vector<tiny::Tensor> saved_grads;
  for (const auto& x : diff) saved_grads.push_back(x.grad());
  std::vector<tiny::Tensor> analytic = tiny::autograd::grad({out}, diff, {v_out}, /*retain_graph=*/true);
  if (analytic.size() != diff.size()) {
    return ::testing::AssertionFailure() << "autograd::grad returned " << analytic.size() << " gradients for "
                                         << diff.size() << " inputs";
  }
  for (size_t k = 0; k < diff.size(); ++k) {
    const tiny::Tensor& g = analytic[k];
    const tiny::Tensor before = saved_grads[k];
    const tiny::Tensor now = diff[k].grad();
    if (before.defined() != now.defined() || (now.defined() && !now.is_same(before))) {
      return ::testing::AssertionFailure() << "autograd::grad changed .grad() of input " << diff_pos[k];
    }
    if (!g.defined()) continue;
    if (g.sizes() != diff[k].sizes()) {
      return ::testing::AssertionFailure() << "gradient of input " << diff_pos[k] << " has shape "
                                           << tiny::shape_str(g.sizes()) << ", the input has "
                                           << tiny::shape_str(diff[k].sizes());
    }
    if (g.device() != diff[k].device()) {
      return ::testing::AssertionFailure() << "gradient of input " << diff_pos[k] << " is on " << g.device()
                                           << ", the input is on " << diff[k].device();
    }
    if (g.dtype() != diff[k].dtype()) {
      return ::testing::AssertionFailure() << "gradient of input " << diff_pos[k] << " has dtype "
                                           << tiny::dtype_name(g.dtype()) << ", the input has "
                                           << tiny::dtype_name(diff[k].dtype());
    }
  }
  std::vector<tiny::Tensor> via_backward;
  {
    bool all_leaves = true;
    for (const auto& x : diff) all_leaves = all_leaves && x.is_leaf();
    if (all_leaves) {
      for (const auto& x : diff) x.set_grad(tiny::Tensor());
      out.backward(v_out);
      for (size_t k = 0; k < diff.size(); ++k) {
        via_backward.push_back(diff[k].grad());
        diff[k].set_grad(saved_grads[k]);
      }
    }
  }
  out = tiny::Tensor();

  double worst_ratio = -1.0;
  std::ostringstream worst;
  for (size_t k = 0; k < diff.size(); ++k) {
    const tiny::Tensor& x = diff[k];
    const int64_t n = x.numel();
    const std::vector<double> a = detail::grad_values(analytic[k], n);
    if (!via_backward.empty()) {
      const std::vector<double> b = detail::grad_values(via_backward[k], n);
      for (int64_t j = 0; j < n; ++j) {
        if (std::abs(a[j] - b[j]) > 1e-12 * (1.0 + std::abs(a[j]))) {
          return ::testing::AssertionFailure()
                 << "input " << diff_pos[k] << " index " << detail::index_str(x, j) << ": autograd::grad gives "
                 << a[j] << " but backward() accumulated " << b[j];
        }
      }
    }
    const detail::Perturber element(x);
    for (int64_t j = 0; j < n; ++j) {
      const double orig = element.read(j);
      const double hi = element.write(j, orig + eps);
      const double f_hi = detail::weighted_output(fn, inputs, v);
      const double lo = element.write(j, orig - eps);
      const double f_lo = detail::weighted_output(fn, inputs, v);
      element.write(j, orig);
      const double numeric = (f_hi - f_lo) / (hi - lo);
      const double err = std::abs(a[j] - numeric);
      const double ratio = err / (atol + rtol * std::abs(numeric));
      const double score = std::isnan(ratio) ? INFINITY : ratio;
      if (score > worst_ratio) {
        worst_ratio = score;
        worst.str("");
        worst << "input " << diff_pos[k] << " (shape " << tiny::shape_str(x.sizes()) << ") index "
              << detail::index_str(x, j) << ": analytic " << a[j] << ", numeric " << numeric << " (|diff| " << err
              << ", allowed " << atol + rtol * std::abs(numeric) << ")";
      }
    }
  }
  if (worst_ratio > 1.0) return ::testing::AssertionFailure() << "gradcheck failed; worst element: " << worst.str();
  return ::testing::AssertionSuccess();
}

}  // namespace tiny_test
