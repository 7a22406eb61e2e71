// Gradient checks of every differentiable op: autograd's vector-Jacobian
// products against central finite differences in float64 (see gradcheck.h).
//
// Inputs stay away from kinks (abs, relu, clamp bounds, max ties), where the
// finite difference straddles two pieces and says nothing about the formula.

#include <gtest/gtest.h>

#include <cctype>
#include <functional>
#include <string>
#include <vector>

#include "gradcheck.h"
#include "tiny/cuda.h"
#include "tiny/nn/functional.h"
#include "tiny/ops.h"

namespace {

using tiny::Tensor;
using tiny_test::away_from_zero;
using tiny_test::distinct;
using tiny_test::gradcheck;
using tiny_test::leaf;
using tiny_test::uniform;
using In = std::vector<Tensor>;
namespace F = tiny::nn::functional;

// A non-contiguous leaf: the transpose of a [cols, rows] buffer, detached so it is a leaf itself.
Tensor transposed_leaf(int64_t rows, int64_t cols, double lo, double hi, uint32_t seed) {
  Tensor t = uniform({cols, rows}, lo, hi, seed).t().detach();
  EXPECT_FALSE(t.is_contiguous());
  return leaf(t);
}

// ---- the checker itself ------------------------------------------------------------

TEST(GradcheckHelper, PassesOnACorrectGradient) {
  Tensor x = leaf(uniform({3, 4}, -1, 1, 1));
  EXPECT_TRUE(gradcheck([](const In& in) { return in[0] * in[0]; }, {x}));
}

TEST(GradcheckHelper, CatchesAWrongGradientAndNamesTheElement) {
  // A hook doubles the gradient of one element only: the analytic result is
  // then wrong exactly there, and gradcheck must say so.
  Tensor x = leaf(uniform({2, 3}, 0.5, 1.5, 2));
  auto wrong = [](const In& in) {
    Tensor y = in[0] * in[0];
    if (y.requires_grad()) {
      y.register_hook([](const Tensor& g) {
        Tensor mask = tiny::zeros({2, 3}, tiny::kFloat64);
        mask.data_ptr<double>()[4] = 1.0;  // element [1, 1]
        return g + g * mask;
      });
    }
    return y;
  };
  ::testing::AssertionResult r = gradcheck(wrong, {x});
  ASSERT_FALSE(r);
  const std::string msg = r.message();
  EXPECT_NE(msg.find("index [1, 1]"), std::string::npos) << msg;
  EXPECT_NE(msg.find("analytic"), std::string::npos) << msg;
  EXPECT_NE(msg.find("numeric"), std::string::npos) << msg;
}

TEST(GradcheckHelper, LeavesGradUntouched) {
  Tensor x = leaf(uniform({4}, -1, 1, 3));
  Tensor old = tiny::ones({4}, tiny::kFloat64);
  x.set_grad(old);
  ASSERT_TRUE(gradcheck([](const In& in) { return in[0].exp(); }, {x}));
  ASSERT_TRUE(x.grad().defined());
  EXPECT_TRUE(x.grad().is_same(old));
  EXPECT_EQ(x.grad().to_vector<double>(), std::vector<double>(4, 1.0));
}

// ---- add / sub / mul / div ---------------------------------------------------------

TEST(Gradcheck, AddBroadcast) {
  Tensor a = leaf(uniform({3, 4}, -1, 1, 10));
  Tensor b = leaf(uniform({4}, -1, 1, 11));
  EXPECT_TRUE(gradcheck([](const In& in) { return in[0] + in[1]; }, {a, b}));
  Tensor c = leaf(uniform({2, 1, 4}, -1, 1, 12));
  Tensor d = leaf(uniform({3, 1}, -1, 1, 13));
  EXPECT_TRUE(gradcheck([](const In& in) { return tiny::add(in[0], in[1], 2.5); }, {c, d}));
}

TEST(Gradcheck, SubBroadcast) {
  Tensor a = leaf(uniform({3, 1}, -1, 1, 14));
  Tensor b = leaf(uniform({2, 1, 4}, -1, 1, 15));
  EXPECT_TRUE(gradcheck([](const In& in) { return in[0] - in[1]; }, {a, b}));
  EXPECT_TRUE(gradcheck([](const In& in) { return tiny::sub(in[0], in[1], -0.75); }, {a, b}));
}

TEST(Gradcheck, MulBroadcast) {
  Tensor a = leaf(uniform({3, 1}, -1, 1, 16));
  Tensor b = leaf(uniform({1, 4}, -1, 1, 17));
  EXPECT_TRUE(gradcheck([](const In& in) { return in[0] * in[1]; }, {a, b}));
  Tensor c = leaf(uniform({}, -1, 1, 18));  // 0-d times a matrix
  Tensor d = leaf(uniform({2, 3}, -1, 1, 19));
  EXPECT_TRUE(gradcheck([](const In& in) { return in[0] * in[1]; }, {c, d}));
}

TEST(Gradcheck, DivBroadcast) {
  Tensor a = leaf(uniform({2, 3}, -1, 1, 20));
  Tensor b = leaf(away_from_zero({3}, 0.5, 2.0, 21));
  EXPECT_TRUE(gradcheck([](const In& in) { return in[0] / in[1]; }, {a, b}));
  Tensor c = leaf(away_from_zero({2, 1}, 0.5, 2.0, 22));
  EXPECT_TRUE(gradcheck([](const In& in) { return in[0] / in[1]; }, {a, c}));
}

TEST(Gradcheck, MixedOnlyOneInputRequiresGrad) {
  Tensor a = leaf(uniform({2, 3}, -1, 1, 23));
  Tensor b = uniform({3}, 0.5, 1.5, 24);  // a constant
  EXPECT_TRUE(gradcheck([](const In& in) { return in[0] * in[1] / in[1].exp(); }, {a, b}));
  EXPECT_TRUE(gradcheck([](const In& in) { return in[1] / in[0].exp(); }, {a, b}));
}

TEST(Gradcheck, TensorScalarForms) {
  Tensor x = leaf(away_from_zero({2, 3}, 0.3, 1.5, 25));
  EXPECT_TRUE(gradcheck([](const In& in) { return in[0] + 2.5; }, {x}));
  EXPECT_TRUE(gradcheck([](const In& in) { return 2.5 + in[0]; }, {x}));
  EXPECT_TRUE(gradcheck([](const In& in) { return in[0] - 1.5; }, {x}));
  EXPECT_TRUE(gradcheck([](const In& in) { return 3.0 - in[0]; }, {x}));
  EXPECT_TRUE(gradcheck([](const In& in) { return in[0] * 2.5; }, {x}));
  EXPECT_TRUE(gradcheck([](const In& in) { return -1.25 * in[0]; }, {x}));
  EXPECT_TRUE(gradcheck([](const In& in) { return in[0] / 4.0; }, {x}));
  EXPECT_TRUE(gradcheck([](const In& in) { return 2.0 / in[0]; }, {x}));
  EXPECT_TRUE(gradcheck([](const In& in) { return in[0] + 2; }, {x}));  // integer scalar
  EXPECT_TRUE(gradcheck([](const In& in) { return 3 - in[0] * in[0]; }, {x}));
  EXPECT_TRUE(gradcheck([](const In& in) { return 2 / (in[0] * in[0]); }, {x}));
}

// ---- pow and unary math --------------------------------------------------------------

TEST(Gradcheck, PowScalarExponent) {
  Tensor x = leaf(uniform({2, 3}, -1.5, 1.5, 26));
  EXPECT_TRUE(gradcheck([](const In& in) { return in[0].pow(3); }, {x}));
  EXPECT_TRUE(gradcheck([](const In& in) { return in[0].pow(2.0); }, {x}));
  EXPECT_TRUE(gradcheck([](const In& in) { return in[0].pow(1); }, {x}));
  EXPECT_TRUE(gradcheck([](const In& in) { return in[0].pow(0); }, {x}));
  Tensor p = leaf(uniform({2, 3}, 0.3, 2.0, 27));
  EXPECT_TRUE(gradcheck([](const In& in) { return in[0].pow(2.5); }, {p}));
  EXPECT_TRUE(gradcheck([](const In& in) { return tiny::pow(in[0], -1.5); }, {p}));
  EXPECT_TRUE(gradcheck([](const In& in) { return in[0].pow(0.5); }, {p}));
}

TEST(Gradcheck, PowTensorExponent) {
  Tensor base = leaf(uniform({3, 4}, 0.3, 2.0, 28));
  Tensor ex = leaf(uniform({4}, -2.0, 2.5, 29));
  EXPECT_TRUE(gradcheck([](const In& in) { return in[0].pow(in[1]); }, {base, ex}));
  Tensor ex2 = leaf(uniform({3, 4}, -1.0, 3.0, 30));
  EXPECT_TRUE(gradcheck([](const In& in) { return tiny::pow(in[0], in[1]); }, {base, ex2}));
  // Broadcasting the other way: a row of bases, a matrix of exponents.
  Tensor base_row = leaf(uniform({1, 4}, 0.3, 2.0, 31));
  EXPECT_TRUE(gradcheck([](const In& in) { return tiny::pow(in[0], in[1]); }, {base_row, ex2}));
}

TEST(Gradcheck, Neg) {
  Tensor x = leaf(uniform({5}, -1, 1, 32));
  EXPECT_TRUE(gradcheck([](const In& in) { return in[0].neg(); }, {x}));
  EXPECT_TRUE(gradcheck([](const In& in) { return -(in[0] * in[0]); }, {x}));
}

TEST(Gradcheck, ExpLogSqrt) {
  Tensor x = leaf(uniform({3, 4}, -2, 2, 33));
  EXPECT_TRUE(gradcheck([](const In& in) { return in[0].exp(); }, {x}));
  Tensor p = leaf(uniform({3, 4}, 0.2, 3.0, 34));
  EXPECT_TRUE(gradcheck([](const In& in) { return in[0].log(); }, {p}));
  EXPECT_TRUE(gradcheck([](const In& in) { return tiny::sqrt(in[0]); }, {p}));
  EXPECT_TRUE(gradcheck([](const In& in) { return tiny::log(tiny::exp(in[0]) + 1.0); }, {x}));
}

TEST(Gradcheck, AbsAwayFromZero) {
  Tensor x = leaf(away_from_zero({3, 4}, 0.1, 2.0, 35));
  EXPECT_TRUE(gradcheck([](const In& in) { return in[0].abs(); }, {x}));
}

TEST(Gradcheck, ReluAwayFromZero) {
  Tensor x = leaf(away_from_zero({3, 4}, 0.1, 2.0, 36));
  EXPECT_TRUE(gradcheck([](const In& in) { return in[0].relu(); }, {x}));
  EXPECT_TRUE(gradcheck([](const In& in) { return F::relu(in[0] * 3.0); }, {x}));
}

TEST(Gradcheck, SigmoidTanh) {
  Tensor x = leaf(uniform({3, 4}, -3, 3, 37));
  EXPECT_TRUE(gradcheck([](const In& in) { return in[0].sigmoid(); }, {x}));
  EXPECT_TRUE(gradcheck([](const In& in) { return F::sigmoid(in[0]); }, {x}));
  EXPECT_TRUE(gradcheck([](const In& in) { return in[0].tanh(); }, {x}));
  EXPECT_TRUE(gradcheck([](const In& in) { return F::tanh(in[0]); }, {x}));
}

TEST(Gradcheck, Gelu) {
  Tensor x = leaf(uniform({4, 5}, -4, 4, 38));
  EXPECT_TRUE(gradcheck([](const In& in) { return tiny::gelu(in[0]); }, {x}));
  EXPECT_TRUE(gradcheck([](const In& in) { return tiny::gelu(in[0], "none"); }, {x}));
  EXPECT_TRUE(gradcheck([](const In& in) { return tiny::gelu(in[0], "tanh"); }, {x}));
  EXPECT_TRUE(gradcheck([](const In& in) { return F::gelu(in[0], "tanh"); }, {x}));
}

TEST(Gradcheck, ClampAwayFromBounds) {
  // Values in [-2, 2], none within 0.05 of the bounds -0.5 and 0.7.
  std::vector<double> v = {-1.9, -0.9, -0.56, -0.44, -0.1, 0.0, 0.3, 0.64, 0.76, 1.2, 1.9, -1.2};
  Tensor x = leaf(tiny::tensor(v, {3, 4}, tiny::kFloat64));
  EXPECT_TRUE(gradcheck([](const In& in) { return in[0].clamp(-0.5, 0.7); }, {x}));
  EXPECT_TRUE(gradcheck([](const In& in) { return tiny::clamp(in[0], -0.5); }, {x}));
  EXPECT_TRUE(gradcheck([](const In& in) { return tiny::clamp(in[0], std::nullopt, 0.7); }, {x}));
}

TEST(Gradcheck, MaximumMinimumNoTies) {
  Tensor a = leaf(uniform({3, 4}, -1, 1, 39));
  // b = a + an offset of at least 0.1 in either direction: never a tie.
  Tensor offset = away_from_zero({3, 4}, 0.1, 1.0, 40);
  Tensor b = leaf((a.detach() + offset).detach());
  EXPECT_TRUE(gradcheck([](const In& in) { return tiny::maximum(in[0], in[1]); }, {a, b}));
  EXPECT_TRUE(gradcheck([](const In& in) { return tiny::minimum(in[0], in[1]); }, {a, b}));
  // Broadcast: a row against a matrix, values on a 0.1 grid plus 0.05 apart.
  Tensor row = leaf(tiny::tensor({0.05, 0.35, -0.25, 0.65}, tiny::kFloat64));
  Tensor m = leaf(distinct({3, 4}, 41));
  EXPECT_TRUE(gradcheck([](const In& in) { return tiny::maximum(in[0], in[1]); }, {row, m}));
  EXPECT_TRUE(gradcheck([](const In& in) { return tiny::minimum(in[1], in[0]); }, {row, m}));
}

TEST(Gradcheck, Where) {
  Tensor cond = tiny::tensor({1, 0, 0, 1, 1, 0, 1, 0, 0, 0, 1, 1}, tiny::kFloat64).reshape({3, 4}) > 0.5;
  ASSERT_EQ(cond.dtype(), tiny::kBool);
  Tensor a = leaf(uniform({3, 4}, -1, 1, 42));
  Tensor b = leaf(uniform({4}, -1, 1, 43));  // broadcast
  EXPECT_TRUE(gradcheck([](const In& in) { return tiny::where(in[2], in[0], in[1]); }, {a, b, cond}));
  EXPECT_TRUE(gradcheck([](const In& in) { return tiny::where(in[2], in[1] * in[1], in[0].exp()); }, {a, b, cond}));
}

// ---- reductions ----------------------------------------------------------------------

TEST(Gradcheck, SumAllDimsKeepdim) {
  Tensor x = leaf(uniform({2, 3, 4}, -1, 1, 44));
  EXPECT_TRUE(gradcheck([](const In& in) { return in[0].sum(); }, {x}));
  EXPECT_TRUE(gradcheck([](const In& in) { return tiny::sum(in[0] * in[0]); }, {x}));
  EXPECT_TRUE(gradcheck([](const In& in) { return in[0].sum({0}); }, {x}));
  EXPECT_TRUE(gradcheck([](const In& in) { return in[0].sum({1}, true); }, {x}));
  EXPECT_TRUE(gradcheck([](const In& in) { return in[0].sum({0, 2}); }, {x}));
  EXPECT_TRUE(gradcheck([](const In& in) { return in[0].sum({-1, 0}, true); }, {x}));
}

TEST(Gradcheck, MeanAllDimsKeepdim) {
  Tensor x = leaf(uniform({2, 3, 4}, -1, 1, 45));
  EXPECT_TRUE(gradcheck([](const In& in) { return in[0].mean(); }, {x}));
  EXPECT_TRUE(gradcheck([](const In& in) { return in[0].mean({1}); }, {x}));
  EXPECT_TRUE(gradcheck([](const In& in) { return in[0].mean({2}, true); }, {x}));
  EXPECT_TRUE(gradcheck([](const In& in) { return tiny::mean(in[0], {0, -1}); }, {x}));
  EXPECT_TRUE(gradcheck([](const In& in) { return tiny::mean(in[0], {0, 1}, true); }, {x}));
}

TEST(Gradcheck, MaxMinAll) {
  Tensor x = leaf(distinct({3, 4}, 46));
  EXPECT_TRUE(gradcheck([](const In& in) { return in[0].max(); }, {x}));
  EXPECT_TRUE(gradcheck([](const In& in) { return in[0].min(); }, {x}));
  EXPECT_TRUE(gradcheck([](const In& in) { return tiny::max(in[0] * in[0]); }, {x}));
}

TEST(Gradcheck, MaxMinOverDimValues) {
  Tensor x = leaf(distinct({3, 4, 2}, 47));
  for (int64_t dim : {0, 1, 2, -1}) {
    for (bool keepdim : {false, true}) {
      SCOPED_TRACE("dim " + std::to_string(dim) + " keepdim " + std::to_string(keepdim));
      EXPECT_TRUE(gradcheck([dim, keepdim](const In& in) { return std::get<0>(in[0].max(dim, keepdim)); }, {x}));
      EXPECT_TRUE(gradcheck([dim, keepdim](const In& in) { return std::get<0>(tiny::min(in[0], dim, keepdim)); }, {x}));
    }
  }
}

// ---- matrix products ---------------------------------------------------------------

struct MatmulCase {
  tiny::IntArrayRef a, b;
};

TEST(Gradcheck, MatmulAllShapeCases) {
  const std::vector<MatmulCase> cases = {
      {{4}, {4}},                    // dot
      {{3, 4}, {4}},                 // matrix-vector
      {{4}, {4, 5}},                 // vector-matrix
      {{3, 4}, {4, 5}},              // mm
      {{2, 3, 4}, {2, 4, 5}},        // batched
      {{2, 3, 4}, {4, 5}},           // batched @ matrix
      {{3, 4}, {2, 4, 5}},           // matrix @ batched
      {{2, 1, 3, 4}, {3, 4, 5}},     // batch broadcast
      {{2, 3, 4}, {4}},              // batched @ vector
      {{4}, {2, 4, 5}},              // vector @ batched
      {{1, 3, 4}, {2, 1, 4, 2}},     // broadcast on both sides
  };
  uint32_t seed = 50;
  for (const MatmulCase& c : cases) {
    SCOPED_TRACE(tiny::shape_str(c.a) + " @ " + tiny::shape_str(c.b));
    Tensor a = leaf(uniform(c.a, -1, 1, seed++));
    Tensor b = leaf(uniform(c.b, -1, 1, seed++));
    EXPECT_TRUE(gradcheck([](const In& in) { return tiny::matmul(in[0], in[1]); }, {a, b}));
  }
}

TEST(Gradcheck, MatmulNonContiguous) {
  Tensor a = transposed_leaf(3, 4, -1, 1, 70);
  Tensor b = transposed_leaf(4, 5, -1, 1, 71);
  EXPECT_TRUE(gradcheck([](const In& in) { return in[0].matmul(in[1]); }, {a, b}));
  // Transposed inside the function: the view feeds matmul, the gradient flows back through it.
  Tensor c = leaf(uniform({2, 5, 4}, -1, 1, 72));
  Tensor d = leaf(uniform({2, 5, 4}, -1, 1, 73));
  EXPECT_TRUE(gradcheck([](const In& in) { return tiny::matmul(in[0], in[1].transpose(1, 2)); }, {c, d}));
  // A strided slice as the left operand.
  Tensor e = leaf(uniform({6, 4}, -1, 1, 74));
  Tensor f = leaf(uniform({4, 3}, -1, 1, 75));
  EXPECT_TRUE(gradcheck([](const In& in) { return tiny::matmul(in[0].slice(0, 0, 6, 2), in[1]); }, {e, f}));
}

TEST(Gradcheck, Mm) {
  Tensor a = leaf(uniform({3, 4}, -1, 1, 76));
  Tensor b = leaf(uniform({4, 2}, -1, 1, 77));
  EXPECT_TRUE(gradcheck([](const In& in) { return tiny::mm(in[0], in[1]); }, {a, b}));
  EXPECT_TRUE(gradcheck([](const In& in) { return in[1].t().mm(in[0].t()); }, {a, b}));
  Tensor at = transposed_leaf(3, 4, -1, 1, 78);
  EXPECT_TRUE(gradcheck([](const In& in) { return in[0].mm(in[1]); }, {at, b}));
  // Shapes with a 1: a column times a row.
  Tensor col = leaf(uniform({3, 1}, -1, 1, 79));
  Tensor row = leaf(uniform({1, 4}, -1, 1, 80));
  EXPECT_TRUE(gradcheck([](const In& in) { return tiny::mm(in[0], in[1]); }, {col, row}));
}

TEST(Gradcheck, Addmm) {
  Tensor bias_row = leaf(uniform({5}, -1, 1, 81));
  Tensor bias_full = leaf(uniform({3, 5}, -1, 1, 82));
  Tensor bias_col = leaf(uniform({3, 1}, -1, 1, 83));
  Tensor a = leaf(uniform({3, 4}, -1, 1, 84));
  Tensor b = leaf(uniform({4, 5}, -1, 1, 85));
  EXPECT_TRUE(gradcheck([](const In& in) { return tiny::addmm(in[0], in[1], in[2]); }, {bias_row, a, b}));
  EXPECT_TRUE(gradcheck([](const In& in) { return tiny::addmm(in[0], in[1], in[2], 0.5, 2.0); }, {bias_row, a, b}));
  EXPECT_TRUE(gradcheck([](const In& in) { return tiny::addmm(in[0], in[1], in[2], -1.5, 0.25); }, {bias_full, a, b}));
  EXPECT_TRUE(gradcheck([](const In& in) { return tiny::addmm(in[0], in[1], in[2], 2, 3); }, {bias_col, a, b}));
  EXPECT_TRUE(gradcheck([](const In& in) { return tiny::addmm(in[0], in[1], in[2], 0.0, 1.0); }, {bias_row, a, b}));
  Tensor bt = transposed_leaf(4, 5, -1, 1, 86);
  EXPECT_TRUE(gradcheck([](const In& in) { return tiny::addmm(in[0], in[1], in[2], 0.5, 2.0); }, {bias_full, a, bt}));
}

// ---- softmax and losses ------------------------------------------------------------------

TEST(Gradcheck, SoftmaxSeveralDims) {
  Tensor x = leaf(uniform({2, 3, 4}, -2, 2, 87));
  for (int64_t dim : {0, 1, 2, -1}) {
    SCOPED_TRACE("dim " + std::to_string(dim));
    EXPECT_TRUE(gradcheck([dim](const In& in) { return F::softmax(in[0], dim); }, {x}));
    EXPECT_TRUE(gradcheck([dim](const In& in) { return in[0].softmax(dim); }, {x}));
  }
  Tensor xt = transposed_leaf(3, 5, -2, 2, 88);
  EXPECT_TRUE(gradcheck([](const In& in) { return F::softmax(in[0], 1); }, {xt}));
}

TEST(Gradcheck, LogSoftmaxSeveralDims) {
  Tensor x = leaf(uniform({2, 3, 4}, -2, 2, 89));
  for (int64_t dim : {0, 1, 2, -2}) {
    SCOPED_TRACE("dim " + std::to_string(dim));
    EXPECT_TRUE(gradcheck([dim](const In& in) { return F::log_softmax(in[0], dim); }, {x}));
    EXPECT_TRUE(gradcheck([dim](const In& in) { return in[0].log_softmax(dim); }, {x}));
  }
  Tensor xt = transposed_leaf(3, 5, -2, 2, 90);
  EXPECT_TRUE(gradcheck([](const In& in) { return F::log_softmax(in[0], 0); }, {xt}));
}

Tensor targets(const std::vector<int64_t>& v) { return tiny::from_vector<int64_t>(v, {static_cast<int64_t>(v.size())}); }

TEST(Gradcheck, CrossEntropyReductions) {
  Tensor logits = leaf(uniform({4, 5}, -2, 2, 91));
  Tensor t = targets({1, 0, 4, 2});
  for (auto red : {F::Reduction::Mean, F::Reduction::Sum, F::Reduction::None}) {
    SCOPED_TRACE(static_cast<int>(red));
    EXPECT_TRUE(gradcheck(
        [red](const In& in) {
          F::CrossEntropyOptions o;
          o.reduction = red;
          return F::cross_entropy(in[0], in[1], o);
        },
        {logits, t}));
  }
  // Default options, and a single sample (1-D logits, 0-d target).
  EXPECT_TRUE(gradcheck([](const In& in) { return F::cross_entropy(in[0], in[1]); }, {logits, t}));
  Tensor one = leaf(uniform({5}, -2, 2, 92));
  Tensor t0 = tiny::scalar_tensor(3, tiny::kInt64);
  EXPECT_TRUE(gradcheck([](const In& in) { return F::cross_entropy(in[0], in[1]); }, {one, t0}));
}

TEST(Gradcheck, CrossEntropyLabelSmoothing) {
  Tensor logits = leaf(uniform({4, 5}, -2, 2, 93));
  Tensor t = targets({1, 0, 4, 2});
  for (auto red : {F::Reduction::Mean, F::Reduction::Sum, F::Reduction::None}) {
    SCOPED_TRACE(static_cast<int>(red));
    EXPECT_TRUE(gradcheck(
        [red](const In& in) {
          F::CrossEntropyOptions o;
          o.reduction = red;
          o.label_smoothing = 0.1;
          return F::cross_entropy(in[0], in[1], o);
        },
        {logits, t}));
  }
}

TEST(Gradcheck, CrossEntropyIgnoreIndex) {
  Tensor logits = leaf(uniform({5, 4}, -2, 2, 94));
  Tensor t_default = targets({1, -100, 3, 0, -100});
  Tensor t_custom = targets({1, 2, 3, 2, 0});
  for (auto red : {F::Reduction::Mean, F::Reduction::Sum, F::Reduction::None}) {
    for (double smoothing : {0.0, 0.2}) {
      SCOPED_TRACE(std::to_string(static_cast<int>(red)) + " smoothing " + std::to_string(smoothing));
      EXPECT_TRUE(gradcheck(
          [red, smoothing](const In& in) {
            F::CrossEntropyOptions o;
            o.reduction = red;
            o.label_smoothing = smoothing;
            return F::cross_entropy(in[0], in[1], o);
          },
          {logits, t_default}));
      EXPECT_TRUE(gradcheck(
          [red, smoothing](const In& in) {
            F::CrossEntropyOptions o;
            o.reduction = red;
            o.label_smoothing = smoothing;
            o.ignore_index = 2;
            return F::cross_entropy(in[0], in[1], o);
          },
          {logits, t_custom}));
    }
  }
}

TEST(Gradcheck, NllLoss) {
  Tensor lp = leaf(uniform({4, 5}, -3, 0, 95));  // any values: nll is linear in its input
  Tensor t = targets({4, 1, 1, 0});
  Tensor t_ignored = targets({4, -100, 1, 0});
  for (auto red : {F::Reduction::Mean, F::Reduction::Sum, F::Reduction::None}) {
    SCOPED_TRACE(static_cast<int>(red));
    EXPECT_TRUE(gradcheck([red](const In& in) { return F::nll_loss(in[0], in[1], red); }, {lp, t}));
    EXPECT_TRUE(gradcheck([red](const In& in) { return F::nll_loss(in[0], in[1], red); }, {lp, t_ignored}));
    EXPECT_TRUE(gradcheck([red](const In& in) { return F::nll_loss(in[0], in[1], red, 1); }, {lp, t}));
    EXPECT_TRUE(gradcheck([red](const In& in) { return F::nll_loss(F::log_softmax(in[0], 1), in[1], red); }, {lp, t}));
  }
}

TEST(Gradcheck, MseLoss) {
  Tensor input = leaf(uniform({3, 4}, -1, 1, 96));
  Tensor target = leaf(uniform({3, 4}, -1, 1, 97));
  for (auto red : {F::Reduction::Mean, F::Reduction::Sum, F::Reduction::None}) {
    SCOPED_TRACE(static_cast<int>(red));
    EXPECT_TRUE(gradcheck([red](const In& in) { return F::mse_loss(in[0], in[1], red); }, {input, target}));
  }
  EXPECT_TRUE(gradcheck([](const In& in) { return F::mse_loss(in[0], in[1]); }, {input, target.detach()}));
}

TEST(Gradcheck, Linear) {
  Tensor x = leaf(uniform({3, 4}, -1, 1, 98));
  Tensor w = leaf(uniform({5, 4}, -1, 1, 99));
  Tensor b = leaf(uniform({5}, -1, 1, 100));
  EXPECT_TRUE(gradcheck([](const In& in) { return F::linear(in[0], in[1], in[2]); }, {x, w, b}));  // addmm path
  EXPECT_TRUE(gradcheck([](const In& in) { return F::linear(in[0], in[1]); }, {x, w}));
  Tensor x3 = leaf(uniform({2, 3, 4}, -1, 1, 101));  // matmul path
  EXPECT_TRUE(gradcheck([](const In& in) { return F::linear(in[0], in[1], in[2]); }, {x3, w, b}));
  Tensor x1 = leaf(uniform({4}, -1, 1, 102));
  EXPECT_TRUE(gradcheck([](const In& in) { return F::linear(in[0], in[1], in[2]); }, {x1, w, b}));
  Tensor xt = transposed_leaf(3, 4, -1, 1, 103);
  EXPECT_TRUE(gradcheck([](const In& in) { return F::linear(in[0], in[1], in[2]); }, {xt, w, b}));
}

// ---- views ---------------------------------------------------------------------------
// A view is linear: the random upstream gradient checks that every element
// goes back to the element it came from. Each view also feeds a nonlinear
// op, so the gradient arriving at the view is not uniform.

TEST(Gradcheck, ViewAndReshape) {
  Tensor x = leaf(uniform({2, 3, 4}, -1, 1, 110));
  EXPECT_TRUE(gradcheck([](const In& in) { return in[0].view({6, 4}); }, {x}));
  EXPECT_TRUE(gradcheck([](const In& in) { return in[0].view({-1}).exp(); }, {x}));
  EXPECT_TRUE(gradcheck([](const In& in) { return in[0].reshape({4, -1}) * 2.0; }, {x}));
  // reshape of a non-contiguous tensor copies; the gradient still has to land in place.
  EXPECT_TRUE(gradcheck([](const In& in) { return in[0].transpose(0, 2).reshape({4, 6}).pow(2); }, {x}));
  Tensor xt = transposed_leaf(3, 4, -1, 1, 111);
  EXPECT_TRUE(gradcheck([](const In& in) { return in[0].reshape({12}).tanh(); }, {xt}));
}

TEST(Gradcheck, TransposeTPermute) {
  Tensor x = leaf(uniform({2, 3, 4}, -1, 1, 112));
  EXPECT_TRUE(gradcheck([](const In& in) { return in[0].transpose(0, 2); }, {x}));
  EXPECT_TRUE(gradcheck([](const In& in) { return in[0].transpose(-1, 1).exp(); }, {x}));
  EXPECT_TRUE(gradcheck([](const In& in) { return in[0].permute({2, 0, 1}); }, {x}));
  EXPECT_TRUE(gradcheck([](const In& in) { return in[0].permute({1, 2, 0}).pow(2); }, {x}));
  Tensor m = leaf(uniform({3, 5}, -1, 1, 113));
  EXPECT_TRUE(gradcheck([](const In& in) { return in[0].t(); }, {m}));
  EXPECT_TRUE(gradcheck([](const In& in) { return in[0].t() * tiny::arange(0.0, 3.0, 1.0, tiny::kFloat64); }, {m}));
  Tensor v = leaf(uniform({4}, -1, 1, 114));
  EXPECT_TRUE(gradcheck([](const In& in) { return in[0].t().exp(); }, {v}));
}

TEST(Gradcheck, NarrowSliceSelect) {
  Tensor x = leaf(uniform({4, 6}, -1, 1, 115));
  EXPECT_TRUE(gradcheck([](const In& in) { return in[0].narrow(1, 2, 3); }, {x}));
  EXPECT_TRUE(gradcheck([](const In& in) { return in[0].narrow(0, -3, 2).exp(); }, {x}));
  EXPECT_TRUE(gradcheck([](const In& in) { return in[0].slice(1, 1, 6, 2); }, {x}));
  EXPECT_TRUE(gradcheck([](const In& in) { return in[0].slice(0, 0, 4, 3).pow(3); }, {x}));
  EXPECT_TRUE(gradcheck([](const In& in) { return in[0].slice(1, -4, 100, 3).exp(); }, {x}));
  EXPECT_TRUE(gradcheck([](const In& in) { return in[0].select(0, 2); }, {x}));
  EXPECT_TRUE(gradcheck([](const In& in) { return in[0].select(1, -1).exp(); }, {x}));
  EXPECT_TRUE(gradcheck([](const In& in) { return in[0][1] * in[0][3]; }, {x}));
  // Overlapping slices of one leaf: both gradients must be summed.
  EXPECT_TRUE(gradcheck([](const In& in) { return in[0].narrow(1, 0, 4) * in[0].narrow(1, 2, 4); }, {x}));
  Tensor xt = transposed_leaf(4, 6, -1, 1, 116);
  EXPECT_TRUE(gradcheck([](const In& in) { return in[0].slice(0, 1, 4, 2).select(1, 3).exp(); }, {xt}));
}

TEST(Gradcheck, UnsqueezeSqueezeFlatten) {
  Tensor x = leaf(uniform({3, 1, 4}, -1, 1, 117));
  EXPECT_TRUE(gradcheck([](const In& in) { return in[0].unsqueeze(0); }, {x}));
  EXPECT_TRUE(gradcheck([](const In& in) { return in[0].unsqueeze(-1).exp(); }, {x}));
  EXPECT_TRUE(gradcheck([](const In& in) { return in[0].squeeze(); }, {x}));
  EXPECT_TRUE(gradcheck([](const In& in) { return in[0].squeeze(1).pow(2); }, {x}));
  EXPECT_TRUE(gradcheck([](const In& in) { return in[0].squeeze(0).exp(); }, {x}));  // size 3: no-op
  Tensor y = leaf(uniform({2, 3, 4}, -1, 1, 118));
  EXPECT_TRUE(gradcheck([](const In& in) { return in[0].flatten(); }, {y}));
  EXPECT_TRUE(gradcheck([](const In& in) { return in[0].flatten(1).exp(); }, {y}));
  EXPECT_TRUE(gradcheck([](const In& in) { return in[0].flatten(0, 1).pow(2); }, {y}));
  EXPECT_TRUE(gradcheck([](const In& in) { return in[0].permute({2, 0, 1}).flatten(1).exp(); }, {y}));
}

TEST(Gradcheck, Expand) {
  Tensor x = leaf(uniform({3, 1}, -1, 1, 119));
  EXPECT_TRUE(gradcheck([](const In& in) { return in[0].expand({3, 4}); }, {x}));
  EXPECT_TRUE(gradcheck([](const In& in) { return in[0].expand({2, 3, 4}).exp(); }, {x}));
  EXPECT_TRUE(gradcheck([](const In& in) { return in[0].expand({-1, 5}) * tiny::arange(0.0, 5.0, 1.0, tiny::kFloat64); },
                        {x}));
  Tensor like = tiny::zeros({2, 3, 2}, tiny::kFloat64);
  EXPECT_TRUE(gradcheck([](const In& in) { return in[0].expand_as(in[1]).pow(2); }, {x, like}));
}

TEST(Gradcheck, CloneContiguous) {
  Tensor x = leaf(uniform({3, 4}, -1, 1, 120));
  EXPECT_TRUE(gradcheck([](const In& in) { return in[0].clone(); }, {x}));
  EXPECT_TRUE(gradcheck([](const In& in) { return in[0].clone().exp(); }, {x}));
  EXPECT_TRUE(gradcheck([](const In& in) { return in[0].t().contiguous().exp(); }, {x}));
  EXPECT_TRUE(gradcheck([](const In& in) { return in[0].contiguous() * in[0]; }, {x}));
  Tensor xt = transposed_leaf(3, 4, -1, 1, 121);
  EXPECT_TRUE(gradcheck([](const In& in) { return in[0].contiguous().pow(2); }, {xt}));
}

TEST(Gradcheck, ToFloat64FromFloat32) {
  // float32 input: finite differences of float32 values are coarse, so the
  // step and the tolerances are loose (float32 has ~7 significant digits).
  Tensor x = leaf(uniform({3, 4}, -1, 1, 122, tiny::kFloat32));
  ASSERT_EQ(x.dtype(), tiny::kFloat32);
  EXPECT_TRUE(gradcheck([](const In& in) { return in[0].to(tiny::kFloat64); }, {x}, 1e-3, 1e-3, 1e-2));
  EXPECT_TRUE(gradcheck([](const In& in) { return in[0].to(tiny::kFloat64).exp() * 3.0; }, {x}, 1e-3, 1e-3, 1e-2));
  // And back: float64 -> float32 -> float64.
  Tensor y = leaf(uniform({5}, -1, 1, 123));
  EXPECT_TRUE(gradcheck([](const In& in) { return in[0].to(tiny::kFloat32).to(tiny::kFloat64).pow(2); }, {y}, 1e-3,
                        1e-3, 1e-2));
}

TEST(Gradcheck, CatAndStack) {
  Tensor a = leaf(uniform({2, 3}, -1, 1, 124));
  Tensor b = leaf(uniform({1, 3}, -1, 1, 125));
  Tensor c = uniform({3, 3}, -1, 1, 126);  // needs no gradient
  EXPECT_TRUE(gradcheck([](const In& in) { return tiny::cat({in[0], in[1], in[2]}, 0); }, {a, b, c}));
  EXPECT_TRUE(gradcheck([](const In& in) { return tiny::cat({in[0].exp(), in[1], in[0]}, 0).pow(2); }, {a, b}));
  Tensor d = leaf(uniform({2, 4}, -1, 1, 127));
  EXPECT_TRUE(gradcheck([](const In& in) { return tiny::cat({in[0], in[1]}, 1); }, {a, d}));
  EXPECT_TRUE(gradcheck([](const In& in) { return tiny::cat({in[0], in[1]}, -1).exp(); }, {a, d}));
  Tensor e = leaf(uniform({2, 3}, -1, 1, 128));
  for (int64_t dim : {0, 1, 2, -1}) {
    SCOPED_TRACE("stack dim " + std::to_string(dim));
    EXPECT_TRUE(gradcheck([dim](const In& in) { return tiny::stack({in[0], in[1], in[0] * in[1]}, dim); }, {a, e}));
  }
  Tensor at = transposed_leaf(2, 3, -1, 1, 129);
  EXPECT_TRUE(gradcheck([](const In& in) { return tiny::stack({in[0], in[1]}, 1).exp(); }, {at, e}));
}

// ---- non-contiguous leaves through elementwise ops and reductions ----------------------

TEST(Gradcheck, NonContiguousLeaves) {
  Tensor a = transposed_leaf(3, 4, -1, 1, 130);
  Tensor b = transposed_leaf(3, 4, 0.5, 1.5, 131);
  EXPECT_TRUE(gradcheck([](const In& in) { return in[0] * in[1] + in[0].exp() / in[1]; }, {a, b}));
  EXPECT_TRUE(gradcheck([](const In& in) { return in[0].sum({1}); }, {a}));
  EXPECT_TRUE(gradcheck([](const In& in) { return in[0].mean({0}, true).exp(); }, {a}));
  EXPECT_TRUE(gradcheck([](const In& in) { return in[0].sigmoid() * in[1].log(); }, {a, b}));
  // A strided slice of a bigger buffer, detached to make it a leaf.
  Tensor s = leaf(uniform({6, 5}, -1, 1, 132).slice(0, 0, 6, 2).slice(1, 1, 5, 2).detach());
  ASSERT_FALSE(s.is_contiguous());
  EXPECT_TRUE(gradcheck([](const In& in) { return (in[0] * in[0]).sum({0}); }, {s}));
}

// ---- small and degenerate shapes: 0-d tensors, 1-D reductions, size-1 dims ----------------

TEST(Gradcheck, ZeroDimAndSizeOneShapes) {
  Tensor s = leaf(uniform({}, 0.5, 1.5, 150));
  Tensor v = leaf(uniform({4}, -1, 1, 151));
  EXPECT_TRUE(gradcheck([](const In& in) { return in[0].exp() * in[0]; }, {s}));
  EXPECT_TRUE(gradcheck([](const In& in) { return in[0].expand({3}).pow(2); }, {s}));
  EXPECT_TRUE(gradcheck([](const In& in) { return in[0].unsqueeze(0).exp(); }, {s}));
  EXPECT_TRUE(gradcheck([](const In& in) { return tiny::stack({in[0], in[0] * 2.0, in[0].log()}); }, {s}));
  EXPECT_TRUE(gradcheck([](const In& in) { return in[1] * in[0]; }, {s, v}));
  EXPECT_TRUE(gradcheck([](const In& in) { return in[0].select(0, 2).exp(); }, {v}));
  EXPECT_TRUE(gradcheck([](const In& in) { return in[0].sum({0}); }, {v}));
  EXPECT_TRUE(gradcheck([](const In& in) { return in[0].mean({0}, true); }, {v}));
  EXPECT_TRUE(gradcheck([](const In& in) { return F::softmax(in[0], 0); }, {v}));
  EXPECT_TRUE(gradcheck([](const In& in) { return F::log_softmax(in[0], -1); }, {v}));
  Tensor d = leaf(distinct({5}, 152));
  EXPECT_TRUE(gradcheck([](const In& in) { return std::get<0>(in[0].max(0)); }, {d}));
  EXPECT_TRUE(gradcheck([](const In& in) { return std::get<0>(in[0].min(0, true)); }, {d}));
  Tensor one = leaf(uniform({1, 1}, -1, 1, 153));
  EXPECT_TRUE(gradcheck([](const In& in) { return in[0].squeeze().exp(); }, {one}));
  EXPECT_TRUE(gradcheck([](const In& in) { return in[0].sum(); }, {one}));
  EXPECT_TRUE(gradcheck([](const In& in) { return tiny::mm(in[0], in[0]); }, {one}));
}

// ---- a small network: the composition of the pieces ---------------------------------------

TEST(Gradcheck, TwoLayerMlpWithCrossEntropy) {
  Tensor x = uniform({4, 3}, -1, 1, 140);
  Tensor w1 = leaf(uniform({5, 3}, -1, 1, 141));
  Tensor b1 = leaf(uniform({5}, -0.1, 0.1, 142));
  Tensor w2 = leaf(uniform({3, 5}, -1, 1, 143));
  Tensor b2 = leaf(uniform({3}, -0.1, 0.1, 144));
  Tensor t = targets({0, 2, 1, 2});
  EXPECT_TRUE(gradcheck(
      [](const In& in) {
        Tensor h = F::gelu(F::linear(in[0], in[1], in[2]));
        return F::cross_entropy(F::linear(h, in[3], in[4]), in[5]);
      },
      {x, w1, b1, w2, b2, t}));
}


// ---- the same checks on a device (cuda:0, by default the host-emulated GPU) ------------
//
// A representative subset of the checks above, run with float64 inputs that
// live on the device. Each check does three things (device_check below):
//  1. builds the inputs twice from the same recipe, on the CPU and on the
//     device (same values, same layout: a transposed or strided leaf is made by
//     moving the buffer first and taking the view on the device);
//  2. runs f on both and requires the device's output and its analytic
//     vector-Jacobian products (autograd::grad with the same v) to be on the
//     device and to equal the CPU's bit for bit: the emulator queues the CPU
//     kernels (DESIGN.md section 4). A real GPU would need a tolerance here
//     (cuBLAS and CUDA reductions order sums differently);
//  3. runs gradcheck on both the CPU inputs and the device inputs. On the
//     device, gradcheck.h computes the finite differences by perturbing a host
//     copy of the input and copying it back into the device tensor in place,
//     so the numeric side exercises host<->device copies (into contiguous and
//     non-contiguous destinations) and every forward op on the device.
// Step 2 alone would pass if the device and the CPU shared a wrong formula;
// step 3 ties both to the finite differences.

using tiny::Device;
using tiny_test::GradcheckFn;
using MakeInputs = std::function<In(const Device&)>;

// A float64 leaf on `dev` with the values of the CPU tensor `t` (a fresh leaf on the CPU too).
Tensor leaf_on(const Tensor& t, const Device& dev) { return t.to(dev).detach().requires_grad_(true); }

// transposed_leaf's values and layout, on `dev`.
Tensor transposed_leaf_on(int64_t rows, int64_t cols, double lo, double hi, uint32_t seed, const Device& dev) {
  Tensor t = uniform({cols, rows}, lo, hi, seed).to(dev).t().detach();
  EXPECT_FALSE(t.is_contiguous());
  return t.requires_grad_(true);
}

Tensor targets_on(const std::vector<int64_t>& v, const Device& dev) {
  return tiny::from_vector<int64_t>(v, {static_cast<int64_t>(v.size())}).to(dev);
}

::testing::AssertionResult device_check(const MakeInputs& make, const GradcheckFn& fn, const Device& dev,
                                        double eps = 1e-6, double atol = 1e-5, double rtol = 1e-4) {
  const In cpu_in = make(Device());
  const In dev_in = make(dev);
  if (cpu_in.size() != dev_in.size()) return ::testing::AssertionFailure() << "the recipe gave different inputs";
  std::vector<Tensor> cpu_diff, dev_diff;
  for (size_t i = 0; i < cpu_in.size(); ++i) {
    const Tensor& c = cpu_in[i];
    const Tensor& d = dev_in[i];
    if (!c.is_cpu() || d.device() != dev) {
      return ::testing::AssertionFailure() << "input " << i << " is on " << c.device() << " / " << d.device()
                                           << ", expected cpu / " << dev;
    }
    if (c.sizes() != d.sizes() || c.strides() != d.strides() || c.requires_grad() != d.requires_grad() ||
        !tiny::equal(c, d.cpu())) {
      return ::testing::AssertionFailure() << "input " << i << " differs between the CPU and " << dev
                                           << " (values, shape, strides or requires_grad)";
    }
    if (c.requires_grad()) {
      cpu_diff.push_back(c);
      dev_diff.push_back(d);
    }
  }
  // 2. Same output and same analytic gradients as the CPU, exactly.
  {
    const Tensor cpu_out = fn(cpu_in);
    const Tensor dev_out = fn(dev_in);
    if (dev_out.device() != dev) {
      return ::testing::AssertionFailure() << "the output is on " << dev_out.device() << ", not on " << dev;
    }
    if (!tiny::equal(cpu_out, dev_out.cpu())) {
      return ::testing::AssertionFailure() << "the output on " << dev << " differs from the CPU's:\n"
                                           << dev_out.cpu() << "\ncpu:\n" << cpu_out;
    }
    const Tensor v = uniform(cpu_out.sizes(), -1.0, 1.0, 4321).to(cpu_out.dtype());
    const std::vector<Tensor> cpu_g = tiny::autograd::grad({cpu_out}, cpu_diff, {v});
    const std::vector<Tensor> dev_g = tiny::autograd::grad({dev_out}, dev_diff, {v.to(dev)});
    if (cpu_g.size() != dev_g.size()) return ::testing::AssertionFailure() << "gradient counts differ";
    for (size_t k = 0; k < cpu_g.size(); ++k) {
      if (cpu_g[k].defined() != dev_g[k].defined()) {
        return ::testing::AssertionFailure() << "gradient " << k << " is defined on one device only";
      }
      if (!cpu_g[k].defined()) continue;
      if (dev_g[k].device() != dev) {
        return ::testing::AssertionFailure() << "gradient " << k << " is on " << dev_g[k].device();
      }
      if (!tiny::equal(cpu_g[k], dev_g[k].cpu())) {
        return ::testing::AssertionFailure() << "gradient " << k << " on " << dev << " differs from the CPU's:\n"
                                             << dev_g[k].cpu() << "\ncpu:\n" << cpu_g[k];
      }
    }
  }
  // 3. Finite differences, on the CPU and on the device.
  ::testing::AssertionResult on_cpu = gradcheck(fn, cpu_in, eps, atol, rtol);
  if (!on_cpu) return ::testing::AssertionFailure() << "on the CPU: " << on_cpu.message();
  ::testing::AssertionResult on_dev = gradcheck(fn, dev_in, eps, atol, rtol);
  if (!on_dev) return ::testing::AssertionFailure() << "on " << dev << ": " << on_dev.message();
  // The finite differences restored every perturbed element.
  for (size_t i = 0; i < dev_in.size(); ++i) {
    if (!tiny::equal(cpu_in[i], dev_in[i].cpu())) {
      return ::testing::AssertionFailure() << "gradcheck left input " << i << " on " << dev << " modified";
    }
  }
  return ::testing::AssertionSuccess();
}

class OnDevice : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    const Device d(GetParam());
    if (!tiny::cuda::is_available() || d.index() >= tiny::cuda::device_count()) {
      GTEST_SKIP() << d << " is not available (TINY_EMULATED_GPUS=0 and no GPU?)";
    }
  }
  Device dev() const { return Device(GetParam()); }
};

TEST_P(OnDevice, PointwiseBroadcast) {
  const Device d = dev();
  auto two = [](const Device& at) { return In{leaf_on(uniform({3, 4}, -1, 1, 10), at),
                                              leaf_on(away_from_zero({4}, 0.5, 2.0, 11), at)}; };
  EXPECT_TRUE(device_check(two, [](const In& in) { return in[0] + in[1]; }, d));
  EXPECT_TRUE(device_check(two, [](const In& in) { return tiny::sub(in[0], in[1], -0.75); }, d));
  EXPECT_TRUE(device_check(two, [](const In& in) { return in[0] * in[1]; }, d));
  EXPECT_TRUE(device_check(two, [](const In& in) { return in[0] / in[1]; }, d));
  EXPECT_TRUE(device_check(two, [](const In& in) { return 2.0 / in[1] - 3.0 * in[0] + 1.5; }, d));
  auto batched = [](const Device& at) { return In{leaf_on(uniform({2, 1, 4}, -1, 1, 12), at),
                                                  leaf_on(uniform({3, 1}, -1, 1, 13), at)}; };
  EXPECT_TRUE(device_check(batched, [](const In& in) { return tiny::add(in[0], in[1], 2.5) * in[0]; }, d));
  // One input is a constant that needs no gradient.
  auto mixed = [](const Device& at) { return In{leaf_on(uniform({2, 3}, -1, 1, 23), at),
                                                uniform({3}, 0.5, 1.5, 24).to(at)}; };
  EXPECT_TRUE(device_check(mixed, [](const In& in) { return in[0] * in[1] / in[1].exp(); }, d));
}

TEST_P(OnDevice, PowAndUnaryMath) {
  const Device d = dev();
  auto pos = [](const Device& at) { return In{leaf_on(uniform({3, 4}, 0.3, 2.0, 28), at),
                                              leaf_on(uniform({4}, -2.0, 2.5, 29), at)}; };
  EXPECT_TRUE(device_check(pos, [](const In& in) { return in[0].pow(in[1]); }, d));
  EXPECT_TRUE(device_check(pos, [](const In& in) { return in[0].pow(2.5) + tiny::pow(in[0], -1.5); }, d));
  EXPECT_TRUE(device_check(pos, [](const In& in) { return in[0].log() + tiny::sqrt(in[0]); }, d));
  auto x = [](const Device& at) { return In{leaf_on(uniform({3, 4}, -3, 3, 37), at)}; };
  EXPECT_TRUE(device_check(x, [](const In& in) { return in[0].exp(); }, d));
  EXPECT_TRUE(device_check(x, [](const In& in) { return in[0].pow(3) - in[0].neg(); }, d));
  EXPECT_TRUE(device_check(x, [](const In& in) { return in[0].sigmoid() * in[0].tanh(); }, d));
  EXPECT_TRUE(device_check(x, [](const In& in) { return tiny::gelu(in[0]); }, d));
  EXPECT_TRUE(device_check(x, [](const In& in) { return tiny::gelu(in[0], "tanh"); }, d));
  auto kinks = [](const Device& at) { return In{leaf_on(away_from_zero({3, 4}, 0.1, 2.0, 35), at)}; };
  EXPECT_TRUE(device_check(kinks, [](const In& in) { return in[0].abs() + F::relu(in[0] * 3.0); }, d));
}

TEST_P(OnDevice, ClampMaximumWhere) {
  const Device d = dev();
  auto grid = [](const Device& at) {
    std::vector<double> v = {-1.9, -0.9, -0.56, -0.44, -0.1, 0.0, 0.3, 0.64, 0.76, 1.2, 1.9, -1.2};
    return In{leaf_on(tiny::tensor(v, {3, 4}, tiny::kFloat64), at)};
  };
  EXPECT_TRUE(device_check(grid, [](const In& in) { return in[0].clamp(-0.5, 0.7); }, d));
  auto pair = [](const Device& at) {
    Tensor a = uniform({3, 4}, -1, 1, 39);
    Tensor b = a + away_from_zero({3, 4}, 0.1, 1.0, 40);  // never a tie
    return In{leaf_on(a, at), leaf_on(b, at)};
  };
  EXPECT_TRUE(device_check(pair, [](const In& in) { return tiny::maximum(in[0], in[1]); }, d));
  EXPECT_TRUE(device_check(pair, [](const In& in) { return tiny::minimum(in[0], in[1]); }, d));
  auto cond = [](const Device& at) {
    Tensor c = tiny::tensor({1, 0, 0, 1, 1, 0, 1, 0, 0, 0, 1, 1}, tiny::kFloat64).reshape({3, 4}) > 0.5;
    return In{leaf_on(uniform({3, 4}, -1, 1, 42), at), leaf_on(uniform({4}, -1, 1, 43), at), c.to(at)};
  };
  EXPECT_TRUE(device_check(cond, [](const In& in) { return tiny::where(in[2], in[1] * in[1], in[0].exp()); }, d));
}

TEST_P(OnDevice, Reductions) {
  const Device d = dev();
  auto x = [](const Device& at) { return In{leaf_on(uniform({2, 3, 4}, -1, 1, 44), at)}; };
  EXPECT_TRUE(device_check(x, [](const In& in) { return in[0].sum(); }, d));
  EXPECT_TRUE(device_check(x, [](const In& in) { return tiny::sum(in[0] * in[0]); }, d));
  EXPECT_TRUE(device_check(x, [](const In& in) { return in[0].sum({0, 2}); }, d));
  EXPECT_TRUE(device_check(x, [](const In& in) { return in[0].sum({-1, 0}, true); }, d));
  EXPECT_TRUE(device_check(x, [](const In& in) { return in[0].mean(); }, d));
  EXPECT_TRUE(device_check(x, [](const In& in) { return in[0].mean({1}); }, d));
  EXPECT_TRUE(device_check(x, [](const In& in) { return tiny::mean(in[0], {0, 1}, true); }, d));
  auto distinct3 = [](const Device& at) { return In{leaf_on(distinct({3, 4, 2}, 47), at)}; };
  EXPECT_TRUE(device_check(distinct3, [](const In& in) { return in[0].max(); }, d));
  EXPECT_TRUE(device_check(distinct3, [](const In& in) { return in[0].min(); }, d));
  for (int64_t dim : {0, 1, -1}) {
    SCOPED_TRACE("dim " + std::to_string(dim));
    EXPECT_TRUE(device_check(distinct3, [dim](const In& in) { return std::get<0>(in[0].max(dim, true)); }, d));
    EXPECT_TRUE(device_check(distinct3, [dim](const In& in) { return std::get<0>(tiny::min(in[0], dim)); }, d));
  }
}

TEST_P(OnDevice, MatmulShapesAndAddmm) {
  const Device d = dev();
  const std::vector<MatmulCase> cases = {
      {{4}, {4}}, {{3, 4}, {4}}, {{4}, {4, 5}}, {{3, 4}, {4, 5}}, {{2, 3, 4}, {2, 4, 5}},
      {{2, 3, 4}, {4, 5}}, {{2, 1, 3, 4}, {3, 4, 5}}, {{1, 3, 4}, {2, 1, 4, 2}},
  };
  uint32_t seed = 50;
  for (const MatmulCase& c : cases) {
    SCOPED_TRACE(tiny::shape_str(c.a) + " @ " + tiny::shape_str(c.b));
    const uint32_t s = seed;
    seed += 2;
    auto ab = [c, s](const Device& at) { return In{leaf_on(uniform(c.a, -1, 1, s), at),
                                                   leaf_on(uniform(c.b, -1, 1, s + 1), at)}; };
    EXPECT_TRUE(device_check(ab, [](const In& in) { return tiny::matmul(in[0], in[1]); }, d));
  }
  auto nc = [](const Device& at) { return In{transposed_leaf_on(3, 4, -1, 1, 70, at),
                                             transposed_leaf_on(4, 5, -1, 1, 71, at)}; };
  EXPECT_TRUE(device_check(nc, [](const In& in) { return in[0].matmul(in[1]); }, d));
  auto addmm_in = [](const Device& at) {
    return In{leaf_on(uniform({5}, -1, 1, 81), at), leaf_on(uniform({3, 4}, -1, 1, 84), at),
              transposed_leaf_on(4, 5, -1, 1, 86, at), leaf_on(uniform({3, 1}, -1, 1, 83), at)};
  };
  EXPECT_TRUE(device_check(addmm_in, [](const In& in) { return tiny::addmm(in[0], in[1], in[2]); }, d));
  EXPECT_TRUE(device_check(addmm_in, [](const In& in) { return tiny::addmm(in[3], in[1], in[2], 0.5, 2.0); }, d));
  auto lin = [](const Device& at) {
    return In{leaf_on(uniform({2, 3, 4}, -1, 1, 101), at), leaf_on(uniform({5, 4}, -1, 1, 99), at),
              leaf_on(uniform({5}, -1, 1, 100), at), transposed_leaf_on(3, 4, -1, 1, 103, at)};
  };
  EXPECT_TRUE(device_check(lin, [](const In& in) { return F::linear(in[3], in[1], in[2]); }, d));  // addmm path
  EXPECT_TRUE(device_check(lin, [](const In& in) { return F::linear(in[0], in[1], in[2]); }, d));  // matmul path
}

TEST_P(OnDevice, SoftmaxLogSoftmax) {
  const Device d = dev();
  auto x = [](const Device& at) { return In{leaf_on(uniform({2, 3, 4}, -2, 2, 87), at)}; };
  for (int64_t dim : {0, 1, -1}) {
    SCOPED_TRACE("dim " + std::to_string(dim));
    EXPECT_TRUE(device_check(x, [dim](const In& in) { return F::softmax(in[0], dim); }, d));
    EXPECT_TRUE(device_check(x, [dim](const In& in) { return in[0].log_softmax(dim); }, d));
  }
  auto xt = [](const Device& at) { return In{transposed_leaf_on(3, 5, -2, 2, 88, at)}; };
  EXPECT_TRUE(device_check(xt, [](const In& in) { return F::softmax(in[0], 1); }, d));
  EXPECT_TRUE(device_check(xt, [](const In& in) { return F::log_softmax(in[0], 0); }, d));
}

TEST_P(OnDevice, Losses) {
  const Device d = dev();
  auto ce = [](const Device& at) {
    return In{leaf_on(uniform({5, 4}, -2, 2, 94), at), targets_on({1, -100, 3, 0, 2}, at),
              targets_on({1, 2, 3, 2, 0}, at)};
  };
  for (auto red : {F::Reduction::Mean, F::Reduction::Sum, F::Reduction::None}) {
    for (double smoothing : {0.0, 0.2}) {
      SCOPED_TRACE(std::to_string(static_cast<int>(red)) + " smoothing " + std::to_string(smoothing));
      EXPECT_TRUE(device_check(ce,
                               [red, smoothing](const In& in) {
                                 F::CrossEntropyOptions o;
                                 o.reduction = red;
                                 o.label_smoothing = smoothing;
                                 return F::cross_entropy(in[0], in[1], o);
                               },
                               d));
      EXPECT_TRUE(device_check(ce,
                               [red, smoothing](const In& in) {
                                 F::CrossEntropyOptions o;
                                 o.reduction = red;
                                 o.label_smoothing = smoothing;
                                 o.ignore_index = 2;
                                 return F::cross_entropy(in[0], in[2], o);
                               },
                               d));
    }
    EXPECT_TRUE(device_check(ce, [red](const In& in) { return F::nll_loss(F::log_softmax(in[0], 1), in[1], red); },
                             d));
  }
  auto single = [](const Device& at) {
    return In{leaf_on(uniform({5}, -2, 2, 92), at), tiny::scalar_tensor(3, tiny::kInt64).to(at)};
  };
  EXPECT_TRUE(device_check(single, [](const In& in) { return F::cross_entropy(in[0], in[1]); }, d));
  auto mse = [](const Device& at) { return In{leaf_on(uniform({3, 4}, -1, 1, 96), at),
                                              leaf_on(uniform({3, 4}, -1, 1, 97), at)}; };
  EXPECT_TRUE(device_check(mse, [](const In& in) { return F::mse_loss(in[0], in[1]); }, d));
  EXPECT_TRUE(device_check(mse, [](const In& in) { return F::mse_loss(in[0], in[1], F::Reduction::None); }, d));
}

TEST_P(OnDevice, ViewsIncludingNonContiguous) {
  const Device d = dev();
  auto x = [](const Device& at) { return In{leaf_on(uniform({2, 3, 4}, -1, 1, 110), at)}; };
  EXPECT_TRUE(device_check(x, [](const In& in) { return in[0].view({-1}).exp(); }, d));
  EXPECT_TRUE(device_check(x, [](const In& in) { return in[0].transpose(0, 2).reshape({4, 6}).pow(2); }, d));
  EXPECT_TRUE(device_check(x, [](const In& in) { return in[0].permute({1, 2, 0}).pow(2); }, d));
  EXPECT_TRUE(device_check(x, [](const In& in) { return in[0].permute({2, 0, 1}).flatten(1).exp(); }, d));
  EXPECT_TRUE(device_check(x, [](const In& in) { return in[0].unsqueeze(-1).squeeze(1).exp(); }, d));
  EXPECT_TRUE(device_check(x, [](const In& in) { return in[0].transpose(0, 2).contiguous().exp(); }, d));
  auto m = [](const Device& at) { return In{leaf_on(uniform({4, 6}, -1, 1, 115), at)}; };
  EXPECT_TRUE(device_check(m, [](const In& in) { return in[0].narrow(0, -3, 2).exp(); }, d));
  EXPECT_TRUE(device_check(m, [](const In& in) { return in[0].slice(1, 1, 6, 2).pow(3); }, d));
  EXPECT_TRUE(device_check(m, [](const In& in) { return in[0].select(1, -1).exp(); }, d));
  EXPECT_TRUE(device_check(m, [](const In& in) { return in[0].narrow(1, 0, 4) * in[0].narrow(1, 2, 4); }, d));
  auto col = [](const Device& at) { return In{leaf_on(uniform({3, 1}, -1, 1, 119), at)}; };
  EXPECT_TRUE(device_check(col, [](const In& in) { return in[0].expand({2, 3, 4}).exp(); }, d));
  auto mt = [](const Device& at) { return In{transposed_leaf_on(4, 6, -1, 1, 116, at)}; };
  EXPECT_TRUE(device_check(mt, [](const In& in) { return in[0].slice(0, 1, 4, 2).select(1, 3).exp(); }, d));
  EXPECT_TRUE(device_check(mt, [](const In& in) { return in[0].reshape({24}).tanh(); }, d));
  EXPECT_TRUE(device_check(mt, [](const In& in) { return in[0].contiguous().pow(2); }, d));
  // A strided slice of a bigger buffer, detached to make it a leaf: the
  // finite differences write into a non-contiguous device tensor.
  auto strided = [](const Device& at) {
    Tensor s = uniform({6, 5}, -1, 1, 132).to(at).slice(0, 0, 6, 2).slice(1, 1, 5, 2).detach();
    EXPECT_FALSE(s.is_contiguous());
    return In{s.requires_grad_(true), transposed_leaf_on(3, 2, 0.5, 1.5, 131, at)};
  };
  EXPECT_TRUE(device_check(strided, [](const In& in) { return (in[0] * in[0]).sum({0}); }, d));
  EXPECT_TRUE(device_check(strided, [](const In& in) { return in[0] * in[1] + in[0].exp() / in[1]; }, d));
}

TEST_P(OnDevice, CatStackAndDtypeRoundTrip) {
  const Device d = dev();
  auto ab = [](const Device& at) {
    return In{leaf_on(uniform({2, 3}, -1, 1, 124), at), leaf_on(uniform({1, 3}, -1, 1, 125), at),
              leaf_on(uniform({2, 3}, -1, 1, 128), at), transposed_leaf_on(2, 3, -1, 1, 129, at)};
  };
  EXPECT_TRUE(device_check(ab, [](const In& in) { return tiny::cat({in[0].exp(), in[1], in[0]}, 0).pow(2); }, d));
  EXPECT_TRUE(device_check(ab, [](const In& in) { return tiny::stack({in[0], in[2], in[0] * in[2]}, 1); }, d));
  EXPECT_TRUE(device_check(ab, [](const In& in) { return tiny::stack({in[3], in[2]}, -1).exp(); }, d));
  // float64 -> float32 -> float64 on the device: float32 rounding, loose tolerances.
  auto y = [](const Device& at) { return In{leaf_on(uniform({5}, -1, 1, 123), at)}; };
  EXPECT_TRUE(device_check(y, [](const In& in) { return in[0].to(tiny::kFloat32).to(tiny::kFloat64).pow(2); }, d,
                           1e-3, 1e-3, 1e-2));
}

TEST_P(OnDevice, TwoLayerMlpWithCrossEntropy) {
  auto net = [](const Device& at) {
    return In{uniform({4, 3}, -1, 1, 140).to(at),          leaf_on(uniform({5, 3}, -1, 1, 141), at),
              leaf_on(uniform({5}, -0.1, 0.1, 142), at),   leaf_on(uniform({3, 5}, -1, 1, 143), at),
              leaf_on(uniform({3}, -0.1, 0.1, 144), at),   targets_on({0, 2, 1, 2}, at)};
  };
  EXPECT_TRUE(device_check(
      net,
      [](const In& in) {
        Tensor h = F::gelu(F::linear(in[0], in[1], in[2]));
        return F::cross_entropy(F::linear(h, in[3], in[4]), in[5]);
      },
      dev()));
}

// The checker itself must be able to fail on a device: a hook that doubles one
// element of the gradient, on the device, is caught by the finite differences
// (the CPU and the device agree with each other here, so only step 3 can see it).
TEST_P(OnDevice, CatchesAWrongGradientOnTheDevice) {
  const Device d = dev();
  Tensor x = leaf_on(uniform({2, 3}, 0.5, 1.5, 2), d);
  auto wrong = [d](const In& in) {
    Tensor y = in[0] * in[0];
    if (y.requires_grad()) {
      y.register_hook([d](const Tensor& g) {
        Tensor mask = tiny::zeros({2, 3}, tiny::kFloat64);
        mask.data_ptr<double>()[4] = 1.0;  // element [1, 1], written on the host, then moved
        return g + g * mask.to(d);
      });
    }
    return y;
  };
  ::testing::AssertionResult r = gradcheck(wrong, {x});
  ASSERT_FALSE(r);
  EXPECT_NE(std::string(r.message()).find("index [1, 1]"), std::string::npos) << r.message();
  // The finite differences left x as it was.
  EXPECT_TRUE(tiny::equal(x.cpu(), uniform({2, 3}, 0.5, 1.5, 2)));
}

std::string device_param_name(const ::testing::TestParamInfo<std::string>& info) {
  std::string s;
  for (char c : info.param) {
    if (std::isalnum(static_cast<unsigned char>(c))) s += c;
  }
  return s;  // cuda:0 -> cuda0
}

INSTANTIATE_TEST_SUITE_P(Gradcheck, OnDevice, ::testing::Values("cuda:0"), device_param_name);

}  // namespace
