// tiny::nn::functional: softmax, dropout, linear and the losses.
#include "amp/autocast_policy.h"
#include "backend/define_dispatch.h"
#include "backend/stubs/loss.h"
#include "backend/stubs/random.h"
#include "backend/stubs/softmax.h"
#include "kernels/philox.h"
#include "ops/op_helpers.h"
#include "tiny/nn/functional.h"

// The kernels these ops call, each with the work of one call on the modelled GPU.
namespace tiny {
namespace {
KernelWork softmax_work(const Tensor& out, const Tensor& in, int64_t, bool log) {
  return {log ? "log_softmax" : "softmax", cost_of({in, out})};
}
KernelWork softmax_backward_work(const Tensor& grad_in, const Tensor& grad_out, const Tensor& out, int64_t, bool) {
  return {"softmax_backward", cost_of({grad_in, grad_out, out})};
}
// One log-probability read per row, beside the target and the loss.
KernelWork nll_forward_work(const Tensor& losses, const Tensor& log_probs, const Tensor& target, int64_t) {
  KernelWork w{"nll_loss", cost_of({losses, target})};
  w.cost.bytes += target.numel() * gpu::model::element_bytes(log_probs.dtype());
  return w;
}
KernelWork nll_backward_work(const Tensor& grad_input, const Tensor& grad_losses, const Tensor& target, int64_t) {
  return {"nll_loss_backward", cost_of({grad_input, grad_losses, target})};
}
}  // namespace

TINY_DEFINE_DISPATCH(softmax_stub, "softmax", softmax_work);
TINY_DEFINE_DISPATCH(softmax_backward_stub, "softmax_backward", softmax_backward_work);
TINY_DEFINE_DISPATCH(nll_forward_stub, "nll_forward", nll_forward_work);
TINY_DEFINE_DISPATCH(nll_backward_stub, "nll_backward", nll_backward_work);
}  // namespace tiny

namespace tiny::nn::functional {

using autograd::BackwardArgs;
using autograd::record;
using autograd::save;
using autograd::save_output;
using autograd::should_record;

Tensor relu(const Tensor& x, bool inplace) { return inplace ? x.relu_() : tiny::relu(x); }
Tensor gelu(const Tensor& x, const std::string& approximate) { return tiny::gelu(x, approximate); }
Tensor sigmoid(const Tensor& x) { return tiny::sigmoid(x); }
Tensor tanh(const Tensor& x) { return tiny::tanh(x); }
Tensor silu(const Tensor& x) { return x * tiny::sigmoid(x); }
Tensor softplus(const Tensor& x, double beta, double threshold) {
  TINY_CHECK(x.is_floating_point(), DtypeError, "\"softplus\" not implemented for '", dtype_name(x.dtype()), "'");
  TINY_CHECK(beta != 0.0, ValueError, "softplus: beta must be nonzero (it divides the result), got 0");
  const Tensor z = x * beta;
  const Tensor linear = z > threshold;
  // exp() only sees values up to the threshold, so the branch that where()
  // drops has a finite gradient (0 * inf would be NaN).
  const Tensor soft = tiny::log1p(tiny::exp(tiny::minimum(z, tiny::full_like(z, threshold)))) / beta;
  return where(linear, x, soft);
}
Tensor leaky_relu(const Tensor& x, double negative_slope, bool inplace) {
  TINY_CHECK(x.is_floating_point(), DtypeError, "\"leaky_relu\" not implemented for '", dtype_name(x.dtype()), "'");
  if (!inplace) return where(x > 0.0, x, x * negative_slope);
  const bool record = autograd::inplace_needs_record(x, {});
  // The backward reads the result's sign, which a slope <= 0 does not keep (PyTorch refuses it too).
  TINY_CHECK(!record || negative_slope > 0.0, ValueError, "In-place leakyReLu backward calculation is triggered with "
             "a negative slope which is not supported. This is caused by calling in-place forward function with a "
             "negative slope (", negative_slope, "), please call out-of-place version instead.");
  {
    NoGradGuard no_grad;
    x.copy_(where(x > 0.0, x, x * negative_slope));
  }
  if (record) {
    autograd::record_inplace("LeakyReluBackward1", x, {}, {save_output(x)}, [negative_slope](const BackwardArgs& args) {
      const Tensor& g = args.grad();
      return std::vector<Tensor>{where(args.saved[0] > 0.0, g, g * negative_slope)};
    });
  }
  return x;
}
Tensor one_hot(const Tensor& indices, int64_t num_classes) {
  TINY_CHECK(indices.dtype() == kInt64, DtypeError, "one_hot is only applicable to index tensor (int64), got ",
             dtype_name(indices.dtype()));
  TINY_OP_SCOPE("one_hot");
  if (indices.numel() > 0) {
    const int64_t lo = indices.min().item<int64_t>(), hi = indices.max().item<int64_t>();
    TINY_CHECK(lo >= 0, IndexError, "one_hot: Class values must be non-negative, got ", lo);
    if (num_classes == -1) num_classes = hi + 1;
    TINY_CHECK(hi < num_classes, IndexError, "one_hot: Class values must be smaller than num_classes (",
               num_classes, "), got ", hi);
  } else {
    TINY_CHECK(num_classes >= 0, ValueError, "one_hot: Can not infer total number of classes from empty tensor; "
               "pass num_classes");
  }
  TINY_CHECK(num_classes >= 0, ValueError, "one_hot: num_classes must be -1 or >= 0, got ", num_classes);
  const Tensor classes = arange(num_classes, TensorOptions(kInt64).device(indices.device()));
  return (indices.unsqueeze(-1) == classes).to(kInt64);
}

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
  if (!(x.dim() >= 1 && x.size(-1) == weight.size(1))) {
    const int64_t in_features = weight.size(1);
    const bool flat_fits = x.dim() >= 2 && x.size(0) > 0 && x.numel() / x.size(0) == in_features;
    TINY_THROW(ShapeError, "mat1 and mat2 shapes cannot be multiplied (",
               x.dim() >= 1 ? x.numel() / std::max<int64_t>(x.size(-1), 1) : 0, "x", x.dim() >= 1 ? x.size(-1) : 0,
               " and ", in_features, "x", weight.size(0), "): a linear layer with in_features=", in_features,
               " takes an input of shape [..., ", in_features, "], got ", shape_str(x.sizes()),
               flat_fits ? "; flatten each sample first (x.flatten(1), or nn::Flatten before the layer)" : "");
  }
  if (x.dim() == 2 && bias.defined()) return addmm(bias, x, weight.t());
  Tensor out = matmul(x, weight.t());
  return bias.defined() ? out + bias : out;
}

Tensor dropout(const Tensor& x, double p, bool training, std::optional<Generator> generator, bool inplace) {
  TINY_OP_SCOPE("dropout", x);
  TINY_CHECK(p >= 0.0 && p <= 1.0, ValueError, "dropout probability has to be between 0 and 1, but got ", p);
  if (!training || p == 0.0) return x;
  if (p == 1.0) return inplace ? x.mul_(0.0) : x * 0.0;
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
  if (inplace) return x.mul_(mask);  // MulBackward0 saves the mask only, as PyTorch's dropout_
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
    case Reduction::BatchMean: break;
  }
  TINY_THROW(ValueError, "reduction=BatchMean ('batchmean') is only for kl_div; use Reduction::Mean or Sum");
}

// Checks of the class-index losses, in PyTorch's words: input [C], [N, C] or
// [N, C, d1, ...]; target int64 [], [N] or [N, d1, ...].
void check_class_input(const Tensor& input, const Tensor& target, const char* op) {
  TINY_CHECK(input.dim() >= 1, ShapeError, op, ": Expected 1 or more dimensions (got 0): input must be [C], [N, C] "
             "or [N, C, d1, ...]");
  TINY_CHECK(input.is_floating_point(), DtypeError, op, ": expected a floating-point input, got ",
             dtype_name(input.dtype()), target.is_floating_point()
                 ? " while the target is " + std::string(dtype_name(target.dtype())) + ": are the arguments swapped? " +
                       op + "(input, target) takes the model's output first, then the labels"
                 : std::string());
  TINY_CHECK(target.dtype() == kInt64, DtypeError, op, ": expected target of dtype int64 (class indices) but got ",
             dtype_name(target.dtype()), ". Convert with target.to(tiny::kInt64); for probabilities give a target of "
             "the input's shape and floating dtype (cross_entropy only)");
  ops::check_same_device(input, target, op);
  if (input.dim() == 1) {
    TINY_CHECK(target.dim() == 0, ShapeError, op, ": expected a 0-d target (one class index) for input of shape ",
               shape_str(input.sizes()), ", got ", shape_str(target.sizes()));
    return;
  }
  const int64_t tn = target.dim() == 0 ? 1 : target.size(0);
  TINY_CHECK(target.dim() >= 1 && input.size(0) == tn, ShapeError, "Expected input batch_size (", input.size(0),
             ") to match target batch_size (", tn, ").");
  IntArrayRef expected = {input.size(0)};
  for (int64_t d = 2; d < input.dim(); ++d) expected.push_back(input.size(d));
  TINY_CHECK(target.sizes() == expected, ShapeError, op, ": Expected target size ", shape_str(expected), ", got ",
             shape_str(target.sizes()), " (input ", shape_str(input.sizes()), " has the classes on dimension 1)");
}

// The class weights as the input's dtype, after PyTorch's check.
Tensor checked_weight(const Tensor& weight, const Tensor& input, int64_t classes, const char* op) {
  if (!weight.defined()) return weight;
  TINY_CHECK(weight.dim() == 1 && weight.numel() == classes, ShapeError, op,
             ": weight tensor should be defined either for all ", classes,
             " classes or no classes but got weight tensor of shape: ", shape_str(weight.sizes()));
  TINY_CHECK(weight.is_floating_point(), DtypeError, op, ": weight must be floating point, got ",
             dtype_name(weight.dtype()));
  ops::check_same_device(input, weight, op);
  return weight.to(input.dtype());
}

// [N, C, d1, ...] -> [N * d1 * ..., C] (classes last), [C] -> [1, C].
Tensor classes_last(const Tensor& x) {
  if (x.dim() == 1) return x.unsqueeze(0);
  if (x.dim() == 2) return x;
  IntArrayRef perm = {0};
  for (int64_t d = 2; d < x.dim(); ++d) perm.push_back(d);
  perm.push_back(1);
  return x.permute(perm).reshape({-1, x.size(1)});
}

// Per-sample -log_probs[n, target[n]] (0 where ignored), differentiable; log_probs [M, C].
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

// weight[target[n]] per sample (0 where ignored), or 1/0 for kept/ignored without weights: the
// mean's denominators. Not differentiable (PyTorch has no gradient for weight either).
Tensor sample_weights(const Tensor& weight, const Tensor& target, int64_t ignore_index, const Tensor& like) {
  NoGradGuard no_grad;
  if (!weight.defined()) return (target != ignore_index).to(like.dtype());
  // nll picks -(-weight)[t]: the same kernel, so ignore_index is handled the same way.
  Tensor neg = (-weight).unsqueeze(0).expand({target.size(0), weight.size(0)}).contiguous();
  return nll_per_sample(neg, target, ignore_index);
}

// The per-sample losses [M] back to the target's shape ([N, d1, ...] or []).
Tensor reduce_class_loss(const Tensor& losses, const Tensor& denominators, const Tensor& target, Reduction reduction) {
  switch (reduction) {
    case Reduction::None: return losses.reshape(target.sizes());
    case Reduction::Sum: return losses.sum();
    case Reduction::Mean: return losses.sum() / denominators.sum();
    case Reduction::BatchMean: break;
  }
  return reduce_loss(losses, reduction);  // throws for BatchMean
}

// The class-index losses: -w[t] * lp[t] (1 - eps) + eps / C * -(sum_c w_c lp_c), for kept samples.
Tensor class_index_loss(const Tensor& log_probs_nd, const Tensor& target, const Tensor& weight_in, Reduction reduction,
                        int64_t ignore_index, double label_smoothing, const char* op) {
  const int64_t classes = log_probs_nd.dim() == 1 ? log_probs_nd.size(0) : log_probs_nd.size(1);
  const Tensor weight = checked_weight(weight_in, log_probs_nd, classes, op);
  const Tensor lp = classes_last(log_probs_nd);
  const Tensor t = target.reshape({-1});
  Tensor losses = nll_per_sample(lp, t, ignore_index);
  const Tensor w_t = sample_weights(weight, t, ignore_index, lp);
  if (weight.defined()) losses = losses * w_t;
  if (label_smoothing > 0.0) {
    const Tensor keep = (t != ignore_index).to(lp.dtype());
    const Tensor smooth = -(weight.defined() ? lp * weight : lp).sum({1}) * keep;
    losses = losses * (1.0 - label_smoothing) + smooth * (label_smoothing / static_cast<double>(classes));
  }
  return reduce_class_loss(losses, w_t, target, reduction);
}

// Cross-entropy with class probabilities (PyTorch 1.13's cross_entropy_loss_prob_target).
Tensor probability_target_loss(const Tensor& logits, const Tensor& target_in, const Tensor& weight_in,
                               Reduction reduction, double label_smoothing) {
  TINY_CHECK(target_in.is_floating_point(), DtypeError, "cross_entropy: Expected floating point type for target with "
             "class probabilities, got ", dtype_name(target_in.dtype()));
  ops::check_same_device(logits, target_in, "cross_entropy");
  const int64_t class_dim = logits.dim() == 1 ? 0 : 1;
  const int64_t classes = logits.size(class_dim);
  const Tensor weight = checked_weight(weight_in, logits, classes, "cross_entropy");
  const Tensor lp = log_softmax(logits, class_dim);
  const Tensor target = label_smoothing > 0.0
                            ? target_in * (1.0 - label_smoothing) + label_smoothing / static_cast<double>(classes)
                            : target_in;
  Tensor terms = lp * target;
  if (weight.defined()) {
    IntArrayRef shape(static_cast<size_t>(logits.dim()), 1);
    shape[static_cast<size_t>(class_dim)] = classes;
    terms = terms * weight.reshape(shape);
  }
  switch (reduction) {
    case Reduction::None: return -terms.sum({class_dim});
    case Reduction::Sum: return -terms.sum();
    case Reduction::Mean: return -terms.sum() / static_cast<double>(logits.numel() / std::max<int64_t>(classes, 1));
    case Reduction::BatchMean: break;
  }
  return reduce_loss(terms, reduction);  // throws for BatchMean
}

}  // namespace

Tensor nll_loss(const Tensor& log_probs_in, const Tensor& target, Reduction reduction, int64_t ignore_index,
                const Tensor& weight) {
  const Tensor log_probs = amp::detail::upcast(log_probs_in);
  check_class_input(log_probs, target, "nll_loss");
  TINY_OP_SCOPE("nll_loss", log_probs, target);
  return class_index_loss(log_probs, target, weight, reduction, ignore_index, 0.0, "nll_loss");
}

Tensor cross_entropy(const Tensor& logits_in, const Tensor& target, const CrossEntropyOptions& options) {
  const Tensor logits = amp::detail::upcast(logits_in);
  TINY_OP_SCOPE("cross_entropy", logits, target);
  TINY_CHECK(options.label_smoothing >= 0.0 && options.label_smoothing <= 1.0, ValueError,
             "label_smoothing must be between 0.0 and 1.0. Got: ", options.label_smoothing);
  if (logits.dim() >= 1 && target.sizes() == logits.sizes() && target.dtype() != kInt64) {
    TINY_CHECK(logits.is_floating_point(), DtypeError, "cross_entropy: expected a floating-point input, got ",
               dtype_name(logits.dtype()));
    return probability_target_loss(logits, amp::detail::upcast(target).to(logits.dtype()), options.weight,
                                   options.reduction,
                                   options.label_smoothing);
  }
  check_class_input(logits, target, "cross_entropy");
  const Tensor lp = log_softmax(logits, logits.dim() == 1 ? 0 : 1);
  return class_index_loss(lp, target, options.weight, options.reduction, options.ignore_index,
                          options.label_smoothing, "cross_entropy");
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
