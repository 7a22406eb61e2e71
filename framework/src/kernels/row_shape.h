// A tensor seen as [outer, size, inner] around one dim, as the row kernels
// (softmax, log_softmax) of every backend walk it.
#pragma once

#include <cstdint>

namespace tiny::kernels {

struct RowShape {
  int64_t outer, size, inner;
};

// `sizes`: any container of the sizes (a tensor's sizes()); `dim` in range.
template <typename Sizes>
RowShape row_shape(const Sizes& sizes, int64_t dim) {
  RowShape s{1, static_cast<int64_t>(sizes[dim]), 1};
  for (int64_t d = 0; d < dim; ++d) s.outer *= static_cast<int64_t>(sizes[d]);
  for (int64_t d = dim + 1; d < static_cast<int64_t>(sizes.size()); ++d) s.inner *= static_cast<int64_t>(sizes[d]);
  return s;
}

}  // namespace tiny::kernels
