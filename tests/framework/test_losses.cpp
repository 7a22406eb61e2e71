// The losses of issue 23 (item 3): cross_entropy on (N, C, d1, ...) with
// weight=, probability targets and label smoothing; nll_loss's weight;
// binary_cross_entropy_with_logits, l1, smooth_l1, huber and kl_div, as
// functions and modules. Checked against PyTorch 1.13 (tests/parity/
// loss_fixtures, written by make_loss_fixtures.py) forward and backward, with
// contiguous and non-contiguous inputs, on the CPU and the emulated GPU
// (float32, then bfloat16/float16); float64 gradient checks; bad inputs.
//
// Tolerances: float32 against PyTorch, |tiny - torch| <= 1e-6 + 1e-5 |torch|
// (DESIGN.md section 5; the sums run in another order); 16-bit inputs against
// the float32 fixtures, 2e-2 of the tensor's largest magnitude (inputs rounded
// to 8 or 11 significant bits, arithmetic in float32 as tensor cores do).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "gradcheck.h"
#include "tiny/cuda.h"
#include "tiny/io.h"
#include "tiny/nn/activation.h"
#include "tiny/nn/loss.h"
#include "tiny/ops.h"

#ifndef TINY_PARITY_DIR
#define TINY_PARITY_DIR "tests/parity/fixtures"
#endif

namespace fs = std::filesystem;
namespace F = tiny::nn::functional;
using tiny::Tensor;
using Inputs = std::map<std::string, Tensor>;
using F::Reduction;

namespace {

const std::string kDir = std::string(TINY_PARITY_DIR) + "/../loss_fixtures";

struct Case {
  std::function<Tensor(const Inputs&)> fn;
  std::vector<std::string> grads;  // inputs that get a gradient
};

F::CrossEntropyOptions ce(Reduction r = Reduction::Mean, double smoothing = 0.0, Tensor weight = Tensor(),
                          int64_t ignore_index = -100) {
  // By the setters, so that the PyTorch fixtures check each one sets its own field.
  return F::CrossEntropyOptions().set_reduction(r).set_label_smoothing(smoothing).set_weight(weight).set_ignore_index(
      ignore_index);
}

// Mirrors CASES in tests/parity/make_loss_fixtures.py.
const std::map<std::string, Case>& table() {
  static const std::map<std::string, Case> t = {
      {"ce_nd_mean", {[](const Inputs& a) { return F::cross_entropy(a.at("x"), a.at("target")); }, {"x"}}},
      {"ce_nd_none",
       {[](const Inputs& a) { return F::cross_entropy(a.at("x"), a.at("target"), ce(Reduction::None)); }, {"x"}}},
      {"ce_nd_weight_sum",
       {[](const Inputs& a) {
          return F::cross_entropy(a.at("x"), a.at("target"), ce(Reduction::Sum, 0.0, a.at("weight")));
        },
        {"x"}}},
      {"ce_weight_ignore_mean",
       {[](const Inputs& a) { return F::cross_entropy(a.at("x"), a.at("target"), ce(Reduction::Mean, 0.0, a.at("weight"))); },
        {"x"}}},
      {"ce_nd_weight_smoothing_mean",
       {[](const Inputs& a) {
          return F::cross_entropy(a.at("x"), a.at("target"), ce(Reduction::Mean, 0.15, a.at("weight")));
        },
        {"x"}}},
      {"ce_nd_smoothing_none",
       {[](const Inputs& a) { return F::cross_entropy(a.at("x"), a.at("target"), ce(Reduction::None, 0.2)); }, {"x"}}},
      {"ce_single_sample", {[](const Inputs& a) { return F::cross_entropy(a.at("x"), a.at("target")); }, {"x"}}},
      {"ce_prob_mean", {[](const Inputs& a) { return F::cross_entropy(a.at("x"), a.at("target")); }, {"x", "target"}}},
      {"ce_prob_weight_smoothing_sum",
       {[](const Inputs& a) {
          return F::cross_entropy(a.at("x"), a.at("target"), ce(Reduction::Sum, 0.1, a.at("weight")));
        },
        {"x", "target"}}},
      {"ce_prob_nd_none",
       {[](const Inputs& a) { return F::cross_entropy(a.at("x"), a.at("target"), ce(Reduction::None)); },
        {"x", "target"}}},
      {"ce_prob_nd_weight_mean",
       {[](const Inputs& a) { return F::cross_entropy(a.at("x"), a.at("target"), ce(Reduction::Mean, 0.0, a.at("weight"))); },
        {"x", "target"}}},
      {"nll_weight_mean",
       {[](const Inputs& a) { return F::nll_loss(a.at("x"), a.at("target"), Reduction::Mean, -100, a.at("weight")); },
        {"x"}}},
      {"nll_nd_weight_ignore_none",
       {[](const Inputs& a) { return F::nll_loss(a.at("x"), a.at("target"), Reduction::None, -1, a.at("weight")); },
        {"x"}}},
      {"bce_logits_mean",
       {[](const Inputs& a) { return F::binary_cross_entropy_with_logits(a.at("x"), a.at("target")); },
        {"x", "target"}}},
      {"bce_logits_weights_sum",
       {[](const Inputs& a) {
          tiny::nn::BCEWithLogitsLoss loss(a.at("weight"), Reduction::Sum, a.at("pos_weight"));  // the module form
          return loss(a.at("x"), a.at("target"));
        },
        {"x", "target"}}},
      {"bce_logits_none",
       {[](const Inputs& a) {
          return F::binary_cross_entropy_with_logits(a.at("x"), a.at("target"), Tensor(), Tensor(), Reduction::None);
        },
        {"x", "target"}}},
      {"l1_mean", {[](const Inputs& a) { return tiny::nn::L1Loss()(a.at("x"), a.at("target")); }, {"x", "target"}}},
      {"l1_none", {[](const Inputs& a) { return F::l1_loss(a.at("x"), a.at("target"), Reduction::None); }, {"x", "target"}}},
      {"smooth_l1_beta_half_mean",
       {[](const Inputs& a) { return tiny::nn::SmoothL1Loss(Reduction::Mean, 0.5)(a.at("x"), a.at("target")); },
        {"x", "target"}}},
      {"smooth_l1_none",
       {[](const Inputs& a) { return F::smooth_l1_loss(a.at("x"), a.at("target"), Reduction::None); }, {"x", "target"}}},
      {"smooth_l1_beta0_sum",
       {[](const Inputs& a) { return F::smooth_l1_loss(a.at("x"), a.at("target"), Reduction::Sum, 0.0); },
        {"x", "target"}}},
      {"huber_delta_mean",
       {[](const Inputs& a) { return tiny::nn::HuberLoss(Reduction::Mean, 0.7)(a.at("x"), a.at("target")); },
        {"x", "target"}}},
      {"huber_none",
       {[](const Inputs& a) { return F::huber_loss(a.at("x"), a.at("target"), Reduction::None, 2.0); }, {"x", "target"}}},
      {"kl_div_batchmean",
       {[](const Inputs& a) { return tiny::nn::KLDivLoss(Reduction::BatchMean)(a.at("x"), a.at("target")); }, {"x"}}},
      {"kl_div_mean", {[](const Inputs& a) { return F::kl_div(a.at("x"), a.at("target")); }, {"x", "target"}}},
      {"kl_div_log_target_sum",
       {[](const Inputs& a) { return F::kl_div(a.at("x"), a.at("target"), Reduction::Sum, true); }, {"x", "target"}}},
      {"kl_div_none",
       {[](const Inputs& a) { return F::kl_div(a.at("x"), a.at("target"), Reduction::None); }, {"x", "target"}}},
  };
  return t;
}

// The same values in a non-contiguous layout (a transposed copy, transposed back).
Tensor non_contiguous(const Tensor& t) {
  if (t.dim() < 2) return t;
  Tensor v = t.transpose(0, t.dim() - 1).contiguous().transpose(0, t.dim() - 1);
  // (a tensor with a dimension of size 1 may still count as contiguous)
  return v;
}

void expect_close(const Tensor& actual, const Tensor& expected, double rtol, double atol, const std::string& what) {
  ASSERT_TRUE(actual.defined()) << what << " is undefined";
  ASSERT_EQ(actual.sizes(), expected.sizes()) << what;
  const auto a = actual.cpu().to(tiny::kFloat64).contiguous().to_vector<double>();
  const auto e = expected.to(tiny::kFloat64).contiguous().to_vector<double>();
  double scale = 0;
  for (double v : e) scale = std::max(scale, std::abs(v));
  for (size_t i = 0; i < a.size(); ++i) {
    ASSERT_NEAR(a[i], e[i], atol * std::max(1.0, rtol < 1e-3 ? 1.0 : scale) + rtol * std::abs(e[i])) << what << " element " << i;
  }
}

// Runs case `name` with its inputs in `dtype` on `device`, contiguous or not, and compares.
void run_case(const std::string& name, const Case& c, const tiny::Device& device, tiny::Dtype dtype, bool contiguous,
              const std::string& base = kDir) {
  SCOPED_TRACE(name + " on " + device.str() + " " + tiny::dtype_name(dtype) + (contiguous ? "" : " non-contiguous"));
  const bool half = dtype != tiny::kFloat32;
  const double rtol = half ? 2e-2 : 1e-5, atol = half ? 2e-2 : 1e-6;
  Inputs in;
  const std::string dir = base + "/" + name + "/";
  for (const auto& entry : fs::directory_iterator(dir)) {
    const std::string stem = entry.path().stem().string();
    if (stem == "out" || stem == "grad_out" || stem.rfind("grad_", 0) == 0) continue;
    Tensor t = tiny::io::load_npy(entry.path().string());
    if (t.is_floating_point()) t = t.to(dtype);
    t = t.to(device);
    if (!contiguous) t = non_contiguous(t);
    in[stem] = t;
  }
  for (const auto& g : c.grads) in.at(g).requires_grad_(true);
  Tensor out = c.fn(in);
  if (!out.is_floating_point()) {  // one_hot: exact, no gradient
    EXPECT_TRUE(tiny::equal(out.cpu(), tiny::io::load_npy(dir + "out.npy"))) << "out";
    return;
  }
  expect_close(out.to(tiny::kFloat32), tiny::io::load_npy(dir + "out.npy"), rtol, atol, "out");
  if (fs::exists(dir + "grad_out.npy")) {
    out.backward(tiny::io::load_npy(dir + "grad_out.npy").to(out.dtype()).to(device));
  } else {
    out.backward();
  }
  for (const auto& g : c.grads) {
    expect_close(in.at(g).grad().to(tiny::kFloat32), tiny::io::load_npy(dir + "grad_" + g + ".npy"), rtol, atol,
                 "grad_" + g);
  }
}

bool have_gpu() { return tiny::cuda::device_count() > 0; }

template <typename ErrorType>
void expect_error(const std::function<void()>& fn, const std::vector<std::string>& parts) {
  try {
    fn();
    ADD_FAILURE() << "expected an error containing \"" << parts.front() << "\"";
  } catch (const ErrorType& e) {
    for (const auto& p : parts) EXPECT_NE(std::string(e.what()).find(p), std::string::npos) << "missing \"" << p << "\" in: " << e.what();
  } catch (const std::exception& e) {
    ADD_FAILURE() << "wrong error type: " << e.what();
  }
}

}  // namespace

TEST(LossParity, TableCoversEveryFixture) {
  std::set<std::string> on_disk, in_table;
  for (const auto& entry : fs::directory_iterator(kDir)) on_disk.insert(entry.path().filename().string());
  for (const auto& [name, c] : table()) in_table.insert(name);
  EXPECT_EQ(on_disk, in_table);
}

TEST(LossParity, MatchesPyTorchOnTheCpuContiguousAndNot) {
  for (const auto& [name, c] : table()) {
    run_case(name, c, tiny::Device("cpu"), tiny::kFloat32, true);
    run_case(name, c, tiny::Device("cpu"), tiny::kFloat32, false);
  }
}

TEST(LossParity, MatchesPyTorchOnTheEmulatedGpu) {
  if (!have_gpu()) GTEST_SKIP() << "needs an (emulated) GPU";
  for (const auto& [name, c] : table()) {
    run_case(name, c, tiny::Device("cuda:0"), tiny::kFloat32, true);
    run_case(name, c, tiny::Device("cuda:0"), tiny::kFloat32, false);
  }
}

TEST(LossParity, Bfloat16AndFloat16OnTheEmulatedGpu) {
  if (!have_gpu()) GTEST_SKIP() << "needs an (emulated) GPU";
  for (tiny::Dtype dtype : {tiny::kBFloat16, tiny::kFloat16}) {
    for (const auto& [name, c] : table()) run_case(name, c, tiny::Device("cuda:0"), dtype, true);
  }
}

// float64: autograd's gradients against central differences.
TEST(LossGradcheck, EveryLossInFloat64) {
  using tiny_test::gradcheck;
  using tiny_test::uniform;
  using In = std::vector<Tensor>;
  const auto f64 = tiny::TensorOptions(tiny::kFloat64);
  Tensor x4 = uniform({2, 3, 2, 2}, -2, 2, 1), x2 = uniform({5, 4}, -2, 2, 2);
  Tensor t3 = tiny::from_vector(std::vector<int64_t>{0, 2, 1, 1, 2, 0, -100, 1}, {2, 2, 2});
  Tensor w3 = tiny::tensor({0.5, 1.5, 2.0}, f64);
  Tensor soft = uniform({5, 4}, 0.05, 1, 3);
  soft = soft / soft.sum({1}, true);
  Tensor w4 = tiny::tensor({0.3, 1.0, 2.0, 0.7}, f64);
  Tensor target = uniform({5, 4}, 0, 1, 4), pos = tiny::tensor({0.5, 2.0, 1.0, 3.0}, f64);
  Tensor y = uniform({5, 4}, -2, 2, 5);
  for (Tensor* t : {&x4, &x2, &soft, &target, &y}) t->requires_grad_(true);
  EXPECT_TRUE(gradcheck([&](const In& in) { return F::cross_entropy(in[0], t3, ce(Reduction::Mean, 0.1, w3)); }, {x4}));
  EXPECT_TRUE(gradcheck([&](const In& in) { return F::cross_entropy(in[0], t3, ce(Reduction::None)); }, {x4}));
  EXPECT_TRUE(gradcheck([&](const In& in) { return F::cross_entropy(in[0], in[1], ce(Reduction::Mean, 0.2, w4)); },
                        {x2, soft}));
  EXPECT_TRUE(gradcheck([&](const In& in) {
    return F::binary_cross_entropy_with_logits(in[0], in[1], Tensor(), pos, Reduction::Sum);
  }, {x2, target}));
  // kinks of l1/smooth_l1/huber: the differences lie in [-2, 2]^2 minus a margin
  Tensor xa = tiny_test::away_from_zero({5, 4}, 0.1, 0.4, 6);
  xa.requires_grad_(true);
  Tensor zero = tiny::zeros({5, 4}, f64);
  EXPECT_TRUE(gradcheck([&](const In& in) { return F::l1_loss(in[0], zero); }, {xa}));
  EXPECT_TRUE(gradcheck([&](const In& in) { return F::smooth_l1_loss(in[0], zero, Reduction::None, 0.25); }, {xa}));
  EXPECT_TRUE(gradcheck([&](const In& in) { return F::huber_loss(in[0], zero, Reduction::Mean, 0.25); }, {xa}));
  Tensor lp = uniform({5, 4}, -3, -0.1, 7);
  lp.requires_grad_(true);
  EXPECT_TRUE(gradcheck([&](const In& in) { return F::kl_div(in[0], in[1], Reduction::BatchMean); }, {lp, soft}));
  EXPECT_TRUE(gradcheck([&](const In& in) { return F::kl_div(in[0], in[1], Reduction::None, true); }, {lp, y}));
  EXPECT_TRUE(gradcheck([&](const In& in) { return F::nll_loss(in[0], t3, Reduction::Sum, -100, w3); }, {x4}));
}

// PyTorch's first positional argument of nn.CrossEntropyLoss and nn.NLLLoss is the class weight.
TEST(LossModules, AWeightAloneIsTheClassWeightAsInPyTorch) {
  const Tensor x = tiny::randn({6, 3});
  const Tensor t = tiny::from_vector(std::vector<int64_t>{0, 2, 1, 1, 2, 0});
  const Tensor w = tiny::tensor({0.2, 1.0, 3.0});
  const Tensor weighted = F::cross_entropy(x, t, ce(Reduction::Mean, 0.0, w));
  ASSERT_FALSE(tiny::allclose(weighted, F::cross_entropy(x, t), 1e-4, 1e-4)) << "the weights must change this loss";
  EXPECT_TRUE(tiny::equal(tiny::nn::CrossEntropyLoss(w)(x, t), weighted));
  const Tensor lp = F::log_softmax(x, 1);
  EXPECT_TRUE(tiny::equal(tiny::nn::NLLLoss(w)(lp, t), F::nll_loss(lp, t, Reduction::Mean, -100, w)));
  EXPECT_TRUE(tiny::equal(tiny::nn::NLLLoss(w, Reduction::Sum, 2)(lp, t), F::nll_loss(lp, t, Reduction::Sum, 2, w)));
}

TEST(LossErrors, BadInputsSayWhatAndHowToFix) {
  Tensor x = tiny::randn({4, 3, 5});
  Tensor t = tiny::zeros({4, 5}, tiny::TensorOptions(tiny::kInt64));
  expect_error<tiny::ShapeError>([&] { F::cross_entropy(x, tiny::zeros({4, 6}, tiny::TensorOptions(tiny::kInt64))); },
                                 {"Expected target size [4, 5], got [4, 6]"});
  expect_error<tiny::ShapeError>([&] { F::cross_entropy(x, tiny::zeros({3, 5}, tiny::TensorOptions(tiny::kInt64))); },
                                 {"Expected input batch_size (4) to match target batch_size (3)."});
  expect_error<tiny::ShapeError>([&] { F::cross_entropy(x, t, ce(Reduction::Mean, 0.0, tiny::ones({4}))); },
                                 {"weight tensor should be defined either for all 3 classes or no classes but got "
                                  "weight tensor of shape: [4]"});
  expect_error<tiny::DtypeError>([&] { F::cross_entropy(x, tiny::zeros({4, 5})); },
                                 {"int64"});
  expect_error<tiny::ValueError>([&] { F::cross_entropy(x, t, ce(Reduction::Mean, -0.1)); },
                                 {"label_smoothing must be between 0.0 and 1.0. Got: -0.1"});
  expect_error<tiny::ShapeError>([&] { F::nll_loss(tiny::randn({2, 3}), tiny::zeros({2}, tiny::TensorOptions(tiny::kInt64)),
                                                   Reduction::Mean, -100, tiny::ones({2, 3})); },
                                 {"weight tensor should be defined either for all 3 classes"});
  Tensor a = tiny::randn({4, 3});
  expect_error<tiny::ShapeError>([&] { F::l1_loss(a, tiny::randn({4, 1})); },
                                 {"target size ([4, 1])", "input size ([4, 3])", "reshape"});
  expect_error<tiny::ValueError>([&] { F::smooth_l1_loss(a, a, Reduction::Mean, -1.0); },
                                 {"smooth_l1_loss does not support negative values for beta"});
  expect_error<tiny::ValueError>([&] { F::huber_loss(a, a, Reduction::Mean, 0.0); },
                                 {"huber_loss does not support non-positive values for delta"});
  expect_error<tiny::ShapeError>([&] { F::binary_cross_entropy_with_logits(a, tiny::randn({3, 4})); },
                                 {"Target size ([3, 4]) must be the same as input size ([4, 3])"});
  expect_error<tiny::ShapeError>([&] { F::binary_cross_entropy_with_logits(a, a, Tensor(), tiny::ones({4})); },
                                 {"pos_weight of shape [4] does not broadcast", "one value per class"});
  expect_error<tiny::ValueError>([&] { F::mse_loss(a, a, Reduction::BatchMean); }, {"only for kl_div"});
  expect_error<tiny::ValueError>([&] { F::l1_loss(a, a, Reduction::BatchMean); }, {"only for kl_div"});
  expect_error<tiny::DtypeError>([&] { F::kl_div(a, tiny::zeros({4, 3}, tiny::TensorOptions(tiny::kInt64))); },
                                 {"floating-point"});
  if (have_gpu()) {
    expect_error<tiny::DeviceError>([&] { F::l1_loss(a, a.to(tiny::Device("cuda:0"))); }, {"cuda:0", "cpu"});
    expect_error<tiny::DeviceError>([&] { F::cross_entropy(x, t, ce(Reduction::Mean, 0.0, tiny::ones({3}).to(tiny::Device("cuda:0")))); },
                                    {"cuda:0"});
  }
}

// ===================================================== issue 23 item 5: the first ops
// op_fixtures/ (OP_CASES in make_loss_fixtures.py), same layout and tolerances.

namespace {

const std::string kOpDir = std::string(TINY_PARITY_DIR) + "/../op_fixtures";

// Mirrors OP_CASES in tests/parity/make_loss_fixtures.py.
const std::map<std::string, Case>& op_table() {
  static const std::map<std::string, Case> t = {
      {"var_dims", {[](const Inputs& a) { return a.at("x").var({0, 2}); }, {"x"}}},
      {"var_all_population", {[](const Inputs& a) { return tiny::var(a.at("x"), {}, 0.0); }, {"x"}}},
      {"var_keepdim", {[](const Inputs& a) { return a.at("x").var({-1}, 1, true); }, {"x"}}},
      {"std_dim", {[](const Inputs& a) { return a.at("x").std({0}); }, {"x"}}},
      {"std_all", {[](const Inputs& a) { return tiny::std_dev(a.at("x")); }, {"x"}}},
      {"logsumexp_dim", {[](const Inputs& a) { return tiny::logsumexp(a.at("x"), {1}); }, {"x"}}},
      {"logsumexp_dims_keepdim", {[](const Inputs& a) { return a.at("x").logsumexp({0, 2}, true); }, {"x"}}},
      {"silu", {[](const Inputs& a) { return tiny::nn::SiLU()(a.at("x")); }, {"x"}}},
      {"leaky_relu", {[](const Inputs& a) { return tiny::nn::LeakyReLU(0.2)(a.at("x")); }, {"x"}}},
      {"leaky_relu_default", {[](const Inputs& a) { return F::leaky_relu(a.at("x")); }, {"x"}}},
      {"one_hot", {[](const Inputs& a) { return F::one_hot(a.at("target"), 6); }, {}}},
      {"one_hot_inferred", {[](const Inputs& a) { return F::one_hot(a.at("target")); }, {}}},
  };
  return t;
}

}  // namespace

TEST(OpParity, TableCoversEveryFixture) {
  std::set<std::string> on_disk, in_table;
  for (const auto& entry : fs::directory_iterator(kOpDir)) on_disk.insert(entry.path().filename().string());
  for (const auto& [name, c] : op_table()) in_table.insert(name);
  EXPECT_EQ(on_disk, in_table);
}

TEST(OpParity, MatchesPyTorchOnTheCpuAndTheEmulatedGpu) {
  std::vector<tiny::Device> devices = {tiny::Device("cpu")};
  if (have_gpu()) devices.push_back(tiny::Device("cuda:0"));
  for (const auto& device : devices) {
    for (const auto& [name, c] : op_table()) {
      run_case(name, c, device, tiny::kFloat32, true, kOpDir);
      run_case(name, c, device, tiny::kFloat32, false, kOpDir);
    }
  }
}

TEST(OpGradcheck, VarStdLogsumexpSiluLeakyReluInFloat64) {
  using tiny_test::gradcheck;
  using In = std::vector<Tensor>;
  Tensor x = tiny_test::uniform({3, 4, 2}, -2, 2, 11);
  Tensor xa = tiny_test::away_from_zero({3, 4}, 0.1, 2, 12);
  x.requires_grad_(true);
  xa.requires_grad_(true);
  EXPECT_TRUE(gradcheck([](const In& in) { return in[0].var({1}); }, {x}));
  EXPECT_TRUE(gradcheck([](const In& in) { return in[0].std({0, 2}, 0.0, true); }, {x}));
  EXPECT_TRUE(gradcheck([](const In& in) { return tiny::logsumexp(in[0], {0, 1}); }, {x}));
  EXPECT_TRUE(gradcheck([](const In& in) { return F::silu(in[0]); }, {x}));
  EXPECT_TRUE(gradcheck([](const In& in) { return F::leaky_relu(in[0], 0.3); }, {xa}));
}

TEST(OpErrors, BadInputsSayWhatAndHowToFix) {
  const auto i64 = tiny::TensorOptions(tiny::kInt64);
  expect_error<tiny::IndexError>([&] { F::one_hot(tiny::tensor({0, 5, 2}, i64), 4); },
                                 {"Class values must be smaller than num_classes (4), got 5"});
  expect_error<tiny::IndexError>([&] { F::one_hot(tiny::tensor({0, -1}, i64)); }, {"non-negative, got -1"});
  expect_error<tiny::DtypeError>([&] { F::one_hot(tiny::zeros({3})); }, {"index tensor (int64), got float32"});
  expect_error<tiny::ValueError>([&] { F::one_hot(tiny::zeros({0}, i64)); }, {"pass num_classes"});
  expect_error<tiny::ValueError>([&] { tiny::var(tiny::randn({3}), {}, -1.0); }, {"correction must be >= 0, got -1"});
  expect_error<tiny::DtypeError>([&] { tiny::var(tiny::zeros({3}, i64)); }, {"floating-point", "int64"});
  // logsumexp keeps infinities as PyTorch does.
  const Tensor inf = tiny::tensor({-INFINITY, -INFINITY});
  EXPECT_EQ(tiny::logsumexp(inf, {0}).item<float>(), -INFINITY);
}
