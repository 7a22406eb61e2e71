// tiny::nn::functional::conv2d: im2col + GEMM, PyTorch's slow_conv2d.
//
// For a chunk of B images, im2col copies every input patch into a column of
// cols [C*KH*KW, B*OH*OW]; each group's output rows are then one GEMM,
// weight_g [OC/g, C/g*KH*KW] @ cols_g, and one pointwise pass puts
// [OC, B, OH*OW] into the NCHW output, adding the bias (a single image's GEMM
// writes its output in place, onto the bias). Backward:
// grad_weight_g += grad_out_g @ cols_g^T (im2col recomputed from the saved
// input, which is what PyTorch saves too: the columns are KH*KW times the
// input), grad_cols_g = weight_g^T @ grad_out_g, then col2im. Chunks keep the
// columns under conv_column_budget() elements, so memory stays bounded for big
// images. On a GPU the GEMMs are cuBLAS's (no cuDNN); on the emulated GPU each
// piece costs its modelled time: the GEMMs, im2col's and col2im's bytes and
// the layout copies.
#include <algorithm>
#include <cmath>
#include <string>

#include "amp/autocast_policy.h"
#include "backend/define_dispatch.h"
#include "backend/stubs/conv.h"
#include "ops/op_helpers.h"
#include "tiny/nn/conv.h"
#include "tiny/nn/init.h"

// The kernels these ops call, each with the work of one call on the modelled GPU.
namespace tiny {
namespace {
// im2col reads each input element once (caches serve the overlapping
// windows) and writes every column entry; col2im reads every column entry and
// writes each input element. A convolution then costs its GEMMs plus these bytes.
KernelWork im2col_work(const Tensor& cols, const Tensor& input, const kernels::Conv2dGeometry&) {
  return {"im2col", cost_of({input, cols})};
}
KernelWork col2im_work(const Tensor& grad_input, const Tensor& cols, const kernels::Conv2dGeometry&) {
  return {"col2im", cost_of({cols, grad_input})};
}
}  // namespace

TINY_DEFINE_DISPATCH(im2col_stub, "im2col", im2col_work);
TINY_DEFINE_DISPATCH(col2im_stub, "col2im", col2im_work);
}  // namespace tiny

namespace tiny::ops {

int64_t& conv_column_budget() {
  static int64_t budget = int64_t(1) << 25;  // 128 MiB of float32 columns
  return budget;
}

}  // namespace tiny::ops

namespace tiny::nn::functional {

namespace {

using kernels::Conv2dGeometry;


std::string pair_str(const std::array<int64_t, 2>& v) {
  return "(" + std::to_string(v[0]) + ", " + std::to_string(v[1]) + ")";
}

struct ConvPlan {
  Conv2dGeometry g;  // batch = images per chunk
  int64_t n = 0, out_channels = 0, groups = 1, chunk = 1;
  int64_t rows_per_group() const { return g.col_rows() / groups; }
  int64_t out_per_group() const { return out_channels / groups; }
  int64_t plane() const { return g.out_h * g.out_w; }
};

void check_conv_args(const Tensor& x, const Tensor& weight, const Tensor& bias, const Conv2dOptions& o) {
  TINY_CHECK(x.defined() && weight.defined(), ValueError, "conv2d: input and weight must be defined tensors");
  TINY_CHECK(weight.dim() == 4, ShapeError, "conv2d: weight must be 4-D [out_channels, in_channels/groups, kH, kW], ",
             "got shape ", shape_str(weight.sizes()));
  TINY_CHECK(x.dim() == 3 || x.dim() == 4, ShapeError, "Expected 3D (unbatched) or 4D (batched) input to conv2d, ",
             "but got input of size: ", shape_str(x.sizes()));
  TINY_CHECK(x.is_floating_point(), DtypeError, "conv2d: expected a floating-point input, got ",
             dtype_name(x.dtype()), " (convert it: x.to(tiny::kFloat32))");
  TINY_CHECK(x.dtype() == weight.dtype(), DtypeError, "Input type (", dtype_name(x.dtype()), ") and weight type (",
             dtype_name(weight.dtype()), ") should be the same: convert one, e.g. x.to(weight.dtype())");
  ops::check_same_device(x, weight, "conv2d");
  if (bias.defined()) {
    TINY_CHECK(bias.dtype() == x.dtype(), DtypeError, "Input type (", dtype_name(x.dtype()), ") and bias type (",
               dtype_name(bias.dtype()), ") should be the same: convert one, e.g. bias.to(x.dtype())");
    ops::check_same_device(x, bias, "conv2d");
  }
  TINY_CHECK(o.groups > 0, ValueError, "non-positive groups is not supported (got groups=", o.groups, ")");
  for (int i = 0; i < 2; ++i) {
    TINY_CHECK(o.stride[i] > 0, ValueError, "non-positive stride is not supported (got stride=", pair_str(o.stride),
               ")");
    TINY_CHECK(o.padding[i] >= 0, ValueError, "negative padding is not supported (got padding=",
               pair_str(o.padding), ")");
    TINY_CHECK(o.dilation[i] > 0, ValueError, "dilation should be greater than zero (got dilation=",
               pair_str(o.dilation), ")");
  }
}

ConvPlan plan_conv(const Tensor& x4, const Tensor& weight, const Tensor& bias, const Conv2dOptions& o) {
  ConvPlan p;
  p.groups = o.groups;
  p.n = x4.size(0);
  p.out_channels = weight.size(0);
  const int64_t channels = x4.size(1), h = x4.size(2), w = x4.size(3);
  const int64_t kh = weight.size(2), kw = weight.size(3);
  TINY_CHECK(p.out_channels % o.groups == 0, ShapeError, "Given groups=", o.groups,
             ", expected weight to be divisible by ", o.groups, " at dimension 0, but got weight of size ",
             shape_str(weight.sizes()), " instead (out_channels must be a multiple of groups)");
  TINY_CHECK(channels == weight.size(1) * o.groups, ShapeError, "Given groups=", o.groups, ", weight of size ",
             shape_str(weight.sizes()), ", expected input", shape_str(x4.sizes()), " to have ",
             weight.size(1) * o.groups, " channels, but got ", channels,
             " channels instead (in_channels must equal weight.size(1) * groups)");
  if (bias.defined()) {
    TINY_CHECK(bias.dim() == 1 && bias.size(0) == p.out_channels, ShapeError, "Given weight of size ",
               shape_str(weight.sizes()), ", expected bias to be 1-dimensional with ", p.out_channels,
               " elements, but got bias of size ", shape_str(bias.sizes()), " instead");
  }
  const int64_t ph = h + 2 * o.padding[0], pw = w + 2 * o.padding[1];
  const int64_t span_h = o.dilation[0] * (kh - 1) + 1, span_w = o.dilation[1] * (kw - 1) + 1;
  TINY_CHECK(ph >= span_h && pw >= span_w, ShapeError, "Calculated padded input size per channel: (", ph, " x ", pw,
             "). Kernel size: (", span_h, " x ", span_w, "). Kernel size can't be greater than actual input size",
             " (pad the input, or use a smaller kernel or dilation)");
  Conv2dGeometry& g = p.g;
  g.channels = channels, g.height = h, g.width = w, g.kernel_h = kh, g.kernel_w = kw;
  g.stride_h = o.stride[0], g.stride_w = o.stride[1], g.pad_h = o.padding[0], g.pad_w = o.padding[1];
  g.dilation_h = o.dilation[0], g.dilation_w = o.dilation[1];
  g.out_h = (ph - span_h) / o.stride[0] + 1;
  g.out_w = (pw - span_w) / o.stride[1] + 1;
  const int64_t per_image = std::max<int64_t>(1, g.col_rows() * g.out_h * g.out_w);
  p.chunk = std::clamp<int64_t>(ops::conv_column_budget() / per_image, 1, std::max<int64_t>(1, p.n));
  return p;
}

// The columns of images [n0, n0 + count) of the contiguous input.
Tensor columns(const ConvPlan& p, const Tensor& x, int64_t n0, int64_t count) {
  Conv2dGeometry g = p.g;
  g.batch = count;
  Tensor cols = make_tensor({g.col_rows(), g.col_cols()}, x.dtype(), x.device());
  im2col_stub(x.device())(cols, x.narrow(0, n0, count), g);
  return cols;
}

// [OC, count * OH*OW] rows of images [n0, n0 + count) of an NCHW tensor (a view when count is 1).
Tensor to_rows(const Tensor& t, int64_t n0, int64_t count, int64_t oc, int64_t plane) {
  if (count == 1) return t.select(0, n0).reshape({oc, plane});
  return t.narrow(0, n0, count).reshape({count, oc, plane}).permute({1, 0, 2}).contiguous().view({oc, count * plane});
}

Tensor conv2d_forward(const ConvPlan& p, const Tensor& x, const Tensor& w2d, const Tensor& bias) {
  const int64_t oc = p.out_channels, plane = p.plane(), ocg = p.out_per_group(), rg = p.rows_per_group();
  const IntArrayRef out_shape{p.n, oc, p.g.out_h, p.g.out_w};
  Tensor out;
  for (int64_t n0 = 0; n0 < p.n; n0 += p.chunk) {
    const int64_t count = std::min(p.chunk, p.n - n0);
    const Tensor cols = columns(p, x, n0, count);
    if (count == 1) {
      // One image: its output is already [OC, OH*OW]; the GEMM adds onto the bias there (beta = 1).
      if (!out.defined()) out = make_tensor(out_shape, x.dtype(), x.device());
      const Tensor rows = out.select(0, n0).view({oc, plane});
      if (bias.defined()) rows.copy_(bias.view({oc, 1}).expand({oc, plane}));
      for (int64_t grp = 0; grp < p.groups; ++grp) {
        ops::gemm_into(rows.narrow(0, grp * ocg, ocg), w2d.narrow(0, grp * ocg, ocg), cols.narrow(0, grp * rg, rg),
                       1.0, bias.defined() ? 1.0 : 0.0);
      }
      continue;
    }
    const Tensor rows = make_tensor({oc, count * plane}, x.dtype(), x.device());
    for (int64_t grp = 0; grp < p.groups; ++grp) {
      ops::gemm_into(rows.narrow(0, grp * ocg, ocg), w2d.narrow(0, grp * ocg, ocg), cols.narrow(0, grp * rg, rg), 1.0,
                     0.0);
    }
    // [OC, B, L] -> [B, OC, L], adding the bias on the way: one pass.
    const Tensor images = rows.view({oc, count, plane}).permute({1, 0, 2});
    Tensor y = bias.defined() ? images + bias.view({1, oc, 1}) : images.contiguous();
    if (!y.is_contiguous()) y = y.contiguous();
    if (count == p.n) {
      out = y.view(out_shape);  // the whole batch in one chunk: this is the output
    } else {
      if (!out.defined()) out = make_tensor(out_shape, x.dtype(), x.device());
      out.narrow(0, n0, count).view({count, oc, plane}).copy_(y);
    }
  }
  if (!out.defined()) out = make_tensor(out_shape, x.dtype(), x.device());  // an empty batch
  return out;
}

std::vector<Tensor> conv2d_backward(const ConvPlan& p, const Tensor& g, const Tensor& x, const Tensor& weight,
                                    const std::vector<bool>& needs) {
  const int64_t oc = p.out_channels, plane = p.plane(), ocg = p.out_per_group(), rg = p.rows_per_group();
  const Tensor go = g.contiguous();
  const Tensor w2d = weight.reshape({oc, rg});
  Tensor grad_x, grad_w, grad_b;
  if (needs[0]) grad_x = make_tensor(x.sizes(), x.dtype(), x.device());
  if (needs[1]) grad_w = make_tensor({oc, rg}, x.dtype(), x.device());
  for (int64_t n0 = 0; n0 < p.n; n0 += p.chunk) {
    const int64_t count = std::min(p.chunk, p.n - n0);
    const Tensor rows = to_rows(go, n0, count, oc, plane);
    if (needs[1]) {
      const Tensor cols = columns(p, x, n0, count);
      for (int64_t grp = 0; grp < p.groups; ++grp) {
        ops::gemm_into(grad_w.narrow(0, grp * ocg, ocg), rows.narrow(0, grp * ocg, ocg),
                       cols.narrow(0, grp * rg, rg).t(), 1.0, n0 == 0 ? 0.0 : 1.0);
      }
    }
    if (needs[0]) {
      Tensor grad_cols = make_tensor({p.g.col_rows(), count * plane}, x.dtype(), x.device());
      for (int64_t grp = 0; grp < p.groups; ++grp) {
        ops::gemm_into(grad_cols.narrow(0, grp * rg, rg), w2d.narrow(0, grp * ocg, ocg).t(),
                       rows.narrow(0, grp * ocg, ocg), 1.0, 0.0);
      }
      Conv2dGeometry geo = p.g;
      geo.batch = count;
      col2im_stub(x.device())(grad_x.narrow(0, n0, count), grad_cols, geo);
    }
  }
  if (needs[1] && p.n == 0) grad_w.fill_(0);
  if (needs[2]) grad_b = go.sum({0, 2, 3});
  return {grad_x, needs[1] ? grad_w.view(weight.sizes()) : Tensor(), grad_b};
}

}  // namespace

Tensor conv2d(const Tensor& input, const Tensor& weight_in, const Tensor& bias_in, const Conv2dOptions& options) {
  // In autocast's lower-precision list, as PyTorch's conv2d.
  const Tensor x_in = amp::detail::lower(input), weight = amp::detail::lower(weight_in),
               bias = amp::detail::lower(bias_in);
  TINY_OP_SCOPE("conv2d", x_in, weight, bias);
  check_conv_args(x_in, weight, bias, options);
  const bool unbatched = x_in.dim() == 3;
  const Tensor x = (unbatched ? x_in.unsqueeze(0) : x_in).contiguous();
  const ConvPlan plan = plan_conv(x, weight, bias, options);
  Tensor out;
  {
    NoGradGuard no_grad;  // the columns, GEMMs and copies are plumbing: one node records the op
    out = conv2d_forward(plan, x, weight.reshape({plan.out_channels, plan.rows_per_group()}), bias);
  }
  if (autograd::should_record({x, weight, bias})) {
    autograd::record("ConvolutionBackward0", {x, weight, bias}, {out}, {autograd::save(x), autograd::save(weight)},
                     [plan](const autograd::BackwardArgs& args) {
                       NoGradGuard no_grad;
                       return conv2d_backward(plan, args.grad(), args.saved[0], args.saved[1], args.needs);
                     });
  }
  return unbatched ? out.squeeze(0) : out;
}

}  // namespace tiny::nn::functional

namespace tiny::nn {

Conv2d::Conv2d(int64_t in_channels_, int64_t out_channels_, std::array<int64_t, 2> kernel_size_,
               Conv2dOptions options_, bool with_bias)
    : in_channels(in_channels_), out_channels(out_channels_), kernel_size(kernel_size_), options(options_) {
  TINY_CHECK(options.groups > 0, ValueError, "groups must be a positive integer (got groups=", options.groups, ")");
  TINY_CHECK(in_channels % options.groups == 0, ValueError, "in_channels must be divisible by groups (got ",
             "in_channels=", in_channels, ", groups=", options.groups, ")");
  TINY_CHECK(out_channels % options.groups == 0, ValueError, "out_channels must be divisible by groups (got ",
             "out_channels=", out_channels, ", groups=", options.groups, ")");
  TINY_CHECK(kernel_size[0] > 0 && kernel_size[1] > 0, ValueError, "Conv2d: kernel_size must be positive, got (",
             kernel_size[0], ", ", kernel_size[1], ")");
  weight = register_parameter("weight", empty({out_channels, in_channels / options.groups, kernel_size[0],
                                               kernel_size[1]}));
  bias = register_parameter("bias", with_bias ? empty({out_channels}) : Tensor());
  reset_parameters();
}

void Conv2d::reset_parameters() {
  // PyTorch's _ConvNd.reset_parameters: kaiming_uniform_(a=sqrt(5)), the bias uniform in ±1/sqrt(fan_in).
  init::kaiming_uniform_(weight, std::sqrt(5.0));
  if (bias.defined()) {
    const int64_t fan_in = (in_channels / options.groups) * kernel_size[0] * kernel_size[1];
    const double bound = fan_in > 0 ? 1.0 / std::sqrt(static_cast<double>(fan_in)) : 0.0;
    init::uniform_(bias, -bound, bound);
  }
}

Tensor Conv2d::forward(const Tensor& x) { return functional::conv2d(x, weight, bias, options); }

std::string Conv2d::extra_repr() const {
  auto tuple = [](const std::array<int64_t, 2>& v) {
    return "(" + std::to_string(v[0]) + ", " + std::to_string(v[1]) + ")";
  };
  std::string s = tiny::detail::concat(in_channels, ", ", out_channels, ", kernel_size=", tuple(kernel_size),
                                       ", stride=", tuple(options.stride));
  if (options.padding != std::array<int64_t, 2>{0, 0}) s += ", padding=" + tuple(options.padding);
  if (options.dilation != std::array<int64_t, 2>{1, 1}) s += ", dilation=" + tuple(options.dilation);
  if (options.groups != 1) s += tiny::detail::concat(", groups=", options.groups);
  if (!bias.defined()) s += ", bias=False";
  return s;
}

}  // namespace tiny::nn

namespace tiny::nn {

std::shared_ptr<Module> Conv2d::clone(const std::optional<Device>& device) const {
  std::shared_ptr<Conv2d> copy;
  {
    detail::GeneratorStateGuard keep_random_state;  // the skeleton's draws are thrown away
    copy = std::make_shared<Conv2d>(options.groups, options.groups, std::array<int64_t, 2>{1, 1}, options,
                                    bias.defined());
  }
  copy->in_channels = in_channels;
  copy->out_channels = out_channels;
  copy->kernel_size = kernel_size;
  copy_state_into(*copy, device);
  return copy;
}

}  // namespace tiny::nn
