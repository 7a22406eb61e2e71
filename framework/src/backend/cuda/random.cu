// CUDA random fills from the Philox stream (kernels/philox.h). Element i's
// draws are stream positions, not thread numbers, so the values are those of
// cpu::random_kernel for the same (seed, offset) whatever the grid: the same
// dropout masks, uniform, randint and bernoulli values bit for bit. (normal
// goes through double log and cos, whose CUDA versions may differ from the
// host's libm in the last bit: equal within rounding.)
#include <cmath>
#include <type_traits>

#include "backend/cuda/common.cuh"
#include "backend/stubs/random.h"
#include "kernels/philox.h"

namespace tiny::cuda_backend {

using namespace kernels;

namespace {

// Dropout's mask: one draw per element, one thread per Philox block of four
// elements. u < threshold is u * 2^-32 < p (see cpu::random_kernel).
template <typename T>
__global__ void bernoulli_mask(T* out, int64_t n, uint64_t seed, uint64_t offset, uint64_t threshold, T on) {
  grid_stride_for((n + 3) / 4, [&](int64_t c) {
    const PhiloxCounter block = philox_block(seed, offset + static_cast<uint64_t>(c));
    const int64_t lanes = n - c * 4 < 4 ? n - c * 4 : 4;
    for (int64_t lane = 0; lane < lanes; ++lane) {
      out[c * 4 + lane] = block.x[lane] < threshold ? on : static_cast<T>(0.0f);
    }
  });
}

template <typename T>
__global__ void random_fill(T* out, int64_t n, RandomKind kind, uint64_t seed, uint64_t offset, double a, double b) {
  grid_stride_for(n, [&](int64_t i) {
    const uint64_t u = static_cast<uint64_t>(i);
    auto draw = [&](uint64_t position) { return philox_draw(seed, offset, position); };
    switch (kind) {
      case RandomKind::Uniform:
        if constexpr (std::is_same_v<T, double>) {
          out[i] = uniform_double(draw(2 * u), draw(2 * u + 1));
        } else if constexpr (is_reduced_float_v<T>) {
          // The float draw cut to the type's precision, as on the CPU.
          constexpr int kDigits = std::is_same_v<T, Half> ? 11 : 8;
          const float v = static_cast<float>(draw(u) >> (32 - kDigits)) / static_cast<float>(1u << kDigits);
          out[i] = static_cast<T>(v);
        } else {
          out[i] = static_cast<T>(uniform_float(draw(u)));
        }
        break;
      case RandomKind::Normal:
        out[i] = static_cast<T>(normal_from_uniforms(draw(2 * u), draw(2 * u + 1)));
        break;
      case RandomKind::Randint:
        out[i] = static_cast<T>(
            randint_from(draw(2 * u), draw(2 * u + 1), static_cast<int64_t>(a), static_cast<int64_t>(b)));
        break;
      case RandomKind::Bernoulli:
        out[i] = bernoulli(draw(u), a) ? static_cast<T>(b) : static_cast<T>(0);
        break;
    }
  });
}

}  // namespace

void random_kernel(const Tensor& out, RandomKind kind, PhiloxState state, double a, double b) {
  const int64_t n = out.numel();
  if (n == 0) return;
  TINY_DISPATCH_ALL(out.dtype(), "random", [&] {
    const LaunchContext ctx(device_of(out));
    scalar_t* data = dev_ptr<scalar_t>(out);
    if (kind == RandomKind::Bernoulli) {
      const uint64_t threshold = static_cast<uint64_t>(std::ceil(a * 4294967296.0));
      bernoulli_mask<scalar_t><<<grid_size((n + 3) / 4), kBlockSize, 0, ctx.stream>>>(
          data, n, state.seed, state.offset, threshold, static_cast<scalar_t>(b));
    } else {
      random_fill<scalar_t><<<grid_size(n), kBlockSize, 0, ctx.stream>>>(data, n, kind, state.seed, state.offset, a, b);
    }
    ctx.launched("random");
  });
}

TINY_REGISTER_KERNEL(random_stub, CUDA, random_kernel);

}  // namespace tiny::cuda_backend
