// gpu::cuda_runtime() in builds without a CUDA toolkit: there is no real GPU
// runtime, so tiny falls back to the emulated GPU. With a toolkit the real
// definition lives in gpu/cuda/cuda_runtime.cpp (the `tiny_cuda` library) and
// this file compiles to nothing.
#include "gpu/runtime.h"

#if !defined(TINY_HAVE_CUDA) || !TINY_HAVE_CUDA

namespace tiny::gpu {

Runtime* cuda_runtime() { return nullptr; }

}  // namespace tiny::gpu

#endif
