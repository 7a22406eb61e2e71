// CUDA sort by rank: one thread per element counts the elements of its row
// that go before it (kernels::sorts_before, ties by position, so the order
// is the stable one the CPU's std::stable_sort gives) and writes its index
// at that rank. n comparisons an element (n^2 a row, from the cache): no
// scratch memory and one launch, made for the rows a course sorts (a
// [256, 1000] sort is 256M comparisons); for rows of 10^5 and more a
// segmented radix sort (CUB's) would be the tool.
#include "backend/cuda/common.cuh"
#include "backend/dtype_dispatch.h"
#include "backend/stubs/sort.h"
#include "kernels/sort_ops.h"

namespace tiny::cuda_backend {

using namespace kernels;

namespace {

template <typename T, typename acc_t>
__global__ void sort_rank_impl(int64_t* out, const T* x, int64_t rows, int64_t n, bool descending) {
  grid_stride_for(rows * n, [&](int64_t e) {
    const int64_t row = e / n, i = e % n;
    const T* r = x + row * n;
    const acc_t xi = static_cast<acc_t>(r[i]);
    int64_t rank = 0;
    for (int64_t j = 0; j < n; ++j) {
      const acc_t xj = static_cast<acc_t>(r[j]);
      rank += (sorts_before(xj, xi, descending) || (j < i && !sorts_before(xi, xj, descending))) ? 1 : 0;
    }
    out[row * n + rank] = i;
  });
}

}  // namespace

void sort_kernel(const Tensor& indices, const Tensor& rows, bool descending) {
  const int64_t r = rows.size(0), n = rows.size(1);
  if (r == 0 || n == 0) return;
  TINY_DISPATCH_ALL(rows.dtype(), "sort", [&] {
    const LaunchContext ctx(device_of(rows));
    sort_rank_impl<scalar_t, opmath_t><<<grid_size(r * n), kBlockSize, 0, ctx.stream>>>(
        dev_ptr<int64_t>(indices), dev_ptr<const scalar_t>(rows), r, n, descending);
    ctx.launched("sort");
  });
}

TINY_REGISTER_KERNEL(sort_stub, CUDA, sort_kernel);

}  // namespace tiny::cuda_backend
