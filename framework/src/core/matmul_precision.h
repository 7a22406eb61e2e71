// The process-wide float32 matmul precision (tiny::set_float32_matmul_precision),
// read by the GPU backends where they run a float32 GEMM.
#pragma once

namespace tiny::detail {

// True when float32 GEMMs may use TF32 tensor cores ("high" or "medium").
bool float32_matmul_allows_tf32();

}  // namespace tiny::detail
