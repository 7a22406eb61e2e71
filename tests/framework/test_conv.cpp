// The vision layers of issue 23 (item 1): conv2d, max/avg/adaptive-avg
// pooling and batch norm, as functions and modules. Checked against PyTorch
// 1.13 (tests/parity/conv_fixtures, written by make_conv_fixtures.py) forward
// and backward, with contiguous and non-contiguous inputs, on the CPU and the
// emulated GPU (float32; float64 for the _f64 case; then bfloat16/float16
// against the float32 values); float64 gradient checks; the CPU and the
// emulated GPU giving the same bits; the modelled cost of a convolution (its
// GEMM plus im2col's bytes); the modules' state, modes and repr; bad inputs.
//
// Tolerances: float32 against PyTorch, |tiny - torch| <= 1e-5 (1 + |torch|)
// (DESIGN.md section 5: PyTorch's CPU convolution is mkldnn's, which sums in
// another order than im2col + OpenBLAS); 16-bit inputs 3e-2 of the tensor's
// largest magnitude (inputs rounded to 8 or 11 significant bits).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "ops/op_helpers.h"  // first: kernels/math.h before tiny/ops.h
#include "gpu/model/cost.h"
#include "gpu/model/device_model.h"
#include "gradcheck.h"
#include "tiny/cuda.h"
#include "tiny/io.h"
#include "tiny/nn/nn.h"
#include "tiny/ops.h"

#ifndef TINY_PARITY_DIR
#define TINY_PARITY_DIR "tests/parity/fixtures"
#endif

namespace fs = std::filesystem;
namespace F = tiny::nn::functional;
using tiny::Tensor;
using tiny::nn::Conv2dOptions;
using tiny::nn::Size2;
using Inputs = std::map<std::string, Tensor>;

namespace {

const std::string kDir = std::string(TINY_PARITY_DIR) + "/../conv_fixtures";

struct Case {
  // Returns the output (and, for max pooling with indices, the indices second).
  std::function<std::vector<Tensor>(const Inputs&)> fn;
  std::vector<std::string> grads;  // inputs that get a gradient
};

Tensor opt(const Inputs& a, const std::string& k) { return a.count(k) ? a.at(k) : Tensor(); }

Conv2dOptions conv_opts(Size2 stride, Size2 padding, Size2 dilation = {1, 1}, int64_t groups = 1) {
  Conv2dOptions o;
  o.stride = stride, o.padding = padding, o.dilation = dilation, o.groups = groups;
  return o;
}

std::function<std::vector<Tensor>(const Inputs&)> one(std::function<Tensor(const Inputs&)> f) {
  return [f](const Inputs& a) { return std::vector<Tensor>{f(a)}; };
}

std::function<std::vector<Tensor>(const Inputs&)> bn(bool training, double momentum = 0.1, double eps = 1e-5) {
  return one([=](const Inputs& a) {
    return F::batch_norm(a.at("x"), a.at("running_mean"), a.at("running_var"), opt(a, "weight"), opt(a, "bias"),
                         training, momentum, eps);
  });
}

// Mirrors CASES in tests/parity/make_conv_fixtures.py.
const std::map<std::string, Case>& table() {
  const std::vector<std::string> xwb = {"x", "w", "b"}, xw = {"x", "w"}, x = {"x"}, xbn = {"x", "weight", "bias"};
  static const std::map<std::string, Case> t = {
      {"conv_basic", {one([](const Inputs& a) { return F::conv2d(a.at("x"), a.at("w"), a.at("b")); }), xwb}},
      {"conv_stride_pad",
       {one([](const Inputs& a) { return F::conv2d(a.at("x"), a.at("w"), a.at("b"), conv_opts({2, 1}, {1, 2})); }),
        xwb}},
      {"conv_dilation_nobias",
       {one([](const Inputs& a) {
          return F::conv2d(a.at("x"), a.at("w"), Tensor(), conv_opts({1, 1}, {1, 1}, {2, 3}));
        }),
        xw}},
      {"conv_groups",
       {one([](const Inputs& a) {
          return F::conv2d(a.at("x"), a.at("w"), a.at("b"), conv_opts({2, 2}, {1, 1}, {1, 1}, 2));
        }),
        xwb}},
      {"conv_depthwise",
       {one([](const Inputs& a) {
          return F::conv2d(a.at("x"), a.at("w"), Tensor(), Conv2dOptions().set_padding(1).set_groups(4));
        }),
        xw}},
      {"conv_1x1", {one([](const Inputs& a) { return F::conv2d(a.at("x"), a.at("w"), a.at("b")); }), xwb}},
      {"conv_unbatched",
       {one([](const Inputs& a) { return F::conv2d(a.at("x"), a.at("w"), a.at("b"), Conv2dOptions().set_padding(1)); }),
        xwb}},
      {"conv_wide",
       {one([](const Inputs& a) { return F::conv2d(a.at("x"), a.at("w"), a.at("b"), Conv2dOptions().set_padding(1)); }),
        xwb}},
      {"conv_kernel_equals_padded_input",
       {one([](const Inputs& a) { return F::conv2d(a.at("x"), a.at("w"), a.at("b"), Conv2dOptions().set_padding(1)); }),
        xwb}},
      {"conv_f64",
       {one([](const Inputs& a) { return F::conv2d(a.at("x"), a.at("w"), a.at("b"), conv_opts({1, 2}, {1, 0})); }),
        xwb}},
      {"maxpool_2", {one([](const Inputs& a) { return F::max_pool2d(a.at("x"), 2); }), x}},
      {"maxpool_3s2p1",
       {one([](const Inputs& a) { return F::max_pool2d(a.at("x"), {3, 3}, Size2{2, 2}, {1, 1}); }), x}},
      {"maxpool_ceil",
       {one([](const Inputs& a) { return F::max_pool2d(a.at("x"), {3, 3}, Size2{2, 2}, {0, 0}, {1, 1}, true); }), x}},
      {"maxpool_dilation",
       {one([](const Inputs& a) { return F::max_pool2d(a.at("x"), {3, 2}, Size2{1, 1}, {1, 1}, {2, 2}); }), x}},
      {"maxpool_indices",
       {[](const Inputs& a) {
          auto [out, idx] = F::max_pool2d_with_indices(a.at("x"), {2, 3}, Size2{2, 1});
          return std::vector<Tensor>{out, idx};
        },
        x}},
      {"maxpool_unbatched", {one([](const Inputs& a) { return tiny::nn::MaxPool2d(2)(a.at("x")); }), x}},
      {"avgpool_2", {one([](const Inputs& a) { return tiny::nn::AvgPool2d(2)(a.at("x")); }), x}},
      {"avgpool_3s2p1",
       {one([](const Inputs& a) { return F::avg_pool2d(a.at("x"), {3, 3}, Size2{2, 2}, {1, 1}); }), x}},
      {"avgpool_3s2p1_exclude_pad",
       {one([](const Inputs& a) { return F::avg_pool2d(a.at("x"), {3, 3}, Size2{2, 2}, {1, 1}, false, false); }), x}},
      {"avgpool_ceil",
       {one([](const Inputs& a) { return F::avg_pool2d(a.at("x"), {3, 3}, Size2{2, 2}, {1, 1}, true); }), x}},
      {"avgpool_divisor",
       {one([](const Inputs& a) {
          return F::avg_pool2d(a.at("x"), {2, 3}, std::nullopt, {1, 1}, false, true, 5);
        }),
        x}},
      {"adaptive_1", {one([](const Inputs& a) { return tiny::nn::AdaptiveAvgPool2d(1)(a.at("x")); }), x}},
      {"adaptive_3x2", {one([](const Inputs& a) { return F::adaptive_avg_pool2d(a.at("x"), {3, 2}); }), x}},
      {"adaptive_up", {one([](const Inputs& a) { return F::adaptive_avg_pool2d(a.at("x"), {5, 4}); }), x}},
      {"bn2d_train", {bn(true), xbn}},
      {"bn2d_train_momentum", {bn(true, 0.3, 1e-3), xbn}},
      {"bn2d_eval", {bn(false), xbn}},
      {"bn2d_train_no_affine", {bn(true), x}},
      {"bn1d_train", {bn(true), xbn}},
      {"bn1d_train_3d", {bn(true), xbn}},
      {"bn1d_eval", {bn(false), xbn}},
  };
  return t;
}

// The same values in a non-contiguous layout (a transposed copy, transposed back).
Tensor non_contiguous(const Tensor& t) {
  if (t.dim() < 2) return t;
  return t.transpose(0, t.dim() - 1).contiguous().transpose(0, t.dim() - 1);
}

void expect_close(const Tensor& actual, const Tensor& expected, double rtol, double atol, bool relative_to_max,
                  const std::string& what) {
  ASSERT_TRUE(actual.defined()) << what << " is undefined";
  ASSERT_EQ(actual.sizes(), expected.sizes()) << what;
  const auto a = actual.cpu().to(tiny::kFloat64).contiguous().to_vector<double>();
  const auto e = expected.to(tiny::kFloat64).contiguous().to_vector<double>();
  double scale = 1.0;
  if (relative_to_max) {
    for (double v : e) scale = std::max(scale, std::abs(v));
  }
  for (size_t i = 0; i < a.size(); ++i) {
    ASSERT_NEAR(a[i], e[i], atol * scale + rtol * std::abs(e[i])) << what << " element " << i;
  }
}

bool is_output_file(const std::string& stem) {
  return stem == "out" || stem == "grad_out" || stem.rfind("grad_", 0) == 0 || stem.rfind("after_", 0) == 0 ||
         stem.rfind("out_", 0) == 0;
}

// Runs case `name` with its floating inputs in `dtype` (float64 cases stay
// float64) on `device`, contiguous or not, and compares with PyTorch.
void run_case(const std::string& name, const Case& c, const tiny::Device& device, tiny::Dtype dtype, bool contiguous) {
  SCOPED_TRACE(name + " on " + device.str() + " " + tiny::dtype_name(dtype) + (contiguous ? "" : " non-contiguous"));
  const bool half = dtype == tiny::kFloat16 || dtype == tiny::kBFloat16;
  const double rtol = half ? 3e-2 : 1e-5, atol = half ? 3e-2 : 1e-5;
  Inputs in;
  const std::string dir = kDir + "/" + name + "/";
  for (const auto& entry : fs::directory_iterator(dir)) {
    const std::string stem = entry.path().stem().string();
    if (is_output_file(stem)) continue;
    Tensor t = tiny::io::load_npy(entry.path().string());
    if (t.dtype() == tiny::kFloat32) t = t.to(dtype);
    t = t.to(device);
    if (!contiguous) t = non_contiguous(t);
    in[stem] = t;
  }
  for (const auto& g : c.grads) in.at(g).requires_grad_(true);
  const std::vector<Tensor> outs = c.fn(in);
  const Tensor& out = outs[0];
  expect_close(out, tiny::io::load_npy(dir + "out.npy"), rtol, atol, half, "out");
  if (fs::exists(dir + "out_indices.npy")) {
    EXPECT_TRUE(tiny::equal(outs.at(1).cpu(), tiny::io::load_npy(dir + "out_indices.npy"))) << "indices";
  }
  for (const auto& entry : fs::directory_iterator(dir)) {
    const std::string stem = entry.path().stem().string();
    if (stem.rfind("after_", 0) != 0) continue;
    expect_close(in.at(stem.substr(6)), tiny::io::load_npy(entry.path().string()), rtol, atol, half, stem);
  }
  out.backward(tiny::io::load_npy(dir + "grad_out.npy").to(out.dtype()).to(device));
  for (const auto& g : c.grads) {
    expect_close(in.at(g).grad(), tiny::io::load_npy(dir + "grad_" + g + ".npy"), rtol, atol, half, "grad_" + g);
  }
}

bool have_gpu() { return tiny::cuda::device_count() > 0; }

template <typename ErrorType>
void expect_error(const std::function<void()>& fn, const std::vector<std::string>& parts) {
  try {
    fn();
    ADD_FAILURE() << "expected an error containing \"" << parts.front() << "\"";
  } catch (const ErrorType& e) {
    for (const auto& p : parts) {
      EXPECT_NE(std::string(e.what()).find(p), std::string::npos) << "missing \"" << p << "\" in: " << e.what();
    }
  } catch (const std::exception& e) {
    ADD_FAILURE() << "wrong error type: " << e.what();
  }
}

}  // namespace

// ---- parity with PyTorch ------------------------------------------------------------------------

TEST(ConvParity, TableCoversEveryFixture) {
  std::set<std::string> on_disk, in_table;
  for (const auto& entry : fs::directory_iterator(kDir)) on_disk.insert(entry.path().filename().string());
  for (const auto& [name, c] : table()) in_table.insert(name);
  EXPECT_EQ(on_disk, in_table);
}

TEST(ConvParity, MatchesPyTorchOnTheCpuContiguousAndNot) {
  for (const auto& [name, c] : table()) {
    run_case(name, c, tiny::Device("cpu"), tiny::kFloat32, true);
    run_case(name, c, tiny::Device("cpu"), tiny::kFloat32, false);
  }
}

TEST(ConvParity, MatchesPyTorchOnTheEmulatedGpu) {
  if (!have_gpu()) GTEST_SKIP() << "needs an (emulated) GPU";
  for (const auto& [name, c] : table()) {
    run_case(name, c, tiny::Device("cuda:0"), tiny::kFloat32, true);
    run_case(name, c, tiny::Device("cuda:0"), tiny::kFloat32, false);
  }
}

TEST(ConvParity, SixteenBitInputsStayCloseToPyTorchsFloat32) {
  for (const tiny::Dtype dtype : {tiny::kBFloat16, tiny::kFloat16}) {
    for (const auto& [name, c] : table()) {
      if (name.size() > 4 && name.substr(name.size() - 4) == "_f64") continue;
      run_case(name, c, tiny::Device("cpu"), dtype, true);
    }
  }
}

// ---- float64 gradient checks ----------------------------------------------------------------------

TEST(ConvGradcheck, Conv2dEveryOptionInFloat64) {
  using tiny_test::gradcheck;
  using tiny_test::leaf;
  using In = std::vector<Tensor>;
  struct Geo {
    std::vector<int64_t> x, w;
    Conv2dOptions o;
    bool bias;
  };
  const std::vector<Geo> geos = {
      {{2, 3, 5, 4}, {2, 3, 3, 2}, Conv2dOptions(), true},
      {{1, 2, 7, 6}, {3, 2, 3, 3}, conv_opts({2, 3}, {1, 2}), true},
      {{2, 2, 8, 7}, {2, 2, 2, 3}, conv_opts({1, 2}, {2, 1}, {3, 2}), false},
      {{2, 4, 5, 5}, {6, 2, 3, 1}, conv_opts({2, 1}, {1, 0}, {1, 1}, 2), true},
      {{3, 3, 4, 4}, {3, 1, 2, 2}, conv_opts({1, 1}, {1, 1}, {2, 1}, 3), true},
  };
  uint32_t seed = 100;
  for (const auto& g : geos) {
    SCOPED_TRACE("x " + tiny::shape_str(g.x) + " w " + tiny::shape_str(g.w));
    Tensor x = leaf(tiny_test::uniform(g.x, -1, 1, seed++));
    Tensor w = leaf(tiny_test::uniform(g.w, -1, 1, seed++));
    Tensor b = g.bias ? leaf(tiny_test::uniform({g.w[0]}, -1, 1, seed++)) : Tensor();
    const Conv2dOptions o = g.o;
    EXPECT_TRUE(gradcheck([o](const In& in) { return F::conv2d(in[0], in[1], in[2], o); }, {x, w, b}));
  }
  // A strided (non-contiguous) input view.
  Tensor base = tiny_test::uniform({2, 5, 3, 6}, -1, 1, 7);
  Tensor xv = base.permute({0, 3, 2, 1});  // [2, 6, 3, 5]
  xv.requires_grad_(true);
  Tensor w = leaf(tiny_test::uniform({2, 6, 2, 2}, -1, 1, 8));
  EXPECT_TRUE(gradcheck([](const In& in) { return F::conv2d(in[0], in[1]); }, {xv, w}));
}

TEST(ConvGradcheck, PoolingInFloat64) {
  using tiny_test::gradcheck;
  using In = std::vector<Tensor>;
  Tensor d = tiny_test::distinct({2, 2, 7, 6}, 21);  // no ties: max pooling is differentiable
  d.requires_grad_(true);
  EXPECT_TRUE(gradcheck([](const In& in) { return F::max_pool2d(in[0], {3, 2}, Size2{2, 1}, {1, 1}); }, {d}));
  EXPECT_TRUE(gradcheck([](const In& in) { return F::max_pool2d(in[0], {2, 2}, Size2{1, 2}, {1, 0}, {2, 2}, true); },
                        {d}));
  Tensor x = tiny_test::leaf(tiny_test::uniform({2, 3, 7, 5}, -1, 1, 22));
  EXPECT_TRUE(gradcheck([](const In& in) { return F::avg_pool2d(in[0], {3, 3}, Size2{2, 2}, {1, 1}); }, {x}));
  EXPECT_TRUE(gradcheck([](const In& in) { return F::avg_pool2d(in[0], {3, 2}, Size2{2, 2}, {1, 1}, true, false); },
                        {x}));
  EXPECT_TRUE(gradcheck(
      [](const In& in) { return F::avg_pool2d(in[0], {2, 2}, Size2{1, 1}, {1, 0}, false, true, 3); }, {x}));
  for (const Size2 size : {Size2{1, 1}, Size2{3, 2}, Size2{4, 4}, Size2{9, 6}}) {
    EXPECT_TRUE(gradcheck([size](const In& in) { return F::adaptive_avg_pool2d(in[0], size); }, {x}));
  }
}

TEST(ConvGradcheck, BatchNormTrainingAndEvalInFloat64) {
  using tiny_test::gradcheck;
  using tiny_test::leaf;
  using In = std::vector<Tensor>;
  for (const std::vector<int64_t>& shape : {std::vector<int64_t>{4, 3, 3, 2}, std::vector<int64_t>{6, 4},
                                            std::vector<int64_t>{3, 2, 5}}) {
    SCOPED_TRACE(tiny::shape_str(shape));
    const int64_t c = shape[1];
    Tensor x = leaf(tiny_test::uniform(shape, -2, 2, 31));
    Tensor w = leaf(tiny_test::uniform({c}, 0.5, 1.5, 32));
    Tensor b = leaf(tiny_test::uniform({c}, -1, 1, 33));
    const Tensor rm = tiny_test::uniform({c}, -0.5, 0.5, 34), rv = tiny_test::uniform({c}, 0.5, 1.5, 35);
    EXPECT_TRUE(gradcheck([](const In& in) { return F::batch_norm(in[0], Tensor(), Tensor(), in[1], in[2], true); },
                          {x, w, b}));
    EXPECT_TRUE(gradcheck([](const In& in) { return F::batch_norm(in[0], Tensor(), Tensor(), Tensor(), Tensor(), true); },
                          {x}));
    EXPECT_TRUE(gradcheck([rm, rv](const In& in) { return F::batch_norm(in[0], rm, rv, in[1], in[2], false); },
                          {x, w, b}));
  }
}

TEST(ConvGradcheck, OnTheEmulatedGpu) {
  if (!have_gpu()) GTEST_SKIP() << "needs an (emulated) GPU";
  using tiny_test::gradcheck;
  using In = std::vector<Tensor>;
  const tiny::Device gpu("cuda:0");
  Tensor x = tiny_test::uniform({2, 4, 6, 5}, -1, 1, 41).to(gpu).requires_grad_(true);
  Tensor w = tiny_test::uniform({4, 2, 3, 3}, -1, 1, 42).to(gpu).requires_grad_(true);
  Tensor b = tiny_test::uniform({4}, -1, 1, 43).to(gpu).requires_grad_(true);
  EXPECT_TRUE(gradcheck([](const In& in) { return F::conv2d(in[0], in[1], in[2], conv_opts({2, 1}, {1, 1}, {1, 2}, 2)); },
                        {x, w, b}));
  EXPECT_TRUE(gradcheck([](const In& in) { return F::avg_pool2d(in[0], {2, 2}, Size2{1, 2}, {1, 1}); }, {x}));
  EXPECT_TRUE(gradcheck([](const In& in) { return F::adaptive_avg_pool2d(in[0], {4, 3}); }, {x}));
  Tensor d = tiny_test::distinct({2, 4, 6, 5}, 44).to(gpu).requires_grad_(true);
  EXPECT_TRUE(gradcheck([](const In& in) { return F::max_pool2d(in[0], {3, 3}, Size2{2, 2}, {1, 1}); }, {d}));
  Tensor w4 = tiny_test::uniform({4}, 0.5, 1.5, 45).to(gpu).requires_grad_(true);
  EXPECT_TRUE(gradcheck([](const In& in) { return F::batch_norm(in[0], Tensor(), Tensor(), in[1], in[2], true); },
                        {x, w4, b}));
}

// ---- in-place ops on a convolution's output ------------------------------------------------------------

// A residual block's `out += x` and `relu_` on a conv2d's output take part in
// autograd as in PyTorch: the same gradients as the out-of-place ops, and the
// version error when a saved output is changed. (conv2d made its output a
// view of an internal GEMM result when the whole batch fit one chunk: an
// in-place op then rewrote that internal tensor's history and the
// convolution's gradient was lost without an error.)
namespace {
void check_inplace_on_conv_output(const tiny::Device& device) {
  SCOPED_TRACE(device.str());
  for (int64_t batch : {1, 2, 5}) {  // one image, and whole batches in one chunk
    SCOPED_TRACE("batch " + std::to_string(batch));
    const Tensor x0 = tiny_test::uniform({batch, 4, 6, 6}, -1, 1, 51).to(device);
    const Tensor w0 = tiny_test::uniform({4, 4, 3, 3}, -1, 1, 52).to(device);
    const Tensor b0 = tiny_test::uniform({4}, -1, 1, 53).to(device);
    const auto grads = [&](const std::function<Tensor(const Tensor&, const Tensor&)>& block) {
      const Tensor x = x0.clone().requires_grad_(true), w = w0.clone().requires_grad_(true);
      const Tensor b = b0.clone().requires_grad_(true);
      const Tensor out = block(F::conv2d(x, w, b, conv_opts({1, 1}, {1, 1}, {1, 1}, 1)), x);
      (out * out).sum().backward();
      EXPECT_TRUE(w.grad().defined() && b.grad().defined() && x.grad().defined());
      return std::vector<Tensor>{out.detach().cpu(), x.grad().cpu(), w.grad().cpu(), b.grad().cpu()};
    };
    const auto expect_same = [](const std::vector<Tensor>& got, const std::vector<Tensor>& want) {
      for (size_t i = 0; i < want.size(); ++i) {
        ASSERT_TRUE(got[i].defined());
        EXPECT_TRUE(tiny::allclose(got[i], want[i], 1e-5, 1e-5)) << "output/x/w/b #" << i;
      }
    };
    expect_same(grads([](const Tensor& y, const Tensor& x) { y.add_(x); return y; }),
                grads([](const Tensor& y, const Tensor& x) { return y + x; }));
    expect_same(grads([](const Tensor& y, const Tensor&) { y.mul_(2.0); return y; }),
                grads([](const Tensor& y, const Tensor&) { return y * 2.0; }));
    expect_same(grads([](const Tensor& y, const Tensor& x) { y.add_(x); y.relu_(); return y; }),
                grads([](const Tensor& y, const Tensor& x) { return tiny::relu(y + x); }));
    // relu_ saves its result; changing it afterwards is PyTorch's version error at backward.
    const Tensor x = x0.clone().requires_grad_(true);
    const Tensor y = F::conv2d(x, w0, b0, conv_opts({1, 1}, {1, 1}, {1, 1}, 1));
    y.relu_();
    y.mul_(2.0);
    expect_error<tiny::Error>([&] { y.sum().backward(); }, {"modified by an inplace operation", "version"});
  }
}
}  // namespace

TEST(ConvInplace, OpsOnTheOutputKeepTheConvolutionsGradientOnTheCpu) { check_inplace_on_conv_output(tiny::Device()); }

TEST(ConvInplace, OpsOnTheOutputKeepTheConvolutionsGradientOnTheEmulatedGpu) {
  if (!have_gpu()) GTEST_SKIP() << "needs an (emulated) GPU";
  check_inplace_on_conv_output(tiny::Device("cuda:0"));
}

// ---- the emulated GPU gives the CPU's bits, and its modelled cost -------------------------------------

TEST(ConvEmulated, SameBitsAsTheCpuForwardAndBackward) {
  if (!have_gpu()) GTEST_SKIP() << "needs an (emulated) GPU";
  const tiny::Device gpu("cuda:0");
  tiny::manual_seed(5);
  tiny::nn::Sequential net({std::make_shared<tiny::nn::Conv2d>(3, 8, 3, Conv2dOptions().set_padding(1)),
                            std::make_shared<tiny::nn::BatchNorm2d>(8), std::make_shared<tiny::nn::ReLU>(),
                            std::make_shared<tiny::nn::MaxPool2d>(2),
                            std::make_shared<tiny::nn::Conv2d>(8, 8, 3, Conv2dOptions().set_groups(2)),
                            std::make_shared<tiny::nn::AvgPool2d>(Size2{2, 2}, Size2{1, 1}, Size2{1, 1}),
                            std::make_shared<tiny::nn::AdaptiveAvgPool2d>(Size2{2, 3})});
  auto net_gpu = net.clone(gpu);
  const Tensor x = tiny::randn({5, 3, 12, 11});
  const Tensor y_cpu = net.forward(x);
  const Tensor y_gpu = net_gpu->forward(x.to(gpu));
  EXPECT_TRUE(tiny::equal(y_gpu.cpu(), y_cpu)) << "forward";
  const Tensor g = tiny::randn(y_cpu.sizes());
  y_cpu.backward(g);
  y_gpu.backward(g.to(gpu));
  const auto p_cpu = net.named_parameters(), p_gpu = net_gpu->named_parameters();
  ASSERT_EQ(p_cpu.size(), p_gpu.size());
  for (size_t i = 0; i < p_cpu.size(); ++i) {
    EXPECT_TRUE(tiny::equal(p_gpu[i].second.grad().cpu(), p_cpu[i].second.grad())) << p_cpu[i].first;
  }
  const auto b_cpu = net.named_buffers(), b_gpu = net_gpu->named_buffers();
  for (size_t i = 0; i < b_cpu.size(); ++i) {
    EXPECT_TRUE(tiny::equal(b_gpu[i].second.cpu(), b_cpu[i].second)) << b_cpu[i].first;
  }
}

TEST(ConvEmulated, AConvolutionCostsItsGemmPlusTheIm2colBytes) {
  if (!have_gpu()) GTEST_SKIP() << "needs an (emulated) GPU";
  namespace model = tiny::gpu::model;
  const tiny::Device gpu("cuda:0");
  const int64_t n = 4, c = 16, h = 20, w = 20, oc = 32, k = 3;
  const Tensor x = tiny::randn({n, c, h, w}).to(gpu);
  const Tensor weight = tiny::randn({oc, c, k, k}).to(gpu);
  tiny::cuda::synchronize();
  tiny::cuda::reset_device_counters(0);
  const Tensor y = F::conv2d(x, weight, Tensor(), Conv2dOptions().set_padding(1));
  tiny::cuda::synchronize();
  const auto counters = tiny::cuda::device_counters(0);
  // im2col, one GEMM, the copy from [OC, N, L] to NCHW.
  EXPECT_EQ(counters.kernel_launches, 3u);
  const model::DeviceModel& m = model::selected_model();
  const int64_t rows = c * k * k, cols = n * h * w;
  model::KernelCost im2col;
  im2col.bytes = (n * c * h * w + rows * cols) * 4;
  model::KernelCost layout;
  layout.bytes = 2 * oc * cols * 4;
  // tiny's GEMM is called column-major (C^T = B^T A^T): m and n swap places.
  const int64_t expected_ns = model::kernel_ns(m, model::gemm_cost(tiny::kFloat32, cols, oc, rows, false)) +
                              model::kernel_ns(m, im2col) + model::kernel_ns(m, layout);
  EXPECT_NEAR(counters.modelled_kernel_ms * 1e6, static_cast<double>(expected_ns), 3.0);
  EXPECT_EQ(y.sizes(), (tiny::IntArrayRef{n, oc, h, w}));
}

// Big batches are cut into chunks whose columns fit conv_column_budget(): the
// result and every gradient must not depend on where the cuts fall (the
// weight's gradient accumulates over chunks with beta = 1).
TEST(ConvChunks, ResultsDoNotDependOnTheColumnBudget) {
  struct BudgetGuard {
    int64_t saved = tiny::ops::conv_column_budget();
    ~BudgetGuard() { tiny::ops::conv_column_budget() = saved; }
  } guard;
  std::vector<tiny::Device> devices = {tiny::Device("cpu")};
  if (have_gpu()) devices.push_back(tiny::Device("cuda:0"));
  for (const auto& device : devices) {
    SCOPED_TRACE(device.str());
    const Tensor x0 = tiny_test::uniform({7, 4, 6, 5}, -1, 1, 51, tiny::kFloat32);
    const Tensor w0 = tiny_test::uniform({6, 2, 3, 3}, -1, 1, 52, tiny::kFloat32);
    const Tensor b0 = tiny_test::uniform({6}, -1, 1, 53, tiny::kFloat32);
    const Tensor g = tiny_test::uniform({7, 6, 3, 5}, -1, 1, 54, tiny::kFloat32);
    const Conv2dOptions o = conv_opts({2, 1}, {1, 1}, {1, 1}, 2);
    std::vector<std::vector<Tensor>> results;
    // Per image: 18 rows x 15 columns = 270 elements. Whole batch, 3 images, 2, 1.
    for (const int64_t budget : {int64_t(1) << 25, int64_t(3 * 270), int64_t(2 * 270 + 100), int64_t(1)}) {
      tiny::ops::conv_column_budget() = budget;
      Tensor x = x0.to(device).requires_grad_(true), w = w0.to(device).requires_grad_(true),
             b = b0.to(device).requires_grad_(true);
      Tensor y = F::conv2d(x, w, b, o);
      y.backward(g.to(device));
      results.push_back({y.cpu(), x.grad().cpu(), w.grad().cpu(), b.grad().cpu()});
    }
    for (size_t r = 1; r < results.size(); ++r) {
      for (size_t k = 0; k < 4; ++k) {
        // The output and grad_input are the same sums; grad_weight adds the chunks' partial products.
        EXPECT_TRUE(tiny::allclose(results[r][k], results[0][k], 1e-5, 1e-5)) << "budget case " << r << " tensor " << k;
      }
    }
  }
}

// ---- modules ---------------------------------------------------------------------------------------

TEST(ConvModules, Conv2dParametersInitialisationAndRepr) {
  tiny::manual_seed(0);
  tiny::nn::Conv2d conv(4, 6, {3, 2}, Conv2dOptions().set_stride(2).set_padding(1).set_groups(2));
  EXPECT_EQ(conv.weight.sizes(), (tiny::IntArrayRef{6, 2, 3, 2}));
  EXPECT_EQ(conv.bias.sizes(), (tiny::IntArrayRef{6}));
  const double bound = 1.0 / std::sqrt(2.0 * 3 * 2);  // kaiming_uniform_(a=sqrt(5)) on fan_in 12
  for (double v : conv.weight.to(tiny::kFloat64).to_vector<double>()) EXPECT_LE(std::abs(v), bound + 1e-7);
  for (double v : conv.bias.to(tiny::kFloat64).to_vector<double>()) EXPECT_LE(std::abs(v), bound + 1e-7);
  EXPECT_EQ(conv.extra_repr(), "4, 6, kernel_size=(3, 2), stride=(2, 2), padding=(1, 1), groups=2");
  EXPECT_EQ(tiny::nn::Conv2d(1, 2, 3, {}, false).extra_repr(), "1, 2, kernel_size=(3, 3), stride=(1, 1), bias=False");
  const Tensor y = conv.forward(tiny::randn({2, 4, 9, 7}));
  EXPECT_EQ(y.sizes(), (tiny::IntArrayRef{2, 6, 5, 4}));
  auto copy = conv.clone();
  EXPECT_TRUE(tiny::equal(std::dynamic_pointer_cast<tiny::nn::Conv2d>(copy)->weight, conv.weight));
  EXPECT_EQ(copy->extra_repr(), conv.extra_repr());
}

// PyTorch's integer arguments, nn.MaxPool2d(3, 2, 1) (ResNet's stem), mean square windows; stride=None is the
// kernel size. The output sizes are worked out by hand from the formula in the header.
TEST(ConvModules, PoolingTakesPyTorchsIntegerArguments) {
  const Tensor x = tiny::randn({2, 3, 9, 9});
  tiny::nn::MaxPool2d stem(3, 2, 1);
  EXPECT_EQ(stem.kernel_size, (Size2{3, 3}));
  EXPECT_EQ(stem.stride, (Size2{2, 2}));
  EXPECT_EQ(stem.padding, (Size2{1, 1}));
  const Tensor y = stem(x);
  EXPECT_EQ(y.sizes(), (tiny::IntArrayRef{2, 3, 5, 5}));  // (9 + 2 - 3) / 2 + 1
  EXPECT_TRUE(tiny::equal(y, F::max_pool2d(x, {3, 3}, Size2{2, 2}, {1, 1})));
  EXPECT_TRUE(tiny::equal(F::max_pool2d(x, 3, 2, 1), y));
  EXPECT_TRUE(tiny::equal(F::max_pool2d(x, 3, 1, 1, 2, true), F::max_pool2d(x, {3, 3}, Size2{1, 1}, {1, 1}, {2, 2}, true)));
  EXPECT_EQ(tiny::nn::MaxPool2d(2).stride, (Size2{2, 2}));
  EXPECT_EQ(tiny::nn::MaxPool2d(3, std::nullopt, 1).stride, (Size2{3, 3}));

  tiny::nn::AvgPool2d avg(3, 1, 1, false, false);
  EXPECT_EQ(avg(x).sizes(), (tiny::IntArrayRef{2, 3, 9, 9}));  // (9 + 2 - 3) / 1 + 1
  EXPECT_TRUE(tiny::equal(avg(x), F::avg_pool2d(x, {3, 3}, Size2{1, 1}, {1, 1}, false, false)));
  EXPECT_TRUE(tiny::equal(F::avg_pool2d(x, 3, 1, 1, false, false), avg(x)));
  EXPECT_TRUE(tiny::equal(F::avg_pool2d(x, 2), F::avg_pool2d(x, {2, 2})));
  EXPECT_EQ(tiny::nn::AvgPool2d(4).stride, (Size2{4, 4}));
}

TEST(ConvModules, BatchNormStateTrainEvalAndCumulativeMomentum) {
  tiny::nn::BatchNorm2d bn(3);
  std::vector<std::string> keys;
  for (const auto& [k, v] : bn.state_dict()) keys.push_back(k);
  EXPECT_EQ(keys, (std::vector<std::string>{"weight", "bias", "running_mean", "running_var", "num_batches_tracked"}));
  EXPECT_EQ(bn.extra_repr(), "3, eps=1e-05, momentum=0.1, affine=True, track_running_stats=True");

  // momentum=None: the running mean is the plain average of the batch means.
  tiny::nn::BatchNorm2d cumulative(2, 1e-5, std::nullopt);
  const Tensor a = tiny::randn({3, 2, 4, 4}), b = tiny::randn({3, 2, 4, 4}) + 1.0;
  cumulative.forward(a);
  cumulative.forward(b);
  EXPECT_EQ(cumulative.num_batches_tracked.item<int64_t>(), 2);
  const Tensor expected_mean = (a.mean({0, 2, 3}) + b.mean({0, 2, 3})) / 2.0;
  EXPECT_TRUE(tiny::allclose(cumulative.running_mean, expected_mean, 1e-5, 1e-6));
  EXPECT_EQ(cumulative.extra_repr(), "2, eps=1e-05, momentum=None, affine=True, track_running_stats=True");

  // eval: the running statistics normalise, and nothing changes.
  cumulative.eval();
  const Tensor before = cumulative.running_mean.clone();
  const Tensor y = cumulative.forward(a);
  EXPECT_TRUE(tiny::equal(cumulative.running_mean, before));
  EXPECT_EQ(cumulative.num_batches_tracked.item<int64_t>(), 2);
  const Tensor manual = (a - cumulative.running_mean.view({1, 2, 1, 1})) /
                        (cumulative.running_var.view({1, 2, 1, 1}) + 1e-5).sqrt();
  EXPECT_TRUE(tiny::allclose(y, manual, 1e-5, 1e-5));

  // track_running_stats=false: batch statistics in both modes, no buffers.
  tiny::nn::BatchNorm1d untracked(2, 1e-5, 0.1, false, false);
  EXPECT_TRUE(untracked.named_buffers().empty());
  untracked.eval();
  const Tensor z = untracked.forward(tiny::randn({5, 2}) * 3.0 + 2.0);
  EXPECT_TRUE(tiny::allclose(z.mean({0}), tiny::zeros({2}), 1e-5, 1e-5));
}

// ---- bad inputs ---------------------------------------------------------------------------------------

TEST(ConvErrors, BadInputsSayWhatAndHowToFix) {
  const Tensor x = tiny::randn({2, 3, 5, 5});
  expect_error<tiny::ShapeError>([&] { F::conv2d(x, tiny::randn({4, 2, 3, 3})); },
                                 {"Given groups=1, weight of size [4, 2, 3, 3], expected input[2, 3, 5, 5] to have 2 "
                                  "channels, but got 3 channels instead"});
  expect_error<tiny::ShapeError>([&] { F::conv2d(tiny::randn({2, 4, 5, 5}), tiny::randn({3, 2, 3, 3}), Tensor(),
                                                 Conv2dOptions().set_groups(2)); },
                                 {"Given groups=2, expected weight to be divisible by 2 at dimension 0", "[3, 2, 3, 3]"});
  expect_error<tiny::ShapeError>([&] { F::conv2d(x, tiny::randn({4, 3, 6, 3})); },
                                 {"Calculated padded input size per channel: (5 x 5). Kernel size: (6 x 3). Kernel "
                                  "size can't be greater than actual input size"});
  expect_error<tiny::ShapeError>([&] { F::conv2d(x, tiny::randn({4, 3, 3, 3}), tiny::randn({3})); },
                                 {"expected bias to be 1-dimensional with 4 elements, but got bias of size [3]"});
  expect_error<tiny::ShapeError>([&] { F::conv2d(tiny::randn({3, 5}), tiny::randn({4, 3, 3, 3})); },
                                 {"Expected 3D (unbatched) or 4D (batched) input to conv2d, but got input of size: [3, 5]"});
  expect_error<tiny::DtypeError>([&] { F::conv2d(x.to(tiny::kFloat64), tiny::randn({4, 3, 3, 3})); },
                                 {"Input type (float64) and weight type (float32) should be the same"});
  expect_error<tiny::DtypeError>([&] { F::conv2d(tiny::zeros({1, 3, 4, 4}, tiny::TensorOptions(tiny::kInt64)),
                                                 tiny::randn({4, 3, 3, 3})); },
                                 {"expected a floating-point input, got int64"});
  expect_error<tiny::ValueError>([&] { F::conv2d(x, tiny::randn({4, 3, 3, 3}), Tensor(), Conv2dOptions().set_stride(0)); },
                                 {"non-positive stride is not supported"});
  expect_error<tiny::ValueError>([&] { F::conv2d(x, tiny::randn({4, 3, 3, 3}), Tensor(), Conv2dOptions().set_padding(-1)); },
                                 {"negative padding is not supported"});
  expect_error<tiny::ValueError>([&] { tiny::nn::Conv2d(3, 4, 3, Conv2dOptions().set_groups(2)); },
                                 {"in_channels must be divisible by groups (got in_channels=3, groups=2)"});
  if (have_gpu()) {
    expect_error<tiny::DeviceError>([&] { F::conv2d(x, tiny::randn({4, 3, 3, 3}).to(tiny::Device("cuda:0"))); },
                                    {"Expected all tensors to be on the same device", "cuda:0", "cpu"});
  }

  expect_error<tiny::ValueError>([&] { F::max_pool2d(x, {3, 3}, std::nullopt, {2, 2}); },
                                 {"pad should be smaller than or equal to half of kernel size, but got padW = 2, padH = 2, "
                                  "kW = 3, kH = 3"});
  expect_error<tiny::ShapeError>([&] { F::max_pool2d(tiny::randn({1, 3, 2, 2}), 3); },
                                 {"Given input size: (3x2x2). Calculated output size: (3x0x0). Output size is too small"});
  expect_error<tiny::ShapeError>([&] { F::avg_pool2d(tiny::randn({5, 5}), {2, 2}); },
                                 {"non-empty 3D or 4D (batch mode) tensor expected for input", "[5, 5]"});
  expect_error<tiny::ValueError>([&] { F::avg_pool2d(x, {0, 2}); },
                                 {"kernel size should be greater than zero, but got kH: 0 kW: 2"});
  expect_error<tiny::ValueError>([&] { F::max_pool2d(x, {2, 2}, Size2{2, 2}, {0, 0}, {0, 1}); },
                                 {"dilation should be greater than zero"});
  expect_error<tiny::ValueError>([&] { F::adaptive_avg_pool2d(x, {-1, 2}); },
                                 {"elements of output_size must be greater than or equal to 0"});

  expect_error<tiny::DtypeError>([&] { F::max_pool2d(tiny::zeros({1, 2, 4, 4}, tiny::TensorOptions(tiny::kInt64)), 2); },
                                 {"\"max_pool2d\" not implemented for 'int64'", "x.to(tiny::kFloat32)"});
  expect_error<tiny::ValueError>([&] { F::avg_pool2d(x, {2, 2}, std::nullopt, {0, 0}, false, true, 0); },
                                 {"divisor must be not zero"});

  tiny::nn::BatchNorm2d bn(3);
  if (have_gpu()) {
    expect_error<tiny::DeviceError>(
        [&] { F::batch_norm(x.to(tiny::Device("cuda:0")), bn.running_mean, bn.running_var, Tensor(), Tensor(), true); },
        {"Expected all tensors to be on the same device", "batch_norm"});
  }
  expect_error<tiny::ValueError>([&] { F::batch_norm(x, Tensor(), Tensor()); },
                                 {"running_mean and running_var must be defined when training=false"});
  expect_error<tiny::ShapeError>([&] { bn.forward(tiny::randn({2, 3, 4})); },
                                 {"expected 4D input (got 3D input)", "x.unsqueeze(0)"});
  expect_error<tiny::ShapeError>([&] { bn.forward(tiny::randn({2, 4})); },
                                 {"expected 4D input (got 2D input)", "BatchNorm1d takes [N, C]"});
  expect_error<tiny::ShapeError>([&] { tiny::nn::BatchNorm1d(3).forward(x); }, {"expected 2D or 3D input (got 4D input)"});
  expect_error<tiny::ShapeError>([&] { bn.forward(tiny::randn({2, 4, 3, 3})); }, {"running_mean should contain 4 elements not 3"});
  expect_error<tiny::ValueError>([&] { tiny::nn::BatchNorm1d(3).forward(tiny::randn({1, 3})); },
                                 {"Expected more than 1 value per channel when training, got input size [1, 3]"});
}
