// CPU drivers of the mixed-precision kernels (kernels/amp_ops.h). The emulated
// GPU queues these same functions on its streams (backend/emulated/emulate.h).
#include <vector>

#include "backend/stubs/amp.h"
#include "backend/cpu/loops.h"
#include "backend/dtype_dispatch.h"
#include "core/tensor_impl.h"
#include "kernels/amp_ops.h"
#include "runtime/thread_pool.h"

namespace tiny::cpu {
namespace {

template <typename T>
T* data_of(const Tensor& t) {
  return reinterpret_cast<T*>(t.unsafe_impl()->data());
}

// Every grad is contiguous (the op layer makes sure). inv_scale and found_inf
// are read and written here, by the "device", never by the host that queued it.
void non_finite_check_and_unscale_kernel(const std::vector<Tensor>& grads, const Tensor& found_inf,
                                         const Tensor& inv_scale) {
  const float inv = *data_of<float>(inv_scale);
  const kernels::FoundInfOp reduce;
  float found = reduce.identity();
  for (const Tensor& grad : grads) {
    const int64_t n = grad.numel();
    if (n == 0) continue;
    std::vector<float> chunk_flags(static_cast<size_t>(runtime::num_chunks(0, n, kPointwiseGrain)), reduce.identity());
    TINY_DISPATCH_FLOATING(grad.dtype(), "_amp_foreach_non_finite_check_and_unscale_", [&] {
      const kernels::UnscaleOp<opmath_t> op{static_cast<opmath_t>(inv)};
      scalar_t* p = data_of<scalar_t>(grad);
      runtime::parallel_for(0, n, kPointwiseGrain, [&](int64_t begin, int64_t end) {
        // This loop reads every gradient of the model once per step, so it is
        // kept vectorisable: the flags (0 or 1) are ORed as integers, where
        // FoundInfOp::combine's float max is not (NaN rules), and the op is a
        // local copy, as stores to p could alias a captured op's inv_scale.
        const kernels::UnscaleOp<opmath_t> unscale = op;
        int any = 0;
        for (int64_t i = begin; i < end; ++i) {
          opmath_t v = p[i];
          any |= static_cast<int>(unscale(v) != 0.0f);
          p[i] = static_cast<scalar_t>(v);
        }
        chunk_flags[static_cast<size_t>(begin / kPointwiseGrain)] = any != 0 ? 1.0f : reduce.identity();
      });
    });
    for (float f : chunk_flags) found = reduce.combine(found, f);
  }
  float* out = data_of<float>(found_inf);
  *out = reduce.combine(*out, found);  // sets 1.0, never clears an earlier 1.0
}

void update_scale_kernel(const Tensor& scale, const Tensor& growth_tracker, const Tensor& found_inf,
                         double growth_factor, double backoff_factor, int64_t growth_interval) {
  kernels::update_scale(*data_of<float>(scale), *data_of<int64_t>(growth_tracker), *data_of<float>(found_inf),
                        growth_factor, backoff_factor, growth_interval);
}

}  // namespace

TINY_REGISTER_KERNEL(non_finite_check_and_unscale_stub, CPU, non_finite_check_and_unscale_kernel);
TINY_REGISTER_KERNEL(update_scale_stub, CPU, update_scale_kernel);

}  // namespace tiny::cpu
