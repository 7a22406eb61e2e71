#include "compare.h"

#include <cmath>
#include <cstdio>
#include <sstream>

namespace workbook {

std::string number_text(double v, int digits) {
  std::ostringstream s;
  s.precision(digits);
  s << v;
  return s.str();
}

std::string values_text(const nlohmann::json& values, size_t max,
                        const std::function<std::string(const nlohmann::json&)>& format) {
  std::ostringstream s;
  s << "[";
  for (size_t i = 0; i < values.size() && i < max; ++i) {
    if (i) s << ", ";
    if (format) {
      s << format(values[i]);
    } else if (values[i].is_number_float()) {
      s << number_text(values[i].get<double>(), 5);
    } else {
      s << values[i].dump();
    }
  }
  if (values.size() > max) s << ", ... (" << values.size() << " in all)";
  s << "]";
  return s.str();
}

std::string shape_text(const std::vector<int64_t>& shape) {
  std::ostringstream s;
  s << "(";
  for (size_t i = 0; i < shape.size(); ++i) s << (i ? ", " : "") << shape[i];
  s << (shape.size() == 1 ? ",)" : ")");
  return s.str();
}

std::string preview(const tiny::Tensor& tensor, int64_t count) {
  const tiny::Tensor flat = tensor.to(tiny::Dtype::Float64).reshape({-1});
  const int64_t n = flat.numel();
  std::ostringstream s;
  s << "[";
  for (int64_t i = 0; i < std::min(n, count); ++i) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.4g", flat[i].item<double>());
    s << (i ? ", " : "") << buf;
  }
  if (n > count) s << ", ...";
  s << "]";
  if (n > count) s << " (" << n << " values)";
  return s.str();
}

std::optional<std::string> differ(const std::string& what, const tiny::Tensor& yours, const tiny::Tensor& expected,
                                  double rtol, double atol) {
  std::ostringstream s;
  if (yours.sizes() != expected.sizes()) {
    s << what << " has shape " << shape_text(yours.sizes()) << " but should have shape "
      << shape_text(expected.sizes());
    return s.str();
  }
  if (yours.dtype() != expected.dtype()) {
    s << what << " has dtype " << tiny::dtype_name(yours.dtype()) << " but should have dtype "
      << tiny::dtype_name(expected.dtype());
    return s.str();
  }
  const tiny::Tensor a = yours.to(tiny::Dtype::Float64).reshape({-1}).contiguous();
  const tiny::Tensor b = expected.to(tiny::Dtype::Float64).reshape({-1}).contiguous();
  const double* pa = a.data_ptr<double>();
  const double* pb = b.data_ptr<double>();
  int64_t worst = -1, bad = 0;
  double worst_diff = 0;
  for (int64_t i = 0; i < a.numel(); ++i) {
    const bool same_nan = std::isnan(pa[i]) && std::isnan(pb[i]);
    const double diff = std::fabs(pa[i] - pb[i]);
    if (same_nan || diff <= atol + rtol * std::fabs(pb[i])) continue;
    ++bad;
    if (worst < 0 || diff > worst_diff || std::isnan(diff)) {
      worst = i;
      worst_diff = diff;
    }
  }
  if (bad == 0) return std::nullopt;
  char buf[160];
  std::snprintf(buf, sizeof buf, "%.6g (yours) vs %.6g (expected)", pa[worst], pb[worst]);
  s << what << " has the wrong values: " << bad << " of " << a.numel() << " differ, the most at flat index "
    << worst << ": " << buf << "\n  yours:    " << preview(yours) << "\n  expected: " << preview(expected);
  return s.str();
}

std::optional<std::string> differ(const std::string& what, const Bundle& yours, const Bundle& expected,
                                  const std::string& name, double rtol, double atol, bool facts) {
  if (!yours.has(name)) return what + " is missing from your results";
  const TensorInfo& y = yours.info(name);
  const TensorInfo& e = expected.info(name);
  if (!y.defined && e.defined) return what + " is an undefined (empty) tiny::Tensor: return the tensor you computed";
  if (!e.defined) return y.defined ? std::optional<std::string>(what + " should be undefined") : std::nullopt;
  if (facts && y.device != e.device) return what + " is on " + y.device + " but should be on " + e.device;
  if (facts && y.requires_grad != e.requires_grad)
    return what + (e.requires_grad ? " should require grad but does not" : " requires grad but should not");
  return differ(what, yours.tensor(name), expected.tensor(name), rtol, atol);
}

std::optional<std::string> state_differs(const std::string& label, const Bundle& yours, const Bundle& expected,
                                         const std::string& prefix, double rtol, double atol) {
  for (const auto& entry : expected.state(prefix)) {
    if (auto why = differ(label + ", " + entry.first, yours, expected, prefix + "." + entry.first, rtol, atol, false))
      return why;
  }
  return std::nullopt;
}

}  // namespace workbook
