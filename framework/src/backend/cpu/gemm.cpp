// GEMM on the CPU through OpenBLAS, called with cuBLAS's column-major
// arguments so the row-major mapping in ops/linalg.cpp is the same for every
// backend.
//
// OpenBLAS runs single-threaded (runtime::num_threads() sets it so); a large
// GEMM is cut into blocks of C that run on tiny's pool, each one OpenBLAS
// call. Two things follow. The GEMM uses the calling thread's pool, so on an
// emulated GPU it uses that device's threads (its share of the cores, or every
// core while the other devices are idle), never another busy device's
// (OpenBLAS's own thread count is process-wide, and two devices' GEMMs once
// fought over it). And the block boundaries depend on the shape
// only, never on the thread count, so the results are bitwise the same with
// 1 thread or 64, as every other reduction of tiny.
#include <cblas.h>

#include <algorithm>
#include <vector>

#include "backend/cpu/half_convert.h"
#include "backend/stubs/gemm.h"
#include "backend/cpu/loops.h"

namespace tiny::cpu {

namespace {

// Runs call(i0, i1, j0, j1) for blocks of C = op(A) op(B) ([m, n], column-major)
// that cover it: blocks of whole columns, or of whole rows when C has more rows
// than columns. Each block repacks the other operand, which costs about
// 1/width of the block's own work, hence blocks of at least 128 rows or
// columns; a GEMM too small to be worth waking the pool is one call.
template <typename Call>
void for_blocks_of_c(int64_t m, int64_t n, int64_t k, Call&& call) {
  constexpr int64_t kMinWidth = 128;
  constexpr double kMinBlockWork = 1 << 21;  // multiply-adds per block
  const bool by_columns = n >= m;
  const int64_t length = by_columns ? n : m, across = by_columns ? m : n;
  const double per_line = static_cast<double>(across) * static_cast<double>(std::max<int64_t>(k, 1));
  const int64_t by_work = static_cast<int64_t>(std::min(kMinBlockWork / per_line + 1, 1e18));
  const int64_t width = std::max({kMinWidth, (length + 15) / 16, by_work});
  if (width >= length) {
    call(0, m, 0, n);
    return;
  }
  runtime::parallel_for(0, length, width, [&](int64_t b, int64_t e) {
    if (by_columns) {
      call(0, m, b, e);
    } else {
      call(b, e, 0, n);
    }
  });
}

// cblas_sgemm or cblas_dgemm over the blocks of for_blocks_of_c.
template <typename T, typename Blas>
void blas_gemm(Blas blas, bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, T alpha, const T* a,
               int64_t lda, const T* b, int64_t ldb, T beta, T* c, int64_t ldc) {
  for_blocks_of_c(m, n, k, [&](int64_t i0, int64_t i1, int64_t j0, int64_t j1) {
    const T* a_rows = trans_a ? a + i0 * lda : a + i0;  // rows i0.. of op(A)
    const T* b_cols = trans_b ? b + j0 : b + j0 * ldb;  // columns j0.. of op(B)
    blas(CblasColMajor, trans_a ? CblasTrans : CblasNoTrans, trans_b ? CblasTrans : CblasNoTrans,
         static_cast<blasint>(i1 - i0), static_cast<blasint>(j1 - j0), static_cast<blasint>(k), alpha, a_rows,
         static_cast<blasint>(lda), b_cols, static_cast<blasint>(ldb), beta, c + i0 + j0 * ldc,
         static_cast<blasint>(ldc));
  });
}

// OpenBLAS has no integer GEMM and integer products are rare (indices, counts),
// so a plain loop. uint8, int32 and int64 sum in int64 and wrap to T on the
// store, which is what PyTorch's wrapping T arithmetic gives.
template <typename T>
void gemm_integral(bool ta, bool tb, int64_t m, int64_t n, int64_t k, int64_t alpha, const T* a, int64_t lda,
                   const T* b, int64_t ldb, int64_t beta, T* c, int64_t ldc) {
  runtime::parallel_for(0, n, 16, [&](int64_t j0, int64_t j1) {
    for (int64_t j = j0; j < j1; ++j) {
      for (int64_t i = 0; i < m; ++i) {
        int64_t acc = 0;
        for (int64_t p = 0; p < k; ++p) {
          const int64_t av = ta ? a[p + i * lda] : a[i + p * lda];
          const int64_t bv = tb ? b[j + p * ldb] : b[p + j * ldb];
          acc += av * bv;
        }
        c[i + j * ldc] = static_cast<T>(alpha * acc + (beta == 0 ? 0 : beta * static_cast<int64_t>(c[i + j * ldc])));
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
                          for (int64_t j = j0; j < j1; ++j) to_float(src + j * ld, dst.data() + j * rows, rows);
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
  blas_gemm(cblas_sgemm, trans_a, trans_b, m, n, k, alpha, fa.data(), trans_a ? k : m, fb.data(), trans_b ? n : k,
            beta, fc.data(), m);
  runtime::parallel_for(0, n, std::max<int64_t>(1, kPointwiseGrain / std::max<int64_t>(m, 1)),
                        [&](int64_t j0, int64_t j1) {
                          for (int64_t j = j0; j < j1; ++j) from_float(fc.data() + j * m, c + j * ldc, m);
                        });
}

}  // namespace

void gemm_kernel(Dtype dtype, bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, double alpha,
                 const void* a, int64_t lda, const void* b, int64_t ldb, double beta, void* c, int64_t ldc) {
  if (m == 0 || n == 0) return;
  // The first call settles tiny's thread count and sets OpenBLAS to one thread,
  // so no GEMM ever runs with OpenBLAS's own default.
  (void)runtime::num_threads();
  switch (dtype) {
    case Dtype::Float32:
      blas_gemm(cblas_sgemm, trans_a, trans_b, m, n, k, static_cast<float>(alpha), static_cast<const float*>(a), lda,
                static_cast<const float*>(b), ldb, static_cast<float>(beta), static_cast<float*>(c), ldc);
      return;
    case Dtype::Float64:
      blas_gemm(cblas_dgemm, trans_a, trans_b, m, n, k, alpha, static_cast<const double*>(a), lda,
                static_cast<const double*>(b), ldb, beta, static_cast<double*>(c), ldc);
      return;
    case Dtype::Int64:
      gemm_integral(trans_a, trans_b, m, n, k, static_cast<int64_t>(alpha), static_cast<const int64_t*>(a), lda,
                    static_cast<const int64_t*>(b), ldb, static_cast<int64_t>(beta), static_cast<int64_t*>(c), ldc);
      return;
    case Dtype::Int32:
      gemm_integral(trans_a, trans_b, m, n, k, static_cast<int64_t>(alpha), static_cast<const int32_t*>(a), lda,
                    static_cast<const int32_t*>(b), ldb, static_cast<int64_t>(beta), static_cast<int32_t*>(c), ldc);
      return;
    case Dtype::UInt8:
      gemm_integral(trans_a, trans_b, m, n, k, static_cast<int64_t>(alpha), static_cast<const uint8_t*>(a), lda,
                    static_cast<const uint8_t*>(b), ldb, static_cast<int64_t>(beta), static_cast<uint8_t*>(c), ldc);
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

TINY_REGISTER_KERNEL(gemm_stub, CPU, gemm_kernel);

}  // namespace tiny::cpu
