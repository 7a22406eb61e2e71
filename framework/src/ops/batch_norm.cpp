// Batch normalization (PyTorch's F.batch_norm, nn.BatchNorm1d/2d) with
// PyTorch's CPU numerics (aten/src/ATen/native/Normalization.cpp and
// cpu/batch_norm_kernel.cpp, 1.13):
//   forward:  mean and the biased variance of each channel (two passes), then
//             y = x * alpha + beta with alpha = invstd * weight and
//             beta = bias - mean * alpha; the running variance takes the
//             unbiased variance (var * n / (n - 1)).
//   backward: sum = sum(dy), dotp = sum((x - mean) dy) per channel;
//             training: dx = (dy - sum / n - (x - mean) * dotp * invstd^2 / n) * invstd * weight
//             eval:     dx = dy * invstd * weight
//             grad_weight = dotp * invstd, grad_bias = sum.
// One autograd node (NativeBatchNormBackward0), saving the input, weight and
// the per-channel mean and invstd, built from tiny's reductions and pointwise
// kernels, so every backend (and the emulated GPU's modelled clock) runs it.
#include <cmath>

#include "ops/op_helpers.h"
#include "tiny/nn/batchnorm.h"
#include "tiny/nn/init.h"

namespace tiny::nn::functional {

namespace {

// [1, C, 1, ...] for broadcasting a per-channel vector against `x`.
IntArrayRef channel_shape(const Tensor& x) {
  IntArrayRef shape(static_cast<size_t>(x.dim()), 1);
  shape[1] = x.size(1);
  return shape;
}

IntArrayRef reduced_dims(const Tensor& x) {
  IntArrayRef dims{0};
  for (int64_t d = 2; d < x.dim(); ++d) dims.push_back(d);
  return dims;
}

void check_channel_vector(const Tensor& t, const char* what, int64_t channels, const Tensor& x) {
  if (!t.defined()) return;
  TINY_CHECK(t.dim() == 1 && t.size(0) == channels, ShapeError, what, " should contain ", channels,
             " elements not ", t.numel(), " (input of shape ", shape_str(x.sizes()),
             " has its channels on dimension 1)");
  ops::check_same_device(x, t, "batch_norm");
}

// The dtype statistics are computed in: float32 for 16-bit inputs.
Dtype compute_dtype(Dtype d) { return (d == kFloat16 || d == kBFloat16) ? kFloat32 : d; }

}  // namespace

Tensor batch_norm(const Tensor& input, const Tensor& running_mean, const Tensor& running_var, const Tensor& weight,
                  const Tensor& bias, bool training, double momentum, double eps) {
  TINY_OP_SCOPE("batch_norm", input, weight, bias);
  TINY_CHECK(input.defined(), ValueError, "batch_norm: input must be a defined tensor");
  TINY_CHECK(input.dim() >= 2, ShapeError, "batch_norm: expected an input of shape [N, C, ...] with at least 2 ",
             "dimensions, got shape ", shape_str(input.sizes()));
  TINY_CHECK(input.is_floating_point(), DtypeError, "\"batch_norm\" not implemented for '", dtype_name(input.dtype()),
             "' (convert the input: x.to(tiny::kFloat32))");
  const int64_t channels = input.size(1);
  check_channel_vector(running_mean, "running_mean", channels, input);
  check_channel_vector(running_var, "running_var", channels, input);
  check_channel_vector(weight, "weight", channels, input);
  check_channel_vector(bias, "bias", channels, input);
  TINY_CHECK(training || (running_mean.defined() && running_var.defined()), ValueError,
             "batch_norm: running_mean and running_var must be defined when training=false (eval mode uses them); ",
             "pass training=true to normalise with the batch's statistics");
  const int64_t count = channels == 0 ? 0 : input.numel() / channels;
  TINY_CHECK(!training || count > 1, ValueError, "Expected more than 1 value per channel when training, got input ",
             "size ", shape_str(input.sizes()), " (use a batch of more than one sample, or call module.eval())");

  const Dtype compute = compute_dtype(input.dtype());
  const IntArrayRef cshape = channel_shape(input), dims = reduced_dims(input);
  Tensor out, mean, invstd;
  {
    NoGradGuard no_grad;  // one node records the op; the statistics are plumbing
    const Tensor x = input.to(compute);
    if (training) {
      mean = x.mean(dims);
      const Tensor centered = x - mean.view(cshape);
      const Tensor var = (centered * centered).mean(dims);  // biased: normalizing uses it
      invstd = (var + eps).sqrt().pow(-1.0);
      if (running_mean.defined()) {
        running_mean.mul_(1.0 - momentum).add_((mean * momentum).to(running_mean.dtype()));
      }
      if (running_var.defined()) {
        const double unbias = static_cast<double>(count) / static_cast<double>(count - 1);
        running_var.mul_(1.0 - momentum).add_((var * (unbias * momentum)).to(running_var.dtype()));
      }
    } else {
      mean = running_mean.to(compute);
      invstd = (running_var.to(compute) + eps).sqrt().pow(-1.0);
    }
    const Tensor alpha = weight.defined() ? invstd * weight.to(compute) : invstd;
    const Tensor beta = bias.defined() ? bias.to(compute) - mean * alpha : -(mean * alpha);
    out = (x * alpha.view(cshape) + beta.view(cshape)).to(input.dtype());
  }
  if (autograd::should_record({input, weight, bias})) {
    autograd::record(
        "NativeBatchNormBackward0", {input, weight, bias}, {out},
        {autograd::save(input), autograd::save(weight), autograd::save(mean), autograd::save(invstd)},
        [training, count, cshape, dims, compute](const autograd::BackwardArgs& args) {
          NoGradGuard no_grad;
          const Tensor& g = args.grad();
          const Tensor x = args.saved[0].to(compute), dy = g.to(compute);
          const Tensor& w = args.saved[1];
          const Tensor& mean = args.saved[2];
          const Tensor& invstd = args.saved[3];
          const Tensor centered = x - mean.view(cshape);
          const Tensor sum = dy.sum(dims);
          Tensor dotp;
          if (args.needs[1] || (training && args.needs[0])) dotp = (centered * dy).sum(dims);
          Tensor gx, gw, gb;
          if (args.needs[0]) {
            const Tensor scale = w.defined() ? invstd * w.to(compute) : invstd;
            if (training) {
              const double n = static_cast<double>(count);
              const Tensor k = dotp * invstd * invstd / n;
              gx = (dy - (sum / n).view(cshape) - centered * k.view(cshape)) * scale.view(cshape);
            } else {
              gx = dy * scale.view(cshape);
            }
            gx = gx.to(args.saved[0].dtype());
          }
          if (args.needs[1]) gw = (dotp * invstd).to(w.dtype());
          if (args.needs[2]) gb = sum.to(g.dtype());
          return std::vector<Tensor>{gx, gw, gb};
        });
  }
  return out;
}

}  // namespace tiny::nn::functional

namespace tiny::nn {

BatchNormBase::BatchNormBase(int64_t num_features_, double eps_, std::optional<double> momentum_, bool affine_,
                             bool track_running_stats_)
    : num_features(num_features_),
      eps(eps_),
      momentum(momentum_),
      affine(affine_),
      track_running_stats(track_running_stats_) {
  TINY_CHECK(num_features > 0, ValueError, "BatchNorm: num_features must be positive, got ", num_features);
  weight = register_parameter("weight", affine ? empty({num_features}) : Tensor());
  bias = register_parameter("bias", affine ? empty({num_features}) : Tensor());
  if (track_running_stats) {
    running_mean = register_buffer("running_mean", zeros({num_features}));
    running_var = register_buffer("running_var", ones({num_features}));
    num_batches_tracked = register_buffer("num_batches_tracked", zeros({}, TensorOptions(kInt64)));
  }
  reset_parameters();
}

void BatchNormBase::reset_running_stats() {
  if (!track_running_stats) return;
  NoGradGuard no_grad;
  running_mean.fill_(0);
  running_var.fill_(1);
  num_batches_tracked.fill_(0);
}

void BatchNormBase::reset_parameters() {
  reset_running_stats();
  if (affine) {
    init::ones_(weight);
    init::zeros_(bias);
  }
}

Tensor BatchNormBase::forward(const Tensor& x) {
  check_input_dim(x);
  // PyTorch's _BatchNorm.forward, line for line.
  double factor = momentum.value_or(0.0);
  if (is_training() && track_running_stats) {
    NoGradGuard no_grad;
    num_batches_tracked.add_(1);
    if (!momentum) factor = 1.0 / static_cast<double>(num_batches_tracked.item<int64_t>());
  }
  const bool use_batch_stats = is_training() || !track_running_stats;
  const bool update_running = !is_training() || track_running_stats;
  return functional::batch_norm(x, update_running ? running_mean : Tensor(), update_running ? running_var : Tensor(),
                                weight, bias, use_batch_stats, factor, eps);
}

std::string BatchNormBase::extra_repr() const {
  return tiny::detail::concat(num_features, ", eps=", detail::python_float_repr(eps), ", momentum=",
                              momentum ? detail::python_float_repr(*momentum) : std::string("None"),
                              ", affine=", detail::python_bool(affine),
                              ", track_running_stats=", detail::python_bool(track_running_stats));
}

void BatchNormBase::clone_into(BatchNormBase& copy, const std::optional<Device>& device) const {
  copy_state_into(copy, device);
}

void BatchNorm1d::check_input_dim(const Tensor& x) const {
  TINY_CHECK(x.defined() && (x.dim() == 2 || x.dim() == 3), ShapeError, "expected 2D or 3D input (got ",
             x.defined() ? x.dim() : 0, "D input) of shape [N, C] or [N, C, L] (BatchNorm2d takes [N, C, H, W])");
}

void BatchNorm2d::check_input_dim(const Tensor& x) const {
  const int64_t dim = x.defined() ? x.dim() : 0;
  TINY_CHECK(dim == 4, ShapeError, "expected 4D input (got ", dim, "D input) of shape [N, C, H, W] (",
             dim == 3 ? "one image [C, H, W]? add the batch dimension with x.unsqueeze(0)"
                      : "BatchNorm1d takes [N, C] or [N, C, L]", ")");
}

std::shared_ptr<Module> BatchNorm1d::clone(const std::optional<Device>& device) const {
  auto copy = std::make_shared<BatchNorm1d>(num_features, eps, momentum, affine, track_running_stats);
  clone_into(*copy, device);
  return copy;
}

std::shared_ptr<Module> BatchNorm2d::clone(const std::optional<Device>& device) const {
  auto copy = std::make_shared<BatchNorm2d>(num_features, eps, momentum, affine, track_running_stats);
  clone_into(*copy, device);
  return copy;
}

}  // namespace tiny::nn
