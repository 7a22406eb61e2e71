// Views: shapes, strides and storage offsets, sharing storage with the base,
// and the copies (reshape of a non-viewable tensor, contiguous, clone).

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "tiny/tiny.h"

namespace {

using tiny::IntArrayRef;
using tiny::Tensor;

// [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9, 10, 11]] as float32.
Tensor grid3x4() { return tiny::arange(12, tiny::kFloat32).view({3, 4}); }

std::vector<float> values(const Tensor& t) { return t.to_vector<float>(); }

// The start of the storage: element 0's address moved back by the storage offset.
const char* storage_base(const Tensor& t) {
  return static_cast<const char*>(t.raw_data_ptr()) - t.storage_offset() * static_cast<int64_t>(t.element_size());
}

bool shares_storage(const Tensor& a, const Tensor& b) { return storage_base(a) == storage_base(b); }

TEST(Views, ViewInfersMinusOneAndSharesStorage) {
  const Tensor x = tiny::arange(24, tiny::kFloat32);
  const Tensor v = x.view({2, -1, 4});
  EXPECT_EQ(v.sizes(), (IntArrayRef{2, 3, 4}));
  EXPECT_EQ(v.strides(), (IntArrayRef{12, 4, 1}));
  EXPECT_TRUE(shares_storage(x, v));
  v.select(1, 2).fill_(-1);  // v[:, 2, :] = -1
  const std::vector<float> got = values(x);
  for (int64_t i = 0; i < 24; ++i) {
    const bool written = (i % 12) / 4 == 2;
    EXPECT_EQ(got[static_cast<size_t>(i)], written ? -1.0f : static_cast<float>(i)) << "element " << i;
  }
  EXPECT_EQ(x.view({-1}).sizes(), (IntArrayRef{24}));
  EXPECT_EQ(tiny::scalar_tensor(1.0).view({1, 1}).sizes(), (IntArrayRef{1, 1}));
  EXPECT_EQ(tiny::zeros({1, 1}).view({}).dim(), 0);
}

TEST(Views, ViewOfTransposedTensorFailsAndReshapeCopies) {
  const Tensor x = grid3x4();
  const Tensor xt = x.t();
  EXPECT_FALSE(xt.is_contiguous());
  try {
    (void)xt.view({12});
    FAIL() << "view of a transposed tensor must fail";
  } catch (const tiny::ShapeError& e) {
    EXPECT_NE(std::string(e.what()).find("view size is not compatible with input tensor's size and stride (at least "
                                         "one dimension spans across two contiguous subspaces). Use .reshape(...) "
                                         "instead."),
              std::string::npos)
        << e.what();
  }
  const Tensor r = xt.reshape({12});
  EXPECT_TRUE(r.is_contiguous());
  EXPECT_FALSE(shares_storage(r, x));
  // Row-major order of x.t(): column by column of x.
  std::vector<float> expected;
  for (int c = 0; c < 4; ++c) {
    for (int row = 0; row < 3; ++row) expected.push_back(static_cast<float>(row * 4 + c));
  }
  EXPECT_EQ(values(r), expected);
  x.fill_(0);  // the copy keeps its values
  EXPECT_EQ(values(r), expected);
}

TEST(Views, ReshapeOfContiguousIsAView) {
  const Tensor x = grid3x4();
  const Tensor r = x.reshape({2, -1});
  EXPECT_EQ(r.sizes(), (IntArrayRef{2, 6}));
  EXPECT_TRUE(shares_storage(r, x));
  r.fill_(3);
  for (float v : values(x)) EXPECT_EQ(v, 3.0f);
  // A view of a transposed tensor is possible when the split dims stay together.
  const Tensor y = tiny::zeros({4, 6}).t();                       // [6, 4], strides {1, 6}
  EXPECT_EQ(y.view({2, 3, 4}).strides(), (IntArrayRef{3, 1, 6}));  // splitting the stride-1 dim
}

TEST(Views, TransposeAndTSwapSizesAndStrides) {
  const Tensor x = tiny::zeros({2, 3, 4});
  const Tensor t = x.transpose(0, 2);
  EXPECT_EQ(t.sizes(), (IntArrayRef{4, 3, 2}));
  EXPECT_EQ(t.strides(), (IntArrayRef{1, 4, 12}));
  EXPECT_EQ(x.transpose(-1, -2).sizes(), (IntArrayRef{2, 4, 3}));
  const Tensor m = grid3x4().t();
  EXPECT_EQ(m.sizes(), (IntArrayRef{4, 3}));
  EXPECT_EQ(m.strides(), (IntArrayRef{1, 4}));
  // Element [i][j] of the transpose is x[j][i].
  for (int64_t i = 0; i < 4; ++i) {
    for (int64_t j = 0; j < 3; ++j) EXPECT_EQ(m[i][j].item<float>(), static_cast<float>(j * 4 + i));
  }
  const Tensor v = tiny::arange(3);
  EXPECT_EQ(v.t().sizes(), (IntArrayRef{3}));  // t() of 1-D is itself
}

TEST(Views, PermuteReordersDims) {
  const Tensor x = tiny::arange(24, tiny::kFloat32).view({2, 3, 4});
  const Tensor p = x.permute({2, 0, 1});
  EXPECT_EQ(p.sizes(), (IntArrayRef{4, 2, 3}));
  EXPECT_EQ(p.strides(), (IntArrayRef{1, 12, 4}));
  EXPECT_TRUE(shares_storage(p, x));
  for (int64_t a = 0; a < 4; ++a) {
    for (int64_t b = 0; b < 2; ++b) {
      for (int64_t c = 0; c < 3; ++c) {
        EXPECT_EQ(p[a][b][c].item<float>(), static_cast<float>(b * 12 + c * 4 + a));
      }
    }
  }
  EXPECT_EQ(x.permute({-1, 0, 1}).sizes(), (IntArrayRef{4, 2, 3}));
}

TEST(Views, NarrowTakesARangeWithOffset) {
  const Tensor x = grid3x4();
  const Tensor n = x.narrow(1, 1, 2);
  EXPECT_EQ(n.sizes(), (IntArrayRef{3, 2}));
  EXPECT_EQ(n.strides(), (IntArrayRef{4, 1}));
  EXPECT_EQ(n.storage_offset(), 1);
  EXPECT_FALSE(n.is_contiguous());
  EXPECT_EQ(values(n), (std::vector<float>{1, 2, 5, 6, 9, 10}));
  const Tensor last = x.narrow(0, -1, 1);  // negative start counts from the end
  EXPECT_EQ(last.storage_offset(), 8);
  EXPECT_EQ(values(last), (std::vector<float>{8, 9, 10, 11}));
  EXPECT_EQ(x.narrow(0, 3, 0).numel(), 0);
}

TEST(Views, SliceClampsBoundsLikePython) {
  const Tensor x = tiny::arange(10);
  auto slice = [&](int64_t start, int64_t end, int64_t step) {
    return x.slice(0, start, end, step).to_vector<int64_t>();
  };
  // Reference: Python's range semantics for x[start:end:step] on a list of 0..9.
  auto python = [](int64_t start, int64_t end, int64_t step) {
    const int64_t n = 10;
    auto fix = [n](int64_t i) { return std::min(std::max(i < 0 ? i + n : i, int64_t{0}), n); };
    std::vector<int64_t> out;
    for (int64_t i = fix(start); i < fix(end); i += step) out.push_back(i);
    return out;
  };
  const int64_t cases[][3] = {{2, 8, 1}, {2, 8, 3}, {-3, 100, 1}, {-100, 2, 1}, {8, 2, 1},
                              {0, 10, 4}, {-5, -1, 2}, {10, 20, 1}, {-20, -15, 1}, {1, 9, 20}};
  for (const auto& c : cases) {
    EXPECT_EQ(slice(c[0], c[1], c[2]), python(c[0], c[1], c[2])) << "x[" << c[0] << ":" << c[1] << ":" << c[2] << "]";
  }
  const Tensor s = x.slice(0, 1, 9, 3);
  EXPECT_EQ(s.sizes(), (IntArrayRef{3}));
  EXPECT_EQ(s.strides(), (IntArrayRef{3}));
  EXPECT_EQ(s.storage_offset(), 1);
  const Tensor g = grid3x4().slice(1, 1, 3);
  EXPECT_EQ(g.strides(), (IntArrayRef{4, 1}));
  EXPECT_EQ(g.storage_offset(), 1);
}

TEST(Views, SelectAndIndexRemoveADim) {
  const Tensor x = grid3x4();
  const Tensor row = x[1];
  EXPECT_EQ(row.sizes(), (IntArrayRef{4}));
  EXPECT_EQ(row.storage_offset(), 4);
  EXPECT_EQ(values(row), (std::vector<float>{4, 5, 6, 7}));
  const Tensor col = x.select(1, 2);
  EXPECT_EQ(col.sizes(), (IntArrayRef{3}));
  EXPECT_EQ(col.strides(), (IntArrayRef{4}));
  EXPECT_EQ(col.storage_offset(), 2);
  EXPECT_EQ(values(col), (std::vector<float>{2, 6, 10}));
  EXPECT_EQ(values(x[-1]), (std::vector<float>{8, 9, 10, 11}));
  EXPECT_EQ(values(x.select(-1, -4)), (std::vector<float>{0, 4, 8}));
  const Tensor e = x[2][3];
  EXPECT_EQ(e.dim(), 0);
  EXPECT_EQ(e.storage_offset(), 11);
  EXPECT_EQ(e.item<float>(), 11.0f);
}

TEST(Views, UnsqueezeAndSqueeze) {
  const Tensor x = tiny::zeros({3, 4});
  EXPECT_EQ(x.unsqueeze(0).sizes(), (IntArrayRef{1, 3, 4}));
  EXPECT_EQ(x.unsqueeze(1).sizes(), (IntArrayRef{3, 1, 4}));
  EXPECT_EQ(x.unsqueeze(-1).sizes(), (IntArrayRef{3, 4, 1}));
  EXPECT_EQ(x.unsqueeze(2).sizes(), (IntArrayRef{3, 4, 1}));
  EXPECT_TRUE(x.unsqueeze(1).is_contiguous());
  const Tensor y = tiny::zeros({1, 3, 1, 2});
  EXPECT_EQ(y.squeeze().sizes(), (IntArrayRef{3, 2}));
  EXPECT_EQ(y.squeeze(0).sizes(), (IntArrayRef{3, 1, 2}));
  EXPECT_EQ(y.squeeze(-2).sizes(), (IntArrayRef{1, 3, 2}));
  EXPECT_EQ(y.squeeze(1).sizes(), (IntArrayRef{1, 3, 1, 2}));  // not size 1: unchanged
  EXPECT_EQ(tiny::zeros({1, 1}).squeeze().dim(), 0);
  EXPECT_EQ(tiny::scalar_tensor(2.0).unsqueeze(0).sizes(), (IntArrayRef{1}));
}

TEST(Views, FlattenMergesARangeOfDims) {
  const Tensor x = tiny::arange(24, tiny::kFloat32).view({2, 3, 4});
  EXPECT_EQ(x.flatten().sizes(), (IntArrayRef{24}));
  EXPECT_EQ(x.flatten(1).sizes(), (IntArrayRef{2, 12}));
  EXPECT_EQ(x.flatten(0, 1).sizes(), (IntArrayRef{6, 4}));
  EXPECT_EQ(x.flatten(-2, -1).sizes(), (IntArrayRef{2, 12}));
  EXPECT_TRUE(shares_storage(x.flatten(), x));
  EXPECT_EQ(tiny::scalar_tensor(5.0).flatten().sizes(), (IntArrayRef{1}));
  // Flattening a permuted tensor copies, in the permuted order.
  const Tensor f = x.permute({2, 0, 1}).flatten();
  EXPECT_EQ(f.to_vector<float>()[1], 4.0f);  // [0][0][1] of the permuted tensor is x[0][1][0]
}

TEST(Views, ExpandUsesStrideZero) {
  const Tensor x = tiny::tensor({1.0, 2.0, 3.0}).view({3, 1});
  const Tensor e = x.expand({2, 3, 4});
  EXPECT_EQ(e.sizes(), (IntArrayRef{2, 3, 4}));
  EXPECT_EQ(e.strides(), (IntArrayRef{0, 1, 0}));
  EXPECT_TRUE(shares_storage(e, x));
  const std::vector<float> got = values(e);
  for (size_t i = 0; i < got.size(); ++i) EXPECT_EQ(got[i], static_cast<float>((i / 4) % 3 + 1));
  EXPECT_EQ(x.expand({-1, 5}).sizes(), (IntArrayRef{3, 5}));
  const Tensor other = tiny::zeros({3, 7});
  const Tensor ea = x.expand_as(other);
  EXPECT_EQ(ea.sizes(), (IntArrayRef{3, 7}));
  EXPECT_EQ(ea.strides(), (IntArrayRef{1, 0}));
  // Writing into the base shows through every expanded position.
  x.fill_(9);
  for (float v : values(ea)) EXPECT_EQ(v, 9.0f);
}

TEST(Views, ContiguousCopiesOnlyWhenNeeded) {
  const Tensor x = grid3x4();
  EXPECT_TRUE(x.contiguous().is_same(x));
  const Tensor t = x.t();
  const Tensor c = t.contiguous();
  EXPECT_TRUE(c.is_contiguous());
  EXPECT_EQ(c.strides(), (IntArrayRef{3, 1}));
  EXPECT_FALSE(shares_storage(c, x));
  EXPECT_EQ(values(c), values(t));
  const Tensor stepped = tiny::arange(10).slice(0, 0, 10, 2);
  EXPECT_FALSE(stepped.is_contiguous());
  EXPECT_EQ(stepped.contiguous().to_vector<int64_t>(), (std::vector<int64_t>{0, 2, 4, 6, 8}));
}

TEST(Views, IsContiguousIgnoresSizeOneDims) {
  // PyTorch: strides of size-1 dims do not matter.
  EXPECT_TRUE(tiny::zeros({3, 1}).t().is_contiguous());
  EXPECT_TRUE(tiny::zeros({4}).unsqueeze(0).expand({1, 4}).is_contiguous());
  EXPECT_FALSE(tiny::zeros({4}).unsqueeze(0).expand({2, 4}).is_contiguous());
  EXPECT_TRUE(grid3x4()[1].is_contiguous());
  EXPECT_FALSE(grid3x4().select(1, 0).is_contiguous());
}

TEST(Views, CloneOwnsItsMemory) {
  const Tensor x = grid3x4();
  const Tensor c = x.clone();
  EXPECT_FALSE(shares_storage(c, x));
  EXPECT_EQ(values(c), values(x));
  c.fill_(0);
  EXPECT_EQ(x[2][3].item<float>(), 11.0f);
  const Tensor ct = x.t().clone();
  EXPECT_EQ(ct.sizes(), (IntArrayRef{4, 3}));
  EXPECT_EQ(values(ct), values(x.t()));
}

TEST(Views, DetachSharesStorageWithoutGrad) {
  const Tensor x = tiny::ones({3}, tiny::TensorOptions().requires_grad(true));
  const Tensor d = x.detach();
  EXPECT_FALSE(d.requires_grad());
  EXPECT_TRUE(shares_storage(d, x));
  d.fill_(4);  // d needs no grad, so this in-place write is allowed
  for (float v : values(x)) EXPECT_EQ(v, 4.0f);
}

TEST(Views, WritesThroughViewsReachTheBase) {
  const Tensor x = tiny::zeros({3, 4});
  x.t()[1].fill_(5);  // column 1 of x
  x.slice(1, 2, 4).select(0, 2).copy_(tiny::tensor({7.0, 8.0}));
  x.narrow(0, 0, 1).copy_(tiny::tensor({1.0, 2.0, 3.0, 4.0}));  // broadcast [4] -> [1, 4]
  const std::vector<float> expected{1, 2, 3, 4,  //
                                    0, 5, 0, 0,  //
                                    0, 5, 7, 8};
  EXPECT_EQ(values(x), expected);
  // A stepped slice writes every other element only.
  const Tensor y = tiny::zeros({6}, tiny::kInt64);
  y.slice(0, 1, 6, 2).fill_(1);
  EXPECT_EQ(y.to_vector<int64_t>(), (std::vector<int64_t>{0, 1, 0, 1, 0, 1}));
  // The version counter is shared by the views.
  const uint32_t before = y.version();
  y[0].fill_(3);
  EXPECT_GT(y.version(), before);
}

TEST(Views, ViewsOfViewsComposeOffsets) {
  const Tensor x = tiny::arange(60, tiny::kFloat32).view({3, 4, 5});
  const Tensor v = x[1].slice(1, 1, 5, 2).t();  // [2, 4] from x[1, :, 1::2]
  EXPECT_EQ(v.sizes(), (IntArrayRef{2, 4}));
  EXPECT_EQ(v.strides(), (IntArrayRef{2, 5}));
  EXPECT_EQ(v.storage_offset(), 21);
  for (int64_t i = 0; i < 2; ++i) {
    for (int64_t j = 0; j < 4; ++j) EXPECT_EQ(v[i][j].item<float>(), static_cast<float>(20 + j * 5 + 1 + 2 * i));
  }
}

}  // namespace
