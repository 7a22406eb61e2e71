// Asks the CUDA runtime how many real GPUs there are (without a driver: none).
#include <cuda_runtime.h>

#include "backend/cuda/probe.h"

namespace tiny::cuda_backend {

int real_device_count() {
  // Without a driver cudaGetDeviceCount returns cudaErrorInsufficientDriver and
  // leaves `count` untouched: start from 0, and clear the error so later calls
  // do not see it.
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    (void)cudaGetLastError();
    return 0;
  }
  return count;
}

}  // namespace tiny::cuda_backend
