// GEMM on the CPU through OpenBLAS, called with cuBLAS's column-major
// arguments so the row-major mapping in ops/linalg.cpp is the same for every
// backend.
#include <cblas.h>

#include "backend/cpu/kernels.h"
#include "backend/cpu/loops.h"

namespace tiny::cpu {

namespace {
// OpenBLAS has no integer GEMM; int64 matmul is rare (indices), so a plain loop.
void gemm_int64(bool ta, bool tb, int64_t m, int64_t n, int64_t k, int64_t alpha, const int64_t* a, int64_t lda,
                const int64_t* b, int64_t ldb, int64_t beta, int64_t* c, int64_t ldc) {
  runtime::parallel_for(0, n, 16, [&](int64_t j0, int64_t j1) {
    for (int64_t j = j0; j < j1; ++j) {
      for (int64_t i = 0; i < m; ++i) {
        int64_t acc = 0;
        for (int64_t p = 0; p < k; ++p) {
          const int64_t av = ta ? a[p + i * lda] : a[i + p * lda];
          const int64_t bv = tb ? b[j + p * ldb] : b[p + j * ldb];
          acc += av * bv;
        }
        c[i + j * ldc] = alpha * acc + (beta == 0 ? 0 : beta * c[i + j * ldc]);
      }
    }
  });
}
}  // namespace

void gemm_kernel(Dtype dtype, bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, double alpha,
                 const void* a, int64_t lda, const void* b, int64_t ldb, double beta, void* c, int64_t ldc) {
  if (m == 0 || n == 0) return;
  // The first call settles tiny's thread count and gives OpenBLAS the same one,
  // so the first GEMM never runs with OpenBLAS's own default.
  (void)runtime::num_threads();
  const CBLAS_TRANSPOSE ta = trans_a ? CblasTrans : CblasNoTrans;
  const CBLAS_TRANSPOSE tb = trans_b ? CblasTrans : CblasNoTrans;
  switch (dtype) {
    case Dtype::Float32:
      cblas_sgemm(CblasColMajor, ta, tb, static_cast<blasint>(m), static_cast<blasint>(n), static_cast<blasint>(k),
                  static_cast<float>(alpha), static_cast<const float*>(a), static_cast<blasint>(lda),
                  static_cast<const float*>(b), static_cast<blasint>(ldb), static_cast<float>(beta),
                  static_cast<float*>(c), static_cast<blasint>(ldc));
      return;
    case Dtype::Float64:
      cblas_dgemm(CblasColMajor, ta, tb, static_cast<blasint>(m), static_cast<blasint>(n), static_cast<blasint>(k),
                  alpha, static_cast<const double*>(a), static_cast<blasint>(lda), static_cast<const double*>(b),
                  static_cast<blasint>(ldb), beta, static_cast<double*>(c), static_cast<blasint>(ldc));
      return;
    case Dtype::Int64:
      gemm_int64(trans_a, trans_b, m, n, k, static_cast<int64_t>(alpha), static_cast<const int64_t*>(a), lda,
                 static_cast<const int64_t*>(b), ldb, static_cast<int64_t>(beta), static_cast<int64_t*>(c), ldc);
      return;
    default:
      TINY_THROW(DtypeError, "\"addmm\" not implemented for '", dtype_name(dtype), "'");
  }
}

}  // namespace tiny::cpu
