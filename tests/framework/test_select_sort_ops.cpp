// repeat, split/chunk, gather, cumsum, prod, sort and topk (issue 23, item 5):
// what the PyTorch parity fixtures (tests/parity, repeat_more_dims ...
// gather_f64) cannot cover alone: float64 gradient checks on the CPU and the
// emulated GPU, the CPU and the emulated GPU giving the same bits, views,
// integer inputs, NaN, edge shapes, and every bad input's message.

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <tuple>
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
using I64 = std::vector<int64_t>;

Tensor i64(const I64& v, const tiny::IntArrayRef& shape) { return tiny::from_vector<int64_t>(v, shape); }

// ---- gradients, float64, on the CPU and on cuda:0 (emulated by default) ----------

class SelectSortGrad : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    if (GetParam() != "cpu" && !tiny::cuda::is_available()) GTEST_SKIP() << "no cuda:0 (TINY_EMULATED_GPUS=0?)";
  }
  tiny::Device dev() const { return tiny::Device(GetParam()); }
  Tensor on(const Tensor& t) const { return leaf(t.to(dev()).detach()); }
};

TEST_P(SelectSortGrad, RepeatSplitChunk) {
  EXPECT_TRUE(gradcheck([](const In& in) { return in[0].t().repeat({2, 1, 3}); }, {on(uniform({2, 3}, -1, 1, 1))}));
  EXPECT_TRUE(gradcheck([](const In& in) { return in[0].split(2, 1)[2] * 3; }, {on(uniform({3, 5}, -1, 1, 2))}));
  EXPECT_TRUE(gradcheck([](const In& in) { return tiny::split(in[0], tiny::IntArrayRef{1, 3}, 0)[1]; },
                        {on(uniform({4, 2}, -1, 1, 3))}));
  EXPECT_TRUE(gradcheck([](const In& in) { return in[0].chunk(3, -1)[1].exp(); }, {on(uniform({2, 7}, -1, 1, 4))}));
}

TEST_P(SelectSortGrad, GatherAddsRepeatedIndices) {
  const Tensor index = i64({2, 0, 2, 2, 1, 1}, {2, 3}).to(dev());
  EXPECT_TRUE(gradcheck([index](const In& in) { return tiny::gather(in[0], 1, index); },
                        {on(uniform({2, 4}, -1, 1, 5))}));
  const Tensor index0 = i64({3, 3, 0, 1}, {2, 2}).to(dev());
  EXPECT_TRUE(gradcheck([index0](const In& in) { return in[0].t().gather(0, index0); },
                        {on(uniform({3, 4}, -1, 1, 6))}));
}

TEST_P(SelectSortGrad, CumsumAndProdWithZeros) {
  EXPECT_TRUE(gradcheck([](const In& in) { return tiny::cumsum(in[0], 1); }, {on(uniform({3, 9, 2}, -1, 1, 7))}));
  EXPECT_TRUE(gradcheck([](const In& in) { return in[0].t().cumsum(0); }, {on(uniform({4, 5}, -1, 1, 8))}));
  EXPECT_TRUE(gradcheck([](const In& in) { return tiny::prod(in[0], 1, true); }, {on(uniform({3, 7}, -2, 2, 9))}));
  EXPECT_TRUE(gradcheck([](const In& in) { return in[0].prod(); }, {on(uniform({5}, 0.5, 1.5, 10))}));
  // Zeros: the gradient of a zero is the product of the others; with two zeros every gradient is 0.
  // Central differences are exact here (prod is linear in each element), so gradcheck holds at the zeros.
  const Tensor x = tiny::tensor({2.0, 0.0, 3.0, 0.0, 0.0, 5.0, 1.5, 2.0, 4.0}, {3, 3}, tiny::kFloat64);
  EXPECT_TRUE(gradcheck([](const In& in) { return tiny::prod(in[0], -1); }, {on(x)}));
  Tensor z = on(x);
  tiny::prod(z, -1).sum().backward();
  EXPECT_TRUE(tiny::equal(z.grad().cpu(), tiny::tensor({0, 6, 0, 0, 0, 0, 8, 6, 3}, {3, 3}, tiny::kFloat64)));
}

TEST_P(SelectSortGrad, SortAndTopkThroughTheValues) {
  EXPECT_TRUE(gradcheck([](const In& in) { return std::get<0>(tiny::sort(in[0], 0, true)); },
                        {on(distinct({5, 3}, 11))}));
  EXPECT_TRUE(gradcheck([](const In& in) { return std::get<0>(in[0].t().topk(2, -1, false)); },
                        {on(distinct({6, 3}, 12))}));
}

TEST_P(SelectSortGrad, SameBitsAsTheCpu) {
  if (GetParam() == "cpu") GTEST_SKIP() << "compares cuda:0 with the cpu";
  const Tensor x = uniform({6, 33}, -2, 2, 13, tiny::kFloat32);
  const Tensor g = x.to(dev());
  EXPECT_TRUE(tiny::equal(tiny::cumsum(g, 1).cpu(), tiny::cumsum(x, 1)));
  EXPECT_TRUE(tiny::equal(tiny::prod(g, 1).cpu(), tiny::prod(x, 1)));
  const auto [v, i] = tiny::sort(g, 1, true);
  const auto [cv, ci] = tiny::sort(x, 1, true);
  EXPECT_TRUE(tiny::equal(v.cpu(), cv));
  EXPECT_TRUE(tiny::equal(i.cpu(), ci));
  const Tensor index = i64({5, 0, 32, 7}, {1, 4}).expand({6, 4}).contiguous();
  EXPECT_TRUE(tiny::equal(tiny::gather(g, 1, index.to(dev())).cpu(), tiny::gather(x, 1, index)));
}

std::string device_name(const ::testing::TestParamInfo<std::string>& info) {
  return info.param == "cpu" ? "cpu" : "cuda0";
}

INSTANTIATE_TEST_SUITE_P(SelectSort, SelectSortGrad, ::testing::Values("cpu", "cuda:0"), device_name);

// ---- values that parity fixtures do not reach -----------------------------------

TEST(SelectSort, SplitAndChunkGiveViewsAndPyTorchsPieceCounts) {
  Tensor x = tiny::zeros({2, 7});
  std::vector<Tensor> parts = x.split(3, 1);
  ASSERT_EQ(parts.size(), 3u);
  EXPECT_EQ(parts[2].sizes(), (tiny::IntArrayRef{2, 1}));  // the last piece shorter
  parts[1].fill_(1);
  EXPECT_EQ(x.sum().item<double>(), 6.0);  // views of x, as PyTorch's
  // chunk may give fewer pieces than asked: 6 elements in 4 chunks is 3 of 2.
  EXPECT_EQ(tiny::chunk(tiny::zeros({6}), 4).size(), 3u);
  EXPECT_EQ(tiny::chunk(tiny::zeros({0, 2}), 3).size(), 3u);  // an empty dim: 3 empty pieces
  EXPECT_EQ(tiny::split(tiny::zeros({0}), 2).size(), 1u);
  EXPECT_EQ(tiny::split_with_sizes(x, {0, 7}, 1)[0].numel(), 0);
}

TEST(SelectSort, RepeatTilesAndCopies) {
  const Tensor a = i64({1, 2, 3}, {3});
  EXPECT_TRUE(tiny::equal(a.repeat({2, 2}), i64({1, 2, 3, 1, 2, 3, 1, 2, 3, 1, 2, 3}, {2, 6})));
  EXPECT_EQ(a.repeat({0, 1}).sizes(), (tiny::IntArrayRef{0, 3}));
  Tensor b = tiny::zeros({2});
  Tensor c = b.repeat({1});
  c.fill_(1);
  EXPECT_EQ(b.sum().item<double>(), 0.0);  // a copy even when nothing repeats
}

TEST(SelectSort, IntegerInputsAndDtypes) {
  const Tensor i = i64({3, -1, 0, 7, 2, 2}, {2, 3});
  EXPECT_TRUE(tiny::equal(tiny::cumsum(i, 1), i64({3, 2, 2, 7, 9, 11}, {2, 3})));
  EXPECT_TRUE(tiny::equal(tiny::prod(i, 1), i64({0, 28}, {2})));
  EXPECT_EQ(tiny::prod(i > 0).dtype(), tiny::kInt64);  // bool multiplies to int64, like sum
  EXPECT_EQ(tiny::cumsum(i > 0, 0).dtype(), tiny::kInt64);
  EXPECT_EQ(tiny::prod(tiny::ones({2}, tiny::kFloat64)).dtype(), tiny::kFloat64);
  const auto [v, idx] = tiny::sort(i, 1, true);
  EXPECT_TRUE(tiny::equal(v, i64({3, 0, -1, 7, 2, 2}, {2, 3})));
  EXPECT_TRUE(tiny::equal(idx, i64({0, 2, 1, 0, 1, 2}, {2, 3})));
  EXPECT_TRUE(tiny::equal(tiny::gather(i, 1, i64({2, 2, 0}, {1, 3})), i64({0, 0, 3}, {1, 3})));
  // Scalars and empty dims, as PyTorch.
  EXPECT_EQ(tiny::prod(tiny::zeros({3, 0}), 1).sizes(), (tiny::IntArrayRef{3}));
  EXPECT_EQ(tiny::prod(tiny::zeros({3, 0}), 1).sum().item<double>(), 3.0);  // the empty product is 1
  EXPECT_EQ(tiny::cumsum(tiny::scalar_tensor(4.0), 0).item<double>(), 4.0);
  EXPECT_EQ(std::get<0>(tiny::topk(tiny::scalar_tensor(5.0), 1)).item<double>(), 5.0);
}

TEST(SelectSort, NanSortsAsTheLargestStably) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const Tensor x = tiny::tensor({3.0, nan, 1.0, 3.0, nan, 0.0}, tiny::kFloat64);
  // PyTorch 1.13: sort(stable=True) gives [5, 2, 0, 3, 1, 4], descending [1, 4, 0, 3, 2, 5].
  EXPECT_TRUE(tiny::equal(std::get<1>(tiny::sort(x)), i64({5, 2, 0, 3, 1, 4}, {6})));
  EXPECT_TRUE(tiny::equal(std::get<1>(tiny::sort(x, 0, true)), i64({1, 4, 0, 3, 2, 5}, {6})));
  EXPECT_TRUE(std::isnan(std::get<0>(tiny::topk(x, 1)).item<double>()));
  // topk picks in passes, not through sort: the same order, NaN last when smallest.
  EXPECT_TRUE(tiny::equal(std::get<1>(tiny::topk(x, 6, 0, false)), i64({5, 2, 0, 3, 1, 4}, {6})));
  EXPECT_TRUE(tiny::equal(std::get<1>(tiny::topk(x, 6)), i64({1, 4, 0, 3, 2, 5}, {6})));
  const double inf = std::numeric_limits<double>::infinity();
  const Tensor edges = tiny::tensor({-inf, nan, inf, -inf, inf}, tiny::kFloat64);
  EXPECT_TRUE(tiny::equal(std::get<1>(tiny::topk(edges, 5, 0, false)), i64({0, 3, 2, 4, 1}, {5})));
  EXPECT_TRUE(tiny::equal(std::get<1>(tiny::topk(edges, 5)), i64({1, 2, 4, 0, 3}, {5})));
}

TEST(SelectSort, SortIsStdStableSortForEveryLength) {
  // Rows full of ties, of lengths around the powers of two the network pads to.
  for (int64_t n : {1, 2, 3, 5, 8, 17, 64, 100}) {
    const Tensor x = tiny::randint(-4, 4, {3, n});
    for (bool descending : {false, true}) {
      const auto [values, indices] = tiny::sort(x, 1, descending);
      for (int64_t r = 0; r < 3; ++r) {
        const std::vector<int64_t> row = x[r].to_vector<int64_t>();
        std::vector<int64_t> expected(static_cast<size_t>(n));
        for (int64_t i = 0; i < n; ++i) expected[static_cast<size_t>(i)] = i;
        std::stable_sort(expected.begin(), expected.end(), [&row, descending](int64_t p, int64_t q) {
          return descending ? row[static_cast<size_t>(p)] > row[static_cast<size_t>(q)]
                            : row[static_cast<size_t>(p)] < row[static_cast<size_t>(q)];
        });
        EXPECT_EQ(indices[r].to_vector<int64_t>(), expected) << "n=" << n << " descending=" << descending;
      }
    }
  }
}

TEST(SelectSort, TopkAgreesWithSortOnTies) {
  // Few distinct values, so most elements tie: topk's passes and sort's ranks must pick the same columns.
  const Tensor x = tiny::randint(-3, 3, {7, 40});
  for (bool largest : {true, false}) {
    const Tensor from_sort = std::get<1>(tiny::sort(x, 1, largest)).narrow(1, 0, 11);
    EXPECT_TRUE(tiny::equal(std::get<1>(tiny::topk(x, 11, 1, largest)), from_sort)) << "largest=" << largest;
    const Tensor f = x.to(tiny::kFloat32).t();
    EXPECT_TRUE(tiny::equal(std::get<1>(tiny::topk(f, 11, 0, largest)), from_sort.t())) << "float, dim 0";
  }
  EXPECT_EQ(std::get<0>(tiny::topk(x, 0, 1)).sizes(), (tiny::IntArrayRef{7, 0}));
}

TEST(SelectSort, TopkUnsortedIsSortedAndLongRowsArePadded) {
  const Tensor x = distinct({3, 50}, 14);
  const auto [v, i] = tiny::topk(x, 4, 1, true, /*sorted=*/false);
  const auto [sv, si] = tiny::topk(x, 4, 1);
  EXPECT_TRUE(tiny::equal(v, sv) && tiny::equal(i, si));
  // A row that is not a power of two (2100, padded to 4096 for the network): still a permutation, in order.
  const Tensor y = uniform({2, 2100}, -1, 1, 15, tiny::kFloat32);
  const auto [yv, yi] = tiny::sort(y, 1);
  EXPECT_TRUE(tiny::all(yv.narrow(1, 1, 2099) >= yv.narrow(1, 0, 2099)).item<bool>());
  EXPECT_TRUE(tiny::equal(std::get<0>(tiny::sort(yi, 1)), tiny::arange(2100).view({1, 2100}).expand({2, 2100})));
}

// ---- bad inputs: the values and the fix in the message ------------------------------

TEST(SelectSort, BadInputsNameTheValuesAndTheFix) {
  const Tensor x = tiny::ones({3, 4});
  expect_error<tiny::IndexError>([&] { (void)tiny::gather(x, 1, i64({0, 4, 1}, {1, 3})); },
                                 {"index 4 is out of bounds for dimension 1 with size 4"});
  expect_error<tiny::IndexError>([&] { (void)tiny::gather(x, 0, i64({-1}, {1, 1})); },
                                 {"index -1 is out of bounds for dimension 0 with size 3"});
  expect_error<tiny::DtypeError>([&] { (void)tiny::gather(x, 0, tiny::zeros({1, 1})); },
                                 {"int64", "float32", ".to(tiny::kInt64)"});
  expect_error<tiny::IndexError>([&] { (void)tiny::gather(x, 0, i64({0}, {1})); },
                                 {"same number of dimensions", "[3, 4]", "[1]"});
  expect_error<tiny::ShapeError>([&] { (void)tiny::gather(x, 0, i64({0, 0, 0, 0, 0}, {1, 5})); },
                                 {"dimension 1", "[1, 5]", "[3, 4]"});
  expect_error<tiny::ShapeError>([&] { (void)x.repeat({2}); }, {"(1)", "(2 for shape [3, 4])"});
  expect_error<tiny::ValueError>([&] { (void)x.repeat({2, -1}); }, {"negative dimension -1"});
  expect_error<tiny::ValueError>([&] { (void)x.split(0, 1); }, {"dimension size of 4"});
  expect_error<tiny::ValueError>([&] { (void)x.split(tiny::IntArrayRef{1, 1}, 0); }, {"sum exactly to 3", "[1, 1]"});
  expect_error<tiny::ValueError>([&] { (void)x.chunk(0); }, {"greater than 0", "0"});
  expect_error<tiny::IndexError>([&] { (void)tiny::split(tiny::scalar_tensor(1.0), 1); }, {"0-d", "view({1})"});
  expect_error<tiny::IndexError>([&] { (void)x.topk(5); }, {"k = 5", "size 4"});
  expect_error<tiny::IndexError>([&] { (void)x.cumsum(2); }, {"2"});
}

}  // namespace
