// Pointwise ops: values against std:: math computed here, broadcasting,
// non-contiguous inputs, empty tensors, dtype promotion, NaN, operators and
// the in-place forms.

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "tiny/tiny.h"

namespace {

using tiny::IntArrayRef;
using tiny::Tensor;

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// The element of an input of shape `in` that feeds element `linear` of a
// broadcast result of shape `out` (both row-major).
int64_t broadcast_source(const IntArrayRef& out, const IntArrayRef& in, int64_t linear) {
  int64_t src = 0, in_stride = 1;
  for (size_t k = 0; k < out.size(); ++k) {
    const size_t d = out.size() - 1 - k;
    const int64_t idx = linear % out[d];
    linear /= out[d];
    if (k < in.size()) {
      const int64_t size = in[in.size() - 1 - k];
      if (size != 1) src += idx * in_stride;
      in_stride *= size;
    }
  }
  return src;
}

// f applied elementwise with broadcasting, in double, on the inputs' values.
std::vector<double> ref_binary(const Tensor& a, const Tensor& b, const std::function<double(double, double)>& f) {
  const IntArrayRef out = tiny::broadcast_shapes(a.sizes(), b.sizes());
  const std::vector<double> va = a.to_vector<double>(), vb = b.to_vector<double>();
  int64_t n = 1;
  for (int64_t s : out) n *= s;
  std::vector<double> r(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    r[static_cast<size_t>(i)] = f(va[static_cast<size_t>(broadcast_source(out, a.sizes(), i))],
                                  vb[static_cast<size_t>(broadcast_source(out, b.sizes(), i))]);
  }
  return r;
}

std::vector<double> ref_unary(const Tensor& a, const std::function<double(double)>& f) {
  std::vector<double> v = a.to_vector<double>();
  for (double& x : v) x = f(x);
  return v;
}

// |got - want| <= atol + rtol * |want| elementwise; NaN must match NaN.
void expect_close(const Tensor& got, const std::vector<double>& want, double rtol = 1e-6, double atol = 1e-7,
                  const std::string& what = "") {
  const std::vector<double> g = got.to_vector<double>();
  ASSERT_EQ(g.size(), want.size()) << what;
  for (size_t i = 0; i < g.size(); ++i) {
    if (std::isnan(want[i])) {
      EXPECT_TRUE(std::isnan(g[i])) << what << " element " << i << ": expected NaN, got " << g[i];
    } else if (std::isinf(want[i])) {
      EXPECT_EQ(g[i], want[i]) << what << " element " << i;
    } else {
      EXPECT_NEAR(g[i], want[i], atol + rtol * std::fabs(want[i])) << what << " element " << i;
    }
  }
}

// Float32 values in [lo, hi), reproducible.
Tensor uniform(const IntArrayRef& shape, double lo, double hi, uint64_t seed, tiny::Dtype dtype = tiny::kFloat32) {
  tiny::Generator g(seed);
  return tiny::rand(shape, dtype, g) * (hi - lo) + lo;
}

double sigmoid_ref(double x) { return 1.0 / (1.0 + std::exp(-x)); }
double gelu_ref(double x) { return 0.5 * x * (1.0 + std::erf(x / std::sqrt(2.0))); }
double gelu_tanh_ref(double x) {
  return 0.5 * x * (1.0 + std::tanh(std::sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x)));
}

TEST(Pointwise, BinaryOpsBroadcast3x1x4With5x4) {
  const Tensor a = uniform({3, 1, 4}, -2, 2, 1);
  const Tensor b = uniform({5, 4}, 0.5, 3, 2);
  const IntArrayRef expected_shape{3, 5, 4};
  struct Case {
    const char* name;
    Tensor got;
    std::function<double(double, double)> f;
  };
  const Case cases[] = {
      {"add", a + b, [](double x, double y) { return x + y; }},
      {"add alpha", tiny::add(a, b, 2.5), [](double x, double y) { return x + 2.5 * y; }},
      {"sub", a - b, [](double x, double y) { return x - y; }},
      {"sub alpha", tiny::sub(a, b, -0.5), [](double x, double y) { return x + 0.5 * y; }},
      {"mul", a * b, [](double x, double y) { return x * y; }},
      {"div", a / b, [](double x, double y) { return x / y; }},
      {"pow", tiny::pow(b, a), [](double x, double y) { return std::pow(y, x); }},  // b ** a
      {"maximum", tiny::maximum(a, b), [](double x, double y) { return std::max(x, y); }},
      {"minimum", tiny::minimum(a, b), [](double x, double y) { return std::min(x, y); }},
  };
  for (const Case& c : cases) {
    EXPECT_EQ(c.got.sizes(), expected_shape) << c.name;
    EXPECT_EQ(c.got.dtype(), tiny::kFloat32) << c.name;
    expect_close(c.got, ref_binary(a, b, c.f), 2e-6, 1e-6, c.name);
  }
}

TEST(Pointwise, ComparisonsBroadcastAndReturnBool) {
  const Tensor a = tiny::tensor({1, 2, 3, 4, 5, 6}, {2, 1, 3});
  const Tensor b = tiny::tensor({2, 2, 6, 3}, {4, 1});
  struct Case {
    const char* name;
    Tensor got;
    std::function<bool(double, double)> f;
  };
  const Case cases[] = {
      {"eq", a == b, [](double x, double y) { return x == y; }},
      {"ne", a != b, [](double x, double y) { return x != y; }},
      {"lt", a < b, [](double x, double y) { return x < y; }},
      {"le", a <= b, [](double x, double y) { return x <= y; }},
      {"gt", a > b, [](double x, double y) { return x > y; }},
      {"ge", a >= b, [](double x, double y) { return x >= y; }},
      {"eq method", a.eq(b), [](double x, double y) { return x == y; }},
      {"lt free", tiny::lt(a, b), [](double x, double y) { return x < y; }},
  };
  for (const Case& c : cases) {
    EXPECT_EQ(c.got.dtype(), tiny::kBool) << c.name;
    EXPECT_EQ(c.got.sizes(), (IntArrayRef{2, 4, 3})) << c.name;
    expect_close(c.got, ref_binary(a, b, [&](double x, double y) { return c.f(x, y) ? 1.0 : 0.0; }), 0, 0, c.name);
  }
}

TEST(Pointwise, ComparisonsWithScalars) {
  const Tensor a = tiny::tensor({-1.5, 0.0, 2.0, 2.5});
  const auto as_double = [](const Tensor& t) { return t.to_vector<double>(); };
  EXPECT_EQ(as_double(a == 2.0), (std::vector<double>{0, 0, 1, 0}));
  EXPECT_EQ(as_double(a != 2), (std::vector<double>{1, 1, 0, 1}));
  EXPECT_EQ(as_double(a < 0), (std::vector<double>{1, 0, 0, 0}));
  EXPECT_EQ(as_double(a <= 0), (std::vector<double>{1, 1, 0, 0}));
  EXPECT_EQ(as_double(a > 2), (std::vector<double>{0, 0, 0, 1}));
  EXPECT_EQ(as_double(a >= 2), (std::vector<double>{0, 0, 1, 1}));
  // An int tensor compared with a fractional scalar compares the true values.
  const Tensor i = tiny::arange(4);
  EXPECT_EQ(as_double(i > 1.5), (std::vector<double>{0, 0, 1, 1}));
  EXPECT_EQ((i > 1.5).dtype(), tiny::kBool);
}

TEST(Pointwise, ScalarOperandsAndOperators) {
  const Tensor a = uniform({4, 5}, 0.5, 4, 3);
  struct Case {
    const char* name;
    Tensor got;
    std::function<double(double)> f;
  };
  const Case cases[] = {
      {"a + 2.5", a + 2.5, [](double x) { return x + 2.5; }},
      {"2.5 + a", 2.5 + a, [](double x) { return x + 2.5; }},
      {"a - 1", a - 1, [](double x) { return x - 1; }},
      {"3 - a", 3 - a, [](double x) { return 3 - x; }},
      {"a * -2", a * -2, [](double x) { return -2 * x; }},
      {"0.5 * a", 0.5 * a, [](double x) { return 0.5 * x; }},
      {"a / 3", a / 3, [](double x) { return x / 3; }},
      {"2 / a", 2 / a, [](double x) { return 2 / x; }},
      {"-a", -a, [](double x) { return -x; }},
      {"pow 2", a.pow(2), [](double x) { return x * x; }},
      {"pow 3", tiny::pow(a, 3), [](double x) { return x * x * x; }},
      {"pow 0.5", a.pow(0.5), [](double x) { return std::sqrt(x); }},
      {"pow -1", a.pow(-1), [](double x) { return 1 / x; }},
      {"pow 1.7", a.pow(1.7), [](double x) { return std::pow(x, 1.7); }},
      {"add scalar", tiny::add(a, tiny::Scalar(1.25)), [](double x) { return x + 1.25; }},
      {"sub scalar", tiny::sub(a, tiny::Scalar(1.25)), [](double x) { return x - 1.25; }},
      {"mul scalar", tiny::mul(a, tiny::Scalar(4)), [](double x) { return 4 * x; }},
      {"div scalar", tiny::div(a, tiny::Scalar(8)), [](double x) { return x / 8; }},
  };
  for (const Case& c : cases) {
    EXPECT_EQ(c.got.sizes(), a.sizes()) << c.name;
    EXPECT_EQ(c.got.dtype(), tiny::kFloat32) << c.name;
    expect_close(c.got, ref_unary(a, c.f), 2e-6, 1e-6, c.name);
  }
}

TEST(Pointwise, ZeroDimOperands) {
  const Tensor a = uniform({2, 3}, -1, 1, 4);
  const Tensor s = tiny::scalar_tensor(1.5);
  const Tensor sum = a + s;
  EXPECT_EQ(sum.sizes(), a.sizes());
  expect_close(sum, ref_unary(a, [](double x) { return x + 1.5; }));
  const Tensor prod = s * a;
  expect_close(prod, ref_unary(a, [](double x) { return 1.5 * x; }));
  const Tensor both = s * tiny::scalar_tensor(-2.0);
  EXPECT_EQ(both.dim(), 0);
  EXPECT_EQ(both.item<float>(), -3.0f);
  EXPECT_EQ(tiny::exp(tiny::scalar_tensor(0.0)).dim(), 0);
  EXPECT_EQ((tiny::scalar_tensor(1.0) < tiny::scalar_tensor(2.0)).item<bool>(), true);
}

TEST(Pointwise, UnaryOpsMatchStdMath) {
  const Tensor x = uniform({1000}, -6, 6, 5);
  const Tensor pos = uniform({1000}, 1e-3, 50, 6);
  struct Case {
    const char* name;
    Tensor got;
    Tensor in;
    std::function<double(double)> f;
    double rtol;
  };
  const Case cases[] = {
      {"neg", tiny::neg(x), x, [](double v) { return -v; }, 0},
      {"abs", tiny::abs(x), x, [](double v) { return std::fabs(v); }, 0},
      {"relu", tiny::relu(x), x, [](double v) { return v > 0 ? v : 0.0; }, 0},
      {"exp", tiny::exp(x), x, [](double v) { return std::exp(v); }, 2e-6},
      {"log", tiny::log(pos), pos, [](double v) { return std::log(v); }, 2e-6},
      {"sqrt", tiny::sqrt(pos), pos, [](double v) { return std::sqrt(v); }, 1e-6},
      {"sigmoid", tiny::sigmoid(x), x, sigmoid_ref, 2e-6},
      {"tanh", tiny::tanh(x), x, [](double v) { return std::tanh(v); }, 2e-6},
      {"gelu", tiny::gelu(x), x, gelu_ref, 2e-6},
      {"gelu tanh", tiny::gelu(x, "tanh"), x, gelu_tanh_ref, 2e-6},
      {"clamp both", tiny::clamp(x, -1.5, 2.0), x, [](double v) { return std::min(std::max(v, -1.5), 2.0); }, 0},
      {"clamp min", tiny::clamp(x, 0.5), x, [](double v) { return std::max(v, 0.5); }, 0},
      {"clamp max", x.clamp(std::nullopt, -0.25), x, [](double v) { return std::min(v, -0.25); }, 0},
      {"method exp", x.exp(), x, [](double v) { return std::exp(v); }, 2e-6},
      {"method sigmoid", x.sigmoid(), x, sigmoid_ref, 2e-6},
      {"nn relu", tiny::nn::functional::relu(x), x, [](double v) { return v > 0 ? v : 0.0; }, 0},
  };
  for (const Case& c : cases) {
    EXPECT_EQ(c.got.dtype(), tiny::kFloat32) << c.name;
    EXPECT_EQ(c.got.sizes(), c.in.sizes()) << c.name;
    expect_close(c.got, ref_unary(c.in, c.f), c.rtol, 1e-6, c.name);
  }
}

TEST(Pointwise, Float64KeepsDoublePrecision) {
  const Tensor x = uniform({100}, -3, 3, 7, tiny::kFloat64);
  EXPECT_EQ(tiny::exp(x).dtype(), tiny::kFloat64);
  expect_close(tiny::exp(x), ref_unary(x, [](double v) { return std::exp(v); }), 1e-14, 0);
  expect_close(tiny::tanh(x) * x + 1.0 / 3.0, ref_unary(x, [](double v) { return std::tanh(v) * v + 1.0 / 3.0; }),
               1e-14, 1e-15);
}

TEST(Pointwise, NonContiguousInputs) {
  const Tensor base = uniform({6, 8}, -2, 2, 8);
  const Tensor transposed = base.t();                      // [8, 6]
  const Tensor stepped = base.slice(1, 1, 8, 2);           // [6, 4], stride 2 in the last dim
  const Tensor expanded = uniform({6, 1}, 1, 2, 9).expand({6, 4});
  ASSERT_FALSE(transposed.is_contiguous());
  ASSERT_FALSE(stepped.is_contiguous());
  ASSERT_FALSE(expanded.is_contiguous());

  expect_close(transposed * 2.0, ref_unary(transposed, [](double v) { return 2 * v; }));
  expect_close(tiny::exp(transposed), ref_unary(transposed, [](double v) { return std::exp(v); }), 2e-6);
  expect_close(stepped + expanded, ref_binary(stepped, expanded, [](double x, double y) { return x + y; }));
  expect_close(stepped * expanded, ref_binary(stepped, expanded, [](double x, double y) { return x * y; }));
  expect_close(tiny::maximum(stepped, expanded),
               ref_binary(stepped, expanded, [](double x, double y) { return std::max(x, y); }));
  const Tensor square = base.narrow(1, 0, 6);  // [6, 6] with row stride 8
  expect_close(square + square.t(), ref_binary(square, square.t(), [](double x, double y) { return x + y; }));
  // A permuted 3-D tensor against a contiguous one of the same shape.
  const Tensor p = uniform({2, 3, 4}, -1, 1, 10).permute({2, 0, 1});
  const Tensor q = uniform({4, 2, 3}, -1, 1, 11);
  expect_close(p - q, ref_binary(p, q, [](double x, double y) { return x - y; }));
}

TEST(Pointwise, LargeTensorsUseEveryChunk) {
  // More elements than one parallel chunk, so several threads write; check every element.
  const Tensor a = uniform({300, 1000}, -1, 1, 12);
  const Tensor b = uniform({1000}, -1, 1, 13);
  expect_close(a * b + a, ref_binary(a, b, [](double x, double y) {
                 return static_cast<double>(static_cast<float>(x * y) + static_cast<float>(x));
               }),
               1e-6, 1e-7);
  const Tensor at = a.t();
  expect_close(tiny::abs(at), ref_unary(at, [](double v) { return std::fabs(v); }), 0, 0);
}

TEST(Pointwise, EmptyTensors) {
  const Tensor e = tiny::zeros({0, 3});
  const Tensor r = e + tiny::ones({3});
  EXPECT_EQ(r.sizes(), (IntArrayRef{0, 3}));
  EXPECT_EQ(tiny::exp(tiny::zeros({2, 0})).sizes(), (IntArrayRef{2, 0}));
  EXPECT_EQ((e < 1.0).numel(), 0);
  EXPECT_EQ((e < 1.0).dtype(), tiny::kBool);
  EXPECT_EQ(tiny::where(e > 0, e, e).sizes(), (IntArrayRef{0, 3}));
  // [0] broadcasts with [1] but not with [2].
  EXPECT_EQ((tiny::zeros({0}) * tiny::ones({1})).numel(), 0);
  EXPECT_THROW((void)(tiny::zeros({0}) * tiny::ones({2})), tiny::ShapeError);
  const Tensor f = tiny::zeros({0});
  f.add_(tiny::ones({1}));
  f.fill_(3);
  EXPECT_EQ(f.numel(), 0);
}

TEST(Pointwise, DtypePromotion) {
  const Tensor i = tiny::tensor({1, -2, 7}, {3}, tiny::kInt64);
  const Tensor f = tiny::tensor({0.5, 0.25, -1.5});
  const Tensor d = tiny::tensor({0.1, 0.2, 0.3}, {3}, tiny::kFloat64);
  const Tensor b = tiny::from_vector<bool>({true, false, true});

  const Tensor if_sum = i + f;
  EXPECT_EQ(if_sum.dtype(), tiny::kFloat32);
  expect_close(if_sum, {1.5, -1.75, 5.5});
  EXPECT_EQ((f * d).dtype(), tiny::kFloat64);
  EXPECT_EQ((i * i).dtype(), tiny::kInt64);
  EXPECT_EQ((i * i).to_vector<int64_t>(), (std::vector<int64_t>{1, 4, 49}));
  EXPECT_EQ((b + i).dtype(), tiny::kInt64);
  EXPECT_EQ((b + i).to_vector<int64_t>(), (std::vector<int64_t>{2, -2, 8}));

  // True division: int / int gives float32.
  const Tensor q = i / tiny::tensor({2, 4, 2}, {3}, tiny::kInt64);
  EXPECT_EQ(q.dtype(), tiny::kFloat32);
  expect_close(q, {0.5, -0.5, 3.5}, 0, 0);
  EXPECT_EQ((i / 2).dtype(), tiny::kFloat32);
  expect_close(i / 2, {0.5, -1.0, 3.5}, 0, 0);
  EXPECT_EQ((2 / i).dtype(), tiny::kFloat32);

  // Scalars never widen within a category; a float scalar makes an int tensor float32.
  EXPECT_EQ((i + 2).dtype(), tiny::kInt64);
  EXPECT_EQ((i + 2).to_vector<int64_t>(), (std::vector<int64_t>{3, 0, 9}));
  EXPECT_EQ((i * 2.5).dtype(), tiny::kFloat32);
  expect_close(i * 2.5, {2.5, -5.0, 17.5}, 0, 0);
  EXPECT_EQ((d + 1.5).dtype(), tiny::kFloat64);
  EXPECT_EQ((b + 1).dtype(), tiny::kInt64);
  EXPECT_EQ(i.pow(2).dtype(), tiny::kInt64);
  EXPECT_EQ(i.pow(2).to_vector<int64_t>(), (std::vector<int64_t>{1, 4, 49}));
  // Float-only math on integers computes in float32.
  EXPECT_EQ(tiny::exp(i).dtype(), tiny::kFloat32);
  expect_close(tiny::sqrt(tiny::tensor({4, 9}, {2}, tiny::kInt64)), {2, 3}, 0, 0);
  EXPECT_EQ(tiny::abs(i).dtype(), tiny::kInt64);
  EXPECT_EQ(tiny::abs(i).to_vector<int64_t>(), (std::vector<int64_t>{1, 2, 7}));
  EXPECT_EQ(tiny::relu(i).to_vector<int64_t>(), (std::vector<int64_t>{1, 0, 7}));
  EXPECT_EQ(tiny::maximum(i, f).dtype(), tiny::kFloat32);

  // Bool comparisons.
  const Tensor c = b == tiny::from_vector<bool>({true, true, false});
  EXPECT_EQ(c.dtype(), tiny::kBool);
  EXPECT_EQ(c.to_vector<bool>(), (std::vector<bool>{true, false, false}));
  EXPECT_EQ((b < i).to_vector<bool>(), (std::vector<bool>{false, false, true}));
  EXPECT_EQ((i > f).to_vector<bool>(), (std::vector<bool>{true, false, true}));
}

TEST(Pointwise, ZeroDimTensorsDoNotWidenWithinTheirCategory) {
  // PyTorch's rule: a 0-d tensor beside a dimensioned one decides the dtype
  // only when its category (bool < integer < floating) is higher.
  const Tensor f = tiny::tensor({1.0, 2.0});
  const Tensor d0 = tiny::scalar_tensor(0.5, tiny::kFloat64);
  EXPECT_EQ((f + d0).dtype(), tiny::kFloat32);
  EXPECT_EQ((d0 * f).dtype(), tiny::kFloat32);
  EXPECT_EQ((f / d0).dtype(), tiny::kFloat32);
  EXPECT_EQ(tiny::maximum(f, d0).dtype(), tiny::kFloat32);
  EXPECT_EQ(tiny::where(f > 1.5, f, d0).dtype(), tiny::kFloat32);
  expect_close(f + d0, {1.5, 2.5}, 0, 0);
  const Tensor i = tiny::from_vector<int64_t>({1, 2});
  EXPECT_EQ((i + d0).dtype(), tiny::kFloat64);  // higher category: the 0-d dtype wins
  EXPECT_EQ((i + tiny::scalar_tensor(true, tiny::kBool)).dtype(), tiny::kInt64);
  EXPECT_EQ((tiny::from_vector<bool>({true}) + tiny::scalar_tensor(int64_t{2}, tiny::kInt64)).dtype(), tiny::kInt64);
  // Two 0-d tensors, or two dimensioned ones, promote normally.
  EXPECT_EQ((tiny::scalar_tensor(1.0) + d0).dtype(), tiny::kFloat64);
  EXPECT_EQ((f + tiny::tensor({0.5}, tiny::kFloat64)).dtype(), tiny::kFloat64);
}

TEST(Pointwise, BoolAddAndMulAreLogical) {
  // PyTorch: True + True is True (or), True * False is False (and); max/min likewise.
  const Tensor a = tiny::from_vector<bool>({false, false, true, true});
  const Tensor b = tiny::from_vector<bool>({false, true, false, true});
  EXPECT_EQ((a + b).dtype(), tiny::kBool);
  EXPECT_EQ((a + b).to_vector<bool>(), (std::vector<bool>{false, true, true, true}));
  EXPECT_EQ((a * b).to_vector<bool>(), (std::vector<bool>{false, false, false, true}));
  EXPECT_EQ(tiny::maximum(a, b).to_vector<bool>(), (std::vector<bool>{false, true, true, true}));
  EXPECT_EQ(tiny::minimum(a, b).to_vector<bool>(), (std::vector<bool>{false, false, false, true}));
  const Tensor m = a.clone();
  m.mul_(b);
  EXPECT_EQ(m.to_vector<bool>(), (std::vector<bool>{false, false, false, true}));
}

TEST(Pointwise, IntegerArithmeticIsExact) {
  // Values above 2^24 (float32's exact range) and products near 2^62.
  const Tensor a = tiny::from_vector<int64_t>({(int64_t{1} << 40) + 3, -123456789, int64_t{1} << 31});
  const Tensor b = tiny::from_vector<int64_t>({5, 1000000007, int64_t{1} << 31});
  EXPECT_EQ((a + b).to_vector<int64_t>(),
            (std::vector<int64_t>{(int64_t{1} << 40) + 8, 1000000007 - 123456789, int64_t{1} << 32}));
  EXPECT_EQ((a * b).to_vector<int64_t>(),
            (std::vector<int64_t>{((int64_t{1} << 40) + 3) * 5, int64_t{-123456789} * 1000000007, int64_t{1} << 62}));
  EXPECT_EQ(tiny::sub(a, b, 2).to_vector<int64_t>(),
            (std::vector<int64_t>{(int64_t{1} << 40) - 7, -123456789 - 2 * int64_t{1000000007}, -(int64_t{1} << 31)}));
  const Tensor base = tiny::from_vector<int64_t>({3, -2, 7});
  const Tensor exponent = tiny::from_vector<int64_t>({20, 5, 0});
  EXPECT_EQ(tiny::pow(base, exponent).to_vector<int64_t>(), (std::vector<int64_t>{3486784401, -32, 1}));
}

TEST(Pointwise, NaNPropagates) {
  const Tensor x = tiny::tensor({kNaN, 1.0, -2.0, kNaN});
  const Tensor y = tiny::tensor({0.0, kNaN, -3.0, kNaN});
  expect_close(tiny::relu(x), {kNaN, 1.0, 0.0, kNaN});
  expect_close(tiny::maximum(x, y), {kNaN, kNaN, -2.0, kNaN});
  expect_close(tiny::minimum(x, y), {kNaN, kNaN, -3.0, kNaN});
  expect_close(tiny::clamp(x, -1.0, 0.5), {kNaN, 0.5, -1.0, kNaN});
  expect_close(tiny::clamp(x, 0.0), {kNaN, 1.0, 0.0, kNaN});
  expect_close(x + 1.0, {kNaN, 2.0, -1.0, kNaN});
  expect_close(tiny::exp(x), {kNaN, std::exp(1.0), std::exp(-2.0), kNaN}, 2e-7);
  // NaN compares unequal to everything, itself included.
  EXPECT_EQ((x == x).to_vector<bool>(), (std::vector<bool>{false, true, true, false}));
  EXPECT_EQ((x != y).to_vector<bool>(), (std::vector<bool>{true, true, true, true}));
  EXPECT_EQ((x > 0.5).to_vector<bool>(), (std::vector<bool>{false, true, false, false}));
  const Tensor c = x.clone();
  c.clamp_(-1.0, 0.5);
  expect_close(c, {kNaN, 0.5, -1.0, kNaN});
  // Domain errors give NaN, as in C.
  expect_close(tiny::log(tiny::tensor({-1.0, 0.0})), {kNaN, -std::numeric_limits<double>::infinity()});
  expect_close(tiny::sqrt(tiny::tensor({-4.0})), {kNaN});
}

TEST(Pointwise, InPlaceArithmetic) {
  const Tensor a0 = uniform({3, 4}, 1, 2, 14);
  const Tensor b = uniform({3, 4}, 1, 2, 15);
  const Tensor row = uniform({4}, 1, 2, 16);
  auto run = [&](const std::function<void(const Tensor&)>& op) {
    Tensor t = a0.clone();
    op(t);
    return t;
  };
  expect_close(run([&](const Tensor& t) { t.add_(b); }), ref_binary(a0, b, [](double x, double y) { return x + y; }));
  expect_close(run([&](const Tensor& t) { t.add_(b, -3); }),
               ref_binary(a0, b, [](double x, double y) { return x - 3 * y; }));
  expect_close(run([&](const Tensor& t) { t.sub_(row); }),  // broadcast [4] into [3, 4]
               ref_binary(a0, row, [](double x, double y) { return x - y; }));
  expect_close(run([&](const Tensor& t) { t.sub_(b, 0.5); }),
               ref_binary(a0, b, [](double x, double y) { return x - 0.5 * y; }));
  expect_close(run([&](const Tensor& t) { t.mul_(row); }),
               ref_binary(a0, row, [](double x, double y) { return x * y; }));
  expect_close(run([&](const Tensor& t) { t.div_(b); }), ref_binary(a0, b, [](double x, double y) { return x / y; }));
  expect_close(run([&](const Tensor& t) { t.add_(2.5); }), ref_unary(a0, [](double x) { return x + 2.5; }));
  expect_close(run([&](const Tensor& t) { t.mul_(-3); }), ref_unary(a0, [](double x) { return -3 * x; }));
  expect_close(run([&](const Tensor& t) { t.div_(4.0); }), ref_unary(a0, [](double x) { return x / 4; }));
  expect_close(run([&](const Tensor& t) { t.clamp_(1.2, 1.8); }),
               ref_unary(a0, [](double x) { return std::min(std::max(x, 1.2), 1.8); }));
  expect_close(run([&](const Tensor& t) { t.clamp_(std::nullopt, 1.5); }),
               ref_unary(a0, [](double x) { return std::min(x, 1.5); }));
  expect_close(run([&](const Tensor& t) { t.zero_(); }), std::vector<double>(12, 0.0), 0, 0);
  expect_close(run([&](const Tensor& t) { t.fill_(-7); }), std::vector<double>(12, -7.0), 0, 0);

  // The in-place ops return self, so they chain.
  Tensor t = a0.clone();
  EXPECT_TRUE(t.add_(1.0).mul_(2.0).is_same(t));
  expect_close(t, ref_unary(a0, [](double x) { return (x + 1) * 2; }));

  // Compound operators.
  Tensor c = a0.clone();
  c += b;
  c -= row;
  c *= b;
  c /= row;
  const std::vector<double> va = a0.to_vector<double>(), vb = b.to_vector<double>(), vr = row.to_vector<double>();
  std::vector<double> expected(12);
  for (size_t k = 0; k < 12; ++k) expected[k] = (va[k] + vb[k] - vr[k % 4]) * vb[k] / vr[k % 4];
  expect_close(c, expected, 1e-5);
}

TEST(Pointwise, InPlaceIntoNonContiguousAndAliasedSelf) {
  // Writing through a transposed view.
  const Tensor x = tiny::zeros({3, 4});
  x.t().add_(tiny::arange(3, tiny::kFloat32));  // x.t() is [4, 3]; adds j to column... row j of x
  for (int64_t r = 0; r < 3; ++r) {
    for (int64_t c = 0; c < 4; ++c) EXPECT_EQ(x[r][c].item<float>(), static_cast<float>(r));
  }
  // self and other share memory in different layouts: the result must be x + x^T of the old values.
  const Tensor m = uniform({5, 5}, -1, 1, 17);
  const Tensor expected = m + m.t().contiguous();
  m.add_(m.t());
  expect_close(m, expected.to_vector<double>(), 0, 0);
  // A stepped slice as self.
  const Tensor v = tiny::zeros({8}, tiny::kInt64);
  v.slice(0, 0, 8, 3).add_(tiny::from_vector<int64_t>({1, 2, 3}));
  EXPECT_EQ(v.to_vector<int64_t>(), (std::vector<int64_t>{1, 0, 0, 2, 0, 0, 3, 0}));
}

TEST(Pointwise, InPlaceDtypeRules) {
  // A float self accepts an int operand (converted).
  const Tensor f = tiny::ones({3});
  f.add_(tiny::from_vector<int64_t>({1, 2, 3}));
  expect_close(f, {2, 3, 4}, 0, 0);
  // An int self cannot hold a float result.
  const Tensor i = tiny::arange(3);
  try {
    i.add_(tiny::ones({3}));
    FAIL() << "int64.add_(float32) must fail";
  } catch (const tiny::DtypeError& e) {
    EXPECT_NE(std::string(e.what()).find("result type float32 can't be cast to the desired output type int64"),
              std::string::npos)
        << e.what();
  }
  try {
    i.div_(tiny::from_vector<int64_t>({1, 1, 1}));
    FAIL() << "int64.div_ must fail";
  } catch (const tiny::DtypeError& e) {
    EXPECT_NE(std::string(e.what()).find("can't be cast to the desired output type int64"), std::string::npos)
        << e.what();
  }
  EXPECT_THROW(i.div_(2), tiny::DtypeError);
  EXPECT_THROW(i.add_(0.5), tiny::DtypeError);
  EXPECT_THROW(i.mul_(0.5), tiny::DtypeError);
  // Failed ops leave self unchanged.
  EXPECT_EQ(i.to_vector<int64_t>(), (std::vector<int64_t>{0, 1, 2}));
  i.add_(5).mul_(2);
  EXPECT_EQ(i.to_vector<int64_t>(), (std::vector<int64_t>{10, 12, 14}));
}

TEST(Pointwise, InPlaceCastsDownWithinACategory) {
  // PyTorch's can_cast allows float64 -> float32 (same category): x.add_(y_double) keeps x float32.
  const Tensor g = tiny::ones({2});
  EXPECT_NO_THROW(g.add_(tiny::tensor({0.5, 0.25}, {2}, tiny::kFloat64)));
  EXPECT_NO_THROW(g.mul_(tiny::scalar_tensor(2.0, tiny::kFloat64)));
  EXPECT_EQ(g.dtype(), tiny::kFloat32);
  expect_close(g, {3.0, 2.5}, 0, 0);
}

TEST(Pointwise, InPlaceCannotGrowSelf) {
  const Tensor x = tiny::zeros({4});
  try {
    x.add_(tiny::ones({3, 4}));
    FAIL() << "broadcasting must not grow self";
  } catch (const tiny::ShapeError& e) {
    EXPECT_NE(std::string(e.what()).find("output with shape [4] doesn't match the broadcast shape [3, 4]"),
              std::string::npos)
        << e.what();
  }
  EXPECT_THROW(x.copy_(tiny::ones({2, 4})), tiny::ShapeError);
  // Writing into an expanded tensor would write one element several times.
  EXPECT_THROW(tiny::zeros({1}).expand({4}).fill_(1), tiny::ValueError);
}

TEST(Pointwise, CopyBroadcastsAndConverts) {
  const Tensor dst = tiny::zeros({2, 3}, tiny::kInt64);
  dst.copy_(tiny::tensor({1.9, -1.9, 2.5}));  // float -> int truncates toward zero
  EXPECT_EQ(dst.to_vector<int64_t>(), (std::vector<int64_t>{1, -1, 2, 1, -1, 2}));
  const Tensor bools = tiny::zeros({3}, tiny::kBool);
  bools.copy_(tiny::tensor({0.0, 0.1, -3.0}));
  EXPECT_EQ(bools.to_vector<bool>(), (std::vector<bool>{false, true, true}));
  const Tensor d = tiny::zeros({3}, tiny::kFloat64);
  d.copy_(tiny::from_vector<int64_t>({int64_t{1} << 50, 3, -4}));
  EXPECT_EQ(d.to_vector<double>(), (std::vector<double>{std::ldexp(1.0, 50), 3.0, -4.0}));
  // Copying a transposed tensor into a contiguous one reorders the elements.
  const Tensor src = tiny::arange(6, tiny::kFloat32).view({2, 3});
  const Tensor out = tiny::empty({3, 2});
  out.copy_(src.t());
  EXPECT_EQ(out.to_vector<float>(), (std::vector<float>{0, 3, 1, 4, 2, 5}));
}

TEST(Pointwise, WhereBroadcastsAndPromotes) {
  const Tensor cond = tiny::from_vector<bool>({true, false, true}).view({3, 1});
  const Tensor a = uniform({1, 4}, -1, 1, 18);
  const Tensor b = tiny::scalar_tensor(-9.0);
  const Tensor w = tiny::where(cond, a, b);
  EXPECT_EQ(w.sizes(), (IntArrayRef{3, 4}));
  const std::vector<double> va = a.to_vector<double>();
  std::vector<double> expected;
  for (int r = 0; r < 3; ++r) {
    for (int c = 0; c < 4; ++c) expected.push_back(r != 1 ? va[static_cast<size_t>(c)] : -9.0);
  }
  expect_close(w, expected, 0, 0);
  // int64 and float32 branches give float32.
  const Tensor mixed = tiny::where(tiny::from_vector<bool>({true, false}), tiny::from_vector<int64_t>({3, 4}),
                                   tiny::tensor({0.5, 1.5}));
  EXPECT_EQ(mixed.dtype(), tiny::kFloat32);
  expect_close(mixed, {3.0, 1.5}, 0, 0);
  // A comparison as the condition, on a transposed input.
  const Tensor m = uniform({4, 3}, -1, 1, 19).t();
  expect_close(tiny::where(m > 0, m, tiny::zeros({1})), ref_unary(m, [](double v) { return v > 0 ? v : 0.0; }), 0, 0);
  try {
    (void)tiny::where(tiny::ones({3}), a, b);
    FAIL() << "a float condition must fail";
  } catch (const tiny::DtypeError& e) {
    EXPECT_NE(std::string(e.what()).find("where expected condition to be a boolean tensor"), std::string::npos)
        << e.what();
  }
}

TEST(Pointwise, MaximumMinimumOnIntegers) {
  const Tensor a = tiny::from_vector<int64_t>({5, -3, 8, 0});
  const Tensor b = tiny::from_vector<int64_t>({2, -1, 8, -7});
  EXPECT_EQ(tiny::maximum(a, b).to_vector<int64_t>(), (std::vector<int64_t>{5, -1, 8, 0}));
  EXPECT_EQ(tiny::minimum(a, b).to_vector<int64_t>(), (std::vector<int64_t>{2, -3, 8, -7}));
  EXPECT_EQ(tiny::maximum(a, b).dtype(), tiny::kInt64);
}

TEST(Pointwise, AllcloseAndEqual) {
  const Tensor a = tiny::tensor({1.0, 2.0, 3.0});
  EXPECT_TRUE(tiny::allclose(a, a));
  EXPECT_TRUE(tiny::allclose(a, a + 1e-6));                  // within rtol * |b|
  EXPECT_FALSE(tiny::allclose(a, a + 1e-3));
  EXPECT_TRUE(tiny::allclose(a, a + 1e-3, 0.0, 2e-3));       // atol
  EXPECT_TRUE(tiny::allclose(a, a * 1.01, 0.011, 0.0));      // rtol relative to b
  EXPECT_FALSE(tiny::allclose(a, a * 1.01, 0.009, 0.0));
  const Tensor n = tiny::tensor({1.0, kNaN});
  EXPECT_FALSE(tiny::allclose(n, n));
  EXPECT_TRUE(tiny::allclose(tiny::from_vector<int64_t>({1, 2, 3}), a));
  EXPECT_TRUE(tiny::allclose(tiny::zeros({0}), tiny::zeros({0})));

  EXPECT_TRUE(tiny::equal(a, a.clone()));
  EXPECT_FALSE(tiny::equal(a, a + 1e-6));
  EXPECT_FALSE(tiny::equal(a, a.view({3, 1})));  // same values, different shape
  EXPECT_FALSE(tiny::equal(n, n));
  EXPECT_TRUE(tiny::equal(tiny::arange(6).view({2, 3}).t(), tiny::from_vector<int64_t>({0, 3, 1, 4, 2, 5}, {3, 2})));
}

}  // namespace

namespace {

// Scalars reach integer kernels exactly: 2^53 + 1 has no double representation.
TEST(Pointwise, IntegerScalarsBeyondDoublePrecisionStayExact) {
  const int64_t big = (int64_t{1} << 53) + 1;
  tiny::Tensor x = tiny::from_vector<int64_t>({0, 1});
  EXPECT_EQ((x + big).to_vector<int64_t>(), (std::vector<int64_t>{big, big + 1}));
  EXPECT_EQ((x * big).to_vector<int64_t>(), (std::vector<int64_t>{0, big}));
  tiny::Tensor y = tiny::from_vector<int64_t>({0, 0});
  y.add_(tiny::from_vector<int64_t>({1, 2}), big);
  EXPECT_EQ(y.to_vector<int64_t>(), (std::vector<int64_t>{big, 2 * big}));
  tiny::Tensor z = tiny::from_vector<int64_t>({big + 5, -3});
  EXPECT_EQ(tiny::clamp(z, int64_t{0}, big).to_vector<int64_t>(), (std::vector<int64_t>{big, 0}));
}

}  // namespace
