// tiny::nn::functional: softmax, log_softmax, the losses, dropout and linear,
// against references computed here in double precision.

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "kernels/philox.h"
#include "tiny/tiny.h"

namespace {

namespace F = tiny::nn::functional;
using tiny::IntArrayRef;
using tiny::Tensor;

Tensor uniform(const IntArrayRef& shape, double lo, double hi, uint64_t seed, tiny::Dtype dtype = tiny::kFloat32) {
  tiny::Generator g(seed);
  return tiny::rand(shape, dtype, g) * (hi - lo) + lo;
}

// log_softmax of each row of a row-major [rows, cols] matrix, in double.
std::vector<double> ref_log_softmax_rows(const std::vector<double>& x, int64_t rows, int64_t cols) {
  std::vector<double> out(x.size());
  for (int64_t r = 0; r < rows; ++r) {
    const double* row = &x[static_cast<size_t>(r * cols)];
    const double mx = *std::max_element(row, row + cols);
    double s = 0.0;
    for (int64_t c = 0; c < cols; ++c) s += std::exp(row[c] - mx);
    for (int64_t c = 0; c < cols; ++c) out[static_cast<size_t>(r * cols + c)] = row[c] - mx - std::log(s);
  }
  return out;
}

void expect_near_all(const Tensor& got, const std::vector<double>& want, double tol, const char* what = "") {
  const std::vector<double> g = got.to_vector<double>();
  ASSERT_EQ(g.size(), want.size()) << what;
  for (size_t i = 0; i < g.size(); ++i) EXPECT_NEAR(g[i], want[i], tol) << what << " element " << i;
}

TEST(NnFunctional, SoftmaxRowsSumToOneAndMatchReference) {
  const Tensor x = uniform({8, 10}, -5, 5, 1);
  const Tensor s = F::softmax(x, 1);
  const Tensor ls = F::log_softmax(x, -1);
  const std::vector<double> ref = ref_log_softmax_rows(x.to_vector<double>(), 8, 10);
  std::vector<double> ref_exp(ref.size());
  std::transform(ref.begin(), ref.end(), ref_exp.begin(), [](double v) { return std::exp(v); });
  expect_near_all(s, ref_exp, 1e-6, "softmax");
  expect_near_all(ls, ref, 2e-6, "log_softmax");
  const std::vector<double> sums = s.sum({1}).to_vector<double>();
  for (double v : sums) EXPECT_NEAR(v, 1.0, 1e-6);
  // Method forms.
  expect_near_all(x.softmax(1), ref_exp, 1e-6, "Tensor::softmax");
  expect_near_all(x.log_softmax(1), ref, 2e-6, "Tensor::log_softmax");
}

TEST(NnFunctional, SoftmaxIsStableForLargeInputs) {
  // exp(1000) overflows in float and double: only a max-shifted computation works.
  const Tensor x = tiny::tensor({1000, 999, 998, -1000, -1001, -1003}, {2, 3});
  const std::vector<double> ref = ref_log_softmax_rows(x.to_vector<double>(), 2, 3);
  const Tensor ls = F::log_softmax(x, 1);
  const Tensor s = F::softmax(x, 1);
  for (double v : s.to_vector<double>()) EXPECT_TRUE(std::isfinite(v));
  expect_near_all(ls, ref, 1e-5, "log_softmax");
  std::vector<double> ref_exp(ref.size());
  std::transform(ref.begin(), ref.end(), ref_exp.begin(), [](double v) { return std::exp(v); });
  expect_near_all(s, ref_exp, 1e-6, "softmax");
  // A row where one logit dominates by far: probabilities 1 and 0, log-probabilities exact.
  const Tensor y = tiny::tensor({1000, -1000});
  expect_near_all(F::softmax(y, 0), {1.0, 0.0}, 0);
  expect_near_all(F::log_softmax(y, 0), {0.0, -2000.0}, 1e-3);
}

TEST(NnFunctional, SoftmaxAlongAnyDim) {
  const Tensor x = uniform({3, 4, 5}, -3, 3, 2);
  for (int64_t dim : {0, 1, 2, -3}) {
    const Tensor s = F::softmax(x, dim);
    EXPECT_EQ(s.sizes(), x.sizes());
    // Move `dim` last, then compare rows with the reference.
    const int64_t d = dim < 0 ? dim + 3 : dim;
    const Tensor moved = x.transpose(d, 2).contiguous();
    const int64_t cols = x.size(d), rows = x.numel() / cols;
    const std::vector<double> ref = ref_log_softmax_rows(moved.to_vector<double>(), rows, cols);
    const std::vector<double> got = s.transpose(d, 2).contiguous().to_vector<double>();
    for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], std::exp(ref[i]), 1e-6) << "dim " << dim;
    const std::vector<double> lgot = F::log_softmax(x, dim).transpose(d, 2).contiguous().to_vector<double>();
    for (size_t i = 0; i < lgot.size(); ++i) EXPECT_NEAR(lgot[i], ref[i], 2e-6) << "dim " << dim;
  }
  // A non-contiguous input.
  const Tensor t = x.transpose(0, 2);  // [5, 4, 3]
  const std::vector<double> sums = F::softmax(t, 2).sum({2}).to_vector<double>();
  for (double v : sums) EXPECT_NEAR(v, 1.0, 1e-6);
}

TEST(NnFunctional, SoftmaxOfZeroDimTensor) {
  const Tensor s = F::softmax(tiny::scalar_tensor(3.7), 0);
  EXPECT_EQ(s.dim(), 0);
  EXPECT_EQ(s.item<float>(), 1.0f);
  const Tensor ls = F::log_softmax(tiny::scalar_tensor(-42.0), -1);
  EXPECT_EQ(ls.dim(), 0);
  EXPECT_EQ(ls.item<float>(), 0.0f);
}

// Per-sample cross-entropy with PyTorch's label smoothing, in double.
std::vector<double> ref_cross_entropy(const Tensor& logits, const std::vector<int64_t>& target, double eps,
                                      int64_t ignore_index) {
  const int64_t n = logits.size(0), c = logits.size(1);
  const std::vector<double> lp = ref_log_softmax_rows(logits.to_vector<double>(), n, c);
  std::vector<double> out(static_cast<size_t>(n), 0.0);
  for (int64_t i = 0; i < n; ++i) {
    const int64_t t = target[static_cast<size_t>(i)];
    if (t == ignore_index) continue;
    double mean_neg = 0.0;
    for (int64_t k = 0; k < c; ++k) mean_neg -= lp[static_cast<size_t>(i * c + k)] / static_cast<double>(c);
    out[static_cast<size_t>(i)] = (1.0 - eps) * -lp[static_cast<size_t>(i * c + t)] + eps * mean_neg;
  }
  return out;
}

TEST(NnFunctional, CrossEntropyReductions) {
  const Tensor logits = uniform({6, 4}, -3, 3, 3);
  const std::vector<int64_t> t{0, 3, 1, 1, 2, 3};
  const Tensor target = tiny::from_vector<int64_t>(t);
  const std::vector<double> per = ref_cross_entropy(logits, t, 0.0, -100);
  double sum = 0.0;
  for (double v : per) sum += v;

  const Tensor none = F::cross_entropy(logits, target, {F::Reduction::None});
  EXPECT_EQ(none.sizes(), (IntArrayRef{6}));
  expect_near_all(none, per, 2e-6, "none");
  const Tensor s = F::cross_entropy(logits, target, {F::Reduction::Sum});
  EXPECT_EQ(s.dim(), 0);
  EXPECT_NEAR(s.item<double>(), sum, 1e-5);
  const Tensor m = F::cross_entropy(logits, target);
  EXPECT_EQ(m.dim(), 0);
  EXPECT_NEAR(m.item<double>(), sum / 6.0, 2e-6);
  // Uniform logits give log(C) whatever the target.
  EXPECT_NEAR(F::cross_entropy(tiny::zeros({3, 4}), tiny::from_vector<int64_t>({0, 1, 3})).item<double>(),
              std::log(4.0), 1e-6);
}

TEST(NnFunctional, CrossEntropyIgnoreIndex) {
  const Tensor logits = uniform({5, 3}, -2, 2, 4);
  const std::vector<int64_t> t{2, -100, 0, -100, 1};
  const Tensor target = tiny::from_vector<int64_t>(t);
  const std::vector<double> per = ref_cross_entropy(logits, t, 0.0, -100);
  expect_near_all(F::cross_entropy(logits, target, {F::Reduction::None}), per, 2e-6);
  // The mean divides by the 3 counted samples, not by 5.
  EXPECT_NEAR(F::cross_entropy(logits, target).item<double>(), (per[0] + per[2] + per[4]) / 3.0, 2e-6);
  // A custom ignore_index.
  const std::vector<int64_t> t2{2, 1, 0, 1, 1};
  F::CrossEntropyOptions opts;
  opts.ignore_index = 1;
  const std::vector<double> per2 = ref_cross_entropy(logits, t2, 0.0, 1);
  EXPECT_NEAR(F::cross_entropy(logits, tiny::from_vector<int64_t>(t2), opts).item<double>(),
              (per2[0] + per2[2]) / 2.0, 2e-6);
  // nll_loss follows the same rule.
  const Tensor lp = F::log_softmax(logits, 1);
  EXPECT_NEAR(F::nll_loss(lp, target).item<double>(), (per[0] + per[2] + per[4]) / 3.0, 2e-6);
}

TEST(NnFunctional, CrossEntropyLabelSmoothing) {
  const Tensor logits = uniform({4, 5}, -3, 3, 5);
  const std::vector<int64_t> t{4, 0, -100, 2};
  F::CrossEntropyOptions opts;
  opts.label_smoothing = 0.2;
  opts.reduction = F::Reduction::None;
  const std::vector<double> per = ref_cross_entropy(logits, t, 0.2, -100);
  expect_near_all(F::cross_entropy(logits, tiny::from_vector<int64_t>(t), opts), per, 2e-6, "none");
  opts.reduction = F::Reduction::Mean;
  EXPECT_NEAR(F::cross_entropy(logits, tiny::from_vector<int64_t>(t), opts).item<double>(),
              (per[0] + per[1] + per[3]) / 3.0, 2e-6);
  // label_smoothing = 1 is the mean of -log p over the classes.
  opts.label_smoothing = 1.0;
  opts.reduction = F::Reduction::Sum;
  const std::vector<double> all = ref_cross_entropy(logits, {0, 1, 2, 3}, 1.0, -100);
  EXPECT_NEAR(F::cross_entropy(logits, tiny::from_vector<int64_t>({0, 1, 2, 3}), opts).item<double>(),
              all[0] + all[1] + all[2] + all[3], 1e-5);
}

TEST(NnFunctional, CrossEntropyOneDimensionalInput) {
  const Tensor logits = tiny::tensor({0.5, -1.0, 2.0});
  const Tensor target = tiny::scalar_tensor(int64_t{2}, tiny::kInt64);
  const std::vector<double> per = ref_cross_entropy(logits.view({1, 3}), {2}, 0.0, -100);
  for (auto r : {F::Reduction::Mean, F::Reduction::Sum, F::Reduction::None}) {
    const Tensor loss = F::cross_entropy(logits, target, {r});
    EXPECT_EQ(loss.dim(), 0);
    EXPECT_NEAR(loss.item<double>(), per[0], 2e-6);
  }
}

TEST(NnFunctional, NllLossPicksTheTargetLogProb) {
  const Tensor lp = tiny::tensor({-0.1, -2.5, -3.0, -1.2, -0.7, -2.2}, {2, 3});
  const Tensor target = tiny::from_vector<int64_t>({1, 0});
  expect_near_all(F::nll_loss(lp, target, F::Reduction::None), {2.5, 1.2}, 1e-6);
  EXPECT_NEAR(F::nll_loss(lp, target, F::Reduction::Sum).item<double>(), 3.7, 1e-6);
  EXPECT_NEAR(F::nll_loss(lp, target).item<double>(), 1.85, 1e-6);
  // Every sample ignored: the mean is 0/0 = NaN, as in PyTorch.
  EXPECT_TRUE(std::isnan(F::nll_loss(lp, tiny::from_vector<int64_t>({2, 2}), F::Reduction::Mean, 2).item<double>()));
}

TEST(NnFunctional, MseLoss) {
  const Tensor a = uniform({4, 3}, -2, 2, 6), b = uniform({4, 3}, -2, 2, 7);
  const std::vector<double> va = a.to_vector<double>(), vb = b.to_vector<double>();
  std::vector<double> sq(va.size());
  double sum = 0.0;
  for (size_t i = 0; i < va.size(); ++i) {
    sq[i] = (va[i] - vb[i]) * (va[i] - vb[i]);
    sum += sq[i];
  }
  expect_near_all(F::mse_loss(a, b, F::Reduction::None), sq, 1e-5);
  EXPECT_NEAR(F::mse_loss(a, b, F::Reduction::Sum).item<double>(), sum, 1e-5);
  EXPECT_NEAR(F::mse_loss(a, b).item<double>(), sum / 12.0, 1e-6);
  EXPECT_EQ(F::mse_loss(a, a).item<float>(), 0.0f);
  EXPECT_THROW(F::mse_loss(a, b.view({12})), tiny::ShapeError);
}

TEST(NnFunctional, DropoutIdentityCases) {
  const Tensor x = uniform({100}, -1, 1, 8);
  EXPECT_TRUE(F::dropout(x, 0.0).is_same(x));
  EXPECT_TRUE(F::dropout(x, 0.5, /*training=*/false).is_same(x));
  const Tensor z = F::dropout(x, 1.0);
  EXPECT_EQ(z.sizes(), x.sizes());
  for (float v : z.to_vector<float>()) EXPECT_EQ(v, 0.0f);
}

TEST(NnFunctional, DropoutKeepsAboutOneMinusPAndScales) {
  const Tensor x = uniform({100000}, 0.5, 1.5, 9);  // no zeros in the input
  const std::vector<float> in = x.to_vector<float>();
  for (double p : {0.1, 0.5, 0.8}) {
    tiny::manual_seed(10);
    const std::vector<float> out = F::dropout(x, p).to_vector<float>();
    int64_t kept = 0;
    for (size_t i = 0; i < out.size(); ++i) {
      if (out[i] == 0.0f) continue;
      ++kept;
      // Kept values are scaled by 1/(1-p): compare in double with float rounding room.
      EXPECT_NEAR(out[i], in[i] / (1.0 - p), 4e-7 * in[i] / (1.0 - p)) << "p=" << p << " element " << i;
    }
    // Binomial(1e5, 1-p): standard deviation at most 158 elements; allow 5 sigma.
    const double expected = (1.0 - p) * 1e5;
    EXPECT_NEAR(static_cast<double>(kept), expected, 5 * std::sqrt(1e5 * p * (1 - p))) << "p=" << p;
  }
}

TEST(NnFunctional, DropoutMaskIsReproducible) {
  const Tensor x = tiny::ones({100000});
  tiny::manual_seed(11);
  const std::vector<float> a = F::dropout(x, 0.3).to_vector<float>();
  tiny::manual_seed(11);
  EXPECT_EQ(F::dropout(x, 0.3).to_vector<float>(), a);
  EXPECT_NE(F::dropout(x, 0.3).to_vector<float>(), a);  // the stream moved on
  tiny::Generator g1(12), g2(12);
  EXPECT_EQ(F::dropout(x, 0.3, true, g1).to_vector<float>(), F::dropout(x, 0.3, true, g2).to_vector<float>());
}

TEST(NnFunctional, DropoutMaskDoesNotDependOnThreadCount) {
  const int saved = tiny::get_num_threads();
  const Tensor x = tiny::ones({100000});  // several parallel chunks
  tiny::set_num_threads(1);
  const std::vector<float> one = F::dropout(x, 0.5, true, tiny::Generator(13)).to_vector<float>();
  tiny::set_num_threads(2);
  const std::vector<float> two = F::dropout(x, 0.5, true, tiny::Generator(13)).to_vector<float>();
  tiny::set_num_threads(saved);
  EXPECT_EQ(one, two);
}

TEST(NnFunctional, LinearIsXTimesWeightTransposedPlusBias) {
  const int64_t in = 5, out = 3;
  const Tensor w = uniform({out, in}, -1, 1, 14), b = uniform({out}, -1, 1, 15);
  const std::vector<double> vw = w.to_vector<double>(), vb = b.to_vector<double>();
  auto check = [&](const Tensor& x, const Tensor& y, bool with_bias) {
    const std::vector<double> vx = x.contiguous().to_vector<double>(), vy = y.to_vector<double>();
    const int64_t rows = x.numel() / in;
    ASSERT_EQ(static_cast<int64_t>(vy.size()), rows * out);
    for (int64_t r = 0; r < rows; ++r) {
      for (int64_t o = 0; o < out; ++o) {
        double s = with_bias ? vb[static_cast<size_t>(o)] : 0.0;
        for (int64_t i = 0; i < in; ++i) s += vx[static_cast<size_t>(r * in + i)] * vw[static_cast<size_t>(o * in + i)];
        EXPECT_NEAR(vy[static_cast<size_t>(r * out + o)], s, 2e-6);
      }
    }
  };
  const Tensor x2 = uniform({4, in}, -1, 1, 16);
  const Tensor y2 = F::linear(x2, w, b);
  EXPECT_EQ(y2.sizes(), (IntArrayRef{4, out}));
  check(x2, y2, true);
  check(x2, F::linear(x2, w), false);
  const Tensor x3 = uniform({2, 3, in}, -1, 1, 17);
  const Tensor y3 = F::linear(x3, w, b);
  EXPECT_EQ(y3.sizes(), (IntArrayRef{2, 3, out}));
  check(x3, y3, true);
  const Tensor x1 = uniform({in}, -1, 1, 18);
  const Tensor y1 = F::linear(x1, w, b);
  EXPECT_EQ(y1.sizes(), (IntArrayRef{out}));
  check(x1, y1, true);
  const Tensor xt = uniform({in, 4}, -1, 1, 19).t();  // non-contiguous input
  check(xt, F::linear(xt, w, b), true);
}

}  // namespace

namespace {

// The gradient of dropout is the same scaled mask the forward pass applied.
TEST(NnFunctional, DropoutGradientIsTheScaledMask) {
  tiny::manual_seed(7);
  const double p = 0.3;
  tiny::Tensor x = tiny::ones({1000}, tiny::kFloat64).requires_grad_();
  tiny::Tensor y = tiny::nn::functional::dropout(x, p, true);
  y.sum().backward();
  const std::vector<double> out = y.to_vector<double>();
  const std::vector<double> grad = x.grad().to_vector<double>();
  int kept = 0;
  for (size_t i = 0; i < out.size(); ++i) {
    const double expected = out[i] != 0.0 ? 1.0 / (1.0 - p) : 0.0;
    ASSERT_DOUBLE_EQ(grad[i], expected) << "element " << i;
    kept += out[i] != 0.0;
  }
  EXPECT_GT(kept, 600);
  EXPECT_LT(kept, 800);
  EXPECT_EQ(y.grad_fn()->name(), "NativeDropoutBackward0");
}

}  // namespace

namespace {

// The dropout mask is the Philox stream of DESIGN.md section 5: element i keeps
// its value when bernoulli(draw i) says so, whatever the chunking or threads.
TEST(NnFunctional, DropoutMaskIsThePhiloxStream) {
  const double p = 0.25;
  tiny::Generator gen(1234);
  const tiny::PhiloxState before = gen.get_state();
  tiny::Tensor y = tiny::nn::functional::dropout(tiny::ones({3, 5001}, tiny::kFloat64), p, true, gen);
  const std::vector<double> out = y.to_vector<double>();
  for (size_t i = 0; i < out.size(); ++i) {
    const bool keep = tiny::kernels::bernoulli(tiny::kernels::philox_draw(before.seed, before.offset, i), 1.0 - p);
    ASSERT_EQ(out[i], keep ? 1.0 / (1.0 - p) : 0.0) << "element " << i;
  }
  EXPECT_EQ(gen.get_state().offset - before.offset, tiny::kernels::philox_counters_needed(out.size(), 1));
}

}  // namespace

namespace {

// ---- dropout on cuda:0 (by default the host-emulated GPU) --------------------------------
// DESIGN.md section 5: the CPU and the device draw the same Philox numbers for
// the same seed, so the masks (and their gradients) must be equal exactly.

const tiny::Device kCuda0("cuda:0");

#define SKIP_WITHOUT_CUDA0()                                                      \
  if (!tiny::cuda::is_available()) {                                              \
    GTEST_SKIP() << "cuda:0 is not available (TINY_EMULATED_GPUS=0 and no GPU?)"; \
  }

TEST(NnFunctional, DropoutMaskOnCuda0EqualsTheCpuMask) {
  SKIP_WITHOUT_CUDA0();
  const Tensor x = uniform({100000}, 0.5, 1.5, 9);
  const Tensor xg = x.to(kCuda0);
  for (double p : {0.1, 0.5, 0.8}) {
    SCOPED_TRACE("p=" + std::to_string(p));
    tiny::manual_seed(10);
    const Tensor on_cpu = F::dropout(x, p);
    tiny::manual_seed(10);
    const Tensor on_gpu = F::dropout(xg, p);
    ASSERT_EQ(on_gpu.device(), kCuda0);
    EXPECT_TRUE(tiny::equal(on_gpu.cpu(), on_cpu));
  }
  // An explicit generator, and the stream moving on identically.
  tiny::Generator g_cpu(12), g_gpu(12);
  for (int draw = 0; draw < 3; ++draw) {
    const Tensor a = F::dropout(x, 0.3, true, g_cpu);
    const Tensor b = F::dropout(xg, 0.3, true, g_gpu);
    EXPECT_TRUE(tiny::equal(b.cpu(), a)) << "draw " << draw;
  }
  EXPECT_EQ(g_cpu.get_state().offset, g_gpu.get_state().offset);
}

TEST(NnFunctional, DropoutMaskOnCuda0IsThePhiloxStreamWithAnyThreadCount) {
  SKIP_WITHOUT_CUDA0();
  const int saved = tiny::get_num_threads();
  const double p = 0.25;
  const Tensor ones = tiny::ones({3, 5001}, tiny::kFloat64).to(kCuda0);
  for (int threads : {1, 2}) {
    tiny::set_num_threads(threads);
    tiny::Generator gen(1234);
    const tiny::PhiloxState before = gen.get_state();
    const std::vector<double> out = F::dropout(ones, p, true, gen).cpu().to_vector<double>();
    for (size_t i = 0; i < out.size(); ++i) {
      const bool keep = tiny::kernels::bernoulli(tiny::kernels::philox_draw(before.seed, before.offset, i), 1.0 - p);
      ASSERT_EQ(out[i], keep ? 1.0 / (1.0 - p) : 0.0) << "threads " << threads << " element " << i;
    }
    EXPECT_EQ(gen.get_state().offset - before.offset, tiny::kernels::philox_counters_needed(out.size(), 1));
  }
  tiny::set_num_threads(saved);
}

TEST(NnFunctional, DropoutGradientOnCuda0EqualsTheCpu) {
  SKIP_WITHOUT_CUDA0();
  const double p = 0.3;
  tiny::manual_seed(7);
  Tensor x = tiny::ones({1000}, tiny::kFloat64).requires_grad_();
  Tensor y = F::dropout(x, p, true);
  y.sum().backward();
  tiny::manual_seed(7);
  Tensor xg = tiny::ones({1000}, tiny::kFloat64).to(kCuda0).detach().requires_grad_();
  Tensor yg = F::dropout(xg, p, true);
  yg.sum().backward();
  ASSERT_EQ(yg.device(), kCuda0);
  ASSERT_TRUE(xg.grad().defined());
  EXPECT_EQ(xg.grad().device(), kCuda0);
  EXPECT_TRUE(tiny::equal(yg.cpu(), y));
  EXPECT_TRUE(tiny::equal(xg.grad().cpu(), x.grad()));
  EXPECT_EQ(yg.grad_fn()->name(), "NativeDropoutBackward0");
}

// DESIGN.md section 5: "one generator per device". After manual_seed(s), the
// first random op on cuda:0 draws the start of s's stream whatever the CPU drew
// before, as in PyTorch (torch.manual_seed seeds the CPU generator and every
// CUDA generator, which then advance independently).
TEST(NnFunctional, DropoutOnCuda0UsesTheDevicesOwnGenerator) {
  SKIP_WITHOUT_CUDA0();
  const Tensor x = tiny::ones({2000});
  tiny::manual_seed(21);
  const Tensor first_cpu = F::dropout(x, 0.3);
  const Tensor first_gpu = F::dropout(x.to(kCuda0), 0.3);  // cuda:0's generator has not moved yet
  EXPECT_TRUE(tiny::equal(first_gpu.cpu(), first_cpu));
}

}  // namespace
