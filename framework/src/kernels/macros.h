// Macros shared by the host+device op structs in this folder.
//
// The arithmetic of every kernel is written once, in structs whose member
// functions carry TINY_HOST_DEVICE: under nvcc they compile for both the host
// and the GPU; under a plain C++ compiler the macro is empty.
#pragma once

#if defined(__CUDACC__)
#define TINY_HOST_DEVICE __host__ __device__
#define TINY_FORCE_INLINE __forceinline__
#else
#define TINY_HOST_DEVICE
#define TINY_FORCE_INLINE inline __attribute__((always_inline))
#endif
