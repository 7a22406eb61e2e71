// mm / matmul / addmm against a naive triple loop in double precision.

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <tuple>
#include <vector>

#include "tiny/tiny.h"

namespace {

using tiny::IntArrayRef;
using tiny::Tensor;

Tensor uniform(const IntArrayRef& shape, uint64_t seed, tiny::Dtype dtype = tiny::kFloat32) {
  tiny::Generator g(seed);
  return tiny::rand(shape, dtype, g) * 2.0 - 1.0;
}

// C = A @ B for row-major [m, k] and [k, n] values; also sum |a||b| per element
// for the error bound.
struct Product {
  std::vector<double> value, magnitude;
};
Product naive_mm(const std::vector<double>& a, const std::vector<double>& b, int64_t m, int64_t k, int64_t n) {
  Product p{std::vector<double>(static_cast<size_t>(m * n), 0.0), std::vector<double>(static_cast<size_t>(m * n), 0.0)};
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      for (int64_t q = 0; q < k; ++q) {
        const double x = a[static_cast<size_t>(i * k + q)], y = b[static_cast<size_t>(q * n + j)];
        p.value[static_cast<size_t>(i * n + j)] += x * y;
        p.magnitude[static_cast<size_t>(i * n + j)] += std::fabs(x * y);
      }
    }
  }
  return p;
}

// Error bound of a float32 dot product of length k: k * 2^-24 * sum |a_i b_i|
// (the standard bound; BLAS blocking only lowers it). Tests use a quarter of
// it plus a tiny absolute term: comfortably above real rounding, far below any
// wrong element.
double fp32_tol(double magnitude, int64_t k) {
  return 0.25 * static_cast<double>(std::max<int64_t>(k, 1)) * std::ldexp(1.0, -24) * magnitude + 1e-6;
}

void expect_product(const Tensor& got, const Product& want, int64_t k, double scale = 1.0) {
  const std::vector<double> g = got.to_vector<double>();
  ASSERT_EQ(g.size(), want.value.size());
  const bool is_double = got.dtype() == tiny::kFloat64;
  for (size_t i = 0; i < g.size(); ++i) {
    const double tol = is_double ? 1e-12 * (want.magnitude[i] + 1.0) : fp32_tol(want.magnitude[i], k) * scale;
    EXPECT_NEAR(g[i], want.value[i], tol) << "element " << i;
  }
}

TEST(Linalg, MmMatchesNaiveLoop) {
  for (auto [m, k, n] : {std::tuple<int64_t, int64_t, int64_t>{3, 4, 5}, {1, 7, 1}, {64, 33, 17}, {128, 256, 96}}) {
    const Tensor a = uniform({m, k}, 1), b = uniform({k, n}, 2);
    const Tensor c = tiny::mm(a, b);
    EXPECT_EQ(c.sizes(), (IntArrayRef{m, n}));
    EXPECT_EQ(c.dtype(), tiny::kFloat32);
    expect_product(c, naive_mm(a.to_vector<double>(), b.to_vector<double>(), m, k, n), k);
    expect_product(a.mm(b), naive_mm(a.to_vector<double>(), b.to_vector<double>(), m, k, n), k);
    expect_product(a.matmul(b), naive_mm(a.to_vector<double>(), b.to_vector<double>(), m, k, n), k);
  }
}

TEST(Linalg, TransposedAndStridedOperands) {
  const int64_t m = 6, k = 5, n = 7;
  const Tensor at = uniform({k, m}, 3).t();           // [m, k], column-major
  const Tensor bt = uniform({n, k}, 4).t();           // [k, n], column-major
  const Tensor bs = uniform({k, 2 * n}, 5).slice(1, 0, 2 * n, 2);  // [k, n], column stride 2
  const Tensor as = uniform({2 * m, k}, 6).slice(0, 1, 2 * m, 2);  // [m, k], row stride 2k
  ASSERT_FALSE(at.is_contiguous());
  ASSERT_FALSE(bs.is_contiguous());
  for (const Tensor& a : {at, as, uniform({m, k}, 7)}) {
    for (const Tensor& b : {bt, bs, uniform({k, n}, 8)}) {
      expect_product(tiny::mm(a, b), naive_mm(a.to_vector<double>(), b.to_vector<double>(), m, k, n), k);
    }
  }
  // The transposes of the results are the products of the transposes.
  const Tensor c = tiny::mm(bt.t(), at.t());  // [n, m] = (at @ bt)^T
  expect_product(c.t(), naive_mm(at.to_vector<double>(), bt.to_vector<double>(), m, k, n), k);
}

TEST(Linalg, MatmulOneDimensionalCases) {
  const Tensor u = uniform({5}, 9), v = uniform({5}, 10);
  const Tensor dot = tiny::matmul(u, v);
  EXPECT_EQ(dot.dim(), 0);
  expect_product(dot, naive_mm(u.to_vector<double>(), v.to_vector<double>(), 1, 5, 1), 5);

  const Tensor m = uniform({3, 5}, 11);
  const Tensor mv = tiny::matmul(m, v);
  EXPECT_EQ(mv.sizes(), (IntArrayRef{3}));
  expect_product(mv, naive_mm(m.to_vector<double>(), v.to_vector<double>(), 3, 5, 1), 5);

  const Tensor w = uniform({5, 4}, 12);
  const Tensor vm = tiny::matmul(u, w);
  EXPECT_EQ(vm.sizes(), (IntArrayRef{4}));
  expect_product(vm, naive_mm(u.to_vector<double>(), w.to_vector<double>(), 1, 5, 4), 5);

  // Batched matrix times vector, and vector times batched matrix.
  const Tensor bm = uniform({2, 3, 5}, 13);
  const Tensor bmv = tiny::matmul(bm, v);
  EXPECT_EQ(bmv.sizes(), (IntArrayRef{2, 3}));
  expect_product(bmv, naive_mm(bm.to_vector<double>(), v.to_vector<double>(), 6, 5, 1), 5);
  const Tensor bw = uniform({2, 5, 4}, 14);
  const Tensor vbm = tiny::matmul(u, bw);
  EXPECT_EQ(vbm.sizes(), (IntArrayRef{2, 4}));
  for (int64_t i = 0; i < 2; ++i) {
    expect_product(vbm[i], naive_mm(u.to_vector<double>(), bw[i].to_vector<double>(), 1, 5, 4), 5);
  }
}

TEST(Linalg, BatchedMatmulBroadcastsBatchDims) {
  const Tensor a = uniform({2, 1, 3, 4}, 15);
  const Tensor b = uniform({5, 4, 6}, 16);
  const Tensor c = tiny::matmul(a, b);
  EXPECT_EQ(c.sizes(), (IntArrayRef{2, 5, 3, 6}));
  for (int64_t i = 0; i < 2; ++i) {
    for (int64_t j = 0; j < 5; ++j) {
      expect_product(c[i][j], naive_mm(a[i][0].to_vector<double>(), b[j].to_vector<double>(), 3, 4, 6), 4);
    }
  }
  // A 2-D right operand is shared by every batch; a transposed batch works too.
  const Tensor x = uniform({4, 6, 3}, 17).transpose(1, 2);  // [4, 3, 6], non-contiguous
  const Tensor w = uniform({6, 2}, 18);
  const Tensor y = tiny::matmul(x, w);
  EXPECT_EQ(y.sizes(), (IntArrayRef{4, 3, 2}));
  for (int64_t i = 0; i < 4; ++i) {
    expect_product(y[i], naive_mm(x[i].to_vector<double>(), w.to_vector<double>(), 3, 6, 2), 6);
  }
}

TEST(Linalg, EmptyInnerDimensionGivesZeros) {
  const Tensor c = tiny::mm(tiny::ones({3, 0}), tiny::ones({0, 4}));
  EXPECT_EQ(c.sizes(), (IntArrayRef{3, 4}));
  for (float v : c.to_vector<float>()) EXPECT_EQ(v, 0.0f);
  // The output memory is fresh, so this also checks that it is written, not left as found.
  const Tensor d = tiny::addmm(tiny::full({4}, 2.0), tiny::ones({3, 0}), tiny::ones({0, 4}), 0.5);
  for (float v : d.to_vector<float>()) EXPECT_EQ(v, 1.0f);
  EXPECT_EQ(tiny::mm(tiny::ones({0, 3}), tiny::ones({3, 2})).sizes(), (IntArrayRef{0, 2}));
  EXPECT_EQ(tiny::matmul(tiny::ones({0}), tiny::ones({0})).item<float>(), 0.0f);
}

TEST(Linalg, Int64MatmulIsExact) {
  tiny::Generator g(19);
  const Tensor a = tiny::randint(-1000, 1000, {7, 9}, tiny::kInt64, g);
  const Tensor b = tiny::randint(-1000, 1000, {9, 4}, tiny::kInt64, g);
  const Tensor c = tiny::matmul(a, b);
  EXPECT_EQ(c.dtype(), tiny::kInt64);
  const std::vector<int64_t> va = a.to_vector<int64_t>(), vb = b.to_vector<int64_t>(), vc = c.to_vector<int64_t>();
  for (int64_t i = 0; i < 7; ++i) {
    for (int64_t j = 0; j < 4; ++j) {
      int64_t s = 0;
      for (int64_t q = 0; q < 9; ++q) s += va[static_cast<size_t>(i * 9 + q)] * vb[static_cast<size_t>(q * 4 + j)];
      EXPECT_EQ(vc[static_cast<size_t>(i * 4 + j)], s);
    }
  }
  // Transposed int64 operands.
  const Tensor ct = tiny::mm(b.t(), a.t());
  EXPECT_TRUE(tiny::equal(ct, c.t()));
}

TEST(Linalg, Float64UsesDoublePrecision) {
  const Tensor a = uniform({20, 30}, 20, tiny::kFloat64);
  const Tensor b = uniform({30, 10}, 21, tiny::kFloat64).t().contiguous().t();
  const Tensor c = tiny::mm(a, b);
  EXPECT_EQ(c.dtype(), tiny::kFloat64);
  expect_product(c, naive_mm(a.to_vector<double>(), b.to_vector<double>(), 20, 30, 10), 30);
  const Tensor bm = tiny::matmul(uniform({3, 2, 30}, 22, tiny::kFloat64), a.t());
  EXPECT_EQ(bm.dtype(), tiny::kFloat64);
  EXPECT_EQ(bm.sizes(), (IntArrayRef{3, 2, 20}));
}

TEST(Linalg, AddmmScalesBiasAndProduct) {
  const int64_t m = 4, k = 6, n = 5;
  const Tensor a = uniform({m, k}, 23), b = uniform({k, n}, 24);
  const Product p = naive_mm(a.to_vector<double>(), b.to_vector<double>(), m, k, n);
  struct Case {
    Tensor bias;
    double beta, alpha;
  };
  const Tensor row_bias = uniform({n}, 25), full_bias = uniform({m, n}, 26), col_bias = uniform({m, 1}, 27);
  for (const Case& c : {Case{row_bias, 1, 1}, Case{full_bias, 0.5, -2}, Case{col_bias, 2, 0.25},
                        Case{full_bias, 0, 1}, Case{row_bias.view({1, n}), 1, 3}}) {
    const Tensor out = tiny::addmm(c.bias, a, b, c.beta, c.alpha);
    EXPECT_EQ(out.sizes(), (IntArrayRef{m, n}));
    const std::vector<double> bias = c.bias.expand({m, n}).to_vector<double>();
    Product want = p;
    for (size_t i = 0; i < want.value.size(); ++i) {
      want.value[i] = c.beta * bias[i] + c.alpha * p.value[i];
      want.magnitude[i] = std::fabs(c.beta * bias[i]) + std::fabs(c.alpha) * p.magnitude[i];
    }
    expect_product(out, want, k + 1);
  }
  // beta = 0 ignores the bias entirely, NaN included (as BLAS and PyTorch do).
  const Tensor nan_bias = tiny::full({m, n}, std::nan(""));
  const Tensor out = tiny::addmm(nan_bias, a, b, 0, 1);
  expect_product(out, p, k);
}

// Large products are cut into blocks of C that run on tiny's pool (OpenBLAS
// itself is single-threaded). Shapes with more rows and with more columns take
// the two ways of cutting; transposed operands move the block offsets. Every
// block must land in its place, and the bits must not depend on the thread count.
TEST(Linalg, LargeProductsSplitIntoBlocksAreRightAndTheSameForAnyThreadCount) {
  const int before = tiny::get_num_threads();
  for (auto [m, k, n] : {std::tuple<int64_t, int64_t, int64_t>{300, 200, 700}, {700, 150, 300}, {1000, 64, 1000}}) {
    const Tensor a = uniform({m, k}, 31), b = uniform({k, n}, 32);
    const Tensor at = uniform({k, m}, 33).t(), bt = uniform({n, k}, 34).t();  // the transposed layouts
    for (const auto& [x, y] : {std::pair<Tensor, Tensor>{a, b}, {at, b}, {a, bt}, {at, bt}}) {
      const Product want = naive_mm(x.to_vector<double>(), y.to_vector<double>(), m, k, n);
      std::vector<float> first;
      for (int threads : {1, 2, 3}) {
        tiny::set_num_threads(threads);
        const Tensor c = tiny::mm(x, y);
        expect_product(c, want, k);
        if (first.empty()) {
          first = c.to_vector<float>();
        } else {
          EXPECT_TRUE(c.to_vector<float>() == first) << m << "x" << k << "x" << n << " with " << threads
                                                     << " threads differs in its bits from 1 thread";
        }
      }
    }
  }
  // float64 takes the same blocks; float16 sums its float32 products in the same blocks.
  const Tensor a = uniform({260, 90}, 35, tiny::kFloat64), b = uniform({90, 400}, 36, tiny::kFloat64);
  expect_product(tiny::mm(a, b), naive_mm(a.to_vector<double>(), b.to_vector<double>(), 260, 90, 400), 90);
  const Tensor ah = a.to(tiny::kFloat16), bh = b.to(tiny::kFloat16);
  EXPECT_TRUE(tiny::equal(tiny::mm(ah, bh), tiny::mm(ah.to(tiny::kFloat32), bh.to(tiny::kFloat32)).to(tiny::kFloat16)));
  tiny::set_num_threads(before);
}

}  // namespace
