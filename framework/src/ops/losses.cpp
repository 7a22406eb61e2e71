// tiny::nn::functional's elementwise losses: l1, smooth_l1, huber,
// binary_cross_entropy_with_logits and kl_div. Each is written with tiny's
// differentiable ops in the order PyTorch 1.13's ATen writes it, so autograd
// gives the gradients and every backend (CPU, emulated GPU, CUDA) runs them.
#include "amp/autocast_policy.h"
#include "ops/op_helpers.h"
#include "tiny/nn/functional.h"

namespace tiny::nn::functional {

namespace {

Tensor reduce(const Tensor& losses, Reduction reduction, const char* op) {
  switch (reduction) {
    case Reduction::None: return losses;
    case Reduction::Sum: return losses.sum();
    case Reduction::Mean: return losses.mean();
    case Reduction::BatchMean: break;
  }
  TINY_THROW(ValueError, op, ": reduction=BatchMean ('batchmean') is only for kl_div; use Reduction::Mean or Sum");
}

// Same shapes (PyTorch only warns and broadcasts, which silently gives wrong
// results), floating point, same device.
void check_pair(const Tensor& input, const Tensor& target, const char* op) {
  TINY_CHECK(input.sizes() == target.sizes(), ShapeError, op, ": Using a target size (", shape_str(target.sizes()),
             ") that is different to the input size (", shape_str(input.sizes()), ") would broadcast them and give "
             "wrong results; reshape one (e.g. target.view({-1, 1}))");
  TINY_CHECK(input.is_floating_point() && target.is_floating_point(), DtypeError, op,
             ": expected floating-point input and target, got ", dtype_name(input.dtype()), " and ",
             dtype_name(target.dtype()), " (convert with .to(tiny::kFloat32))");
  ops::check_same_device(input, target, op);
}

}  // namespace

Tensor l1_loss(const Tensor& input_in, const Tensor& target_in, Reduction reduction) {
  const Tensor input = amp::detail::upcast(input_in), target = amp::detail::upcast(target_in);
  check_pair(input, target, "l1_loss");
  TINY_OP_SCOPE("l1_loss");
  return reduce((input - target).abs(), reduction, "l1_loss");
}

Tensor smooth_l1_loss(const Tensor& input_in, const Tensor& target_in, Reduction reduction, double beta) {
  const Tensor input = amp::detail::upcast(input_in), target = amp::detail::upcast(target_in);
  TINY_CHECK(beta >= 0.0, ValueError, "smooth_l1_loss does not support negative values for beta. (got beta=", beta,
             ")");
  check_pair(input, target, "smooth_l1_loss");
  TINY_OP_SCOPE("smooth_l1_loss");
  if (beta == 0.0) return l1_loss(input, target, reduction);  // as PyTorch
  const Tensor z = (input - target).abs();
  // z < beta ? 0.5 * z * z / beta : z - 0.5 * beta
  return reduce(where(z < beta, z * 0.5 * z / beta, z - 0.5 * beta), reduction, "smooth_l1_loss");
}

Tensor huber_loss(const Tensor& input_in, const Tensor& target_in, Reduction reduction, double delta) {
  const Tensor input = amp::detail::upcast(input_in), target = amp::detail::upcast(target_in);
  TINY_CHECK(delta > 0.0, ValueError, "huber_loss does not support non-positive values for delta. (got delta=", delta,
             ")");
  check_pair(input, target, "huber_loss");
  TINY_OP_SCOPE("huber_loss");
  const Tensor z = (input - target).abs();
  // z < delta ? 0.5 * z * z : delta * (z - 0.5 * delta)
  return reduce(where(z < delta, z * 0.5 * z, (z - 0.5 * delta) * delta), reduction, "huber_loss");
}

Tensor binary_cross_entropy_with_logits(const Tensor& input_in, const Tensor& target_in, const Tensor& weight,
                                        const Tensor& pos_weight, Reduction reduction) {
  const Tensor input = amp::detail::upcast(input_in), target = amp::detail::upcast(target_in);
  TINY_CHECK(input.sizes() == target.sizes(), ShapeError, "Target size (", shape_str(target.sizes()),
             ") must be the same as input size (", shape_str(input.sizes()), ")");
  check_pair(input, target, "binary_cross_entropy_with_logits");
  TINY_OP_SCOPE("binary_cross_entropy_with_logits");
  auto broadcastable = [&](const Tensor& w, const char* what) {
    if (!w.defined()) return;
    ops::check_same_device(input, w, "binary_cross_entropy_with_logits");
    bool fits = false;
    try {
      fits = broadcast_shapes(w.sizes(), input.sizes()) == input.sizes();
    } catch (const ShapeError&) {
      fits = false;  // reported below, with the fix
    }
    TINY_CHECK(fits, ShapeError,
               "binary_cross_entropy_with_logits: ", what, " of shape ", shape_str(w.sizes()),
               " does not broadcast to the input's shape ", shape_str(input.sizes()),
               what == std::string("pos_weight") ? " (pos_weight holds one value per class: the last dimension)" : "");
  };
  broadcastable(weight, "weight");
  broadcastable(pos_weight, "pos_weight");
  // PyTorch 1.13 (Loss.cpp): max_val = (-input).clamp_min(0), then the log-sum-exp form.
  const Tensor max_val = (-input).relu();
  const Tensor log_sum = ((-max_val).exp() + (-input - max_val).exp()).log();
  Tensor loss;
  if (pos_weight.defined()) {
    const Tensor log_weight = (pos_weight.to(input.dtype()) - 1.0) * target + 1.0;
    loss = (1.0 - target) * input + log_weight * (log_sum + max_val);
  } else {
    loss = (1.0 - target) * input + max_val + log_sum;
  }
  if (weight.defined()) loss = loss * weight.to(input.dtype());
  return reduce(loss, reduction, "binary_cross_entropy_with_logits");
}

Tensor kl_div(const Tensor& input_in, const Tensor& target_in, Reduction reduction, bool log_target) {
  const Tensor input = amp::detail::upcast(input_in), target = amp::detail::upcast(target_in);
  check_pair(input, target, "kl_div");
  TINY_OP_SCOPE("kl_div");
  Tensor out;
  if (log_target) {
    out = target.exp() * (target - input);
  } else {
    // xlogy(target, target) - target * input; xlogy is 0 where target is 0.
    const Tensor safe = where(target == 0.0, ones_like(target), target);
    out = target * safe.log() - target * input;
  }
  if (reduction == Reduction::BatchMean) {
    // PyTorch: sum / input.size(0) (a 0-d input: the sum).
    return input.dim() == 0 ? out.sum() : out.sum() / static_cast<double>(input.size(0));
  }
  return reduce(out, reduction, "kl_div");
}

}  // namespace tiny::nn::functional
