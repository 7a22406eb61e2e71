// operator<< for tensors in PyTorch's format: fixed or scientific notation
// chosen from the values, columns aligned, long tensors summarised with "...".
#include <cmath>
#include <iomanip>
#include <ostream>
#include <sstream>

#include "core/tensor_impl.h"
#include "tiny/autograd.h"
#include "tiny/ops.h"

namespace tiny {

std::string shape_str(const IntArrayRef& shape) {
  std::ostringstream out;
  out << "[";
  for (size_t i = 0; i < shape.size(); ++i) out << (i ? ", " : "") << shape[i];
  out << "]";
  return out.str();
}

std::ostream& operator<<(std::ostream& out, const Scalar& s) {
  if (s.is_bool()) return out << (s.to_bool() ? "True" : "False");
  if (s.is_integral()) return out << s.to_int64();
  std::ostringstream tmp;
  tmp << std::fixed << std::setprecision(4) << s.to_double();
  return out << tmp.str();
}

namespace {

constexpr int64_t kSummarizeThreshold = 1000;
constexpr int64_t kEdgeItems = 3;

struct Formatter {
  Dtype dtype;
  bool int_mode = false;  // floats that are all whole numbers print as "1."
  bool sci_mode = false;
  int width = 1;

  std::string format(double v) const {
    std::ostringstream s;
    if (dtype == kBool) {
      s << (v != 0.0 ? "True" : "False");
    } else if (dtype == kInt64) {
      s << static_cast<int64_t>(v);
    } else if (std::isnan(v)) {
      s << "nan";
    } else if (std::isinf(v)) {
      s << (v > 0 ? "inf" : "-inf");
    } else if (int_mode) {
      s << std::fixed << std::setprecision(0) << v << ".";
    } else if (sci_mode) {
      s << std::scientific << std::setprecision(4) << v;
    } else {
      s << std::fixed << std::setprecision(4) << v;
    }
    return s.str();
  }
};

Formatter make_formatter(const std::vector<double>& values, Dtype dtype) {
  Formatter f{dtype};
  if (is_floating_point(dtype)) {
    double max_abs = 0.0, min_abs = INFINITY;
    bool all_int = true, any_finite = false;
    for (double v : values) {
      if (!std::isfinite(v)) continue;
      any_finite = true;
      const double a = std::fabs(v);
      if (a != 0.0) {
        max_abs = std::max(max_abs, a);
        min_abs = std::min(min_abs, a);
      }
      all_int = all_int && std::nearbyint(v) == v;
    }
    if (any_finite && all_int) {
      f.int_mode = true;
      f.sci_mode = max_abs > 1e8;
      if (f.sci_mode) f.int_mode = false;
    } else if (any_finite && min_abs != INFINITY) {
      f.sci_mode = max_abs / min_abs > 1000.0 || max_abs > 1e8 || min_abs < 1e-4;
    }
  }
  for (double v : values) f.width = std::max(f.width, static_cast<int>(f.format(v).size()));
  return f;
}

// Values of a tensor (summarised: only the edges of long dims) in row-major order.
void collect(const Tensor& t, bool summarize, std::vector<double>& out) {
  if (t.dim() == 0) {
    out.push_back(t.item().to_double());
    return;
  }
  const int64_t n = t.size(0);
  for (int64_t i = 0; i < n; ++i) {
    if (summarize && n > 2 * kEdgeItems && i == kEdgeItems) i = n - kEdgeItems;
    collect(t.select(0, i), summarize, out);
  }
}

void print_rec(std::ostream& out, const Tensor& t, const Formatter& f, bool summarize, int indent) {
  if (t.dim() == 0) {
    out << std::setw(f.width) << f.format(t.item().to_double());
    return;
  }
  const int64_t n = t.size(0);
  out << "[";
  for (int64_t i = 0; i < n; ++i) {
    if (summarize && n > 2 * kEdgeItems && i == kEdgeItems) {
      out << (t.dim() == 1 ? "..., " : "...,\n" + std::string(indent + 1, ' '));
      i = n - kEdgeItems;
    }
    print_rec(out, t.select(0, i), f, summarize, indent + 1);
    if (i + 1 < n) {
      if (t.dim() == 1) {
        out << ", ";
      } else {
        out << "," << std::string(static_cast<size_t>(t.dim() - 1), '\n') << std::string(indent + 1, ' ');
      }
    }
  }
  out << "]";
}

}  // namespace

std::ostream& operator<<(std::ostream& out, const Tensor& tensor) {
  if (!tensor.defined()) return out << "[ Tensor (undefined) ]";
  NoGradGuard no_grad;
  const Tensor host = tensor.detach().cpu();
  const bool summarize = host.numel() > kSummarizeThreshold;
  std::ostringstream body;
  const std::string prefix = "tensor(";
  if (host.numel() == 0) {
    body << "[]";
  } else {
    std::vector<double> values;
    collect(host.to(kFloat64), summarize, values);
    Formatter f = make_formatter(values, host.dtype());
    print_rec(body, host.to(kFloat64), f, summarize, static_cast<int>(prefix.size()));
  }
  out << prefix << body.str();
  if (host.numel() == 0 && host.dim() != 1) {
    out << ", size=(";
    for (int64_t d = 0; d < host.dim(); ++d) out << (d ? ", " : "") << host.size(d);
    out << (host.dim() == 1 ? ",)" : ")");
  }
  if (tensor.device() != Device()) out << ", device='" << tensor.device() << "'";
  if (tensor.dtype() != kFloat32 && tensor.dtype() != kInt64 && tensor.dtype() != kBool) {
    out << ", dtype=tiny." << dtype_name(tensor.dtype());
  }
  if (tensor.grad_fn()) {
    out << ", grad_fn=<" << tensor.grad_fn()->name() << ">";
  } else if (tensor.requires_grad()) {
    out << ", requires_grad=True";
  }
  return out << ")";
}

}  // namespace tiny
