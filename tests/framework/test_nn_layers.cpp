// tiny::nn layers and nn::init: forward values against references computed
// here in double precision, initialisation bounds and reproducibility, and
// gradients of Embedding and LayerNorm (by hand and by central differences).

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "gradcheck.h"
#include "runtime/thread_pool.h"
#include "tiny/nn/nn.h"
#include "tiny/tiny.h"

namespace {

namespace nn = tiny::nn;
namespace F = tiny::nn::functional;
using tiny::IntArrayRef;
using tiny::Tensor;
using tiny_test::gradcheck;
using tiny_test::leaf;
using tiny_test::uniform;

void expect_near_all(const Tensor& got, const std::vector<double>& want, double tol, const std::string& what = "") {
  const std::vector<double> g = got.to_vector<double>();
  ASSERT_EQ(g.size(), want.size()) << what;
  for (size_t i = 0; i < g.size(); ++i) EXPECT_NEAR(g[i], want[i], tol) << what << " element " << i;
}

// Writes `values` into a parameter without recording (as an optimizer would).
void set_values(const Tensor& t, const std::vector<double>& values) {
  tiny::NoGradGuard no_grad;
  t.copy_(tiny::tensor(values, t.sizes(), tiny::TensorOptions(t.dtype())));
}

double sample_std(const std::vector<double>& v) {
  double mean = 0.0;
  for (double x : v) mean += x;
  mean /= static_cast<double>(v.size());
  double var = 0.0;
  for (double x : v) var += (x - mean) * (x - mean);
  return std::sqrt(var / static_cast<double>(v.size()));
}

double sample_mean(const std::vector<double>& v) {
  double s = 0.0;
  for (double x : v) s += x;
  return s / static_cast<double>(v.size());
}

// ---- Linear --------------------------------------------------------------------------------

TEST(NnLayers, LinearInitIsUniformWithinOneOverSqrtFanIn) {
  tiny::manual_seed(0);
  nn::Linear lin(100, 80);
  EXPECT_EQ(lin.weight.sizes(), (IntArrayRef{80, 100}));
  EXPECT_EQ(lin.bias.sizes(), (IntArrayRef{80}));
  const double bound = 1.0 / std::sqrt(100.0);
  const std::vector<double> w = lin.weight.to_vector<double>();
  double lo = 1.0, hi = -1.0;
  for (double v : w) {
    EXPECT_LE(std::abs(v), bound);
    lo = std::min(lo, v);
    hi = std::max(hi, v);
  }
  // 8000 uniform draws reach close to both ends, and the spread is bound/sqrt(3).
  EXPECT_LT(lo, -0.98 * bound);
  EXPECT_GT(hi, 0.98 * bound);
  EXPECT_NEAR(sample_std(w), bound / std::sqrt(3.0), 0.05 * bound);
  EXPECT_NEAR(sample_mean(w), 0.0, 0.05 * bound);
  const std::vector<double> b = lin.bias.to_vector<double>();
  for (double v : b) EXPECT_LE(std::abs(v), bound);
  EXPECT_GT(*std::max_element(b.begin(), b.end()) - *std::min_element(b.begin(), b.end()), bound);
}

TEST(NnLayers, LinearInitIsReproducibleWithManualSeed) {
  tiny::manual_seed(42);
  nn::Linear a(7, 5);
  tiny::manual_seed(42);
  nn::Linear b(7, 5);
  tiny::manual_seed(43);
  nn::Linear c(7, 5);
  EXPECT_TRUE(tiny::equal(a.weight, b.weight));
  EXPECT_TRUE(tiny::equal(a.bias, b.bias));
  EXPECT_FALSE(tiny::equal(a.weight, c.weight));
  // reset_parameters draws new values.
  a.reset_parameters();
  EXPECT_FALSE(tiny::equal(a.weight, b.weight));
}

TEST(NnLayers, LinearForwardMatchesHandComputation) {
  nn::Linear lin(3, 2);
  set_values(lin.weight, {1.0, -2.0, 0.5, 0.25, 3.0, -1.0});
  set_values(lin.bias, {0.1, -0.2});
  Tensor x = tiny::tensor({1.0, 2.0, 3.0, -1.0, 0.0, 4.0}, {2, 3});
  // Row 0: 1 - 4 + 1.5 + 0.1 = -1.4 ; 0.25 + 6 - 3 - 0.2 = 3.05
  // Row 1: -1 + 0 + 2 + 0.1 = 1.1   ; -0.25 + 0 - 4 - 0.2 = -4.45
  expect_near_all(lin(x), {-1.4, 3.05, 1.1, -4.45}, 1e-6);
  // Leading batch dimensions are kept.
  Tensor y = lin(x.reshape({2, 1, 3}));
  EXPECT_EQ(y.sizes(), (IntArrayRef{2, 1, 2}));
  expect_near_all(y, {-1.4, 3.05, 1.1, -4.45}, 1e-6);
  EXPECT_THROW(lin(tiny::ones({2, 4})), tiny::ShapeError);
}

TEST(NnLayers, LinearWithoutBias) {
  nn::Linear lin(2, 2, /*bias=*/false);
  EXPECT_FALSE(lin.bias.defined());
  EXPECT_EQ(lin.parameters().size(), 1u);
  EXPECT_EQ(lin.state_dict().size(), 1u);
  set_values(lin.weight, {1.0, 2.0, 3.0, 4.0});
  expect_near_all(lin(tiny::tensor({1.0, -1.0}, {1, 2})), {-1.0, -1.0}, 1e-6);
}

// ---- activations, Dropout, Flatten -------------------------------------------------------------

TEST(NnLayers, ActivationsMatchTheirFormulas) {
  const std::vector<double> xs = {-3.0, -1.5, -0.25, 0.0, 0.3, 1.0, 2.5};
  Tensor x = tiny::tensor(xs, {7}, tiny::kFloat64);
  std::vector<double> relu, gelu, gelu_tanh, tanh, sigmoid;
  const double pi = std::acos(-1.0);
  for (double v : xs) {
    relu.push_back(v > 0 ? v : 0.0);
    gelu.push_back(0.5 * v * (1.0 + std::erf(v / std::sqrt(2.0))));
    gelu_tanh.push_back(0.5 * v * (1.0 + std::tanh(std::sqrt(2.0 / pi) * (v + 0.044715 * v * v * v))));
    tanh.push_back(std::tanh(v));
    sigmoid.push_back(1.0 / (1.0 + std::exp(-v)));
  }
  expect_near_all(nn::ReLU()(x), relu, 1e-12, "relu");
  expect_near_all(nn::GELU()(x), gelu, 1e-12, "gelu");
  expect_near_all(nn::GELU("tanh")(x), gelu_tanh, 1e-12, "gelu tanh");
  expect_near_all(nn::Tanh()(x), tanh, 1e-12, "tanh");
  expect_near_all(nn::Sigmoid()(x), sigmoid, 1e-12, "sigmoid");
  EXPECT_THROW(nn::GELU("fast"), tiny::ValueError);
}

TEST(NnLayers, DropoutZeroesAndScalesInTrainingOnly) {
  nn::Dropout drop(0.25);
  Tensor x = uniform({64, 64}, 0.5, 1.5, 3, tiny::kFloat32);
  tiny::manual_seed(11);
  const std::vector<float> y = drop(x).to_vector<float>();
  const std::vector<float> xv = x.to_vector<float>();
  int zeros = 0;
  for (size_t i = 0; i < y.size(); ++i) {
    if (y[i] == 0.0f) {
      ++zeros;
    } else {
      EXPECT_NEAR(y[i], xv[i] / 0.75f, 1e-6f);
    }
  }
  // 4096 draws with p = 0.25: expect 1024 zeros, sd ~28.
  EXPECT_NEAR(zeros, 1024, 150);
  // Same seed, same mask.
  tiny::manual_seed(11);
  EXPECT_EQ(drop(x).to_vector<float>(), y);
  drop.eval();
  EXPECT_TRUE(tiny::equal(drop(x), x));
  EXPECT_TRUE(tiny::equal(nn::Dropout(0.0)(x), x));
  EXPECT_THROW(nn::Dropout(1.5), tiny::ValueError);
  EXPECT_THROW(nn::Dropout(-0.1), tiny::ValueError);
}

TEST(NnLayers, FlattenMergesTheAskedDimensions) {
  Tensor x = tiny::arange(0.0, 120.0).reshape({2, 3, 4, 5});
  Tensor y = nn::Flatten()(x);
  EXPECT_EQ(y.sizes(), (IntArrayRef{2, 60}));
  EXPECT_EQ(y.to_vector<float>(), x.to_vector<float>());
  EXPECT_EQ(nn::Flatten(0, 2)(x).sizes(), (IntArrayRef{24, 5}));
  EXPECT_EQ(nn::Flatten(1, 2)(x).sizes(), (IntArrayRef{2, 12, 5}));
}

// ---- Sequential ------------------------------------------------------------------------------

TEST(NnLayers, SequentialChainsAndIndexes) {
  auto l1 = std::make_shared<nn::Linear>(3, 4);
  auto l2 = std::make_shared<nn::Linear>(4, 2);
  nn::Sequential seq{l1, std::make_shared<nn::Tanh>()};
  seq.push_back(l2);
  EXPECT_EQ(seq.size(), 3u);
  Tensor x = uniform({5, 3}, -1.0, 1.0, 9, tiny::kFloat32);
  Tensor want = (*l2)(tiny::tanh((*l1)(x)));
  EXPECT_TRUE(tiny::equal(seq(x), want));

  EXPECT_EQ(seq[0].get(), l1.get());
  EXPECT_EQ(seq[-1].get(), l2.get());
  EXPECT_EQ(seq.at<nn::Linear>(2).get(), l2.get());
  EXPECT_EQ(seq[1]->name(), "Tanh");
  EXPECT_THROW(seq.at<nn::Linear>(1), tiny::Error);
  EXPECT_THROW(seq[3], tiny::IndexError);
  EXPECT_THROW(seq[-4], tiny::IndexError);
  std::vector<std::string> names;
  for (const auto& [n, c] : seq.named_children()) names.push_back(n);
  EXPECT_EQ(names, (std::vector<std::string>{"0", "1", "2"}));
  size_t count = 0;
  for (const auto& m : seq) count += m != nullptr;
  EXPECT_EQ(count, 3u);
  // An empty Sequential is the identity.
  EXPECT_TRUE(nn::Sequential()(x).is_same(x));
}

// ---- Embedding ---------------------------------------------------------------------------------

TEST(NnLayers, EmbeddingLooksUpRows) {
  nn::Embedding emb(5, 3);
  EXPECT_EQ(emb.weight.sizes(), (IntArrayRef{5, 3}));
  std::vector<double> w(15);
  for (int i = 0; i < 15; ++i) w[i] = 0.5 * i - 3.0;
  set_values(emb.weight, w);
  Tensor idx = tiny::from_vector<int64_t>({4, 0, 2, 2, 1, 4}, {2, 3});
  Tensor y = emb(idx);
  EXPECT_EQ(y.sizes(), (IntArrayRef{2, 3, 3}));
  std::vector<double> want;
  for (int64_t r : {4, 0, 2, 2, 1, 4}) {
    for (int c = 0; c < 3; ++c) want.push_back(w[r * 3 + c]);
  }
  expect_near_all(y, want, 0.0);
  // A 0-d index gives one vector; a strided weight works too.
  expect_near_all(emb(tiny::scalar_tensor(3, tiny::kInt64)), {w[9], w[10], w[11]}, 0.0);
  Tensor wt = tiny::tensor(w, {3, 5}).t();  // [5, 3], non-contiguous
  expect_near_all(F::embedding(tiny::from_vector<int64_t>({1}, {1}), wt), {w[1], w[6], w[11]}, 0.0);
}

TEST(NnLayers, EmbeddingInitIsStandardNormalWithZeroPaddingRow) {
  tiny::manual_seed(21);
  nn::Embedding emb(1000, 16, /*padding_idx=*/7);
  std::vector<double> w = emb.weight.to_vector<double>();
  for (int c = 0; c < 16; ++c) EXPECT_EQ(w[7 * 16 + c], 0.0);
  w.erase(w.begin() + 7 * 16, w.begin() + 8 * 16);
  EXPECT_NEAR(sample_mean(w), 0.0, 0.03);
  EXPECT_NEAR(sample_std(w), 1.0, 0.03);
  tiny::manual_seed(21);
  nn::Embedding again(1000, 16, 7);
  EXPECT_TRUE(tiny::equal(emb.weight, again.weight));
  EXPECT_THROW(nn::Embedding(10, 3, 10), tiny::ValueError);
  EXPECT_THROW(nn::Embedding(10, 3, -2), tiny::ValueError);
}

TEST(NnLayers, EmbeddingGradientAccumulatesRepeatedIndicesAndSkipsPadding) {
  nn::Embedding emb(6, 4, /*padding_idx=*/2);
  emb.to(tiny::kFloat64);
  const std::vector<int64_t> indices = {1, 3, 1, 2, 1, 5, 2, 0};
  Tensor idx = tiny::from_vector<int64_t>(indices, {2, 4});
  Tensor g = uniform({2, 4, 4}, -1.0, 1.0, 17);
  emb(idx).backward(g);
  const std::vector<double> gv = g.to_vector<double>();
  std::vector<double> want(24, 0.0);
  for (size_t i = 0; i < indices.size(); ++i) {
    if (indices[i] == 2) continue;
    for (int c = 0; c < 4; ++c) want[indices[i] * 4 + c] += gv[i * 4 + c];
  }
  ASSERT_TRUE(emb.weight.grad().defined());
  EXPECT_EQ(emb.weight.grad().sizes(), (IntArrayRef{6, 4}));
  expect_near_all(emb.weight.grad(), want, 1e-12);
  // Row 1 was used three times: its gradient is not a copy of one use.
  EXPECT_NE(want[4], gv[0]);
  // Row 2 (padding) gets nothing although it was looked up twice; row 4 was never used.
  for (int c = 0; c < 4; ++c) {
    EXPECT_EQ(emb.weight.grad().to_vector<double>()[2 * 4 + c], 0.0);
    EXPECT_EQ(emb.weight.grad().to_vector<double>()[4 * 4 + c], 0.0);
  }
}

TEST(NnLayers, EmbeddingGradcheck) {
  Tensor weight = leaf(uniform({5, 3}, -1.0, 1.0, 23));
  Tensor idx = tiny::from_vector<int64_t>({0, 4, 4, 2, 0, 4}, {3, 2});
  EXPECT_TRUE(gradcheck([](const std::vector<Tensor>& in) { return F::embedding(in[1], in[0]); }, {weight, idx}));
  // With a padding_idx set: the padding row is still read in forward (as in PyTorch) but gets no gradient by
  // design, so finite differences only apply to lookups of the other rows.
  Tensor idx2 = tiny::from_vector<int64_t>({0, 1, 3, 1}, {4});
  EXPECT_TRUE(gradcheck([](const std::vector<Tensor>& in) { return F::embedding(in[1], in[0], 2) * 2.0; },
                        {weight, idx2}));
}

TEST(NnLayers, EmbeddingBackwardIsTheSameWithAnyThreadCount) {
  // Many repeated indices and enough columns for several parallel chunks.
  const int64_t num = 7, dim = 300, n = 400;
  Tensor weight = leaf(uniform({num, dim}, -1.0, 1.0, 31, tiny::kFloat32));
  std::vector<int64_t> indices;
  for (int64_t i = 0; i < n; ++i) indices.push_back((i * i + 3 * i) % num);
  Tensor idx = tiny::from_vector<int64_t>(indices, {n});
  Tensor g = uniform({n, dim}, -1.0, 1.0, 32, tiny::kFloat32);
  const int threads_before = tiny::runtime::num_threads();
  std::vector<std::vector<float>> results;
  for (int threads : {1, 2, 4}) {
    tiny::runtime::set_num_threads(threads);
    weight.set_grad(Tensor());
    F::embedding(idx, weight).backward(g);
    results.push_back(weight.grad().to_vector<float>());
  }
  tiny::runtime::set_num_threads(threads_before);
  EXPECT_EQ(results[0], results[1]);
  EXPECT_EQ(results[0], results[2]);
  // And it is the index-order sum (float32 accumulated in order, checked against double).
  const std::vector<float> gv = g.to_vector<float>();
  for (int64_t r = 0; r < num; ++r) {
    double s = 0.0;
    for (int64_t i = 0; i < n; ++i) s += indices[i] == r ? gv[i * dim] : 0.0;
    EXPECT_NEAR(results[0][r * dim], s, 1e-4) << "row " << r;
  }
}

TEST(NnLayers, EmbeddingRejectsBadIndices) {
  nn::Embedding emb(10, 2);
  try {
    emb(tiny::from_vector<int64_t>({3, 12, 1}, {3}));
    FAIL() << "expected IndexError";
  } catch (const tiny::IndexError& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("12"), std::string::npos) << msg;
    EXPECT_NE(msg.find("num_embeddings=10"), std::string::npos) << msg;
  }
  EXPECT_THROW(emb(tiny::from_vector<int64_t>({-1}, {1})), tiny::IndexError);
  EXPECT_THROW(emb(tiny::from_vector<int64_t>({10}, {1})), tiny::IndexError);
  EXPECT_NO_THROW(emb(tiny::from_vector<int64_t>({9, 0}, {2})));
  try {
    emb(tiny::tensor({1.0, 2.0}));
    FAIL() << "expected DtypeError";
  } catch (const tiny::DtypeError& e) {
    EXPECT_NE(std::string(e.what()).find("int64"), std::string::npos) << e.what();
  }
  EXPECT_THROW(F::embedding(tiny::from_vector<int64_t>({0}, {1}), emb.weight, 10), tiny::ValueError);
  EXPECT_THROW(F::embedding(tiny::from_vector<int64_t>({0}, {1}), tiny::ones({10})), tiny::ShapeError);
}

// ---- LayerNorm ---------------------------------------------------------------------------------

TEST(NnLayers, LayerNormForwardMatchesHandComputation) {
  nn::LayerNorm ln(4);
  EXPECT_EQ(ln.weight.to_vector<float>(), (std::vector<float>{1, 1, 1, 1}));
  EXPECT_EQ(ln.bias.to_vector<float>(), (std::vector<float>{0, 0, 0, 0}));
  set_values(ln.weight, {1.0, 2.0, -1.0, 0.5});
  set_values(ln.bias, {0.0, 0.1, 0.2, 0.3});
  const std::vector<double> xs = {1.0, 2.0, 3.0, 6.0, -1.0, -1.0, 2.0, 0.0};
  Tensor x = tiny::tensor(xs, {2, 4});
  const std::vector<double> w = {1.0, 2.0, -1.0, 0.5}, b = {0.0, 0.1, 0.2, 0.3};
  std::vector<double> want;
  for (int r = 0; r < 2; ++r) {
    double mean = 0.0, var = 0.0;
    for (int c = 0; c < 4; ++c) mean += xs[r * 4 + c] / 4.0;
    for (int c = 0; c < 4; ++c) var += (xs[r * 4 + c] - mean) * (xs[r * 4 + c] - mean) / 4.0;
    for (int c = 0; c < 4; ++c) want.push_back((xs[r * 4 + c] - mean) / std::sqrt(var + 1e-5) * w[c] + b[c]);
  }
  expect_near_all(ln(x), want, 1e-5);
}

TEST(NnLayers, LayerNormOverSeveralDimsWithoutAffine) {
  nn::LayerNorm ln({2, 3}, 1e-3, /*elementwise_affine=*/false);
  EXPECT_TRUE(ln.parameters().empty());
  EXPECT_TRUE(ln.state_dict().empty());
  Tensor x = uniform({4, 2, 3}, -2.0, 2.0, 41);
  const std::vector<double> xs = x.to_vector<double>();
  std::vector<double> want;
  for (int r = 0; r < 4; ++r) {
    double mean = 0.0, var = 0.0;
    for (int c = 0; c < 6; ++c) mean += xs[r * 6 + c] / 6.0;
    for (int c = 0; c < 6; ++c) var += (xs[r * 6 + c] - mean) * (xs[r * 6 + c] - mean) / 6.0;
    for (int c = 0; c < 6; ++c) want.push_back((xs[r * 6 + c] - mean) / std::sqrt(var + 1e-3));
  }
  Tensor y = ln(x);
  EXPECT_EQ(y.sizes(), (IntArrayRef{4, 2, 3}));
  expect_near_all(y, want, 1e-12);
  EXPECT_THROW(ln(tiny::ones({4, 3, 2})), tiny::ShapeError);
  EXPECT_THROW(nn::LayerNorm(5)(tiny::ones({2, 4})), tiny::ShapeError);
}

TEST(NnLayers, LayerNormGradcheck) {
  Tensor x = leaf(uniform({3, 5}, -2.0, 2.0, 51));
  Tensor w = leaf(uniform({5}, 0.5, 1.5, 52));
  Tensor b = leaf(uniform({5}, -0.5, 0.5, 53));
  EXPECT_TRUE(gradcheck(
      [](const std::vector<Tensor>& in) { return F::layer_norm(in[0], {5}, in[1], in[2], 1e-5); }, {x, w, b}));
  Tensor x3 = leaf(uniform({2, 3, 4}, -1.0, 1.0, 54));
  EXPECT_TRUE(gradcheck([](const std::vector<Tensor>& in) { return F::layer_norm(in[0], {3, 4}); }, {x3}));
  // Through the module in float64, its parameters included.
  nn::LayerNorm ln(5);
  ln.to(tiny::kFloat64);
  set_values(ln.weight, {1.0, 0.5, -1.0, 2.0, 0.3});
  Tensor xm = leaf(uniform({2, 5}, -1.0, 1.0, 55));
  EXPECT_TRUE(gradcheck([&ln](const std::vector<Tensor>& in) { return ln(in[0]); }, {xm, ln.weight, ln.bias}));
}

// ---- losses ------------------------------------------------------------------------------------

TEST(NnLayers, LossModulesMatchHandComputation) {
  const std::vector<double> logits = {1.0, 2.0, 0.5, -1.0, 0.0, 3.0};
  Tensor x = tiny::tensor(logits, {2, 3}, tiny::kFloat64);
  Tensor t = tiny::from_vector<int64_t>({1, 2}, {2});
  std::vector<double> nll;
  for (int r = 0; r < 2; ++r) {
    double s = 0.0;
    for (int c = 0; c < 3; ++c) s += std::exp(logits[r * 3 + c]);
    const int64_t target = r == 0 ? 1 : 2;
    nll.push_back(std::log(s) - logits[r * 3 + target]);
  }
  nn::CrossEntropyLoss ce;
  EXPECT_NEAR(ce(x, t).item<double>(), (nll[0] + nll[1]) / 2.0, 1e-12);
  nn::CrossEntropyLoss ce_sum({nn::Reduction::Sum});
  EXPECT_NEAR(ce_sum(x, t).item<double>(), nll[0] + nll[1], 1e-12);
  nn::CrossEntropyLoss ce_none({nn::Reduction::None});
  expect_near_all(ce_none(x, t), nll, 1e-12);

  // NLLLoss on log-probabilities, with an ignored sample.
  Tensor lp = tiny::tensor({-0.5, -1.0, -2.0, -0.1, -3.0, -0.7}, {2, 3}, tiny::kFloat64);
  nn::NLLLoss nll_loss;
  EXPECT_NEAR(nll_loss(lp, t).item<double>(), (1.0 + 0.7) / 2.0, 1e-12);
  nn::NLLLoss nll_ignore(nn::Reduction::Mean, /*ignore_index=*/2);
  EXPECT_NEAR(nll_ignore(lp, t).item<double>(), 1.0, 1e-12);
  nn::NLLLoss nll_none(nn::Reduction::None);
  expect_near_all(nll_none(lp, t), {1.0, 0.7}, 1e-12);

  Tensor a = tiny::tensor({1.0, 2.0, 3.0}, tiny::kFloat64);
  Tensor b = tiny::tensor({0.0, 4.0, 2.5}, tiny::kFloat64);
  EXPECT_NEAR(nn::MSELoss()(a, b).item<double>(), (1.0 + 4.0 + 0.25) / 3.0, 1e-12);
  EXPECT_NEAR(nn::MSELoss(nn::Reduction::Sum)(a, b).item<double>(), 5.25, 1e-12);
  expect_near_all(nn::MSELoss(nn::Reduction::None)(a, b), {1.0, 4.0, 0.25}, 1e-12);

  // A loss called with one tensor says what it needs.
  try {
    ce(x);
    FAIL() << "expected NotImplemented";
  } catch (const tiny::NotImplemented& e) {
    EXPECT_NE(std::string(e.what()).find("CrossEntropyLoss"), std::string::npos) << e.what();
  }
}

TEST(NnLayers, LossModuleGradientTrainsAModel) {
  tiny::manual_seed(61);
  auto model = std::make_shared<nn::Sequential>(std::make_shared<nn::Linear>(4, 8), std::make_shared<nn::ReLU>(),
                                                std::make_shared<nn::Linear>(8, 3));
  nn::CrossEntropyLoss criterion;
  Tensor x = uniform({16, 4}, -1.0, 1.0, 62, tiny::kFloat32);
  std::vector<int64_t> labels;
  for (int i = 0; i < 16; ++i) labels.push_back(i % 3);
  Tensor y = tiny::from_vector<int64_t>(labels, {16});
  const float first = criterion((*model)(x), y).item<float>();
  for (int step = 0; step < 50; ++step) {
    model->zero_grad();
    criterion((*model)(x), y).backward();
    tiny::NoGradGuard no_grad;
    for (const Tensor& p : model->parameters()) p.sub_(p.grad(), 0.5);
  }
  EXPECT_LT(criterion((*model)(x), y).item<float>(), 0.8f * first);
}

// ---- nn::init ------------------------------------------------------------------------------------

TEST(NnLayers, InitGainsAndFans) {
  EXPECT_DOUBLE_EQ(nn::init::calculate_gain("linear"), 1.0);
  EXPECT_DOUBLE_EQ(nn::init::calculate_gain("sigmoid"), 1.0);
  EXPECT_DOUBLE_EQ(nn::init::calculate_gain("tanh"), 5.0 / 3.0);
  EXPECT_DOUBLE_EQ(nn::init::calculate_gain("relu"), std::sqrt(2.0));
  EXPECT_DOUBLE_EQ(nn::init::calculate_gain("leaky_relu"), std::sqrt(2.0 / (1.0 + 0.01 * 0.01)));
  EXPECT_DOUBLE_EQ(nn::init::calculate_gain("leaky_relu", std::sqrt(5.0)), std::sqrt(1.0 / 3.0));
  EXPECT_DOUBLE_EQ(nn::init::calculate_gain("selu"), 0.75);
  EXPECT_THROW(nn::init::calculate_gain("swish"), tiny::ValueError);
  const auto [fan_in, fan_out] = nn::init::calculate_fan_in_and_fan_out(tiny::empty({3, 4, 5, 6}));
  EXPECT_EQ(fan_in, 4 * 30);
  EXPECT_EQ(fan_out, 3 * 30);
  EXPECT_THROW(nn::init::calculate_fan_in_and_fan_out(tiny::empty({3})), tiny::ValueError);
}

// All values within ±bound, and the extremes close to it (so a too-small bound fails too).
void expect_uniform_bound(const Tensor& t, double bound, const char* what) {
  const std::vector<double> v = t.to_vector<double>();
  const auto [lo, hi] = std::minmax_element(v.begin(), v.end());
  EXPECT_GE(*lo, -bound) << what;
  EXPECT_LE(*hi, bound) << what;
  EXPECT_LT(*lo, -0.97 * bound) << what;
  EXPECT_GT(*hi, 0.97 * bound) << what;
}

TEST(NnLayers, InitFunctionsUsePyTorchFormulas) {
  tiny::Generator gen(5);
  Tensor w = tiny::empty({64, 32});
  nn::init::kaiming_uniform_(w, 0.0, nn::init::FanMode::FanIn, "relu", gen);
  expect_uniform_bound(w, std::sqrt(6.0 / 32.0), "kaiming_uniform_ relu fan_in");
  nn::init::kaiming_uniform_(w, 0.0, nn::init::FanMode::FanOut, "relu", gen);
  expect_uniform_bound(w, std::sqrt(6.0 / 64.0), "kaiming_uniform_ relu fan_out");
  nn::init::kaiming_uniform_(w, std::sqrt(5.0));
  expect_uniform_bound(w, 1.0 / std::sqrt(32.0), "kaiming_uniform_ a=sqrt(5)");
  nn::init::xavier_uniform_(w, 1.0, gen);
  expect_uniform_bound(w, std::sqrt(6.0 / 96.0), "xavier_uniform_");
  nn::init::xavier_uniform_(w, 2.0, gen);
  expect_uniform_bound(w, 2.0 * std::sqrt(6.0 / 96.0), "xavier_uniform_ gain 2");
  nn::init::uniform_(w, -0.5, 2.0, gen);
  const std::vector<double> u = w.to_vector<double>();
  for (double v : u) {
    EXPECT_GE(v, -0.5);
    EXPECT_LT(v, 2.0);
  }
  EXPECT_NEAR(sample_mean(u), 0.75, 0.05);

  Tensor big = tiny::empty({200, 100}, tiny::kFloat64);
  nn::init::normal_(big, 3.0, 0.5, gen);
  EXPECT_NEAR(sample_mean(big.to_vector<double>()), 3.0, 0.02);
  EXPECT_NEAR(sample_std(big.to_vector<double>()), 0.5, 0.02);
  nn::init::kaiming_normal_(big, 0.0, nn::init::FanMode::FanIn, "relu", gen);
  EXPECT_NEAR(sample_std(big.to_vector<double>()), std::sqrt(2.0 / 100.0), 0.01 * std::sqrt(2.0 / 100.0) * 5);
  nn::init::xavier_normal_(big, 1.0, gen);
  EXPECT_NEAR(sample_std(big.to_vector<double>()), std::sqrt(2.0 / 300.0), 0.05 * std::sqrt(2.0 / 300.0));

  nn::init::constant_(w, 0.25);
  for (float v : w.to_vector<float>()) EXPECT_EQ(v, 0.25f);
  nn::init::ones_(w);
  for (float v : w.to_vector<float>()) EXPECT_EQ(v, 1.0f);
  nn::init::zeros_(w);
  for (float v : w.to_vector<float>()) EXPECT_EQ(v, 0.0f);
  EXPECT_THROW(nn::init::uniform_(tiny::zeros({3}, tiny::kInt64)), tiny::DtypeError);
}

TEST(NnLayers, InitIsInPlaceReproducibleAndWorksOnParameters) {
  Tensor p = tiny::zeros({4, 4}, tiny::TensorOptions().requires_grad(true));
  const void* data = p.raw_data_ptr();
  Tensor r = nn::init::xavier_uniform_(p, 1.0, tiny::Generator(77));
  EXPECT_TRUE(r.is_same(p));
  EXPECT_EQ(p.raw_data_ptr(), data);
  EXPECT_TRUE(p.requires_grad());
  EXPECT_TRUE(p.is_leaf());
  Tensor q = tiny::zeros({4, 4});
  nn::init::xavier_uniform_(q, 1.0, tiny::Generator(77));
  EXPECT_TRUE(tiny::equal(p.detach(), q));
  nn::init::xavier_uniform_(q, 1.0, tiny::Generator(78));
  EXPECT_FALSE(tiny::equal(p.detach(), q));
}

}  // namespace
