// CPU sort: each row's indices put in order by std::stable_sort on the row's
// values (read once into the compute type), rows split over the threads.
#include <algorithm>
#include <numeric>
#include <vector>

#include "backend/cpu/loops.h"
#include "backend/dtype_dispatch.h"
#include "backend/stubs/sort.h"
#include "kernels/sort_ops.h"

namespace tiny::cpu {

using namespace kernels;

void sort_kernel(const Tensor& indices, const Tensor& rows, bool descending) {
  const int64_t r = rows.size(0), n = rows.size(1);
  if (r == 0 || n == 0) return;
  TINY_DISPATCH_ALL(rows.dtype(), "sort", [&] {
    const scalar_t* x = static_cast<const scalar_t*>(rows.raw_data_ptr());
    int64_t* out = indices.data_ptr<int64_t>();
    // About 32k elements a chunk: short rows are grouped, a long row is one chunk.
    const int64_t grain = std::max<int64_t>(1, 32768 / n);
    runtime::parallel_for(0, r, grain, [&](int64_t begin, int64_t end) {
      std::vector<opmath_t> keys(static_cast<size_t>(n));
      for (int64_t row = begin; row < end; ++row) {
        for (int64_t i = 0; i < n; ++i) keys[static_cast<size_t>(i)] = static_cast<opmath_t>(x[row * n + i]);
        int64_t* order = out + row * n;
        std::iota(order, order + n, int64_t{0});
        std::stable_sort(order, order + n, [&](int64_t i, int64_t j) {
          return sorts_before(keys[static_cast<size_t>(i)], keys[static_cast<size_t>(j)], descending);
        });
      }
    });
  });
}

TINY_REGISTER_KERNEL(sort_stub, CPU, sort_kernel);

}  // namespace tiny::cpu
