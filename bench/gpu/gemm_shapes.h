// The matrix products the emulated GPU's GEMM model is checked against on a
// real GPU (bench_calibration's Gemm rows, kernel_choices' listing).
#pragma once

#include <cstdint>
#include <vector>

namespace bench {

// {m, n, k} of [m, k] x [k, n]: square sizes, sizes that are not multiples of
// 8 (no tensor-core alignment), matrix-vector products, and the linear layers
// of the training cases A, B, C (bench/training_cases.h): forward [batch, in]
// x [in, out], input gradient [batch, out] x [out, in], weight gradient
// [in, batch] x [batch, out].
inline std::vector<std::vector<int64_t>> calibration_gemm_shapes() {
  std::vector<std::vector<int64_t>> shapes;
  for (int64_t n : {256, 512, 1024, 2048, 4096, 8192}) shapes.push_back({n, n, n});
  for (int64_t n : {1000, 1023, 4095}) shapes.push_back({n, n, n});
  // One row (m = 1, a batch of one through a layer): cuBLAS's GEMV-like
  // kernels, bound by reading the weight, which no row above measures.
  for (int64_t n : {1024, 4096}) shapes.push_back({1, n, n});
  shapes.push_back({1, 512, 784});
  const std::vector<std::vector<int64_t>> layers = {  // {batch, in, out}
      {64, 784, 512}, {64, 512, 256}, {64, 256, 10}, {128, 1024, 2048}, {128, 2048, 512}, {128, 512, 10},
      {32, 784, 256}, {32, 256, 10}};
  for (const auto& l : layers) {
    shapes.push_back({l[0], l[2], l[1]});
    shapes.push_back({l[0], l[1], l[2]});
    shapes.push_back({l[1], l[2], l[0]});
  }
  return shapes;
}

}  // namespace bench
