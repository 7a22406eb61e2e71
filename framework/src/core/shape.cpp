// Shapes: strides, element counts, dimension wrapping, broadcasting and their
// printing, with PyTorch's messages.
#include <algorithm>
#include <limits>
#include <sstream>
#include <string>

#include "core/op_scope.h"
#include "core/tensor_impl.h"

namespace tiny {

std::string shape_str(const IntArrayRef& shape) {
  std::ostringstream out;
  out << "[";
  for (size_t i = 0; i < shape.size(); ++i) out << (i ? ", " : "") << shape[i];
  out << "]";
  return out.str();
}

IntArrayRef contiguous_strides(const IntArrayRef& sizes) {
  IntArrayRef strides(sizes.size());
  int64_t running = 1;
  for (size_t i = sizes.size(); i-- > 0;) {
    strides[i] = running;
    running *= std::max<int64_t>(sizes[i], 1);
  }
  return strides;
}

int64_t checked_numel(const IntArrayRef& sizes) {
  int64_t n = 1;
  for (int64_t s : sizes) {
    TINY_CHECK(s >= 0, ValueError, "Trying to create tensor with negative dimension ", s, ": ", shape_str(sizes));
    if (s != 0 && n > std::numeric_limits<int64_t>::max() / s) {
      TINY_THROW(ValueError, "a tensor of shape ", shape_str(sizes), " has more elements than fit in int64");
    }
    n *= s;
  }
  return n;
}

int64_t wrap_dim(int64_t dim, int64_t ndim) {
  const int64_t lo = ndim == 0 ? -1 : -ndim;
  const int64_t hi = ndim == 0 ? 0 : ndim - 1;
  TINY_CHECK(dim >= lo && dim <= hi, IndexError, detail::current_op_name ? detail::current_op_name : "",
             detail::current_op_name ? ": " : "", "Dimension out of range (expected to be in range of [", lo, ", ", hi,
             "], but got ", dim, "): the tensor has ", ndim, ndim == 1 ? " dimension" : " dimensions",
             " (print its .sizes(); dimensions count from 0, and -1 is the last)");
  return dim < 0 ? dim + std::max<int64_t>(ndim, 1) : dim;
}

IntArrayRef broadcast_shapes(const IntArrayRef& a, const IntArrayRef& b) {
  const size_t nd = std::max(a.size(), b.size());
  IntArrayRef out(nd);
  for (size_t i = 0; i < nd; ++i) {
    const int64_t sa = i < nd - a.size() ? 1 : a[i - (nd - a.size())];
    const int64_t sb = i < nd - b.size() ? 1 : b[i - (nd - b.size())];
    TINY_CHECK(sa == sb || sa == 1 || sb == 1, ShapeError, "The size of tensor a (", sa,
               ") must match the size of tensor b (", sb, ") at non-singleton dimension ", i, " (shapes ",
               shape_str(a), " and ", shape_str(b), ")");
    out[i] = sa == 1 ? sb : sa;
  }
  return out;
}

}  // namespace tiny
