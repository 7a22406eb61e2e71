// CPU random fills from the Philox stream: element i's draws depend only on
// (seed, offset, i), so any chunking, any thread count and the GPU drivers give
// the same numbers.
#include <cmath>

#include "backend/stubs/random.h"
#include "backend/cpu/loops.h"
#include "backend/dtype_dispatch.h"
#include "kernels/philox.h"

namespace tiny::cpu {

using namespace kernels;

void random_kernel(const Tensor& out, RandomKind kind, PhiloxState state, double a, double b) {
  const uint64_t seed = state.seed, offset = state.offset;
  TINY_DISPATCH_ALL(out.dtype(), "random", [&] {
    scalar_t* data = static_cast<scalar_t*>(out.raw_data_ptr());
    if (kind == RandomKind::Bernoulli) {
      // Dropout's mask: one draw per element, so each Philox block fills four
      // consecutive elements (chunks start at multiples of 4). Kept separate
      // from the general loop so it stays a straight line the compiler unrolls.
      // bernoulli(u, p) is u * 2^-32 < p, i.e. u < ceil(p * 2^32) for an
      // integer u: the same mask with one integer compare per element.
      const uint64_t threshold = static_cast<uint64_t>(std::ceil(a * 4294967296.0));
      const scalar_t on = static_cast<scalar_t>(b);
      const int64_t n = out.numel();
      // Philox costs ~50x a multiply per element: smaller chunks let two
      // threads share even one activation's mask (still a multiple of 4).
      constexpr int64_t kGrain = 4096;
      runtime::parallel_for(0, n, kGrain, [&](int64_t begin, int64_t end) {
        for (int64_t c = begin / 4; c * 4 < end; ++c) {
          const PhiloxCounter block = philox_block(seed, offset + static_cast<uint64_t>(c));
          const int64_t lanes = std::min<int64_t>(4, end - c * 4);
          for (int64_t lane = 0; lane < lanes; ++lane) {
            data[c * 4 + lane] = block.x[lane] < threshold ? on : static_cast<scalar_t>(0);
          }
        }
      });
      return;
    }
    runtime::parallel_for(0, out.numel(), kPointwiseGrain, [&](int64_t begin, int64_t end) {
      // One Philox block yields four draws: keep the last one instead of
      // recomputing ten rounds per draw (same numbers as philox_draw).
      uint64_t cached = ~uint64_t{0};
      PhiloxCounter block{};
      auto draw = [&](uint64_t position) {
        const uint64_t counter = offset + position / 4;
        if (counter != cached) {
          block = philox_block(seed, counter);
          cached = counter;
        }
        return block.x[position % 4];
      };
      for (int64_t i = begin; i < end; ++i) {
        const uint64_t u = static_cast<uint64_t>(i);
        switch (kind) {
          case RandomKind::Uniform:
            if constexpr (std::is_same_v<scalar_t, double>) {
              data[i] = uniform_double(draw(2 * u), draw(2 * u + 1));
            } else if constexpr (is_reduced_float_v<scalar_t>) {
              // The float draw cut to the type's precision (11 bits for
              // float16, 8 for bfloat16), as PyTorch's uniform_real_distribution:
              // rounding instead could give exactly 1.
              constexpr int kDigits = std::is_same_v<scalar_t, Half> ? 11 : 8;
              const float v = static_cast<float>(draw(u) >> (32 - kDigits)) / static_cast<float>(1u << kDigits);
              data[i] = static_cast<scalar_t>(v);
            } else {
              data[i] = static_cast<scalar_t>(uniform_float(draw(u)));
            }
            break;
          case RandomKind::Normal:
            data[i] = static_cast<scalar_t>(normal_from_uniforms(draw(2 * u), draw(2 * u + 1)));
            break;
          case RandomKind::Randint:
            data[i] = static_cast<scalar_t>(randint_from(draw(2 * u), draw(2 * u + 1), static_cast<int64_t>(a),
                                                         static_cast<int64_t>(b)));
            break;
          case RandomKind::Bernoulli:
            // True draws hold `b` (dropout passes its 1/(1-p) scale), false ones 0.
            data[i] = bernoulli(draw(u), a) ? static_cast<scalar_t>(b) : static_cast<scalar_t>(0);
            break;
        }
      }
    });
  });
}

TINY_REGISTER_KERNEL(random_stub, CPU, random_kernel);

}  // namespace tiny::cpu
