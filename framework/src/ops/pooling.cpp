// 2-D max, average and adaptive average pooling (PyTorch's F.max_pool2d,
// F.avg_pool2d, F.adaptive_avg_pool2d) and their modules. The kernels are
// kernels/conv_ops.h's gathers, forward and backward, on every backend.
#include <string>
#include <utility>

#include "backend/define_dispatch.h"
#include "backend/stubs/conv.h"
#include "ops/op_helpers.h"
#include "tiny/nn/pooling.h"

// The kernels these ops call, each with the work of one call on the modelled GPU.
namespace tiny {
namespace {
// Pooling reads its input once and writes its output (and max pooling's
// indices); the backward reads the output gradient (and indices) and writes
// the input gradient. Windows are summed or compared at one FLOP an element.
KernelWork pool2d_work(const Tensor& out, const Tensor& indices, const Tensor& input,
                       const kernels::Pool2dGeometry& g) {
  KernelWork w{g.kind == kernels::PoolKind::Max   ? "max_pool2d"
               : g.kind == kernels::PoolKind::Avg ? "avg_pool2d"
                                                  : "adaptive_avg_pool2d",
               cost_of({input, out, indices})};
  w.cost.flops = static_cast<double>(out.numel()) * static_cast<double>(g.kernel_h * g.kernel_w);
  return w;
}
KernelWork pool2d_backward_work(const Tensor& grad_input, const Tensor& grad_out, const Tensor& indices,
                                const kernels::Pool2dGeometry& g) {
  return {g.kind == kernels::PoolKind::Max   ? "max_pool2d_backward"
          : g.kind == kernels::PoolKind::Avg ? "avg_pool2d_backward"
                                             : "adaptive_avg_pool2d_backward",
          cost_of({grad_out, indices, grad_input})};
}
}  // namespace

TINY_DEFINE_DISPATCH(pool2d_stub, "pool2d", pool2d_work);
TINY_DEFINE_DISPATCH(pool2d_backward_stub, "pool2d_backward", pool2d_backward_work);
}  // namespace tiny

namespace tiny::nn {
namespace {
// PyTorch's integer kernel_size=k (or stride, padding, dilation) as (k, k); stride=None stays None.
Size2 both(int64_t k) { return {k, k}; }
std::optional<Size2> both(std::optional<int64_t> k) { return k ? std::optional<Size2>(both(*k)) : std::nullopt; }
}  // namespace
}  // namespace tiny::nn

namespace tiny::nn::functional {

namespace {

using kernels::PoolKind;
using kernels::Pool2dGeometry;

std::string size2_str(const Size2& v) { return "(" + std::to_string(v[0]) + ", " + std::to_string(v[1]) + ")"; }

// PyTorch's pooling_output_shape: floor (or ceil) of the window count, where a
// ceil-mode last window must start inside the input or its left padding.
int64_t pooled_size(int64_t in, int64_t kernel, int64_t pad, int64_t stride, int64_t dilation, bool ceil_mode) {
  const int64_t numerator = in + 2 * pad - dilation * (kernel - 1) - 1 + (ceil_mode ? stride - 1 : 0);
  int64_t out = (numerator >= 0 ? numerator / stride : -((-numerator + stride - 1) / stride)) + 1;
  if (ceil_mode && (out - 1) * stride >= in + pad) --out;
  return out;
}

// The input as [N, C, H, W] (an unbatched [C, H, W] gets N = 1), contiguous.
Tensor as_batched(const Tensor& x, const char* op) {
  TINY_CHECK(x.defined(), ValueError, op, ": input must be a defined tensor");
  bool ok = x.dim() == 3 || x.dim() == 4;
  for (int64_t d = 1; ok && d < x.dim(); ++d) ok = x.size(d) != 0;
  TINY_CHECK(ok, ShapeError, op, ": non-empty 3D or 4D (batch mode) tensor expected for input, but got input of size ",
             shape_str(x.sizes()), " (pool [N, C, H, W] or [C, H, W]; add a batch dimension with x.unsqueeze(0))");
  TINY_CHECK(x.is_floating_point(), DtypeError, "\"", op, "\" not implemented for '", dtype_name(x.dtype()),
             "' (convert the input: x.to(tiny::kFloat32))");
  return (x.dim() == 3 ? x.unsqueeze(0) : x).contiguous();
}

Pool2dGeometry window_geometry(PoolKind kind, const Tensor& x4, const Size2& kernel, const Size2& stride,
                               const Size2& padding, const Size2& dilation, bool ceil_mode, const char* op) {
  TINY_CHECK(kernel[0] > 0 && kernel[1] > 0, ValueError, op, ": kernel size should be greater than zero, but got kH: ",
             kernel[0], " kW: ", kernel[1]);
  TINY_CHECK(stride[0] > 0 && stride[1] > 0, ValueError, op, ": stride should be greater than zero, but got dH: ",
             stride[0], " dW: ", stride[1]);
  TINY_CHECK(dilation[0] > 0 && dilation[1] > 0, ValueError, op,
             ": dilation should be greater than zero, but got dilationH: ", dilation[0], " dilationW: ", dilation[1]);
  TINY_CHECK(padding[0] >= 0 && padding[1] >= 0 && padding[0] <= kernel[0] / 2 && padding[1] <= kernel[1] / 2,
             ValueError, op, ": pad should be smaller than or equal to half of kernel size, but got padW = ",
             padding[1], ", padH = ", padding[0], ", kW = ", kernel[1], ", kH = ", kernel[0],
             " (use padding <= kernel_size / 2)");
  Pool2dGeometry g;
  g.kind = kind;
  g.planes = x4.size(0) * x4.size(1);
  g.height = x4.size(2), g.width = x4.size(3);
  g.kernel_h = kernel[0], g.kernel_w = kernel[1];
  g.stride_h = stride[0], g.stride_w = stride[1];
  g.pad_h = padding[0], g.pad_w = padding[1];
  g.dilation_h = dilation[0], g.dilation_w = dilation[1];
  g.out_h = pooled_size(g.height, kernel[0], padding[0], stride[0], dilation[0], ceil_mode);
  g.out_w = pooled_size(g.width, kernel[1], padding[1], stride[1], dilation[1], ceil_mode);
  TINY_CHECK(g.out_h >= 1 && g.out_w >= 1, ShapeError, op, ": Given input size: (", x4.size(1), "x", g.height, "x",
             g.width, "). Calculated output size: (", x4.size(1), "x", g.out_h, "x", g.out_w,
             "). Output size is too small (use a smaller kernel, or padding)");
  return g;
}

// Runs the pooling kernel and records its backward (the gather of conv_ops.h).
std::pair<Tensor, Tensor> run_pool(const Tensor& x_in, const Tensor& x4, const Pool2dGeometry& g, const char* node) {
  const bool is_max = g.kind == PoolKind::Max;
  Tensor out = make_tensor({x4.size(0), x4.size(1), g.out_h, g.out_w}, x4.dtype(), x4.device());
  Tensor indices = is_max ? make_tensor(out.sizes(), kInt64, x4.device()) : Tensor();
  pool2d_stub(x4.device())(out, indices, x4, g);
  if (autograd::should_record({x4})) {
    const IntArrayRef in_shape = x4.sizes();
    autograd::record(node, {x4}, {out}, {autograd::save(indices)}, [g, in_shape](const autograd::BackwardArgs& args) {
      const Tensor go = args.grad().contiguous();
      Tensor grad_input = make_tensor(in_shape, go.dtype(), go.device());
      pool2d_backward_stub(go.device())(grad_input, go, args.saved[0], g);
      return std::vector<Tensor>{grad_input};
    });
  }
  if (x_in.dim() == 3) return {out.squeeze(0), is_max ? indices.squeeze(0) : indices};
  return {out, indices};
}

}  // namespace

std::pair<Tensor, Tensor> max_pool2d_with_indices(const Tensor& input, Size2 kernel_size, std::optional<Size2> stride,
                                                  Size2 padding, Size2 dilation, bool ceil_mode) {
  TINY_OP_SCOPE("max_pool2d", input);
  const Tensor x4 = as_batched(input, "max_pool2d");
  const Pool2dGeometry g = window_geometry(PoolKind::Max, x4, kernel_size, stride.value_or(kernel_size), padding,
                                           dilation, ceil_mode, "max_pool2d");
  return run_pool(input, x4, g, "MaxPool2DWithIndicesBackward0");
}

Tensor max_pool2d(const Tensor& input, Size2 kernel_size, std::optional<Size2> stride, Size2 padding, Size2 dilation,
                  bool ceil_mode) {
  return max_pool2d_with_indices(input, kernel_size, stride, padding, dilation, ceil_mode).first;
}

Tensor max_pool2d(const Tensor& input, int64_t kernel_size, std::optional<int64_t> stride, int64_t padding,
                  int64_t dilation, bool ceil_mode) {
  return max_pool2d(input, both(kernel_size), both(stride), both(padding), both(dilation), ceil_mode);
}

Tensor avg_pool2d(const Tensor& input, Size2 kernel_size, std::optional<Size2> stride, Size2 padding, bool ceil_mode,
                  bool count_include_pad, std::optional<int64_t> divisor_override) {
  TINY_OP_SCOPE("avg_pool2d", input);
  const Tensor x4 = as_batched(input, "avg_pool2d");
  TINY_CHECK(!divisor_override || *divisor_override != 0, ValueError, "avg_pool2d: divisor must be not zero",
             " (pass std::nullopt to divide by the window size)");
  Pool2dGeometry g = window_geometry(PoolKind::Avg, x4, kernel_size, stride.value_or(kernel_size), padding, {1, 1},
                                     ceil_mode, "avg_pool2d");
  g.count_include_pad = count_include_pad;
  g.divisor_override = divisor_override.value_or(0);
  return run_pool(input, x4, g, "AvgPool2DBackward0").first;
}

Tensor avg_pool2d(const Tensor& input, int64_t kernel_size, std::optional<int64_t> stride, int64_t padding,
                  bool ceil_mode, bool count_include_pad, std::optional<int64_t> divisor_override) {
  return avg_pool2d(input, both(kernel_size), both(stride), both(padding), ceil_mode, count_include_pad,
                    divisor_override);
}

Tensor adaptive_avg_pool2d(const Tensor& input, Size2 output_size) {
  TINY_OP_SCOPE("adaptive_avg_pool2d", input);
  TINY_CHECK(output_size[0] >= 0 && output_size[1] >= 0, ValueError,
             "adaptive_avg_pool2d: elements of output_size must be greater than or equal to 0 but received ",
             size2_str(output_size));
  const Tensor x4 = as_batched(input, "adaptive_avg_pool2d");
  Pool2dGeometry g;
  g.kind = PoolKind::AdaptiveAvg;
  g.planes = x4.size(0) * x4.size(1);
  g.height = x4.size(2), g.width = x4.size(3);
  g.out_h = output_size[0], g.out_w = output_size[1];
  // The largest window, for the kernels' work estimate: ceil(H / oH) + 1 rows.
  g.kernel_h = g.out_h > 0 ? (g.height + g.out_h - 1) / g.out_h + 1 : 1;
  g.kernel_w = g.out_w > 0 ? (g.width + g.out_w - 1) / g.out_w + 1 : 1;
  return run_pool(input, x4, g, "AdaptiveAvgPool2DBackward0").first;
}

}  // namespace tiny::nn::functional

namespace tiny::nn {

namespace {
std::string tuple_str(const Size2& v) { return "(" + std::to_string(v[0]) + ", " + std::to_string(v[1]) + ")"; }
// A size as PyTorch prints it: an integer when the module was built from integers, else a tuple.
std::string size_str(const Size2& v, bool given_as_int) { return given_as_int ? std::to_string(v[0]) : tuple_str(v); }
const char* py_bool(bool b) { return b ? "True" : "False"; }
}  // namespace

MaxPool2d::MaxPool2d(Size2 kernel_size_, std::optional<Size2> stride_, Size2 padding_, Size2 dilation_, bool ceil_mode_)
    : kernel_size(kernel_size_), stride(stride_.value_or(kernel_size_)), padding(padding_), dilation(dilation_),
      ceil_mode(ceil_mode_) {}
MaxPool2d::MaxPool2d(int64_t kernel_size_, std::optional<int64_t> stride_, int64_t padding_, int64_t dilation_,
                     bool ceil_mode_)
    : MaxPool2d(both(kernel_size_), both(stride_), both(padding_), both(dilation_), ceil_mode_) {
  given_as_ints_ = true;
}
Tensor MaxPool2d::forward(const Tensor& x) {
  return functional::max_pool2d(x, kernel_size, stride, padding, dilation, ceil_mode);
}
std::shared_ptr<Module> MaxPool2d::clone(const std::optional<Device>& device) const {
  auto copy = std::make_shared<MaxPool2d>(kernel_size, stride, padding, dilation, ceil_mode);
  copy->given_as_ints_ = given_as_ints_;
  copy_state_into(*copy, device);
  return copy;
}
std::string MaxPool2d::extra_repr() const {
  const bool ints = given_as_ints_;
  return "kernel_size=" + size_str(kernel_size, ints) + ", stride=" + size_str(stride, ints) + ", padding=" +
         size_str(padding, ints) + ", dilation=" + size_str(dilation, ints) + ", ceil_mode=" + py_bool(ceil_mode);
}

AvgPool2d::AvgPool2d(Size2 kernel_size_, std::optional<Size2> stride_, Size2 padding_, bool ceil_mode_,
                     bool count_include_pad_, std::optional<int64_t> divisor_override_)
    : kernel_size(kernel_size_), stride(stride_.value_or(kernel_size_)), padding(padding_), ceil_mode(ceil_mode_),
      count_include_pad(count_include_pad_), divisor_override(divisor_override_) {}
AvgPool2d::AvgPool2d(int64_t kernel_size_, std::optional<int64_t> stride_, int64_t padding_, bool ceil_mode_,
                     bool count_include_pad_, std::optional<int64_t> divisor_override_)
    : AvgPool2d(both(kernel_size_), both(stride_), both(padding_), ceil_mode_, count_include_pad_,
                divisor_override_) {
  given_as_ints_ = true;
}
Tensor AvgPool2d::forward(const Tensor& x) {
  return functional::avg_pool2d(x, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override);
}
std::shared_ptr<Module> AvgPool2d::clone(const std::optional<Device>& device) const {
  auto copy = std::make_shared<AvgPool2d>(kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override);
  copy->given_as_ints_ = given_as_ints_;
  copy_state_into(*copy, device);
  return copy;
}
std::string AvgPool2d::extra_repr() const {
  return "kernel_size=" + size_str(kernel_size, given_as_ints_) + ", stride=" + size_str(stride, given_as_ints_) +
         ", padding=" + size_str(padding, given_as_ints_);
}

AdaptiveAvgPool2d::AdaptiveAvgPool2d(Size2 output_size_) : output_size(output_size_) {}
Tensor AdaptiveAvgPool2d::forward(const Tensor& x) { return functional::adaptive_avg_pool2d(x, output_size); }
std::shared_ptr<Module> AdaptiveAvgPool2d::clone(const std::optional<Device>& device) const {
  auto copy = std::make_shared<AdaptiveAvgPool2d>(output_size);
  copy_state_into(*copy, device);
  return copy;
}
std::string AdaptiveAvgPool2d::extra_repr() const { return "output_size=" + tuple_str(output_size); }

}  // namespace tiny::nn
