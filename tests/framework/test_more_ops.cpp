// The ops of issue 23, item 5 that the parity fixtures cannot cover alone:
// float64 gradient checks (on the CPU and the emulated GPU), integer and bool
// inputs, edge shapes, and every bad input's message. Values against PyTorch
// are in tests/parity (sin ... unbind).

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "gradcheck.h"
#include "test_util.h"
#include "tiny/cuda.h"
#include "tiny/ops.h"

namespace {

using tiny::Tensor;
using tiny_test::distinct;
using tiny_test::expect_error;
using tiny_test::gradcheck;
using tiny_test::leaf;
using tiny_test::uniform;
using In = std::vector<Tensor>;

// ---- gradients, float64, on the CPU and on cuda:0 (emulated by default) ----------

class MoreOpsGrad : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    if (GetParam() != "cpu" && !tiny::cuda::is_available()) GTEST_SKIP() << "no cuda:0 (TINY_EMULATED_GPUS=0?)";
  }
  Tensor on(const Tensor& t) const { return leaf(t.to(tiny::Device(GetParam())).detach()); }
};

TEST_P(MoreOpsGrad, Transcendental) {
  EXPECT_TRUE(gradcheck([](const In& in) { return tiny::sin(in[0]); }, {on(uniform({3, 4}, -3, 3, 1))}));
  EXPECT_TRUE(gradcheck([](const In& in) { return tiny::cos(in[0]); }, {on(uniform({3, 4}, -3, 3, 2))}));
  EXPECT_TRUE(gradcheck([](const In& in) { return tiny::log1p(in[0]); }, {on(uniform({3, 4}, -0.5, 2, 3))}));
  EXPECT_TRUE(gradcheck([](const In& in) { return tiny::expm1(in[0]); }, {on(uniform({3, 4}, -2, 2, 4))}));
  EXPECT_TRUE(gradcheck([](const In& in) { return tiny::rsqrt(in[0]); }, {on(uniform({3, 4}, 0.3, 3, 5))}));
}

TEST_P(MoreOpsGrad, PiecewiseConstantHaveZeroGradient) {
  for (auto op : {&tiny::floor, &tiny::round, &tiny::sign}) {
    Tensor x = on(uniform({5}, -3, 3, 6));
    (op(x) * x).sum().backward();
    // d/dx (f(x) * x) = f(x) + x * f'(x), and f' is 0: the gradient is f(x) itself.
    EXPECT_TRUE(tiny::allclose(x.grad().cpu(), op(x.detach()).cpu()));
  }
}

TEST_P(MoreOpsGrad, AmaxAminOverSeveralDims) {
  EXPECT_TRUE(gradcheck([](const In& in) { return tiny::amax(in[0], {0, 2}); }, {on(distinct({3, 4, 5}, 7))}));
  EXPECT_TRUE(gradcheck([](const In& in) { return tiny::amin(in[0], {-1}, true); }, {on(distinct({4, 6}, 8))}));
  EXPECT_TRUE(gradcheck([](const In& in) { return tiny::amax(in[0]); }, {on(distinct({2, 3}, 9))}));
}

TEST_P(MoreOpsGrad, IndexingOps) {
  const tiny::Device dev(GetParam());
  const Tensor index = tiny::from_vector<int64_t>({2, 0, 2, 1}, {4}).to(dev);
  EXPECT_TRUE(gradcheck([index](const In& in) { return tiny::index_select(in[0], 1, index); },
                        {on(uniform({3, 3, 2}, -1, 1, 10))}));
  EXPECT_TRUE(gradcheck([](const In& in) { return tiny::flip(in[0], {-1, 0}); }, {on(uniform({3, 4}, -1, 1, 11))}));
  EXPECT_TRUE(gradcheck([](const In& in) { return tiny::tril(in[0], -1) + tiny::triu(in[0], 2); },
                        {on(uniform({2, 4, 5}, -1, 1, 12))}));
  const Tensor mask = (uniform({1, 5}, 0, 1, 13) > 0.5).to(dev);
  EXPECT_TRUE(gradcheck([mask](const In& in) { return tiny::masked_fill(in[0], mask, 3.0); },
                        {on(uniform({3, 5}, -1, 1, 14))}));
  EXPECT_TRUE(gradcheck([](const In& in) { return tiny::unbind(in[0], 1)[2] * 2; }, {on(uniform({3, 4}, -1, 1, 15))}));
  // masked_select with a mask broadcast over rows: the gradient lands on every picked element.
  const Tensor row_mask = (uniform({1, 4}, 0, 1, 16) > 0.4).to(dev);
  EXPECT_TRUE(gradcheck([row_mask](const In& in) { return tiny::masked_select(in[0], row_mask); },
                        {on(uniform({3, 4}, -1, 1, 17))}));
}

std::string device_name(const ::testing::TestParamInfo<std::string>& info) {
  return info.param == "cpu" ? "cpu" : "cuda0";
}

INSTANTIATE_TEST_SUITE_P(MoreOps, MoreOpsGrad, ::testing::Values("cpu", "cuda:0"), device_name);

// ---- values that parity fixtures do not reach -----------------------------------

TEST(MoreOps, IntegerAndBoolInputs) {
  const Tensor i = tiny::from_vector<int64_t>({3, -1, 0, 7}, {2, 2});
  EXPECT_TRUE(tiny::equal(tiny::floor(i), i));
  EXPECT_TRUE(tiny::equal(tiny::round(i), i));
  EXPECT_TRUE(tiny::equal(tiny::sign(i), tiny::from_vector<int64_t>({1, -1, 0, 1}, {2, 2})));
  EXPECT_FALSE(tiny::any(tiny::isnan(i)).item<bool>());
  EXPECT_TRUE(tiny::all(tiny::isfinite(i)).item<bool>());
  EXPECT_EQ(tiny::isnan(i).dtype(), tiny::kBool);
  // Integer index_select and flip (no gradient, exact beyond 2^53).
  const int64_t big = (int64_t{1} << 53) + 1;
  const Tensor b = tiny::from_vector<int64_t>({big, 1, 2, big + 2}, {4});
  EXPECT_TRUE(tiny::equal(tiny::flip(b, {0}), tiny::from_vector<int64_t>({big + 2, 2, 1, big}, {4})));
  EXPECT_TRUE(tiny::equal(tiny::index_select(b, 0, tiny::from_vector<int64_t>({3, 3, 0}, {3})),
                          tiny::from_vector<int64_t>({big + 2, big + 2, big}, {3})));
  EXPECT_EQ(tiny::amax(b).item<int64_t>(), big + 2);
  EXPECT_TRUE(tiny::equal(tiny::masked_fill(b, b > 1, 0), tiny::from_vector<int64_t>({0, 1, 0, 0}, {4})));
}

// masked_select and nonzero on each device: row-major order, empty and full masks,
// a broadcast input, integers, and the same answer on the emulated GPU as on the CPU.
TEST_P(MoreOpsGrad, MaskedSelectAndNonzero) {
  const tiny::Device dev(GetParam());
  const Tensor x = tiny::from_vector<int64_t>({10, 11, 12, 13, 14, 15}, {2, 3}).to(dev);
  const Tensor m = tiny::from_vector<bool>({true, false, true, false, false, true}, {2, 3}).to(dev);
  EXPECT_TRUE(tiny::equal(tiny::masked_select(x, m).cpu(), tiny::from_vector<int64_t>({10, 12, 15}, {3})));
  EXPECT_TRUE(tiny::equal(x.masked_select(m).cpu(), tiny::from_vector<int64_t>({10, 12, 15}, {3})));
  EXPECT_TRUE(tiny::equal(tiny::nonzero(m).cpu(), tiny::from_vector<int64_t>({0, 0, 0, 2, 1, 2}, {3, 2})));
  EXPECT_TRUE(tiny::equal(m.nonzero().cpu(), tiny::nonzero(m).cpu()));
  // The input broadcast against the mask: a row picked twice.
  const Tensor row = tiny::tensor({1.0, 2.0, 3.0}).to(dev);
  EXPECT_TRUE(tiny::equal(tiny::masked_select(row, m).cpu(), tiny::tensor({1.0, 3.0, 3.0})));
  // Nothing picked: an empty 1-D tensor of the input's dtype on its device; all picked: every element.
  const Tensor none = tiny::masked_select(x, tiny::zeros({2, 3}, tiny::TensorOptions(tiny::kBool).device(dev)));
  EXPECT_EQ(none.sizes(), (tiny::IntArrayRef{0}));
  EXPECT_EQ(none.dtype(), tiny::kInt64);
  EXPECT_EQ(none.device(), x.device());
  EXPECT_TRUE(tiny::equal(tiny::masked_select(x, tiny::ones({1}, tiny::TensorOptions(tiny::kBool).device(dev))).cpu(),
                          x.reshape({-1}).cpu()));
  EXPECT_EQ(tiny::nonzero(tiny::zeros({4, 2}).to(dev)).sizes(), (tiny::IntArrayRef{0, 2}));
  // A 0-d input: [1, 0] when it is nonzero, [0, 0] when not, as in PyTorch.
  EXPECT_EQ(tiny::nonzero(tiny::full({}, 3.0).to(dev)).sizes(), (tiny::IntArrayRef{1, 0}));
  EXPECT_EQ(tiny::nonzero(tiny::zeros({}).to(dev)).sizes(), (tiny::IntArrayRef{0, 0}));
  // NaN is nonzero.
  const Tensor with_nan = tiny::tensor({0.0, std::nan(""), 0.0}).to(dev);
  EXPECT_TRUE(tiny::equal(tiny::nonzero(with_nan).cpu(), tiny::from_vector<int64_t>({1}, {1, 1})));
}

TEST(MoreOps, NanAndInfinity) {
  const double nan = std::numeric_limits<double>::quiet_NaN(), inf = std::numeric_limits<double>::infinity();
  const Tensor x = tiny::tensor({1.0, nan, inf, -inf, 0.0});
  EXPECT_TRUE(tiny::equal(tiny::isnan(x), tiny::from_vector<bool>({false, true, false, false, false}, {5})));
  EXPECT_TRUE(tiny::equal(tiny::isfinite(x), tiny::from_vector<bool>({true, false, false, false, true}, {5})));
  EXPECT_TRUE(std::isnan(tiny::amax(x).item<double>()));  // NaN propagates, as in PyTorch
}

TEST(MoreOps, CreationEdgeCases) {
  EXPECT_EQ(tiny::linspace(0, 1, 0).numel(), 0);
  EXPECT_EQ(tiny::linspace(2.5, 9, 1).item<double>(), 2.5);
  const Tensor l = tiny::linspace(-1, 1, 5, tiny::kFloat64);
  EXPECT_EQ(l[0].item<double>(), -1.0);
  EXPECT_EQ(l[4].item<double>(), 1.0);  // both ends exact
  EXPECT_EQ(l[2].item<double>(), 0.0);  // and symmetric
  const Tensor e = tiny::eye(3);
  EXPECT_EQ(e.sizes(), (tiny::IntArrayRef{3, 3}));
  EXPECT_EQ(e.sum().item<double>(), 3.0);
  EXPECT_EQ(e.dtype(), tiny::kFloat32);
  EXPECT_EQ(tiny::eye(2, 4, tiny::kInt64).sum().item<int64_t>(), 2);
}

TEST(MoreOps, UnbindGivesViews) {
  Tensor x = tiny::zeros({2, 3});
  std::vector<Tensor> rows = tiny::unbind(x, 0);
  ASSERT_EQ(rows.size(), 2u);
  rows[1].fill_(5);
  EXPECT_EQ(x.sum().item<double>(), 15.0);  // a view of x, as PyTorch's unbind
}

// ---- bad inputs: the values and the fix in the message ------------------------------

TEST(MoreOps, BadInputsNameTheValuesAndTheFix) {
  const Tensor x = tiny::ones({3, 4});
  expect_error<tiny::IndexError>([&] { (void)tiny::index_select(x, 1, tiny::from_vector<int64_t>({0, 4}, {2})); },
                                 {"index 4 is out of bounds for dimension 1 with size 4"});
  expect_error<tiny::DtypeError>([&] { (void)tiny::index_select(x, 0, tiny::ones({2})); },
                                 {"int64", "float32", ".to(tiny::kInt64)"});
  expect_error<tiny::IndexError>([&] { (void)tiny::index_select(x, 0, tiny::zeros({2, 2}, tiny::kInt64)); },
                                 {"vector", "[2, 2]"});
  expect_error<tiny::DtypeError>([&] { (void)tiny::masked_fill(x, tiny::ones({3, 4}), 0); }, {"bool", "x > 0"});
  expect_error<tiny::ShapeError>([&] { (void)tiny::masked_fill(x, tiny::ones({2, 4}, tiny::kBool), 0); },
                                 {"[2, 4]", "[3, 4]"});
  expect_error<tiny::ShapeError>([&] { (void)tiny::tril(tiny::ones({4})); }, {"at least 2 dimensions", "[4]"});
  expect_error<tiny::ValueError>([&] { (void)tiny::linspace(0, 1, -2); }, {"non-negative", "-2"});
  expect_error<tiny::IndexError>([&] { (void)tiny::amax(tiny::ones({3, 0}), {1}); }, {"non-zero size", "[3, 0]"});
  expect_error<tiny::DtypeError>([&] { (void)tiny::floor(x > 0); }, {"bool", "to(tiny::kFloat32)"});
  expect_error<tiny::ValueError>([&] { (void)tiny::flip(x, {1, -1}); }, {"multiple times"});
  expect_error<tiny::DtypeError>([&] { (void)tiny::masked_select(x, tiny::ones({3, 4})); }, {"bool", "x > 0"});
  expect_error<tiny::ShapeError>([&] { (void)tiny::masked_select(x, tiny::ones({2, 4}, tiny::kBool)); },
                                 {"[3, 4]", "[2, 4]"});
}

}  // namespace

// x.masked_fill(...), x.flip(...), x.tril(), x.triu() are the free functions,
// as `x.foo()` is in PyTorch; masked_fill_ changes x in place and its gradient
// is zero where the mask is true.
TEST(MoreOps, TensorMethodsAreTheFreeFunctions) {
  const Tensor x = distinct({3, 4}, 61);
  const Tensor mask = tiny::tensor({1, 0, 0, 1}).reshape({1, 4}).to(tiny::kBool);
  EXPECT_TRUE(tiny::equal(x.masked_fill(mask, -1.0), tiny::masked_fill(x, mask, -1.0)));
  EXPECT_TRUE(tiny::equal(x.flip({0, 1}), tiny::flip(x, {0, 1})));
  EXPECT_TRUE(tiny::equal(x.tril(), tiny::tril(x)));
  EXPECT_TRUE(tiny::equal(x.triu(1), tiny::triu(x, 1)));

  const Tensor w = distinct({3, 4}, 62).requires_grad_(true);
  const Tensor y = w * 2.0;
  const Tensor& same = y.masked_fill_(mask, 0.0);
  EXPECT_EQ(&same, &y);
  EXPECT_TRUE(tiny::equal(y, tiny::masked_fill(w.detach() * 2.0, mask, 0.0)));
  y.sum().backward();
  const Tensor expected = tiny::masked_fill(tiny::full({3, 4}, 2.0), mask, 0.0);
  EXPECT_TRUE(tiny::equal(w.grad(), expected)) << "the gradient is 2 where the mask is false, 0 where it is true";
}
