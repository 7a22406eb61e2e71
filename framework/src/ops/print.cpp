// operator<< for tensors in PyTorch's format (torch/_tensor_str.py of 1.13):
// fixed or scientific notation chosen from the nonzero finite values, columns
// aligned, rows wrapped at 80 characters, tensors of more than 1000 elements
// summarised with "...", and suffixes (dtype, requires_grad, grad_fn) that also
// wrap at 80 characters.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <iomanip>
#include <ostream>
#include <sstream>
#include <string>
#include <vector>

#include "core/tensor_impl.h"
#include "tiny/autograd.h"
#include "tiny/ops.h"

namespace tiny {

std::ostream& operator<<(std::ostream& out, const Scalar& s) {
  if (s.is_bool()) return out << (s.to_bool() ? "True" : "False");
  if (s.is_integral()) return out << s.to_int64();
  std::ostringstream tmp;
  tmp << std::fixed << std::setprecision(4) << s.to_double();
  return out << tmp.str();
}

namespace {

// PyTorch's PRINT_OPTS defaults.
constexpr int64_t kThreshold = 1000;  // more elements than this: summarise
constexpr int64_t kEdgeItems = 3;     // elements kept at each end of a summarised dimension
constexpr int kLineWidth = 80;
constexpr int kPrecision = 4;

// One element: floats as double, int64 exactly, bool as 0/1.
struct Elem {
  double d = 0.0;
  int64_t i = 0;
};

// A contiguous CPU copy of the tensor, read element by element.
struct HostView {
  Tensor t;
  IntArrayRef sizes;
  IntArrayRef strides;  // contiguous strides, in elements
  Dtype dtype;

  explicit HostView(const Tensor& tensor) : t(tensor.contiguous()), sizes(t.sizes()), dtype(t.dtype()) {
    strides.assign(sizes.size(), 1);
    for (int64_t d = static_cast<int64_t>(sizes.size()) - 2; d >= 0; --d) {
      strides[d] = strides[d + 1] * std::max<int64_t>(sizes[d + 1], 1);
    }
  }
  Elem at(int64_t offset) const {
    Elem e;
    switch (dtype) {
      case Dtype::Float32: e.d = static_cast<double>(t.data_ptr<float>()[offset]); break;
      case Dtype::Float64: e.d = t.data_ptr<double>()[offset]; break;
      // As PyTorch: 16-bit floats are formatted as their exact float values.
      case Dtype::Float16: e.d = static_cast<float>(t.data_ptr<Half>()[offset]); break;
      case Dtype::BFloat16: e.d = static_cast<float>(t.data_ptr<BFloat16>()[offset]); break;
      case Dtype::Int64: e.i = t.data_ptr<int64_t>()[offset]; break;
      case Dtype::Int32: e.i = t.data_ptr<int32_t>()[offset]; break;
      case Dtype::UInt8: e.i = t.data_ptr<uint8_t>()[offset]; break;
      case Dtype::Bool: e.i = t.data_ptr<bool>()[offset] ? 1 : 0; break;
    }
    return e;
  }
};

std::string printf_str(const char* fmt, double v) {
  char buf[512];
  std::snprintf(buf, sizeof(buf), fmt, v);
  return buf;
}

// Python's '{:.4f}' / '{:.4e}' / '{:.0f}': nan and inf print as "nan", "inf", "-inf".
std::string nonfinite_str(double v) { return std::isnan(v) ? "nan" : (v > 0 ? "inf" : "-inf"); }
std::string fixed_str(double v, int precision) {
  if (!std::isfinite(v)) return nonfinite_str(v);
  return printf_str(precision == 0 ? "%.0f" : "%.4f", v);
}
std::string sci_str(double v) {
  if (!std::isfinite(v)) return nonfinite_str(v);
  return printf_str("%.4e", v);
}

// PyTorch's _Formatter: the mode and width come from the (summarised) values.
class Formatter {
 public:
  Formatter(const std::vector<Elem>& values, Dtype dtype) : dtype_(dtype), floating_(is_floating_point(dtype)) {
    if (!floating_) {
      for (const Elem& v : values) max_width_ = std::max(max_width_, static_cast<int>(raw(v).size()));
      return;
    }
    std::vector<double> nonzero_finite;
    for (const Elem& v : values) {
      if (std::isfinite(v.d) && v.d != 0.0) nonzero_finite.push_back(v.d);
    }
    if (nonzero_finite.empty()) return;  // int_mode, width 1, as in PyTorch
    double min_abs = INFINITY, max_abs = 0.0;
    for (double v : nonzero_finite) {
      min_abs = std::min(min_abs, std::fabs(v));
      max_abs = std::max(max_abs, std::fabs(v));
      if (v != std::ceil(v)) int_mode_ = false;
    }
    if (int_mode_) {
      if (max_abs / min_abs > 1000.0 || max_abs > 1e8) {
        sci_mode_ = true;
        for (double v : nonzero_finite) max_width_ = std::max(max_width_, static_cast<int>(sci_str(v).size()));
      } else {
        for (double v : nonzero_finite) {
          max_width_ = std::max(max_width_, static_cast<int>(fixed_str(v, 0).size()) + 1);
        }
      }
    } else {
      if (max_abs / min_abs > 1000.0 || max_abs > 1e8 || min_abs < 1e-4) {
        sci_mode_ = true;
        for (double v : nonzero_finite) max_width_ = std::max(max_width_, static_cast<int>(sci_str(v).size()));
      } else {
        for (double v : nonzero_finite) {
          max_width_ = std::max(max_width_, static_cast<int>(fixed_str(v, kPrecision).size()));
        }
      }
    }
  }

  int width() const { return max_width_; }

  // The element right-aligned to the common width.
  std::string format(const Elem& v) const {
    const std::string s = raw(v);
    return s.size() < static_cast<size_t>(max_width_) ? std::string(max_width_ - s.size(), ' ') + s : s;
  }

 private:
  std::string raw(const Elem& v) const {
    if (dtype_ == kBool) return v.i ? "True" : "False";
    if (!floating_) return std::to_string(v.i);
    if (sci_mode_) return sci_str(v.d);
    if (int_mode_) return std::isfinite(v.d) ? fixed_str(v.d, 0) + "." : nonfinite_str(v.d);
    return fixed_str(v.d, kPrecision);
  }

  Dtype dtype_;
  bool floating_;
  bool int_mode_ = true;
  bool sci_mode_ = false;
  int max_width_ = 1;
};

bool summarised(int64_t n, bool summarize) { return summarize && n > 2 * kEdgeItems; }

// The indices of dimension `n` that are printed.
std::vector<int64_t> shown(int64_t n, bool summarize) {
  std::vector<int64_t> idx;
  for (int64_t i = 0; i < n; ++i) {
    if (summarised(n, summarize) && i == kEdgeItems) i = n - kEdgeItems;
    idx.push_back(i);
  }
  return idx;
}

// PyTorch's get_summarized_data: the values that are printed, in order.
void collect(const HostView& v, size_t dim, int64_t offset, bool summarize, std::vector<Elem>& out) {
  if (dim == v.sizes.size()) {
    out.push_back(v.at(offset));
    return;
  }
  for (int64_t i : shown(v.sizes[dim], summarize)) collect(v, dim + 1, offset + i * v.strides[dim], summarize, out);
}

std::string tensor_str(const HostView& v, size_t dim, int64_t offset, int indent, bool summarize,
                       const Formatter& f) {
  const size_t ndim = v.sizes.size() - dim;
  if (ndim == 0) return f.format(v.at(offset));
  const int64_t n = v.sizes[dim];
  const bool cut = summarised(n, summarize);
  std::vector<std::string> parts;
  if (ndim == 1) {
    const int element_length = f.width() + 2;
    const int per_line = std::max(1, static_cast<int>(std::floor(static_cast<double>(kLineWidth - indent) /
                                                                 element_length)));
    for (int64_t i : shown(n, summarize)) {
      if (cut && i == n - kEdgeItems) parts.push_back(" ...");
      parts.push_back(f.format(v.at(offset + i * v.strides[dim])));
    }
    std::string out = "[";
    for (size_t i = 0; i < parts.size(); ++i) {
      if (i > 0) out += (i % per_line == 0) ? ",\n" + std::string(indent + 1, ' ') : ", ";
      out += parts[i];
    }
    return out + "]";
  }
  for (int64_t i : shown(n, summarize)) {
    if (cut && i == n - kEdgeItems) parts.push_back("...");
    parts.push_back(tensor_str(v, dim + 1, offset + i * v.strides[dim], indent + 1, summarize, f));
  }
  const std::string sep = "," + std::string(ndim - 1, '\n') + std::string(indent + 1, ' ');
  std::string out = "[";
  for (size_t i = 0; i < parts.size(); ++i) out += (i ? sep : "") + parts[i];
  return out + "]";
}

// PyTorch's _add_suffixes: ", suffix", or ",\n" + indent + suffix when the line would pass 80 characters.
std::string add_suffixes(const std::string& body, const std::vector<std::string>& suffixes, int indent) {
  std::string out = body;
  const size_t nl = body.rfind('\n');
  // Python: len(s) - s.rfind("\n") + 1, with rfind giving -1 when there is no newline.
  int64_t last_line_len = static_cast<int64_t>(body.size()) - (nl == std::string::npos ? -1 : static_cast<int64_t>(nl)) + 1;
  for (const std::string& suffix : suffixes) {
    const int64_t len = static_cast<int64_t>(suffix.size());
    if (last_line_len + len + 2 > kLineWidth) {
      out += ",\n" + std::string(indent, ' ') + suffix;
      last_line_len = indent + len;
    } else {
      out += ", " + suffix;
      last_line_len += len + 2;
    }
  }
  return out + ")";
}

}  // namespace

std::ostream& operator<<(std::ostream& out, const Tensor& tensor) {
  if (!tensor.defined()) return out << "[ Tensor (undefined) ]";
  NoGradGuard no_grad;
  const Tensor host = tensor.detach().cpu();
  const std::string prefix = "tensor(";
  const int indent = static_cast<int>(prefix.size());
  std::vector<std::string> suffixes;
  if (!tensor.device().is_cpu()) {
    std::ostringstream d;
    d << "device='" << tensor.device() << "'";
    suffixes.push_back(d.str());
  }
  const std::string dtype_suffix = std::string("dtype=tiny.") + dtype_name(tensor.dtype());
  std::string body;
  if (host.numel() == 0) {
    // As NumPy: the shape unless it is (0,); and the dtype unless it is the default float32,
    // since there are no elements to tell an int64 or bool tensor apart.
    if (host.dim() != 1) {
      std::string size = "size=(";
      for (int64_t d = 0; d < host.dim(); ++d) size += (d ? ", " : "") + std::to_string(host.size(d));
      suffixes.push_back(size + ")");
    }
    if (tensor.dtype() != kFloat32) suffixes.push_back(dtype_suffix);
    body = "[]";
  } else {
    if (tensor.dtype() != kFloat32 && tensor.dtype() != kInt64 && tensor.dtype() != kBool) {
      suffixes.push_back(dtype_suffix);
    }
    const HostView view(host);
    const bool summarize = host.numel() > kThreshold;
    std::vector<Elem> values;
    collect(view, 0, 0, summarize, values);
    const Formatter f(values, host.dtype());
    body = tensor_str(view, 0, 0, indent, summarize, f);
  }
  if (tensor.grad_fn()) {
    suffixes.push_back("grad_fn=<" + tensor.grad_fn()->name() + ">");
  } else if (tensor.requires_grad()) {
    suffixes.push_back("requires_grad=True");
  }
  return out << add_suffixes(prefix + body, suffixes, indent);
}

}  // namespace tiny
