// GEMM on the GPU: cuBLAS with the column-major arguments of GemmFn
// (ops/linalg.cpp maps row-major products onto them, for every backend).
// float32: cublasSgemm, in cuBLAS's default math mode (no TF32) unless
// tiny::set_float32_matmul_precision("high" or "medium") allows TF32 tensor cores
// (CUBLAS_TF32_TENSOR_OP_MATH, as PyTorch's allow_tf32; cuBLAS ignores it before
// compute capability 8.0, and the GEMM counters then say float32); float64:
// cublasDgemm; float16/bfloat16: cublasGemmEx with CUBLAS_COMPUTE_32F (fp32
// accumulation, alpha and beta in float, one rounding per element of C, as
// cpu::gemm_kernel). int64 has no cuBLAS routine: a plain kernel, one thread
// per element of C (integer products are exact, so any order is the CPU's).
//
// cuBLAS is loaded with dlopen on the first GEMM, not linked: linking it makes
// every program that uses tiny spend about a second loading cuBLAS at start,
// GPU or not. One handle per device, created on first use and never destroyed
// (as the runtime); each call sets the calling thread's current stream on it
// under a per-device lock, since a handle holds one stream at a time.
#include <cublas_v2.h>
#include <dlfcn.h>

#include <climits>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "backend/cuda/common.cuh"
#include "backend/stubs/gemm.h"
#include "core/matmul_precision.h"

namespace tiny::cuda_backend {

namespace {

// The cuBLAS entry points tiny uses, resolved from the shared library.
struct Cublas {
  cublasStatus_t (*create)(cublasHandle_t*) = nullptr;
  cublasStatus_t (*set_stream)(cublasHandle_t, cudaStream_t) = nullptr;
  cublasStatus_t (*set_math_mode)(cublasHandle_t, cublasMath_t) = nullptr;
  cublasStatus_t (*sgemm)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int, int, const float*,
                          const float*, int, const float*, int, const float*, float*, int) = nullptr;
  cublasStatus_t (*dgemm)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int, int, const double*,
                          const double*, int, const double*, int, const double*, double*, int) = nullptr;
  cublasStatus_t (*gemm_ex)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int, int, const void*,
                            const void*, cudaDataType, int, const void*, cudaDataType, int, const void*, void*,
                            cudaDataType, int, cublasComputeType_t, cublasGemmAlgo_t) = nullptr;
  const char* (*status_string)(cublasStatus_t) = nullptr;
};

const Cublas& cublas() {
  static const Cublas api = [] {
    const std::string soname = "libcublas.so." + std::to_string(CUBLAS_VER_MAJOR);
    std::vector<std::string> candidates = {soname, gpu::cudart_directory() + soname, "libcublas.so"};
    void* lib = nullptr;
    std::string errors;
    for (const std::string& name : candidates) {
      lib = dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL);
      if (lib != nullptr) break;
      const char* e = dlerror();
      errors += "\n  " + name + ": " + (e ? e : "not found");
    }
    TINY_CHECK(lib != nullptr, Error, "matrix products on the GPU need cuBLAS (", soname,
               "), which could not be loaded:", errors,
               "\nInstall the CUDA toolkit's cuBLAS (or add its folder to LD_LIBRARY_PATH), or use the emulated GPU "
               "with TINY_FORCE_EMULATED_GPU=1.");
    Cublas c;
    auto resolve = [&](auto& fn, const char* symbol) {
      fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(dlsym(lib, symbol));
      TINY_CHECK(fn != nullptr, Error, "cuBLAS (", soname, ") has no ", symbol, ": the library is too old or damaged");
    };
    resolve(c.create, "cublasCreate_v2");
    resolve(c.set_stream, "cublasSetStream_v2");
    resolve(c.set_math_mode, "cublasSetMathMode");
    resolve(c.sgemm, "cublasSgemm_v2");
    resolve(c.dgemm, "cublasDgemm_v2");
    resolve(c.gemm_ex, "cublasGemmEx");
    resolve(c.status_string, "cublasGetStatusString");
    return c;
  }();
  return api;
}

void check_cublas(cublasStatus_t status, const char* call, int device) {
  if (status == CUBLAS_STATUS_SUCCESS) return;
  const std::string message = std::string("CUDA error: ") + cublas().status_string(status) + " (" + call +
                              " on cuda:" + std::to_string(device) + ")";
  if (status == CUBLAS_STATUS_ALLOC_FAILED) throw OutOfMemoryError(message);
  throw Error(message);
}

// One handle per device, and the lock that makes "set stream, then GEMM" one step.
struct DeviceHandle {
  std::mutex mutex;
  cublasHandle_t handle = nullptr;
  cublasMath_t math = CUBLAS_DEFAULT_MATH;  // the handle's math mode (cuBLAS's default at creation)
  int major = -1;                           // the device's compute capability (TF32 from 8.0)
};

DeviceHandle& device_handle(int device) {
  static std::mutex table_mutex;
  static auto* handles = new std::vector<std::unique_ptr<DeviceHandle>>();  // never destroyed
  std::lock_guard<std::mutex> lock(table_mutex);
  if (handles->size() <= static_cast<size_t>(device)) handles->resize(static_cast<size_t>(device) + 1);
  auto& slot = (*handles)[static_cast<size_t>(device)];
  if (!slot) slot = std::make_unique<DeviceHandle>();
  return *slot;
}

int as_int(int64_t v, const char* what) {
  TINY_CHECK(v >= 0 && v <= INT_MAX, ValueError, "matrix product on the GPU: ", what, " = ", v,
             " exceeds cuBLAS's 32-bit limit (", INT_MAX, "); split the product into smaller ones");
  return static_cast<int>(v);
}

// Integer products (uint8, int32, int64; cuBLAS has none) sum in int64 and wrap to T on the store.
template <typename T>
__global__ void gemm_integral(bool ta, bool tb, int64_t m, int64_t n, int64_t k, int64_t alpha, const T* a,
                              int64_t lda, const T* b, int64_t ldb, int64_t beta, T* c, int64_t ldc) {
  grid_stride_for(m * n, [&](int64_t e) {
    const int64_t i = e % m, j = e / m;
    int64_t acc = 0;
    for (int64_t p = 0; p < k; ++p) {
      const int64_t av = ta ? a[p + i * lda] : a[i + p * lda];
      const int64_t bv = tb ? b[j + p * ldb] : b[p + j * ldb];
      acc += av * bv;
    }
    c[i + j * ldc] = static_cast<T>(alpha * acc + (beta == 0 ? 0 : beta * static_cast<int64_t>(c[i + j * ldc])));
  });
}

}  // namespace

void gemm_kernel(Dtype dtype, bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, double alpha,
                 const void* a, int64_t lda, const void* b, int64_t ldb, double beta, void* c, int64_t ldc) {
  if (m == 0 || n == 0) return;
  // The device is the one whose memory holds C (ops put all operands on one device).
  cudaPointerAttributes attr{};
  if (cudaPointerGetAttributes(&attr, c) != cudaSuccess || attr.type != cudaMemoryTypeDevice) {
    (void)cudaGetLastError();
    TINY_THROW(DeviceError, "internal: the GPU matrix product's output ", c, " is not device memory");
  }
  const int device = attr.device;
  const LaunchContext ctx(device);
  if (is_integral(dtype)) {
    auto launch = [&](auto* type) {
      using T = std::remove_pointer_t<decltype(type)>;
      gemm_integral<T><<<grid_size(m * n), kBlockSize, 0, ctx.stream>>>(
          trans_a, trans_b, m, n, k, static_cast<int64_t>(alpha), static_cast<const T*>(a), lda,
          static_cast<const T*>(b), ldb, static_cast<int64_t>(beta), static_cast<T*>(c), ldc);
    };
    if (dtype == Dtype::Int64) launch(static_cast<int64_t*>(nullptr));
    else if (dtype == Dtype::Int32) launch(static_cast<int32_t*>(nullptr));
    else launch(static_cast<uint8_t*>(nullptr));
    ctx.launched("gemm_integral");
    ctx.runtime->note_gemm(device, dtype, false);
    return;
  }
  const cublasOperation_t ta = trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
  const cublasOperation_t tb = trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
  const int im = as_int(m, "m"), in = as_int(n, "n"), ik = as_int(k, "k");
  const int ilda = as_int(lda, "lda"), ildb = as_int(ldb, "ldb"), ildc = as_int(ldc, "ldc");
  const Cublas& api = cublas();
  DeviceHandle& h = device_handle(device);
  std::lock_guard<std::mutex> lock(h.mutex);
  if (h.handle == nullptr) {
    check_cublas(api.create(&h.handle), "cublasCreate", device);
    if (cudaDeviceGetAttribute(&h.major, cudaDevAttrComputeCapabilityMajor, device) != cudaSuccess) {
      (void)cudaGetLastError();
      h.major = 0;  // unknown: count float32 products as float32
    }
  }
  check_cublas(api.set_stream(h.handle, ctx.stream), "cublasSetStream", device);
  const bool tf32 = dtype == Dtype::Float32 && detail::float32_matmul_allows_tf32();
  const cublasMath_t math = tf32 ? CUBLAS_TF32_TENSOR_OP_MATH : CUBLAS_DEFAULT_MATH;
  if (math != h.math) {
    check_cublas(api.set_math_mode(h.handle, math), "cublasSetMathMode", device);
    h.math = math;
  }
  switch (dtype) {
    case Dtype::Float32: {
      const float fa = static_cast<float>(alpha), fb = static_cast<float>(beta);
      check_cublas(api.sgemm(h.handle, ta, tb, im, in, ik, &fa, static_cast<const float*>(a), ilda,
                             static_cast<const float*>(b), ildb, &fb, static_cast<float*>(c), ildc),
                   "cublasSgemm", device);
      break;
    }
    case Dtype::Float64:
      check_cublas(api.dgemm(h.handle, ta, tb, im, in, ik, &alpha, static_cast<const double*>(a), ilda,
                             static_cast<const double*>(b), ildb, &beta, static_cast<double*>(c), ildc),
                   "cublasDgemm", device);
      break;
    case Dtype::Float16:
    case Dtype::BFloat16: {
      const cudaDataType type = dtype == Dtype::Float16 ? CUDA_R_16F : CUDA_R_16BF;
      const float fa = static_cast<float>(alpha), fb = static_cast<float>(beta);
      check_cublas(api.gemm_ex(h.handle, ta, tb, im, in, ik, &fa, a, type, ilda, b, type, ildb, &fb, c, type, ildc,
                               CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
                   "cublasGemmEx", device);
      break;
    }
    default:
      TINY_THROW(DtypeError, "\"addmm\" not implemented for '", dtype_name(dtype), "'");
  }
  // cuBLAS launched its kernels on the stream: count them as one launch.
  ctx.launched("cublas gemm");
  ctx.runtime->note_gemm(device, dtype, tf32 && h.major >= 8);
}

TINY_REGISTER_KERNEL(gemm_stub, CUDA, gemm_kernel);

}  // namespace tiny::cuda_backend
