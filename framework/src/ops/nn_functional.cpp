// tiny::nn::functional: softmax, dropout, linear and the losses.
#include "amp/autocast_policy.h"
#include "kernels/philox.h"
#include "ops/op_helpers.h"
#include "tiny/nn/functional.h"

namespace tiny::nn::functional {

using autograd::BackwardArgs;
using autograd::record;
using autograd::save;
using autograd::save_output;
using autograd::should_record;

Tensor relu(const Tensor& x) { return tiny::relu(x); }
Tensor gelu(const Tensor& x, const std::string& approximate) { return tiny::gelu(x, approximate); }
Tensor sigmoid(const Tensor& x) { return tiny::sigmoid(x); }
Tensor tanh(const Tensor& x) { return tiny::tanh(x); }

namespace {

Tensor softmax_impl(const Tensor& x, int64_t dim, bool log) {
  const char* name = log ? "log_softmax" : "softmax";
  TINY_OP_SCOPE(name, x);
  TINY_CHECK(x.is_floating_point(), DtypeError, "\"", name, "\" not implemented for '", dtype_name(x.dtype()),
             "' (convert to float first: x.to(tiny::kFloat32))");
  const int64_t d = wrap_dim(dim, x.dim());
  Tensor in = x.dim() == 0 ? x.reshape({1}) : x.contiguous();
  Tensor out = make_tensor(in.sizes(), in.dtype(), in.device());
  if (out.numel() > 0) softmax_stub(in.device())(out, in, d, log);
  if (x.dim() == 0) out = out.reshape({});
  if (should_record({x})) {
    record(log ? "LogSoftmaxBackward0" : "SoftmaxBackward0", {x}, {out}, {save_output(out)},
           [d, log](const BackwardArgs& args) {
             Tensor y = args.saved[0].dim() == 0 ? args.saved[0].reshape({1}) : args.saved[0];
             Tensor g = args.grad().reshape(y.sizes()).contiguous();
             Tensor grad_in = make_tensor(y.sizes(), y.dtype(), y.device());
             if (y.numel() > 0) softmax_backward_stub(y.device())(grad_in, g, y.contiguous(), d, log);
             return std::vector<Tensor>{grad_in.reshape(args.saved[0].sizes())};
           });
  }
  return out;
}

}  // namespace

Tensor softmax(const Tensor& x, int64_t dim) { return softmax_impl(amp::detail::upcast(x), dim, false); }
Tensor log_softmax(const Tensor& x, int64_t dim) { return softmax_impl(amp::detail::upcast(x), dim, true); }

Tensor linear(const Tensor& x_in, const Tensor& weight_in, const Tensor& bias_in) {
  const Tensor x = amp::detail::lower(x_in), weight = amp::detail::lower(weight_in),
               bias = amp::detail::lower(bias_in);
  TINY_CHECK(weight.dim() == 2, ShapeError, "linear: weight must be 2-D [out_features, in_features], got shape ",
             shape_str(weight.sizes()));
  TINY_OP_SCOPE("linear", x, weight, bias);
  TINY_CHECK(x.dim() >= 1 && x.size(-1) == weight.size(1), ShapeError, "mat1 and mat2 shapes cannot be multiplied (",
             x.dim() >= 1 ? x.numel() / std::max<int64_t>(x.size(-1), 1) : 0, "x", x.dim() >= 1 ? x.size(-1) : 0,
             " and ", weight.size(1), "x", weight.size(0), ")");
  if (x.dim() == 2 && bias.defined()) return addmm(bias, x, weight.t());
  Tensor out = matmul(x, weight.t());
  return bias.defined() ? out + bias : out;
}

Tensor dropout(const Tensor& x, double p, bool training, std::optional<Generator> generator) {
  TINY_OP_SCOPE("dropout", x);
  TINY_CHECK(p >= 0.0 && p <= 1.0, ValueError, "dropout probability has to be between 0 and 1, but got ", p);
  if (!training || p == 0.0) return x;
  if (p == 1.0) return x * 0.0;
  TINY_CHECK(x.is_floating_point(), DtypeError, "dropout: expected a floating-point tensor, got ",
             dtype_name(x.dtype()));
  // mask[i] = 1/(1-p) with probability 1-p, else 0, drawn from Philox so the
  // CPU and the GPU backends produce the same mask for the same seed. Backward
  // needs only the mask, not x.
  Tensor mask = make_tensor(x.sizes(), x.dtype(), x.device());
  Generator gen = generator ? *generator : default_generator(x.device());
  const PhiloxState state = gen.reserve(kernels::philox_counters_needed(static_cast<uint64_t>(mask.numel()),
                                                                        kernels::kDrawsBernoulli));
  random_stub(mask.device())(mask, RandomKind::Bernoulli, state, 1.0 - p, 1.0 / (1.0 - p));
  Tensor out;
  {
    NoGradGuard no_grad;
    out = x * mask;
  }
  if (should_record({x})) {
    record("NativeDropoutBackward0", {x}, {out}, {save(mask)}, [](const BackwardArgs& args) {
      return std::vector<Tensor>{args.grad() * args.saved[0]};
    });
  }
  return out;
}

namespace {

Tensor reduce_loss(const Tensor& losses, Reduction reduction) {
  switch (reduction) {
    case Reduction::None: return losses;
    case Reduction::Sum: return losses.sum();
    case Reduction::Mean: return losses.mean();
  }
  return losses;
}

void check_class_input(const Tensor& input, const Tensor& target, const char* op) {
  TINY_CHECK(input.dim() == 1 || input.dim() == 2, ShapeError, op, ": expected input of shape [N, C] or [C], got ",
             shape_str(input.sizes()));
  TINY_CHECK(input.is_floating_point(), DtypeError, op, ": expected a floating-point input, got ",
             dtype_name(input.dtype()));
  TINY_CHECK(target.dtype() == kInt64, DtypeError, op, ": expected target of dtype int64 (class indices) but got ",
             dtype_name(target.dtype()), ". Convert with target.to(tiny::kInt64); for probabilities use a soft-label "
             "loss instead.");
  ops::check_same_device(input, target, op);
  const int64_t n = input.dim() == 2 ? input.size(0) : 1;
  const int64_t tn = target.dim() == 0 ? 1 : target.size(0);
  TINY_CHECK((input.dim() == 2 && target.dim() == 1) || (input.dim() == 1 && target.dim() == 0), ShapeError, op,
             ": expected target of shape [", n, "] for input of shape ", shape_str(input.sizes()), ", got ",
             shape_str(target.sizes()));
  TINY_CHECK(n == tn, ShapeError, "Expected input batch_size (", n, ") to match target batch_size (", tn, ").");
}

// Per-sample -log_probs[n, target[n]] (0 where ignored), differentiable.
Tensor nll_per_sample(const Tensor& log_probs, const Tensor& target, int64_t ignore_index) {
  Tensor lp = log_probs.contiguous();
  Tensor t = target.contiguous();
  Tensor losses = make_tensor({lp.size(0)}, lp.dtype(), lp.device());
  nll_forward_stub(lp.device())(losses, lp, t, ignore_index);
  if (should_record({log_probs})) {
    const IntArrayRef shape = lp.sizes();
    record("NllLossBackward0", {log_probs}, {losses}, {save(t)}, [shape, ignore_index](const BackwardArgs& args) {
      Tensor grad_in = zeros(shape, TensorOptions(args.grad().dtype()).device(args.grad().device()));
      nll_backward_stub(grad_in.device())(grad_in, args.grad().contiguous(), args.saved[0], ignore_index);
      return std::vector<Tensor>{grad_in};
    });
  }
  return losses;
}

// Mean over the samples that are not ignored (PyTorch divides by their count).
Tensor masked_mean(const Tensor& losses, const Tensor& target, int64_t ignore_index) {
  Tensor counted = (target != ignore_index).to(losses.dtype());
  return losses.sum() / counted.sum();
}

}  // namespace

Tensor nll_loss(const Tensor& log_probs_in, const Tensor& target, Reduction reduction, int64_t ignore_index) {
  const Tensor log_probs = amp::detail::upcast(log_probs_in);
  check_class_input(log_probs, target, "nll_loss");
  TINY_OP_SCOPE("nll_loss", log_probs, target);
  const bool single = log_probs.dim() == 1;
  Tensor lp = single ? log_probs.unsqueeze(0) : log_probs;
  Tensor t = single ? target.reshape({1}) : target;
  Tensor losses = nll_per_sample(lp, t, ignore_index);
  if (reduction == Reduction::Mean) return masked_mean(losses, t, ignore_index);
  if (single && reduction == Reduction::None) return losses.reshape({});
  return reduce_loss(losses, reduction);
}

Tensor cross_entropy(const Tensor& logits_in, const Tensor& target, const CrossEntropyOptions& options) {
  const Tensor logits = amp::detail::upcast(logits_in);
  check_class_input(logits, target, "cross_entropy");
  TINY_OP_SCOPE("cross_entropy", logits, target);
  TINY_CHECK(options.label_smoothing >= 0.0 && options.label_smoothing <= 1.0, ValueError,
             "label_smoothing must be between 0.0 and 1.0. Got: ", options.label_smoothing);
  const bool single = logits.dim() == 1;
  Tensor x = single ? logits.unsqueeze(0) : logits;
  Tensor t = single ? target.reshape({1}) : target;
  Tensor lp = log_softmax(x, 1);
  Tensor losses = nll_per_sample(lp, t, options.ignore_index);
  const double eps = options.label_smoothing;
  if (eps > 0.0) {
    // PyTorch: (1 - eps) * nll + eps * mean over classes of -log p, ignored samples excluded.
    const int64_t classes = x.size(1);
    Tensor smooth = -lp.sum({1}) / static_cast<double>(classes);
    Tensor keep = (t != options.ignore_index).to(lp.dtype());
    losses = losses * (1.0 - eps) + smooth * keep * eps;
  }
  if (options.reduction == Reduction::Mean) return masked_mean(losses, t, options.ignore_index);
  if (single && options.reduction == Reduction::None) return losses.reshape({});
  return reduce_loss(losses, options.reduction);
}

Tensor mse_loss(const Tensor& input_in, const Tensor& target_in, Reduction reduction) {
  const Tensor input = amp::detail::upcast(input_in), target = amp::detail::upcast(target_in);
  TINY_CHECK(input.sizes() == target.sizes(), ShapeError, "mse_loss: input shape ", shape_str(input.sizes()),
             " and target shape ", shape_str(target.sizes()), " differ; broadcasting them silently gives wrong "
             "results, so reshape one (e.g. target.view({-1, 1}))");
  TINY_OP_SCOPE("mse_loss", input, target);
  Tensor diff = input - target;
  return reduce_loss(diff * diff, reduction);
}

}  // namespace tiny::nn::functional

namespace tiny {
Tensor Tensor::softmax(int64_t dim) const { return nn::functional::softmax(*this, dim); }
Tensor Tensor::log_softmax(int64_t dim) const { return nn::functional::log_softmax(*this, dim); }
}  // namespace tiny
