// tiny::nn::init: PyTorch's formulas for gains and fans, drawing from tiny's Philox generator.
#include "tiny/nn/init.h"

#include <cmath>

#include "tiny/autograd.h"
#include "tiny/ops.h"

namespace tiny::nn::init {

namespace {

void check_floating(const Tensor& t, const char* fn) {
  TINY_CHECK(t.defined(), ValueError, "nn::init::", fn, ": the tensor is undefined");
  TINY_CHECK(t.is_floating_point(), DtypeError, "nn::init::", fn, ": expected a floating-point tensor, got ",
             dtype_name(t.dtype()));
}

TensorOptions options_of(const Tensor& t) { return TensorOptions(t.dtype()).device(t.device()); }

int64_t fan_of(const Tensor& t, FanMode mode) {
  const auto [fan_in, fan_out] = calculate_fan_in_and_fan_out(t);
  return mode == FanMode::FanIn ? fan_in : fan_out;
}

}  // namespace

double calculate_gain(const std::string& nonlinearity, std::optional<double> param) {
  if (nonlinearity == "linear" || nonlinearity == "conv1d" || nonlinearity == "conv2d" ||
      nonlinearity == "conv3d" || nonlinearity == "conv_transpose1d" || nonlinearity == "conv_transpose2d" ||
      nonlinearity == "conv_transpose3d" || nonlinearity == "sigmoid") {
    return 1.0;
  }
  if (nonlinearity == "tanh") return 5.0 / 3.0;
  if (nonlinearity == "relu") return std::sqrt(2.0);
  if (nonlinearity == "leaky_relu") {
    const double slope = param.value_or(0.01);
    return std::sqrt(2.0 / (1.0 + slope * slope));
  }
  if (nonlinearity == "selu") return 3.0 / 4.0;
  TINY_THROW(ValueError, "Unsupported nonlinearity ", nonlinearity);
}

std::pair<int64_t, int64_t> calculate_fan_in_and_fan_out(const Tensor& tensor) {
  TINY_CHECK(tensor.dim() >= 2, ValueError, "Fan in and fan out can not be computed for tensor with fewer than 2 "
             "dimensions (got shape ", shape_str(tensor.sizes()), ")");
  int64_t receptive_field = 1;
  for (int64_t d = 2; d < tensor.dim(); ++d) receptive_field *= tensor.size(d);
  return {tensor.size(1) * receptive_field, tensor.size(0) * receptive_field};
}

Tensor uniform_(const Tensor& tensor, double a, double b, std::optional<Generator> generator) {
  check_floating(tensor, "uniform_");
  TINY_CHECK(a <= b, ValueError, "nn::init::uniform_: expects a <= b, got a=", a, " and b=", b);
  NoGradGuard no_grad;
  tensor.copy_(rand(tensor.sizes(), options_of(tensor), generator) * (b - a) + a);
  return tensor;
}

Tensor normal_(const Tensor& tensor, double mean, double std, std::optional<Generator> generator) {
  check_floating(tensor, "normal_");
  TINY_CHECK(std >= 0.0, ValueError, "nn::init::normal_: expects std >= 0.0, got ", std);
  NoGradGuard no_grad;
  tensor.copy_(randn(tensor.sizes(), options_of(tensor), generator) * std + mean);
  return tensor;
}

Tensor constant_(const Tensor& tensor, const Scalar& value) {
  TINY_CHECK(tensor.defined(), ValueError, "nn::init::constant_: the tensor is undefined");
  NoGradGuard no_grad;
  tensor.fill_(value);
  return tensor;
}

Tensor zeros_(const Tensor& tensor) { return constant_(tensor, 0); }
Tensor ones_(const Tensor& tensor) { return constant_(tensor, 1); }

Tensor kaiming_uniform_(const Tensor& tensor, double a, FanMode mode, const std::string& nonlinearity,
                        std::optional<Generator> generator) {
  check_floating(tensor, "kaiming_uniform_");
  if (tensor.numel() == 0) return tensor;  // PyTorch: initializing zero-element tensors is a no-op
  const int64_t fan = fan_of(tensor, mode);
  TINY_CHECK(fan > 0, ValueError, "nn::init::kaiming_uniform_: initializing a tensor with zero fan (shape ",
             shape_str(tensor.sizes()), ")");
  const double stdev = calculate_gain(nonlinearity, a) / std::sqrt(static_cast<double>(fan));
  const double bound = std::sqrt(3.0) * stdev;
  return uniform_(tensor, -bound, bound, generator);
}

Tensor kaiming_normal_(const Tensor& tensor, double a, FanMode mode, const std::string& nonlinearity,
                       std::optional<Generator> generator) {
  check_floating(tensor, "kaiming_normal_");
  if (tensor.numel() == 0) return tensor;  // PyTorch: initializing zero-element tensors is a no-op
  const int64_t fan = fan_of(tensor, mode);
  TINY_CHECK(fan > 0, ValueError, "nn::init::kaiming_normal_: initializing a tensor with zero fan (shape ",
             shape_str(tensor.sizes()), ")");
  const double stdev = calculate_gain(nonlinearity, a) / std::sqrt(static_cast<double>(fan));
  return normal_(tensor, 0.0, stdev, generator);
}

Tensor xavier_uniform_(const Tensor& tensor, double gain, std::optional<Generator> generator) {
  check_floating(tensor, "xavier_uniform_");
  if (tensor.numel() == 0) return tensor;  // PyTorch: initializing zero-element tensors is a no-op
  const auto [fan_in, fan_out] = calculate_fan_in_and_fan_out(tensor);
  const double stdev = gain * std::sqrt(2.0 / static_cast<double>(fan_in + fan_out));
  const double bound = std::sqrt(3.0) * stdev;
  return uniform_(tensor, -bound, bound, generator);
}

Tensor xavier_normal_(const Tensor& tensor, double gain, std::optional<Generator> generator) {
  check_floating(tensor, "xavier_normal_");
  if (tensor.numel() == 0) return tensor;  // PyTorch: initializing zero-element tensors is a no-op
  const auto [fan_in, fan_out] = calculate_fan_in_and_fan_out(tensor);
  const double stdev = gain * std::sqrt(2.0 / static_cast<double>(fan_in + fan_out));
  return normal_(tensor, 0.0, stdev, generator);
}

}  // namespace tiny::nn::init
