// GEMM on the CPU through OpenBLAS, called with cuBLAS's column-major
// arguments so the row-major mapping in ops/linalg.cpp is the same for every
// backend.
#include <cblas.h>

#include <vector>

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

// A column-major [rows, cols] matrix with leading dimension ld, widened to a
// packed float matrix (ld = rows).
template <typename T>
std::vector<float> widen(const T* src, int64_t rows, int64_t cols, int64_t ld) {
  std::vector<float> dst(static_cast<size_t>(rows * cols));
  runtime::parallel_for(0, cols, std::max<int64_t>(1, kPointwiseGrain / std::max<int64_t>(rows, 1)),
                        [&](int64_t j0, int64_t j1) {
                          for (int64_t j = j0; j < j1; ++j) {
                            for (int64_t i = 0; i < rows; ++i) dst[i + j * rows] = src[i + j * ld];
                          }
                        });
  return dst;
}

// 16-bit GEMM as cuBLAS does it with float32 compute (cublasGemmEx with
// CUBLAS_COMPUTE_32F): inputs widened exactly, products summed in float,
// alpha and beta applied in float, one rounding per element of C. The sums
// run in OpenBLAS's order, not cuBLAS's, so results may differ from a GPU's
// by an ulp of float32 before the final rounding (tests allow a 16-bit ulp).
template <typename T>
void gemm_reduced(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const T* a, int64_t lda,
                  const T* b, int64_t ldb, float beta, T* c, int64_t ldc) {
  const std::vector<float> fa = trans_a ? widen(a, k, m, lda) : widen(a, m, k, lda);
  const std::vector<float> fb = trans_b ? widen(b, n, k, ldb) : widen(b, k, n, ldb);
  std::vector<float> fc = beta == 0.0f ? std::vector<float>(static_cast<size_t>(m * n)) : widen(c, m, n, ldc);
  cblas_sgemm(CblasColMajor, trans_a ? CblasTrans : CblasNoTrans, trans_b ? CblasTrans : CblasNoTrans,
              static_cast<blasint>(m), static_cast<blasint>(n), static_cast<blasint>(k), alpha, fa.data(),
              static_cast<blasint>(trans_a ? k : m), fb.data(), static_cast<blasint>(trans_b ? n : k), beta,
              fc.data(), static_cast<blasint>(m));
  runtime::parallel_for(0, n, std::max<int64_t>(1, kPointwiseGrain / std::max<int64_t>(m, 1)),
                        [&](int64_t j0, int64_t j1) {
                          for (int64_t j = j0; j < j1; ++j) {
                            for (int64_t i = 0; i < m; ++i) c[i + j * ldc] = T(fc[i + j * m]);
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
    case Dtype::Float16:
      gemm_reduced(trans_a, trans_b, m, n, k, static_cast<float>(alpha), static_cast<const Half*>(a), lda,
                   static_cast<const Half*>(b), ldb, static_cast<float>(beta), static_cast<Half*>(c), ldc);
      return;
    case Dtype::BFloat16:
      gemm_reduced(trans_a, trans_b, m, n, k, static_cast<float>(alpha), static_cast<const BFloat16*>(a), lda,
                   static_cast<const BFloat16*>(b), ldb, static_cast<float>(beta), static_cast<BFloat16*>(c), ldc);
      return;
    default:
      TINY_THROW(DtypeError, "\"addmm\" not implemented for '", dtype_name(dtype), "'");
  }
}

}  // namespace tiny::cpu
