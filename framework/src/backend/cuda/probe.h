// What the CUDA runtime reports about real GPUs (only built with a CUDA toolkit).
#pragma once

namespace tiny::cuda_backend {

// Number of usable NVIDIA GPUs; 0 when there is no driver or no device.
int real_device_count();

}  // namespace tiny::cuda_backend
