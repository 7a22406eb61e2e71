// CPU negative log-likelihood: gather -log_probs[n, target[n]] and its
// scatter-shaped backward. A target outside [0, C) that is not ignore_index is
// an IndexError naming the sample, the value and the valid range.
#include "backend/stubs/loss.h"
#include "backend/cpu/loops.h"
#include "backend/dtype_dispatch.h"

namespace tiny::cpu {

namespace {
void check_target(int64_t t, int64_t n, int64_t classes, int64_t ignore_index) {
  TINY_CHECK(t == ignore_index || (t >= 0 && t < classes), IndexError, "Target ", t, " is out of bounds: sample ", n,
             " has class ", t, " but the input has ", classes, " classes (valid targets are 0..", classes - 1,
             ", or ignore_index=", ignore_index, ")");
}
}  // namespace

void nll_forward_kernel(const Tensor& losses, const Tensor& log_probs, const Tensor& target, int64_t ignore_index) {
  const int64_t n = log_probs.size(0), c = log_probs.size(1);
  const int64_t* t = target.data_ptr<int64_t>();
  TINY_DISPATCH_FLOATING(log_probs.dtype(), "nll_loss", [&] {
    const scalar_t* lp = log_probs.data_ptr<scalar_t>();
    scalar_t* out = losses.data_ptr<scalar_t>();
    for (int64_t i = 0; i < n; ++i) {
      check_target(t[i], i, c, ignore_index);
      out[i] = t[i] == ignore_index ? opmath_t(0) : -static_cast<opmath_t>(lp[i * c + t[i]]);
    }
  });
}

void nll_backward_kernel(const Tensor& grad_input, const Tensor& grad_losses, const Tensor& target,
                         int64_t ignore_index) {
  const int64_t n = grad_input.size(0), c = grad_input.size(1);
  const int64_t* t = target.data_ptr<int64_t>();
  TINY_DISPATCH_FLOATING(grad_input.dtype(), "nll_loss_backward", [&] {
    const scalar_t* g = grad_losses.data_ptr<scalar_t>();
    scalar_t* gi = grad_input.data_ptr<scalar_t>();
    for (int64_t i = 0; i < n; ++i) {
      if (t[i] != ignore_index) gi[i * c + t[i]] = -g[i];
    }
  });
}

TINY_REGISTER_KERNEL(nll_forward_stub, CPU, nll_forward_kernel);
TINY_REGISTER_KERNEL(nll_backward_stub, CPU, nll_backward_kernel);

}  // namespace tiny::cpu
