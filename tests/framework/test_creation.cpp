// Factory functions: zeros/ones/full/empty/arange, the random factories,
// tensors from data, *_like, TensorOptions, empty shapes and 0-d tensors.

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <vector>

#include "tiny/tiny.h"

namespace {

using tiny::Tensor;

TEST(Creation, ZerosOnesFullValuesAndDtypes) {
  const Tensor z = tiny::zeros({2, 3});
  EXPECT_EQ(z.sizes(), (tiny::IntArrayRef{2, 3}));
  EXPECT_EQ(z.dtype(), tiny::kFloat32);
  EXPECT_TRUE(z.is_contiguous());
  for (float v : z.to_vector<float>()) EXPECT_EQ(v, 0.0f);

  const Tensor o = tiny::ones({4}, tiny::kInt64);
  EXPECT_EQ(o.dtype(), tiny::kInt64);
  for (int64_t v : o.to_vector<int64_t>()) EXPECT_EQ(v, 1);

  const Tensor f = tiny::full({3, 2}, 2.5, tiny::kFloat64);
  EXPECT_EQ(f.dtype(), tiny::kFloat64);
  EXPECT_EQ(f.numel(), 6);
  for (double v : f.to_vector<double>()) EXPECT_EQ(v, 2.5);

  const Tensor b = tiny::full({2}, true, tiny::kBool);
  EXPECT_EQ(b.dtype(), tiny::kBool);
  for (bool v : b.to_vector<bool>()) EXPECT_TRUE(v);
}

TEST(Creation, EmptyHasShapeDtypeAndContiguousStrides) {
  const Tensor e = tiny::empty({2, 3, 4}, tiny::kFloat64);
  EXPECT_EQ(e.sizes(), (tiny::IntArrayRef{2, 3, 4}));
  EXPECT_EQ(e.strides(), (tiny::IntArrayRef{12, 4, 1}));
  EXPECT_EQ(e.dtype(), tiny::kFloat64);
  EXPECT_EQ(e.element_size(), sizeof(double));
  EXPECT_EQ(e.storage_offset(), 0);
  EXPECT_TRUE(e.is_cpu());
  EXPECT_EQ(e.get_device(), -1);
}

TEST(Creation, ArangeEndOnlyIsInt64) {
  const Tensor a = tiny::arange(5);
  EXPECT_EQ(a.dtype(), tiny::kInt64);
  EXPECT_EQ(a.to_vector<int64_t>(), (std::vector<int64_t>{0, 1, 2, 3, 4}));
  EXPECT_EQ(tiny::arange(0).numel(), 0);
  const Tensor af = tiny::arange(3, tiny::kFloat32);
  EXPECT_EQ(af.dtype(), tiny::kFloat32);
  EXPECT_EQ(af.to_vector<float>(), (std::vector<float>{0.0f, 1.0f, 2.0f}));
}

// Options that give only a device keep PyTorch's int64 default of arange(end)
// and randint (torch.arange(3, device=d) is int64); a dtype given wins.
TEST(Creation, ADeviceAloneKeepsTheInt64DefaultOfArangeAndRandint) {
  EXPECT_FALSE(tiny::TensorOptions(tiny::Device()).has_dtype());
  EXPECT_TRUE(tiny::TensorOptions(tiny::kFloat32).has_dtype());
  EXPECT_EQ(tiny::TensorOptions().dtype(), tiny::kFloat32);  // what every other factory defaults to
  std::vector<tiny::Device> devices{tiny::Device()};
  if (tiny::cuda::device_count() > 0) devices.emplace_back("cuda:0");
  for (const tiny::Device& d : devices) {
    SCOPED_TRACE(d.str());
    EXPECT_EQ(tiny::arange(3, d).dtype(), tiny::kInt64);
    EXPECT_EQ(tiny::arange(3, d).cpu().to_vector<int64_t>(), (std::vector<int64_t>{0, 1, 2}));
    EXPECT_EQ(tiny::randint(0, 4, {8}, d).dtype(), tiny::kInt64);
    EXPECT_EQ(tiny::randint(0, 4, {8}, tiny::TensorOptions(d).requires_grad(false)).dtype(), tiny::kInt64);
    EXPECT_EQ(tiny::arange(3, tiny::TensorOptions(tiny::kFloat64).device(d)).dtype(), tiny::kFloat64);
    EXPECT_EQ(tiny::randint(0, 4, {8}, tiny::TensorOptions(tiny::kInt32).device(d)).dtype(), tiny::kInt32);
    EXPECT_EQ(tiny::zeros({2}, d).dtype(), tiny::kFloat32);
  }
}

TEST(Creation, ArangeStartEndStepMatchesPythonRange) {
  struct Case {
    double start, end, step;
  };
  for (const Case& c : {Case{0, 10, 3}, Case{2, 7, 1}, Case{5, 0, -1.5}, Case{0, 1, 0.25}, Case{-1, 1, 0.3},
                        Case{3, 3, 1}}) {
    std::vector<double> expected;
    for (double v = c.start; c.step > 0 ? v < c.end - 1e-12 : v > c.end + 1e-12; v += c.step) expected.push_back(v);
    const Tensor t = tiny::arange(c.start, c.end, c.step, tiny::kFloat64);
    EXPECT_EQ(t.dtype(), tiny::kFloat64);
    const std::vector<double> got = t.to_vector<double>();
    ASSERT_EQ(got.size(), expected.size()) << "arange(" << c.start << ", " << c.end << ", " << c.step << ")";
    for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], expected[i], 1e-12);
  }
  // The three-argument form defaults to float32.
  EXPECT_EQ(tiny::arange(0.0, 1.0, 0.5).dtype(), tiny::kFloat32);
}

TEST(Creation, RandIsInUnitIntervalWithPlausibleMean) {
  tiny::manual_seed(1);
  for (tiny::Dtype dtype : {tiny::kFloat32, tiny::kFloat64}) {
    const Tensor r = tiny::rand({20000}, dtype);
    EXPECT_EQ(r.dtype(), dtype);
    const std::vector<double> v = r.to_vector<double>();
    for (double x : v) {
      ASSERT_GE(x, 0.0);
      ASSERT_LT(x, 1.0);
    }
    // Mean of U[0,1) has standard error sqrt(1/12/n) ~ 0.002 here; allow 5 sigma.
    const double mean = std::accumulate(v.begin(), v.end(), 0.0) / static_cast<double>(v.size());
    EXPECT_NEAR(mean, 0.5, 0.01);
  }
}

TEST(Creation, RandnHasZeroMeanUnitVariance) {
  tiny::manual_seed(2);
  const std::vector<double> v = tiny::randn({50000}).to_vector<double>();
  double mean = std::accumulate(v.begin(), v.end(), 0.0) / static_cast<double>(v.size());
  double var = 0.0;
  for (double x : v) var += (x - mean) * (x - mean);
  var /= static_cast<double>(v.size());
  // Standard errors: mean ~0.0045, variance ~0.0063; allow about 5 sigma.
  EXPECT_NEAR(mean, 0.0, 0.025);
  EXPECT_NEAR(var, 1.0, 0.035);
  for (double x : v) ASSERT_TRUE(std::isfinite(x));
}

TEST(Creation, RandintStaysInRangeAndHitsEveryValue) {
  tiny::manual_seed(3);
  const Tensor r = tiny::randint(-3, 4, {10000});
  EXPECT_EQ(r.dtype(), tiny::kInt64);
  std::vector<int> counts(7, 0);
  for (int64_t x : r.to_vector<int64_t>()) {
    ASSERT_GE(x, -3);
    ASSERT_LT(x, 4);
    ++counts[static_cast<size_t>(x + 3)];
  }
  for (int c : counts) EXPECT_GT(c, 1000);  // expected ~1429 each

  const Tensor f = tiny::randint(0, 10, {100}, tiny::kFloat32);
  EXPECT_EQ(f.dtype(), tiny::kFloat32);
  for (float x : f.to_vector<float>()) {
    EXPECT_EQ(x, std::floor(x));
    EXPECT_GE(x, 0.0f);
    EXPECT_LT(x, 10.0f);
  }
}

TEST(Creation, RandpermIsAPermutation) {
  tiny::manual_seed(4);
  const Tensor p = tiny::randperm(1000);
  EXPECT_EQ(p.dtype(), tiny::kInt64);
  std::vector<int64_t> v = p.to_vector<int64_t>();
  std::vector<int64_t> sorted = v;
  std::sort(sorted.begin(), sorted.end());
  std::vector<int64_t> identity(1000);
  std::iota(identity.begin(), identity.end(), 0);
  EXPECT_EQ(sorted, identity);
  EXPECT_NE(v, identity) << "a shuffle of 1000 elements left them all in place";
  EXPECT_EQ(tiny::randperm(0).numel(), 0);
  EXPECT_EQ(tiny::randperm(1).to_vector<int64_t>(), (std::vector<int64_t>{0}));
}

TEST(Creation, ManualSeedMakesRandomOpsReproducible) {
  tiny::manual_seed(123);
  const auto a1 = tiny::rand({100}).to_vector<float>();
  const auto b1 = tiny::randn({7, 3}, tiny::kFloat64).to_vector<double>();
  const auto c1 = tiny::randint(0, 1000, {50}).to_vector<int64_t>();
  const auto d1 = tiny::randperm(64).to_vector<int64_t>();
  tiny::manual_seed(123);
  EXPECT_EQ(tiny::rand({100}).to_vector<float>(), a1);
  EXPECT_EQ(tiny::randn({7, 3}, tiny::kFloat64).to_vector<double>(), b1);
  EXPECT_EQ(tiny::randint(0, 1000, {50}).to_vector<int64_t>(), c1);
  EXPECT_EQ(tiny::randperm(64).to_vector<int64_t>(), d1);
  // Consecutive calls advance the stream: the next draw differs from the first.
  EXPECT_NE(tiny::rand({100}).to_vector<float>(), a1);
}

TEST(Creation, DifferentSeedsGiveDifferentNumbers) {
  tiny::manual_seed(1);
  const auto a = tiny::rand({64}).to_vector<float>();
  tiny::manual_seed(2);
  const auto b = tiny::rand({64}).to_vector<float>();
  EXPECT_NE(a, b);
}

TEST(Creation, ExplicitGeneratorIsIndependentOfTheDefault) {
  tiny::Generator g1(42);
  const auto a = tiny::randn({32}, {}, g1).to_vector<float>();
  // Using the default generator in between must not disturb an explicit one.
  tiny::manual_seed(7);
  (void)tiny::rand({1000});
  tiny::Generator g2(42);
  EXPECT_EQ(tiny::randn({32}, {}, g2).to_vector<float>(), a);
  // g1 advanced, so its next draw differs.
  EXPECT_NE(tiny::randn({32}, {}, g1).to_vector<float>(), a);
  // Re-seeding restarts the stream.
  g1.manual_seed(42);
  EXPECT_EQ(tiny::randn({32}, {}, g1).to_vector<float>(), a);
  EXPECT_EQ(g1.initial_seed(), 42u);

  tiny::Generator g3(42);
  const auto perm = tiny::randperm(50, g3).to_vector<int64_t>();
  tiny::Generator g4(42);
  EXPECT_EQ(tiny::randperm(50, g4).to_vector<int64_t>(), perm);
}

TEST(Creation, GeneratorStateCanBeSavedAndRestored) {
  tiny::Generator g(5);
  (void)tiny::rand({10}, {}, g);
  const tiny::PhiloxState state = g.get_state();
  const auto a = tiny::rand({10}, {}, g).to_vector<float>();
  g.set_state(state);
  EXPECT_EQ(tiny::rand({10}, {}, g).to_vector<float>(), a);
}

TEST(Creation, TensorFromValuesAndShape) {
  const Tensor t = tiny::tensor({1.5, -2.0, 3.25});
  EXPECT_EQ(t.dtype(), tiny::kFloat32);
  EXPECT_EQ(t.sizes(), (tiny::IntArrayRef{3}));
  EXPECT_EQ(t.to_vector<float>(), (std::vector<float>{1.5f, -2.0f, 3.25f}));

  const Tensor m = tiny::tensor({1, 2, 3, 4, 5, 6}, {2, 3}, tiny::kInt64);
  EXPECT_EQ(m.dtype(), tiny::kInt64);
  EXPECT_EQ(m.sizes(), (tiny::IntArrayRef{2, 3}));
  // Row-major: element [1, 0] is the fourth value.
  EXPECT_EQ(m[1][0].item<int64_t>(), 4);
  EXPECT_EQ(m.to_vector<int64_t>(), (std::vector<int64_t>{1, 2, 3, 4, 5, 6}));
}

TEST(Creation, FromVectorKeepsTheElementType) {
  const Tensor i = tiny::from_vector<int64_t>({int64_t{1} << 40, -5, 7});
  EXPECT_EQ(i.dtype(), tiny::kInt64);
  EXPECT_EQ(i.to_vector<int64_t>(), (std::vector<int64_t>{int64_t{1} << 40, -5, 7}));

  const Tensor d = tiny::from_vector<double>({0.1, 0.2, 0.3, 0.4}, {2, 2});
  EXPECT_EQ(d.dtype(), tiny::kFloat64);
  EXPECT_EQ(d.sizes(), (tiny::IntArrayRef{2, 2}));
  EXPECT_EQ(d.to_vector<double>(), (std::vector<double>{0.1, 0.2, 0.3, 0.4}));

  const Tensor b = tiny::from_vector<bool>({true, false, true});
  EXPECT_EQ(b.dtype(), tiny::kBool);
  EXPECT_EQ(b.to_vector<bool>(), (std::vector<bool>{true, false, true}));

  const Tensor f = tiny::from_vector<float>({1.0f, 2.0f}, {}, tiny::kFloat64);
  EXPECT_EQ(f.dtype(), tiny::kFloat64);
}

TEST(Creation, ScalarTensorIsZeroDim) {
  const Tensor s = tiny::scalar_tensor(3.5);
  EXPECT_EQ(s.dim(), 0);
  EXPECT_EQ(s.numel(), 1);
  EXPECT_TRUE(s.sizes().empty());
  EXPECT_EQ(s.dtype(), tiny::kFloat32);
  EXPECT_EQ(s.item<float>(), 3.5f);
  const Tensor i = tiny::scalar_tensor(int64_t{-9}, tiny::kInt64);
  EXPECT_EQ(i.item<int64_t>(), -9);
  EXPECT_TRUE(i.item().is_integral());
}

TEST(Creation, LikeFunctionsCopyShapeAndDtype) {
  const Tensor base = tiny::zeros({3, 2}, tiny::kFloat64).t();  // non-contiguous [2, 3]
  for (const Tensor& t : {tiny::empty_like(base), tiny::zeros_like(base), tiny::ones_like(base),
                          tiny::full_like(base, 7), tiny::rand_like(base), tiny::randn_like(base)}) {
    EXPECT_EQ(t.sizes(), (tiny::IntArrayRef{2, 3}));
    EXPECT_EQ(t.dtype(), tiny::kFloat64);
    EXPECT_TRUE(t.is_contiguous());
  }
  for (double v : tiny::ones_like(base).to_vector<double>()) EXPECT_EQ(v, 1.0);
  for (double v : tiny::full_like(base, 7).to_vector<double>()) EXPECT_EQ(v, 7.0);
  const Tensor ints = tiny::arange(4);
  EXPECT_EQ(tiny::zeros_like(ints).dtype(), tiny::kInt64);
  tiny::Generator g(9);
  const auto a = tiny::rand_like(base, g).to_vector<double>();
  tiny::Generator g2(9);
  EXPECT_EQ(tiny::rand({2, 3}, tiny::kFloat64, g2).to_vector<double>(), a);
}

TEST(Creation, TensorOptionsSetDtypeAndRequiresGrad) {
  const Tensor t = tiny::zeros({2}, tiny::TensorOptions().dtype(tiny::kFloat64).requires_grad(true));
  EXPECT_EQ(t.dtype(), tiny::kFloat64);
  EXPECT_TRUE(t.requires_grad());
  EXPECT_TRUE(t.is_leaf());
  EXPECT_FALSE(tiny::zeros({2}).requires_grad());

  const tiny::TensorOptions defaults;
  EXPECT_EQ(defaults.dtype(), tiny::kFloat32);
  EXPECT_TRUE(defaults.device().is_cpu());
  EXPECT_FALSE(defaults.requires_grad());
  const tiny::TensorOptions chained = tiny::TensorOptions(tiny::kInt64).device(tiny::Device("cpu"));
  EXPECT_EQ(chained.dtype(), tiny::kInt64);
  EXPECT_EQ(tiny::ones({1}, chained).dtype(), tiny::kInt64);

  for (const Tensor& r : {tiny::rand({3}, tiny::TensorOptions().requires_grad(true)),
                          tiny::randn({3}, tiny::TensorOptions().requires_grad(true)),
                          tiny::tensor({1.0, 2.0}, tiny::TensorOptions().requires_grad(true)),
                          tiny::full({2}, 1.0, tiny::TensorOptions().requires_grad(true))}) {
    EXPECT_TRUE(r.requires_grad());
    EXPECT_TRUE(r.is_leaf());
  }
}

TEST(Creation, EmptyShapes) {
  const Tensor a = tiny::zeros({0});
  EXPECT_EQ(a.numel(), 0);
  EXPECT_EQ(a.dim(), 1);
  EXPECT_TRUE(a.to_vector<float>().empty());

  const Tensor b = tiny::ones({2, 0, 3});
  EXPECT_EQ(b.numel(), 0);
  EXPECT_EQ(b.sizes(), (tiny::IntArrayRef{2, 0, 3}));
  EXPECT_EQ(b.strides(), (tiny::IntArrayRef{3, 3, 1}));  // PyTorch's strides for this shape
  EXPECT_TRUE(b.is_contiguous());
  EXPECT_EQ(tiny::rand({2, 0, 3}).numel(), 0);
  EXPECT_EQ(tiny::randint(0, 5, {0}).numel(), 0);
  EXPECT_EQ(tiny::tensor(std::vector<double>{}, {0}).numel(), 0);
  EXPECT_EQ(tiny::sum(b).item<float>(), 0.0f);
}

TEST(Creation, ZeroDimTensors) {
  const Tensor z = tiny::zeros({});
  EXPECT_EQ(z.dim(), 0);
  EXPECT_EQ(z.numel(), 1);
  EXPECT_TRUE(z.strides().empty());
  EXPECT_TRUE(z.is_contiguous());
  EXPECT_EQ(z.item<float>(), 0.0f);
  const Tensor f = tiny::full({}, 4, tiny::kInt64);
  EXPECT_EQ(f.item<int64_t>(), 4);
  const Tensor r = tiny::rand({});
  EXPECT_EQ(r.dim(), 0);
  const float v = r.item<float>();
  EXPECT_GE(v, 0.0f);
  EXPECT_LT(v, 1.0f);
  EXPECT_EQ(tiny::tensor(std::vector<double>{2.0}, {}).dim(), 0);
}

}  // namespace
