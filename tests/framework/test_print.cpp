// operator<< must print tensors exactly as PyTorch 1.13 prints them (repr of a
// torch.Tensor), except that the dtype suffix says "tiny." where PyTorch says
// "torch.". Every expected string below is PyTorch's output for the Python
// expression in the comment above it, produced by Debian's /usr/bin/python3
// (torch 1.13) and pasted verbatim.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <sstream>
#include <string>
#include <vector>

#include "tiny/ops.h"
#include "tiny/tensor.h"

namespace {

std::string str(const tiny::Tensor& t) {
  std::ostringstream out;
  out << t;
  return out.str();
}

TEST(Print, FloatMatrixWithNegativesAlignsColumns) {
  // torch.tensor([[1.5, -2.25, 3.0], [-10.125, 0.5, 100.0]])
  EXPECT_EQ(str(tiny::tensor({1.5, -2.25, 3.0, -10.125, 0.5, 100.0}, {2, 3})),
            R"(tensor([[  1.5000,  -2.2500,   3.0000],
        [-10.1250,   0.5000, 100.0000]]))");
  // torch.tensor([[0.1234, -1.0], [12.5, 3.0]])
  EXPECT_EQ(str(tiny::tensor({0.1234, -1.0, 12.5, 3.0}, {2, 2})),
            R"(tensor([[ 0.1234, -1.0000],
        [12.5000,  3.0000]]))");
  // torch.tensor([[1.0], [-2.5]])
  EXPECT_EQ(str(tiny::tensor({1.0, -2.5}, {2, 1})),
            R"(tensor([[ 1.0000],
        [-2.5000]]))");
  // torch.tensor([0.99999, 1.23456789])
  EXPECT_EQ(str(tiny::tensor({0.99999, 1.23456789})),
            R"(tensor([1.0000, 1.2346]))");
}

TEST(Print, WholeNumberFloats) {
  // torch.tensor([1., 2., 3.])
  EXPECT_EQ(str(tiny::tensor({1.0, 2.0, 3.0})),
            R"(tensor([1., 2., 3.]))");
  // torch.tensor([[-1., 20.], [3., -400.]])
  EXPECT_EQ(str(tiny::tensor({-1.0, 20.0, 3.0, -400.0}, {2, 2})),
            R"(tensor([[  -1.,   20.],
        [   3., -400.]]))");
  // torch.zeros(3)
  EXPECT_EQ(str(tiny::zeros({3})),
            R"(tensor([0., 0., 0.]))");
  // torch.tensor([0.0, -0.0])
  EXPECT_EQ(str(tiny::tensor({0.0, -0.0})),
            R"(tensor([0., -0.]))");
  // torch.tensor([1., 2000.])
  EXPECT_EQ(str(tiny::tensor({1.0, 2000.0})),
            R"(tensor([1.0000e+00, 2.0000e+03]))");
  // torch.tensor([1e9, 2.0])
  EXPECT_EQ(str(tiny::tensor({1e9, 2.0})),
            R"(tensor([1.0000e+09, 2.0000e+00]))");
}

TEST(Print, Int64) {
  // torch.tensor([[1, -20, 300], [4, 5, -6]])
  EXPECT_EQ(str(tiny::from_vector<int64_t>({1, -20, 300, 4, 5, -6}, {2, 3})),
            R"(tensor([[  1, -20, 300],
        [  4,   5,  -6]]))");
  // torch.tensor([3, 7])
  EXPECT_EQ(str(tiny::from_vector<int64_t>({3, 7})),
            R"(tensor([3, 7]))");
  // torch.tensor([2**62 + 1, -3])
  EXPECT_EQ(str(tiny::from_vector<int64_t>({(int64_t{1} << 62) + 1, -3})),
            R"(tensor([4611686018427387905,                  -3]))");
}

TEST(Print, Bool) {
  // torch.tensor([True, False])
  EXPECT_EQ(str(tiny::from_vector(std::vector<bool>{true, false})),
            R"(tensor([ True, False]))");
  // torch.tensor([[True, False], [False, True]])
  EXPECT_EQ(str(tiny::from_vector(std::vector<bool>{true, false, false, true}, {2, 2})),
            R"(tensor([[ True, False],
        [False,  True]]))");
}

TEST(Print, ScientificMode) {
  // torch.tensor([1e-5, 1.0])
  EXPECT_EQ(str(tiny::tensor({1e-5, 1.0})),
            R"(tensor([1.0000e-05, 1.0000e+00]))");
  // torch.tensor([-1e-5, 1.0])
  EXPECT_EQ(str(tiny::tensor({-1e-5, 1.0})),
            R"(tensor([-1.0000e-05,  1.0000e+00]))");
  // torch.tensor([[1e-5, -2.5e3], [123.456, 0.0]])
  EXPECT_EQ(str(tiny::tensor({1e-5, -2.5e3, 123.456, 0.0}, {2, 2})),
            R"(tensor([[ 1.0000e-05, -2.5000e+03],
        [ 1.2346e+02,  0.0000e+00]]))");
  // torch.tensor([1e9, 1.5])
  EXPECT_EQ(str(tiny::tensor({1e9, 1.5})),
            R"(tensor([1.0000e+09, 1.5000e+00]))");
  // torch.tensor([0.001, 2.0])
  EXPECT_EQ(str(tiny::tensor({0.001, 2.0})),
            R"(tensor([1.0000e-03, 2.0000e+00]))");
  // torch.tensor([0.01, 5.0])
  EXPECT_EQ(str(tiny::tensor({0.01, 5.0})),
            R"(tensor([0.0100, 5.0000]))");
  // torch.tensor([0.0001, 0.5])
  EXPECT_EQ(str(tiny::tensor({0.0001, 0.5})),
            R"(tensor([1.0000e-04, 5.0000e-01]))");
  // torch.tensor([123456.7, 1.0])
  EXPECT_EQ(str(tiny::tensor({123456.7, 1.0})),
            R"(tensor([1.2346e+05, 1.0000e+00]))");
}

TEST(Print, ZeroDimensional) {
  // torch.tensor(2.5)
  EXPECT_EQ(str(tiny::scalar_tensor(2.5)),
            R"(tensor(2.5000))");
  // torch.tensor(3.)
  EXPECT_EQ(str(tiny::scalar_tensor(3.0)),
            R"(tensor(3.))");
  // torch.tensor(7)
  EXPECT_EQ(str(tiny::scalar_tensor(7, tiny::kInt64)),
            R"(tensor(7))");
  // torch.tensor(True)
  EXPECT_EQ(str(tiny::scalar_tensor(true, tiny::kBool)),
            R"(tensor(True))");
  // torch.tensor(2.5, dtype=torch.float64)
  EXPECT_EQ(str(tiny::scalar_tensor(2.5, tiny::kFloat64)),
            R"(tensor(2.5000, dtype=tiny.float64))");
}

TEST(Print, Empty) {
  // torch.tensor([])
  EXPECT_EQ(str(tiny::empty({0})),
            R"(tensor([]))");
  // torch.empty(0, 3)
  EXPECT_EQ(str(tiny::empty({0, 3})),
            R"(tensor([], size=(0, 3)))");
  // torch.empty(0, dtype=torch.int64)
  EXPECT_EQ(str(tiny::empty({0}, tiny::kInt64)),
            R"(tensor([], dtype=tiny.int64))");
  // torch.empty(2, 0, dtype=torch.bool)
  EXPECT_EQ(str(tiny::empty({2, 0}, tiny::kBool)),
            R"(tensor([], size=(2, 0), dtype=tiny.bool))");
  // torch.empty(0, 3, dtype=torch.float64)
  EXPECT_EQ(str(tiny::empty({0, 3}, tiny::kFloat64)),
            R"(tensor([], size=(0, 3), dtype=tiny.float64))");
}

TEST(Print, HigherDimensionsSeparateBlocksWithBlankLines) {
  // torch.arange(12.).reshape(2, 2, 3) - 5.5
  EXPECT_EQ(str(tiny::arange(0.0, 12.0).reshape({2, 2, 3}) - 5.5),
            R"(tensor([[[-5.5000, -4.5000, -3.5000],
         [-2.5000, -1.5000, -0.5000]],

        [[ 0.5000,  1.5000,  2.5000],
         [ 3.5000,  4.5000,  5.5000]]]))");
  // torch.arange(12).reshape(2, 2, 3)
  EXPECT_EQ(str(tiny::arange(12).reshape({2, 2, 3})),
            R"(tensor([[[ 0,  1,  2],
         [ 3,  4,  5]],

        [[ 6,  7,  8],
         [ 9, 10, 11]]]))");
  // torch.arange(16).reshape(2, 2, 2, 2)
  EXPECT_EQ(str(tiny::arange(16).reshape({2, 2, 2, 2})),
            R"(tensor([[[[ 0,  1],
          [ 2,  3]],

         [[ 4,  5],
          [ 6,  7]]],


        [[[ 8,  9],
          [10, 11]],

         [[12, 13],
          [14, 15]]]]))");
}

TEST(Print, MoreThan1000ElementsAreSummarised) {
  // torch.arange(1001.)
  EXPECT_EQ(str(tiny::arange(0.0, 1001.0)),
            R"(tensor([   0.,    1.,    2.,  ...,  998.,  999., 1000.]))");
  // torch.arange(2000).reshape(40, 50)
  EXPECT_EQ(str(tiny::arange(2000).reshape({40, 50})),
            R"(tensor([[   0,    1,    2,  ...,   47,   48,   49],
        [  50,   51,   52,  ...,   97,   98,   99],
        [ 100,  101,  102,  ...,  147,  148,  149],
        ...,
        [1850, 1851, 1852,  ..., 1897, 1898, 1899],
        [1900, 1901, 1902,  ..., 1947, 1948, 1949],
        [1950, 1951, 1952,  ..., 1997, 1998, 1999]]))");
  // torch.arange(1200.).reshape(10, 10, 12) / 8
  EXPECT_EQ(str(tiny::arange(0.0, 1200.0).reshape({10, 10, 12}) / 8.0),
            R"(tensor([[[0.0000e+00, 1.2500e-01, 2.5000e-01,  ..., 1.1250e+00,
          1.2500e+00, 1.3750e+00],
         [1.5000e+00, 1.6250e+00, 1.7500e+00,  ..., 2.6250e+00,
          2.7500e+00, 2.8750e+00],
         [3.0000e+00, 3.1250e+00, 3.2500e+00,  ..., 4.1250e+00,
          4.2500e+00, 4.3750e+00],
         ...,
         [1.0500e+01, 1.0625e+01, 1.0750e+01,  ..., 1.1625e+01,
          1.1750e+01, 1.1875e+01],
         [1.2000e+01, 1.2125e+01, 1.2250e+01,  ..., 1.3125e+01,
          1.3250e+01, 1.3375e+01],
         [1.3500e+01, 1.3625e+01, 1.3750e+01,  ..., 1.4625e+01,
          1.4750e+01, 1.4875e+01]],

        [[1.5000e+01, 1.5125e+01, 1.5250e+01,  ..., 1.6125e+01,
          1.6250e+01, 1.6375e+01],
         [1.6500e+01, 1.6625e+01, 1.6750e+01,  ..., 1.7625e+01,
          1.7750e+01, 1.7875e+01],
         [1.8000e+01, 1.8125e+01, 1.8250e+01,  ..., 1.9125e+01,
          1.9250e+01, 1.9375e+01],
         ...,
         [2.5500e+01, 2.5625e+01, 2.5750e+01,  ..., 2.6625e+01,
          2.6750e+01, 2.6875e+01],
         [2.7000e+01, 2.7125e+01, 2.7250e+01,  ..., 2.8125e+01,
          2.8250e+01, 2.8375e+01],
         [2.8500e+01, 2.8625e+01, 2.8750e+01,  ..., 2.9625e+01,
          2.9750e+01, 2.9875e+01]],

        [[3.0000e+01, 3.0125e+01, 3.0250e+01,  ..., 3.1125e+01,
          3.1250e+01, 3.1375e+01],
         [3.1500e+01, 3.1625e+01, 3.1750e+01,  ..., 3.2625e+01,
          3.2750e+01, 3.2875e+01],
         [3.3000e+01, 3.3125e+01, 3.3250e+01,  ..., 3.4125e+01,
          3.4250e+01, 3.4375e+01],
         ...,
         [4.0500e+01, 4.0625e+01, 4.0750e+01,  ..., 4.1625e+01,
          4.1750e+01, 4.1875e+01],
         [4.2000e+01, 4.2125e+01, 4.2250e+01,  ..., 4.3125e+01,
          4.3250e+01, 4.3375e+01],
         [4.3500e+01, 4.3625e+01, 4.3750e+01,  ..., 4.4625e+01,
          4.4750e+01, 4.4875e+01]],

        ...,

        [[1.0500e+02, 1.0512e+02, 1.0525e+02,  ..., 1.0612e+02,
          1.0625e+02, 1.0638e+02],
         [1.0650e+02, 1.0662e+02, 1.0675e+02,  ..., 1.0762e+02,
          1.0775e+02, 1.0788e+02],
         [1.0800e+02, 1.0812e+02, 1.0825e+02,  ..., 1.0912e+02,
          1.0925e+02, 1.0938e+02],
         ...,
         [1.1550e+02, 1.1562e+02, 1.1575e+02,  ..., 1.1662e+02,
          1.1675e+02, 1.1688e+02],
         [1.1700e+02, 1.1712e+02, 1.1725e+02,  ..., 1.1812e+02,
          1.1825e+02, 1.1838e+02],
         [1.1850e+02, 1.1862e+02, 1.1875e+02,  ..., 1.1962e+02,
          1.1975e+02, 1.1988e+02]],

        [[1.2000e+02, 1.2012e+02, 1.2025e+02,  ..., 1.2112e+02,
          1.2125e+02, 1.2138e+02],
         [1.2150e+02, 1.2162e+02, 1.2175e+02,  ..., 1.2262e+02,
          1.2275e+02, 1.2288e+02],
         [1.2300e+02, 1.2312e+02, 1.2325e+02,  ..., 1.2412e+02,
          1.2425e+02, 1.2438e+02],
         ...,
         [1.3050e+02, 1.3062e+02, 1.3075e+02,  ..., 1.3162e+02,
          1.3175e+02, 1.3188e+02],
         [1.3200e+02, 1.3212e+02, 1.3225e+02,  ..., 1.3312e+02,
          1.3325e+02, 1.3338e+02],
         [1.3350e+02, 1.3362e+02, 1.3375e+02,  ..., 1.3462e+02,
          1.3475e+02, 1.3488e+02]],

        [[1.3500e+02, 1.3512e+02, 1.3525e+02,  ..., 1.3612e+02,
          1.3625e+02, 1.3638e+02],
         [1.3650e+02, 1.3662e+02, 1.3675e+02,  ..., 1.3762e+02,
          1.3775e+02, 1.3788e+02],
         [1.3800e+02, 1.3812e+02, 1.3825e+02,  ..., 1.3912e+02,
          1.3925e+02, 1.3938e+02],
         ...,
         [1.4550e+02, 1.4562e+02, 1.4575e+02,  ..., 1.4662e+02,
          1.4675e+02, 1.4688e+02],
         [1.4700e+02, 1.4712e+02, 1.4725e+02,  ..., 1.4812e+02,
          1.4825e+02, 1.4838e+02],
         [1.4850e+02, 1.4862e+02, 1.4875e+02,  ..., 1.4962e+02,
          1.4975e+02, 1.4988e+02]]]))");
}

TEST(Print, LongRowsWrapAt80Characters) {
  // torch.arange(20.) / 4 - 2
  EXPECT_EQ(str(tiny::arange(0.0, 20.0) / 4.0 - 2.0),
            R"(tensor([-2.0000, -1.7500, -1.5000, -1.2500, -1.0000, -0.7500, -0.5000, -0.2500,
         0.0000,  0.2500,  0.5000,  0.7500,  1.0000,  1.2500,  1.5000,  1.7500,
         2.0000,  2.2500,  2.5000,  2.7500]))");
  // torch.arange(30)
  EXPECT_EQ(str(tiny::arange(30)),
            R"(tensor([ 0,  1,  2,  3,  4,  5,  6,  7,  8,  9, 10, 11, 12, 13, 14, 15, 16, 17,
        18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29]))");
}

TEST(Print, NonContiguousPrintsLogicalOrder) {
  // torch.arange(6.).reshape(2, 3).t()
  EXPECT_EQ(str(tiny::arange(0.0, 6.0).reshape({2, 3}).t()),
            R"(tensor([[0., 3.],
        [1., 4.],
        [2., 5.]]))");
}

TEST(Print, Float64DtypeSuffix) {
  // torch.tensor([1.5, 2.0], dtype=torch.float64)
  EXPECT_EQ(str(tiny::tensor({1.5, 2.0}, tiny::kFloat64)),
            R"(tensor([1.5000, 2.0000], dtype=tiny.float64))");
  // torch.tensor([[1.0, 2.0]], dtype=torch.float64)
  EXPECT_EQ(str(tiny::tensor({1.0, 2.0}, {1, 2}, tiny::kFloat64)),
            R"(tensor([[1., 2.]], dtype=tiny.float64))");
}

TEST(Print, NanAndInf) {
  // torch.tensor([nan, inf, -inf, 1.5])
  EXPECT_EQ(str(tiny::tensor({NAN, INFINITY, -INFINITY, 1.5})),
            R"(tensor([   nan,    inf,   -inf, 1.5000]))");
  // torch.tensor([nan, 1.0, -inf])
  EXPECT_EQ(str(tiny::tensor({NAN, 1.0, -INFINITY})),
            R"(tensor([nan, 1., -inf]))");
  // torch.tensor([nan, inf])
  EXPECT_EQ(str(tiny::tensor({NAN, INFINITY})),
            R"(tensor([nan, inf]))");
  // torch.tensor([nan, 0.0])
  EXPECT_EQ(str(tiny::tensor({NAN, 0.0})),
            R"(tensor([nan, 0.]))");
  // torch.tensor([-0.5, -inf, 1e-5])
  EXPECT_EQ(str(tiny::tensor({-0.5, -INFINITY, 1e-5})),
            R"(tensor([-5.0000e-01,        -inf,  1.0000e-05]))");
}

TEST(Print, RequiresGradSuffix) {
  // torch.tensor([1.0, -2.0, 3.0], requires_grad=True)
  EXPECT_EQ(str(tiny::tensor({1.0, -2.0, 3.0}, tiny::TensorOptions().requires_grad(true))),
            R"(tensor([ 1., -2.,  3.], requires_grad=True))");
  // torch.tensor([[1.0, -2.0], [3.0, 4.5]], requires_grad=True)
  EXPECT_EQ(str(tiny::tensor({1.0, -2.0, 3.0, 4.5}, {2, 2}, tiny::TensorOptions().requires_grad(true))),
            R"(tensor([[ 1.0000, -2.0000],
        [ 3.0000,  4.5000]], requires_grad=True))");
  // torch.tensor(2.5, requires_grad=True)
  EXPECT_EQ(str(tiny::scalar_tensor(2.5, tiny::TensorOptions().requires_grad(true))),
            R"(tensor(2.5000, requires_grad=True))");
  // torch.empty(0, 3, requires_grad=True)
  EXPECT_EQ(str(tiny::zeros({0, 3}, tiny::TensorOptions().requires_grad(true))),
            R"(tensor([], size=(0, 3), requires_grad=True))");
  // torch.tensor([1.5, 2.0], dtype=torch.float64, requires_grad=True)
  EXPECT_EQ(str(tiny::tensor({1.5, 2.0}, tiny::TensorOptions(tiny::kFloat64).requires_grad(true))),
            R"(tensor([1.5000, 2.0000], dtype=tiny.float64, requires_grad=True))");
}

TEST(Print, SuffixesWrapAt80Characters) {
  // (torch.arange(9.) / torch.full((9,), 3.)).reshape(1, 9).requires_grad_()
  EXPECT_EQ(str((tiny::arange(0.0, 9.0) / tiny::full({9}, 3.0)).reshape({1, 9}).requires_grad_(true)),
            R"(tensor([[0.0000, 0.3333, 0.6667, 1.0000, 1.3333, 1.6667, 2.0000, 2.3333, 2.6667]],
       requires_grad=True))");
  // (torch.arange(11.) / torch.full((11,), 3.) * 1000).reshape(1, 11).double().requires_grad_()
  EXPECT_EQ(str((tiny::arange(0.0, 11.0) / tiny::full({11}, 3.0) * 1000.0).reshape({1, 11}).to(tiny::kFloat64).requires_grad_(true)),
            R"(tensor([[   0.0000,  333.3333,  666.6667, 1000.0000, 1333.3334, 1666.6666,
         2000.0000, 2333.3333, 2666.6667, 3000.0000, 3333.3333]],
       dtype=tiny.float64, requires_grad=True))");
}

TEST(Print, GradFnSuffix) {
  // torch.tensor([1.0, -2.0, 3.0], requires_grad=True) + torch.tensor([1.0, 1.0, 1.0])
  EXPECT_EQ(str(tiny::tensor({1.0, -2.0, 3.0}, tiny::TensorOptions().requires_grad(true)) + tiny::tensor({1.0, 1.0, 1.0})),
            R"(tensor([ 2., -1.,  4.], grad_fn=<AddBackward0>))");
  // torch.tensor([1.0, -2.0, 3.0], requires_grad=True) * torch.tensor([1.0, -2.0, 3.0])
  EXPECT_EQ(str(tiny::tensor({1.0, -2.0, 3.0}, tiny::TensorOptions().requires_grad(true)) * tiny::tensor({1.0, -2.0, 3.0})),
            R"(tensor([1., 4., 9.], grad_fn=<MulBackward0>))");
  // torch.tensor([1.0, -2.0, 3.0], requires_grad=True).sum(0)
  EXPECT_EQ(str(tiny::tensor({1.0, -2.0, 3.0}, tiny::TensorOptions().requires_grad(true)).sum({0})),
            R"(tensor(2., grad_fn=<SumBackward1>))");
  // torch.tensor([1.0, -2.0, 3.0], requires_grad=True).mean(0)
  EXPECT_EQ(str(tiny::tensor({1.0, -2.0, 3.0}, tiny::TensorOptions().requires_grad(true)).mean({0})),
            R"(tensor(0.6667, grad_fn=<MeanBackward1>))");
  // torch.exp(torch.tensor([0.0, 1.0], requires_grad=True))
  EXPECT_EQ(str(tiny::exp(tiny::tensor({0.0, 1.0}, tiny::TensorOptions().requires_grad(true)))),
            R"(tensor([1.0000, 2.7183], grad_fn=<ExpBackward0>))");
  // 1.0 - torch.tensor([1.0, -2.0, 3.0], requires_grad=True)
  EXPECT_EQ(str(1.0 - tiny::tensor({1.0, -2.0, 3.0}, tiny::TensorOptions().requires_grad(true))),
            R"(tensor([ 0.,  3., -2.], grad_fn=<RsubBackward1>))");
  // torch.tensor([1.5, 2.0], dtype=torch.float64, requires_grad=True) * torch.tensor([2.0, 2.0], dtype=torch.float64)
  EXPECT_EQ(str(tiny::tensor({1.5, 2.0}, tiny::TensorOptions(tiny::kFloat64).requires_grad(true)) * tiny::tensor({2.0, 2.0}, tiny::kFloat64)),
            R"(tensor([3., 4.], dtype=tiny.float64, grad_fn=<MulBackward0>))");
}

// grad_fn names are autograd's (Node::name(), "the name PyTorch would print"), checked here because the
// printed suffix is where users see them. PyTorch wraps Python scalars into tensors, so `x + 1` is
// add.Tensor (AddBackward0, not the add.Scalar overload's AddBackward1), and `x.sum()` / `x.mean()` without
// dims are SumBackward0 / MeanBackward0 (the dim overloads are ...Backward1, as GradFnSuffix checks).
TEST(Print, GradFnNamesOfScalarOpsAndFullReductions) {
  // torch.tensor([1.0, -2.0, 3.0], requires_grad=True) + 1
  EXPECT_EQ(str(tiny::tensor({1.0, -2.0, 3.0}, tiny::TensorOptions().requires_grad(true)) + 1.0),
            R"(tensor([ 2., -1.,  4.], grad_fn=<AddBackward0>))");
  // torch.tensor([1.0, -2.0, 3.0], requires_grad=True) * 2
  EXPECT_EQ(str(tiny::tensor({1.0, -2.0, 3.0}, tiny::TensorOptions().requires_grad(true)) * 2.0),
            R"(tensor([ 2., -4.,  6.], grad_fn=<MulBackward0>))");
  // torch.tensor([1.0, -2.0, 3.0], requires_grad=True) / 2
  EXPECT_EQ(str(tiny::tensor({1.0, -2.0, 3.0}, tiny::TensorOptions().requires_grad(true)) / 2.0),
            R"(tensor([ 0.5000, -1.0000,  1.5000], grad_fn=<DivBackward0>))");
  // torch.tensor([1.0, -2.0, 3.0], requires_grad=True).sum()
  EXPECT_EQ(str(tiny::tensor({1.0, -2.0, 3.0}, tiny::TensorOptions().requires_grad(true)).sum()),
            R"(tensor(2., grad_fn=<SumBackward0>))");
  // torch.tensor([1.0, -2.0, 3.0], requires_grad=True).mean()
  EXPECT_EQ(str(tiny::tensor({1.0, -2.0, 3.0}, tiny::TensorOptions().requires_grad(true)).mean()),
            R"(tensor(0.6667, grad_fn=<MeanBackward0>))");
}

TEST(Print, SummarisesOnlyAboveThreshold) {
  // PyTorch summarises when numel > 1000 (PRINT_OPTS.threshold): exactly 1000 elements print in full.
  const std::string full = str(tiny::arange(1000));
  EXPECT_EQ(full.find("..."), std::string::npos);
  EXPECT_NE(full.find(" 500, "), std::string::npos);
  // torch.arange(1000) starts and ends like this, with 14 elements per line: floor((80 - 8) / (3 + 2)).
  EXPECT_EQ(full.substr(0, 23), "tensor([  0,   1,   2, ");
  EXPECT_EQ(full.substr(full.size() - 20), "996, 997, 998, 999])");
  EXPECT_EQ(std::count(full.begin(), full.end(), '\n'), 71);  // ceil(1000 / 14) = 72 lines
  // torch.arange(1001)
  EXPECT_EQ(str(tiny::arange(1001)), "tensor([   0,    1,    2,  ...,  998,  999, 1000])");
}

TEST(Print, UndefinedTensor) { EXPECT_EQ(str(tiny::Tensor()), "[ Tensor (undefined) ]"); }

TEST(Print, PrintingDoesNotChangeTheTensor) {
  tiny::Tensor x = tiny::tensor({1.0, 2.0}, tiny::TensorOptions().requires_grad(true));
  const tiny::Tensor y = x * 3.0;
  (void)str(y);
  EXPECT_TRUE(y.requires_grad());
  EXPECT_TRUE(y.grad_fn() != nullptr);
  EXPECT_EQ(y.to_vector<float>(), (std::vector<float>{3.0f, 6.0f}));
}

}  // namespace
