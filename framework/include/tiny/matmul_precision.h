/// @file
/// @brief The process-wide float32 matmul precision (`torch.set_float32_matmul_precision`),
/// a setting the GEMM kernels of every backend read (tiny/ops.h includes it).
#pragma once

#include <string>

namespace tiny {

/// @brief How float32 matrix products may run on a GPU (`torch.set_float32_matmul_precision`).
///
/// "highest" (the default): in float32. "high" and "medium": on TF32 tensor
/// cores where the GPU has them (compute capability 8.0 and later; the
/// emulated GPU where its modelled GPU has them, so not a T4): inputs rounded
/// to 10 mantissa bits, accumulation in float32. On CUDA this is cuBLAS's
/// CUBLAS_TF32_TENSOR_OP_MATH, as PyTorch sets it for both ("medium"'s
/// bfloat16 mode is for PyTorch's CPU kernels). The CPU and the emulated GPU
/// compute every float32 product in full float32 whatever the setting: only
/// the emulator's modelled time and its GEMM counters (gemms_tf32) change.
/// Process-wide, as in PyTorch. Anything else throws tiny::ValueError.
void set_float32_matmul_precision(const std::string& precision);
/// @brief The current setting: "highest", "high" or "medium" (`torch.get_float32_matmul_precision()`).
std::string get_float32_matmul_precision();

}  // namespace tiny
