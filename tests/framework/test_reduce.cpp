// Reductions: sum/mean/max/min/argmax/argmin over everything and over dims,
// dtypes, NaN, large inputs against double precision, and bitwise
// determinism across thread counts.

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <iomanip>
#include <limits>
#include <numeric>
#include <string>
#include <tuple>
#include <vector>

#include "tiny/tiny.h"

namespace {

using tiny::IntArrayRef;
using tiny::Tensor;

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

Tensor uniform(const IntArrayRef& shape, double lo, double hi, uint64_t seed, tiny::Dtype dtype = tiny::kFloat32) {
  tiny::Generator g(seed);
  return tiny::rand(shape, dtype, g) * (hi - lo) + lo;
}

// Reference reduction of a [A, B, C] tensor over the dims flagged in `over`,
// in double, as a row-major vector over the kept dims.
template <typename Fold>
std::vector<double> ref_reduce3(const Tensor& t, bool over0, bool over1, bool over2, double init, Fold fold) {
  const std::vector<double> v = t.to_vector<double>();
  const int64_t A = t.size(0), B = t.size(1), C = t.size(2);
  const int64_t oa = over0 ? 1 : A, ob = over1 ? 1 : B, oc = over2 ? 1 : C;
  std::vector<double> out(static_cast<size_t>(oa * ob * oc), init);
  for (int64_t a = 0; a < A; ++a) {
    for (int64_t b = 0; b < B; ++b) {
      for (int64_t c = 0; c < C; ++c) {
        const int64_t o = ((over0 ? 0 : a) * ob + (over1 ? 0 : b)) * oc + (over2 ? 0 : c);
        double& acc = out[static_cast<size_t>(o)];
        acc = fold(acc, v[static_cast<size_t>((a * B + b) * C + c)]);
      }
    }
  }
  return out;
}

void expect_near_all(const Tensor& got, const std::vector<double>& want, double tol, const char* what = "") {
  const std::vector<double> g = got.to_vector<double>();
  ASSERT_EQ(g.size(), want.size()) << what;
  for (size_t i = 0; i < g.size(); ++i) EXPECT_NEAR(g[i], want[i], tol) << what << " element " << i;
}

const auto kAdd = [](double acc, double x) { return acc + x; };

TEST(Reduce, SumAllAndOverEachDim) {
  const Tensor x = uniform({3, 4, 5}, -1, 1, 1);
  EXPECT_EQ(x.sum().dim(), 0);
  EXPECT_NEAR(x.sum().item<double>(), ref_reduce3(x, true, true, true, 0.0, kAdd)[0], 1e-5);
  const Tensor s0 = x.sum({0});
  EXPECT_EQ(s0.sizes(), (IntArrayRef{4, 5}));
  expect_near_all(s0, ref_reduce3(x, true, false, false, 0.0, kAdd), 1e-6, "sum dim 0");
  const Tensor s1 = tiny::sum(x, {1});
  EXPECT_EQ(s1.sizes(), (IntArrayRef{3, 5}));
  expect_near_all(s1, ref_reduce3(x, false, true, false, 0.0, kAdd), 1e-6, "sum dim 1");
  const Tensor s2 = x.sum({-1});
  EXPECT_EQ(s2.sizes(), (IntArrayRef{3, 4}));
  expect_near_all(s2, ref_reduce3(x, false, false, true, 0.0, kAdd), 1e-6, "sum dim -1");
}

TEST(Reduce, KeepdimAndMultipleDims) {
  const Tensor x = uniform({3, 4, 5}, -1, 1, 2);
  const Tensor k = x.sum({1}, true);
  EXPECT_EQ(k.sizes(), (IntArrayRef{3, 1, 5}));
  expect_near_all(k, ref_reduce3(x, false, true, false, 0.0, kAdd), 1e-6);
  const Tensor m = x.sum({0, 2});
  EXPECT_EQ(m.sizes(), (IntArrayRef{4}));
  expect_near_all(m, ref_reduce3(x, true, false, true, 0.0, kAdd), 1e-5);
  const Tensor mk = x.sum({-1, 0}, true);
  EXPECT_EQ(mk.sizes(), (IntArrayRef{1, 4, 1}));
  expect_near_all(mk, ref_reduce3(x, true, false, true, 0.0, kAdd), 1e-5);
  const Tensor all_keep = x.sum({0, 1, 2}, true);
  EXPECT_EQ(all_keep.sizes(), (IntArrayRef{1, 1, 1}));
  const Tensor mean = x.mean({0, 2}, true);
  EXPECT_EQ(mean.sizes(), (IntArrayRef{1, 4, 1}));
  std::vector<double> expected = ref_reduce3(x, true, false, true, 0.0, kAdd);
  for (double& v : expected) v /= 15.0;
  expect_near_all(mean, expected, 1e-6);
}

TEST(Reduce, NonContiguousInput) {
  const Tensor base = uniform({5, 4, 6}, -1, 1, 3);
  const Tensor p = base.permute({2, 0, 1});           // [6, 5, 4]
  const Tensor stepped = base.slice(2, 0, 6, 2);      // [5, 4, 3]
  const Tensor expanded = uniform({1, 4, 1}, -1, 1, 4).expand({3, 4, 5});
  for (const Tensor& t : {p, stepped, expanded}) {
    ASSERT_FALSE(t.is_contiguous());
    expect_near_all(t.sum({0}), ref_reduce3(t, true, false, false, 0.0, kAdd), 1e-5, "sum 0");
    expect_near_all(t.sum({1, 2}), ref_reduce3(t, false, true, true, 0.0, kAdd), 1e-5, "sum 1,2");
    expect_near_all(std::get<0>(t.max(1)),
                    ref_reduce3(t, false, true, false, -1e300, [](double a, double x) { return std::max(a, x); }), 0,
                    "max 1");
    EXPECT_NEAR(t.sum().item<double>(), ref_reduce3(t, true, true, true, 0.0, kAdd)[0], 1e-4);
  }
}

TEST(Reduce, MeanMatchesSumOverCount) {
  const Tensor x = uniform({4, 6}, 0, 10, 5, tiny::kFloat64);
  const std::vector<double> v = x.to_vector<double>();
  EXPECT_NEAR(x.mean().item<double>(), std::accumulate(v.begin(), v.end(), 0.0) / 24.0, 1e-12);
  const Tensor m1 = x.mean({1});
  for (int64_t r = 0; r < 4; ++r) {
    double s = 0.0;
    for (int64_t c = 0; c < 6; ++c) s += v[static_cast<size_t>(r * 6 + c)];
    EXPECT_NEAR(m1[r].item<double>(), s / 6.0, 1e-12);
  }
  EXPECT_EQ(x.mean().dtype(), tiny::kFloat64);
  // The mean of no elements is NaN (0/0), as in PyTorch.
  EXPECT_TRUE(std::isnan(tiny::zeros({0}).mean().item<float>()));
}

TEST(Reduce, IntegerAndBoolSumsAreInt64) {
  const Tensor i = tiny::from_vector<int64_t>({int64_t{1} << 40, 3, -5, int64_t{1} << 41}, {2, 2});
  const Tensor s = i.sum();
  EXPECT_EQ(s.dtype(), tiny::kInt64);
  EXPECT_EQ(s.item<int64_t>(), (int64_t{1} << 40) + (int64_t{1} << 41) - 2);  // exact beyond 2^24 and 2^53
  EXPECT_EQ(i.sum({0}).to_vector<int64_t>(), (std::vector<int64_t>{(int64_t{1} << 40) - 5, (int64_t{1} << 41) + 3}));
  const Tensor b = tiny::from_vector<bool>({true, false, true, true, false, true}, {2, 3});
  EXPECT_EQ(b.sum().dtype(), tiny::kInt64);
  EXPECT_EQ(b.sum().item<int64_t>(), 4);
  EXPECT_EQ(b.sum({1}).to_vector<int64_t>(), (std::vector<int64_t>{2, 2}));
  // Counting a comparison: the usual "correct predictions" idiom.
  const Tensor x = uniform({10000}, 0, 1, 6);
  const std::vector<float> v = x.to_vector<float>();
  int64_t expected = 0;
  for (float f : v) expected += f > 0.3f;
  EXPECT_EQ((x > 0.3).sum().item<int64_t>(), expected);
}

TEST(Reduce, MaxMinValuesAndIndices) {
  const Tensor x = uniform({3, 7}, -5, 5, 7);
  const std::vector<float> v = x.to_vector<float>();
  auto [values, indices] = x.max(1);
  EXPECT_EQ(values.sizes(), (IntArrayRef{3}));
  EXPECT_EQ(indices.dtype(), tiny::kInt64);
  auto [minv, mini] = tiny::min(x, 0, true);
  EXPECT_EQ(minv.sizes(), (IntArrayRef{1, 7}));
  EXPECT_EQ(mini.sizes(), (IntArrayRef{1, 7}));
  for (int64_t r = 0; r < 3; ++r) {
    int64_t best = 0;
    for (int64_t c = 1; c < 7; ++c) {
      if (v[static_cast<size_t>(r * 7 + c)] > v[static_cast<size_t>(r * 7 + best)]) best = c;
    }
    EXPECT_EQ(indices[r].item<int64_t>(), best);
    EXPECT_EQ(values[r].item<float>(), v[static_cast<size_t>(r * 7 + best)]);
    EXPECT_EQ(x.argmax(1)[r].item<int64_t>(), best);
  }
  for (int64_t c = 0; c < 7; ++c) {
    int64_t best = 0;
    for (int64_t r = 1; r < 3; ++r) {
      if (v[static_cast<size_t>(r * 7 + c)] < v[static_cast<size_t>(best * 7 + c)]) best = r;
    }
    EXPECT_EQ(mini[0][c].item<int64_t>(), best);
    EXPECT_EQ(minv[0][c].item<float>(), v[static_cast<size_t>(best * 7 + c)]);
    EXPECT_EQ(tiny::argmin(x, 0)[c].item<int64_t>(), best);
  }
  const size_t flat_max = static_cast<size_t>(std::max_element(v.begin(), v.end()) - v.begin());
  const size_t flat_min = static_cast<size_t>(std::min_element(v.begin(), v.end()) - v.begin());
  EXPECT_EQ(x.max().item<float>(), v[flat_max]);
  EXPECT_EQ(x.min().item<float>(), v[flat_min]);
  EXPECT_EQ(x.argmax().item<int64_t>(), static_cast<int64_t>(flat_max));
  EXPECT_EQ(tiny::argmin(x).item<int64_t>(), static_cast<int64_t>(flat_min));
  EXPECT_EQ(x.argmax().dim(), 0);
  EXPECT_EQ(x.argmax(-1, true).sizes(), (IntArrayRef{3, 1}));
  // Integers.
  const Tensor i = tiny::from_vector<int64_t>({4, -9, 12, 12, 0});
  EXPECT_EQ(i.max().item<int64_t>(), 12);
  EXPECT_EQ(i.min().item<int64_t>(), -9);
  EXPECT_EQ(i.max().dtype(), tiny::kInt64);
}

TEST(Reduce, ArgmaxTiesGoToTheLowestIndex) {
  const Tensor x = tiny::tensor({1, 5, 3, 5, 5, 0, 0, 2}, {2, 4});
  EXPECT_EQ(x.argmax().item<int64_t>(), 1);
  EXPECT_EQ(tiny::argmin(x).item<int64_t>(), 5);
  EXPECT_EQ(x.argmax(1).to_vector<int64_t>(), (std::vector<int64_t>{1, 0}));
  EXPECT_EQ(tiny::argmin(x, 1).to_vector<int64_t>(), (std::vector<int64_t>{0, 1}));
  EXPECT_EQ(std::get<1>(x.max(1)).to_vector<int64_t>(), (std::vector<int64_t>{1, 0}));
  // All equal over a reduction longer than one block of the CPU driver: still index 0.
  const Tensor flat = tiny::ones({20000});
  EXPECT_EQ(flat.argmax().item<int64_t>(), 0);
  EXPECT_EQ(tiny::argmin(flat).item<int64_t>(), 0);
  const Tensor tail = tiny::zeros({20000});
  tail.narrow(0, 9000, 11000).fill_(1);  // the max first appears in the third block
  EXPECT_EQ(tail.argmax().item<int64_t>(), 9000);
  EXPECT_EQ(tiny::argmin(tail).item<int64_t>(), 0);
}

TEST(Reduce, MaxMinPropagateNaN) {
  const Tensor x = tiny::tensor({1.0, kNaN, 3.0, -2.0, 5.0, 0.0}, {2, 3});
  EXPECT_TRUE(std::isnan(x.max().item<float>()));
  EXPECT_TRUE(std::isnan(x.min().item<float>()));
  auto [v, i] = x.max(1);
  EXPECT_TRUE(std::isnan(v[0].item<float>()));
  EXPECT_EQ(i[0].item<int64_t>(), 1);  // the NaN's position, as PyTorch
  EXPECT_EQ(v[1].item<float>(), 5.0f);
  auto [mv, mi] = x.min(1);
  EXPECT_TRUE(std::isnan(mv[0].item<float>()));
  EXPECT_EQ(mi[0].item<int64_t>(), 1);
  EXPECT_EQ(x.argmax().item<int64_t>(), 1);
  // NaN in the last element of a long reduction, past the first block.
  const Tensor big = tiny::zeros({10000});
  big[9999].fill_(kNaN);
  EXPECT_TRUE(std::isnan(big.max().item<float>()));
  EXPECT_TRUE(std::isnan(big.min().item<float>()));
  EXPECT_TRUE(std::isnan(big.sum().item<float>()));
}

TEST(Reduce, ZeroDimAndSingleElement) {
  const Tensor s = tiny::scalar_tensor(2.5);
  EXPECT_EQ(s.sum().item<float>(), 2.5f);
  EXPECT_EQ(s.sum({0}).item<float>(), 2.5f);  // dim 0 of a 0-d tensor is allowed, as in PyTorch
  EXPECT_EQ(s.mean().item<float>(), 2.5f);
  EXPECT_EQ(s.max().item<float>(), 2.5f);
  EXPECT_EQ(s.argmax().item<int64_t>(), 0);
  EXPECT_EQ(tiny::zeros({0, 3}).sum({0}).to_vector<float>(), (std::vector<float>{0, 0, 0}));
}

TEST(Reduce, LargeSumMatchesDoublePrecision) {
  const Tensor x = uniform({1000000}, 0, 1, 8);
  const std::vector<float> v = x.to_vector<float>();
  const double exact = std::accumulate(v.begin(), v.end(), 0.0);
  // Tolerance: the CPU driver folds blocks of 4096 sequentially in float32 and
  // then combines the 245 block sums. The worst case is (4096 + 245) roundings
  // of relative size 2^-24 (about 2.6e-4), but rounding errors are random, so
  // the expected relative error is about sqrt(4096) * 2^-24 = 4e-6 of a block
  // sum's magnitude, spread over 245 independent blocks: ~1e-7 overall. 1e-6
  // leaves a 10x margin and still rejects a plain float32 running sum over all
  // 1e6 elements, which is off by about 1.8e-6 on this input.
  EXPECT_NEAR(x.sum().item<double>(), exact, 1e-6 * exact);
  EXPECT_NEAR(x.mean().item<double>(), exact / 1e6, 1e-6 * exact / 1e6);
  const Tensor xd = x.to(tiny::kFloat64);
  EXPECT_NEAR(xd.sum().item<double>(), exact, 1e-9 * exact);
  // Over a dim: 1000 sums of 1000 elements.
  const Tensor m = x.view({1000, 1000}).sum({0});
  const std::vector<float> got = m.to_vector<float>();
  for (size_t c = 0; c < 1000; c += 97) {
    double col = 0.0;
    for (size_t r = 0; r < 1000; ++r) col += v[r * 1000 + c];
    EXPECT_NEAR(got[c], col, 1e-5 * col);
  }
}

// Restores the thread count when a test ends, whether it passes or not.
class ThreadCountGuard {
 public:
  ThreadCountGuard() : saved_(tiny::get_num_threads()) {}
  ~ThreadCountGuard() { tiny::set_num_threads(saved_); }
  ThreadCountGuard(const ThreadCountGuard&) = delete;
  ThreadCountGuard& operator=(const ThreadCountGuard&) = delete;

 private:
  int saved_;
};

template <typename T>
bool bitwise_equal(const std::vector<T>& a, const std::vector<T>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(T)) == 0;
}

TEST(Reduce, SumIsBitwiseIdenticalWithOneOrTwoThreads) {
  ThreadCountGuard guard;
  const Tensor x = tiny::randn({3000000}, {}, tiny::Generator(9));
  const Tensor m = tiny::randn({5000, 300}, {}, tiny::Generator(10));
  tiny::set_num_threads(1);
  ASSERT_EQ(tiny::get_num_threads(), 1);
  const std::vector<float> total1{x.sum().item<float>()};
  const std::vector<float> cols1 = m.sum({0}).to_vector<float>();
  const std::vector<float> rows1 = m.sum({1}).to_vector<float>();
  tiny::set_num_threads(2);
  ASSERT_EQ(tiny::get_num_threads(), 2);
  const std::vector<float> total2{x.sum().item<float>()};
  const std::vector<float> cols2 = m.sum({0}).to_vector<float>();
  const std::vector<float> rows2 = m.sum({1}).to_vector<float>();
  EXPECT_TRUE(bitwise_equal(total1, total2)) << total1[0] << " vs " << total2[0];
  EXPECT_TRUE(bitwise_equal(cols1, cols2));
  EXPECT_TRUE(bitwise_equal(rows1, rows2));
  // And the same again on a repeat run.
  EXPECT_TRUE(bitwise_equal(total2, std::vector<float>{x.sum().item<float>()}));
}

// ---- the same reductions on cuda:0 (by default the host-emulated GPU) -----------------
// The emulator queues the CPU kernels on the device's stream (DESIGN.md section
// 4), so a reduction on the device must give the CPU's result bit for bit,
// including the ones whose rounding depends on the summation order (large
// float32 sums), on block boundaries (argmax ties, NaN past the first block)
// and on the thread count. (A real GPU would need a tolerance instead: CUDA
// reductions use another order.)

const tiny::Device kCuda0("cuda:0");

#define SKIP_WITHOUT_CUDA0()                                                              \
  if (!tiny::cuda::is_available()) {                                                      \
    GTEST_SKIP() << "cuda:0 is not available (TINY_EMULATED_GPUS=0 and no GPU?)";         \
  }

// Exactly equal values (NaN equal to NaN), shapes and dtypes; `on_device` must be on cuda:0.
::testing::AssertionResult same_as_cpu(const Tensor& on_device, const Tensor& on_cpu) {
  if (on_device.device() != kCuda0) {
    return ::testing::AssertionFailure() << "the result is on " << on_device.device() << ", not on cuda:0";
  }
  const Tensor d = on_device.cpu();
  if (d.dtype() != on_cpu.dtype() || d.sizes() != on_cpu.sizes()) {
    return ::testing::AssertionFailure() << "dtype/shape " << d.dtype() << " " << tiny::shape_str(d.sizes())
                                         << " on cuda:0, " << on_cpu.dtype() << " " << tiny::shape_str(on_cpu.sizes())
                                         << " on the CPU";
  }
  if (!d.is_floating_point()) {
    if (d.to_vector<int64_t>() == on_cpu.to_vector<int64_t>()) return ::testing::AssertionSuccess();
    return ::testing::AssertionFailure() << "cuda:0 " << d << " vs cpu " << on_cpu;
  }
  const std::vector<double> a = d.to_vector<double>(), b = on_cpu.to_vector<double>();
  for (size_t i = 0; i < a.size(); ++i) {
    const bool same = (std::isnan(a[i]) && std::isnan(b[i])) || std::memcmp(&a[i], &b[i], sizeof(double)) == 0;
    if (!same) {
      return ::testing::AssertionFailure() << "element " << i << ": cuda:0 " << std::setprecision(17) << a[i]
                                           << ", cpu " << b[i];
    }
  }
  return ::testing::AssertionSuccess();
}

TEST(Reduce, LargeSumOnCuda0EqualsTheCpuBitwise) {
  SKIP_WITHOUT_CUDA0();
  const Tensor x = uniform({1000000}, 0, 1, 8);
  const Tensor xg = x.to(kCuda0);
  EXPECT_TRUE(same_as_cpu(xg.sum(), x.sum()));
  EXPECT_TRUE(same_as_cpu(xg.mean(), x.mean()));
  EXPECT_TRUE(same_as_cpu(xg.to(tiny::kFloat64).sum(), x.to(tiny::kFloat64).sum()));
  EXPECT_TRUE(same_as_cpu(xg.view({1000, 1000}).sum({0}), x.view({1000, 1000}).sum({0})));
  EXPECT_TRUE(same_as_cpu(xg.view({1000, 1000}).sum({1}), x.view({1000, 1000}).sum({1})));
  // Non-contiguous: a transposed view and a strided slice.
  EXPECT_TRUE(same_as_cpu(xg.view({1000, 1000}).t().sum({1}), x.view({1000, 1000}).t().sum({1})));
  EXPECT_TRUE(same_as_cpu(xg.slice(0, 1, 1000000, 3).sum(), x.slice(0, 1, 1000000, 3).sum()));
}

TEST(Reduce, SumOnCuda0EqualsTheCpuWithOneOrTwoThreads) {
  SKIP_WITHOUT_CUDA0();
  ThreadCountGuard guard;
  const Tensor x = tiny::randn({3000000}, {}, tiny::Generator(9));
  const Tensor m = tiny::randn({5000, 300}, {}, tiny::Generator(10));
  const Tensor xg = x.to(kCuda0), mg = m.to(kCuda0);
  tiny::set_num_threads(1);
  const Tensor total = x.sum(), cols = m.sum({0}), rows = m.sum({1});
  for (int threads : {1, 2}) {
    SCOPED_TRACE("threads " + std::to_string(threads));
    tiny::set_num_threads(threads);
    EXPECT_TRUE(same_as_cpu(xg.sum(), total));
    EXPECT_TRUE(same_as_cpu(mg.sum({0}), cols));
    EXPECT_TRUE(same_as_cpu(mg.sum({1}), rows));
  }
}

TEST(Reduce, ArgmaxTiesAndNaNOnCuda0EqualTheCpu) {
  SKIP_WITHOUT_CUDA0();
  const Tensor flat = tiny::ones({20000});
  const Tensor tail = tiny::zeros({20000});
  tail.narrow(0, 9000, 11000).fill_(1);  // the max first appears in the third block
  const Tensor nan_last = tiny::zeros({10000});
  nan_last[9999].fill_(kNaN);
  const Tensor small = tiny::tensor({1.0, kNaN, 3.0, -2.0, 5.0, 0.0}, {2, 3});
  for (const Tensor& t : {flat, tail, nan_last}) {
    const Tensor g = t.to(kCuda0);
    EXPECT_TRUE(same_as_cpu(g.argmax(), t.argmax()));
    EXPECT_TRUE(same_as_cpu(tiny::argmin(g), tiny::argmin(t)));
    EXPECT_TRUE(same_as_cpu(g.max(), t.max()));
    EXPECT_TRUE(same_as_cpu(g.min(), t.min()));
    EXPECT_TRUE(same_as_cpu(g.sum(), t.sum()));
  }
  const Tensor sg = small.to(kCuda0);
  auto [v, i] = sg.max(1);
  auto [cv, ci] = small.max(1);
  EXPECT_TRUE(same_as_cpu(v, cv));
  EXPECT_TRUE(same_as_cpu(i, ci));
  auto [mv, mi] = sg.min(0, true);
  auto [cmv, cmi] = small.min(0, true);
  EXPECT_TRUE(same_as_cpu(mv, cmv));
  EXPECT_TRUE(same_as_cpu(mi, cmi));
  // Integer and bool sums are int64 and exact on the device too.
  const Tensor big = tiny::from_vector<int64_t>({int64_t{1} << 40, 3, -5, int64_t{1} << 41}, {2, 2});
  EXPECT_TRUE(same_as_cpu(big.to(kCuda0).sum(), big.sum()));
  const Tensor u = uniform({10000}, 0, 1, 6);
  EXPECT_TRUE(same_as_cpu((u.to(kCuda0) > 0.3).sum(), (u > 0.3).sum()));
}

}  // namespace
