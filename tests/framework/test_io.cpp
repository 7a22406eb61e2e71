// Tests of tiny::io::save_npy / load_npy, the Tensor layer over io/npy_format:
// round trips of every dtype and layout, files written by numpy
// (tests/framework/data/npy/, see make_npy_files.py there: element i is i,
// bool element i is i % 2 == 0), and the errors a user sees.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>
#include <string>
#include <vector>

#include "test_util.h"
#include "tiny/error.h"
#include "tiny/io.h"
#include "tiny/ops.h"
#include "tiny/tensor.h"

#ifndef TINY_TEST_DATA_DIR
#define TINY_TEST_DATA_DIR "tests/framework/data"
#endif

namespace fs = std::filesystem;
using tiny::Tensor;
using tiny::io::load_npy;
using tiny::io::save_npy;

namespace {

std::string numpy_file(const std::string& name) { return std::string(TINY_TEST_DATA_DIR) + "/npy/" + name; }

using tiny_test::slurp;

// A fresh directory per test, removed afterwards.
class Io : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = fs::temp_directory_path() /
           ("tiny_test_io_" + std::to_string(::getpid()) + "_" + info->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  std::string path(const std::string& name) const { return (dir_ / name).string(); }

  // Saves and loads back; checks the loaded tensor is a plain CPU tensor of the same dtype and shape.
  Tensor round_trip(const Tensor& t, const std::string& name = "t.npy") {
    save_npy(path(name), t);
    Tensor back = load_npy(path(name));
    EXPECT_EQ(back.dtype(), t.dtype());
    EXPECT_EQ(back.sizes(), t.sizes());
    EXPECT_TRUE(back.is_cpu());
    EXPECT_TRUE(back.is_contiguous());
    EXPECT_FALSE(back.requires_grad());
    return back;
  }

  fs::path dir_;
};

// Bitwise comparison, so NaN, -0.0 and infinities count too.
template <typename T>
void expect_bits_equal(const std::vector<T>& a, const std::vector<T>& b) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(std::memcmp(&a[i], &b[i], sizeof(T)), 0) << "element " << i << ": " << a[i] << " vs " << b[i];
  }
}

// ---- round trips ------------------------------------------------------------

TEST_F(Io, RoundTripFloat32KeepsEveryBit) {
  const float inf = std::numeric_limits<float>::infinity();
  const std::vector<float> v{1.5f, -2.25f, 0.0f, -0.0f, 1e-45f, 3.4e38f, inf, -inf, std::nanf(""), 0.1f, -7.0f, 42.0f};
  const Tensor t = tiny::from_vector(v, {3, 4});
  const Tensor back = round_trip(t);
  expect_bits_equal(back.to_vector<float>(), v);
}

TEST_F(Io, RoundTripFloat64KeepsEveryBit) {
  const std::vector<double> v{0.1, -1e300, 5e-324, -0.0, std::numeric_limits<double>::infinity(), std::nan("")};
  const Tensor back = round_trip(tiny::from_vector(v, {2, 1, 3}));
  expect_bits_equal(back.to_vector<double>(), v);
}

TEST_F(Io, RoundTripInt64IncludingExtremes) {
  const std::vector<int64_t> v{0, -1, 1, std::numeric_limits<int64_t>::min(), std::numeric_limits<int64_t>::max(),
                               -100};
  const Tensor back = round_trip(tiny::from_vector(v, {6}));
  EXPECT_EQ(back.to_vector<int64_t>(), v);
}

TEST_F(Io, RoundTripBool) {
  const std::vector<bool> v{true, false, false, true, true, false};
  const Tensor back = round_trip(tiny::from_vector(v, {3, 2}));
  EXPECT_EQ(back.to_vector<bool>(), v);
}

TEST_F(Io, RoundTripZeroDimensional) {
  const Tensor f = round_trip(tiny::scalar_tensor(2.5), "f.npy");
  EXPECT_EQ(f.dim(), 0);
  EXPECT_EQ(f.item<float>(), 2.5f);
  const Tensor d = round_trip(tiny::scalar_tensor(-0.125, tiny::kFloat64), "d.npy");
  EXPECT_EQ(d.dim(), 0);
  EXPECT_EQ(d.item<double>(), -0.125);
  const Tensor i = round_trip(tiny::scalar_tensor(int64_t{-7}, tiny::kInt64), "i.npy");
  EXPECT_EQ(i.dim(), 0);
  EXPECT_EQ(i.item<int64_t>(), -7);
  const Tensor b = round_trip(tiny::scalar_tensor(true, tiny::kBool), "b.npy");
  EXPECT_EQ(b.dim(), 0);
  EXPECT_TRUE(b.item<bool>());
}

TEST_F(Io, RoundTripEmptyTensors) {
  for (const auto& shape : std::vector<tiny::IntArrayRef>{{0}, {0, 3}, {2, 0, 4}}) {
    for (tiny::Dtype dtype : {tiny::kFloat32, tiny::kFloat64, tiny::kInt64, tiny::kBool}) {
      SCOPED_TRACE(tiny::shape_str(shape) + " " + tiny::dtype_name(dtype));
      const Tensor back = round_trip(tiny::empty(shape, dtype));
      EXPECT_EQ(back.numel(), 0);
    }
  }
}

TEST_F(Io, RoundTripTransposedWritesLogicalOrder) {
  // [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9, 10, 11]] transposed: a [4, 3] view with strides [1, 4].
  const Tensor base = tiny::arange(0.0, 12.0).reshape({3, 4});
  const Tensor t = base.t();
  ASSERT_FALSE(t.is_contiguous());
  const Tensor back = round_trip(t);
  EXPECT_EQ(back.to_vector<float>(), (std::vector<float>{0, 4, 8, 1, 5, 9, 2, 6, 10, 3, 7, 11}));
  // Same for int64 and float64.
  const Tensor back_i = round_trip(tiny::arange(6).reshape({2, 3}).t(), "i.npy");
  EXPECT_EQ(back_i.to_vector<int64_t>(), (std::vector<int64_t>{0, 3, 1, 4, 2, 5}));
  const Tensor back_d = round_trip(tiny::arange(6).reshape({2, 3}).to(tiny::kFloat64).t(), "d.npy");
  EXPECT_EQ(back_d.to_vector<double>(), (std::vector<double>{0, 3, 1, 4, 2, 5}));
}

TEST_F(Io, RoundTripOtherViews) {
  const Tensor base = tiny::arange(0.0, 24.0).reshape({2, 3, 4});
  // A strided slice with a storage offset: base[:, 1:, ::2].
  const Tensor sliced = base.slice(1, 1, 3).slice(2, 0, 4, 2);
  EXPECT_EQ(round_trip(sliced, "s.npy").to_vector<float>(),
            (std::vector<float>{4, 6, 8, 10, 16, 18, 20, 22}));
  // A broadcast view (stride 0) is written out in full.
  const Tensor expanded = tiny::tensor({1.0, 2.0}).unsqueeze(0).expand({3, 2});
  EXPECT_EQ(round_trip(expanded, "e.npy").to_vector<float>(), (std::vector<float>{1, 2, 1, 2, 1, 2}));
  // A permutation of a 3-D tensor.
  const Tensor permuted = base.permute({2, 0, 1});
  EXPECT_EQ(round_trip(permuted, "p.npy").to_vector<float>(), permuted.to_vector<float>());
}

TEST_F(Io, SavesATensorThatRequiresGrad) {
  Tensor w = tiny::tensor({1.0, -2.0, 3.0});
  w.requires_grad_(true);
  const Tensor y = w * 2.0;  // a non-leaf with a grad_fn
  const Tensor back = round_trip(y);
  EXPECT_EQ(back.to_vector<float>(), (std::vector<float>{2, -4, 6}));
}

TEST_F(Io, OverwritesAnExistingFile) {
  save_npy(path("t.npy"), tiny::arange(100));
  save_npy(path("t.npy"), tiny::tensor({9.0}));
  const Tensor back = load_npy(path("t.npy"));
  EXPECT_EQ(back.dtype(), tiny::kFloat32);
  EXPECT_EQ(back.to_vector<float>(), std::vector<float>{9.0f});
}

TEST_F(Io, SaveWritesTheSameBytesAsNumpy) {
  // The files numpy wrote for arange(6).reshape(2, 3): save_npy must produce them byte for byte.
  struct Case {
    const char* file;
    Tensor tensor;
  };
  const Tensor ints = tiny::arange(6).reshape({2, 3});
  const std::vector<Case> cases = {
      {"dtype_f4.npy", ints.to(tiny::kFloat32)},
      {"dtype_f8.npy", ints.to(tiny::kFloat64)},
      {"dtype_i8.npy", ints},
      {"dtype_b1.npy", tiny::from_vector(std::vector<bool>{true, false, true, false, true, false}, {2, 3})},
      {"scalar_f8.npy", tiny::scalar_tensor(3.25, tiny::kFloat64)},
      {"empty_f4.npy", tiny::empty({0, 3})},
      {"vector_i8.npy", tiny::arange(5)},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.file);
    save_npy(path(c.file), c.tensor);
    EXPECT_EQ(slurp(path(c.file)), slurp(numpy_file(c.file)));
  }
}

// ---- files written by numpy -------------------------------------------------

TEST_F(Io, LoadsNumpyFilesOfTheNativeDtypes) {
  const Tensor f4 = load_npy(numpy_file("dtype_f4.npy"));
  EXPECT_EQ(f4.dtype(), tiny::kFloat32);
  EXPECT_EQ(f4.sizes(), (tiny::IntArrayRef{2, 3}));
  EXPECT_EQ(f4.to_vector<float>(), (std::vector<float>{0, 1, 2, 3, 4, 5}));
  const Tensor f8 = load_npy(numpy_file("dtype_f8.npy"));
  EXPECT_EQ(f8.dtype(), tiny::kFloat64);
  EXPECT_EQ(f8.to_vector<double>(), (std::vector<double>{0, 1, 2, 3, 4, 5}));
  const Tensor i8 = load_npy(numpy_file("dtype_i8.npy"));
  EXPECT_EQ(i8.dtype(), tiny::kInt64);
  EXPECT_EQ(i8.to_vector<int64_t>(), (std::vector<int64_t>{0, 1, 2, 3, 4, 5}));
  const Tensor b1 = load_npy(numpy_file("dtype_b1.npy"));
  EXPECT_EQ(b1.dtype(), tiny::kBool);
  EXPECT_EQ(b1.sizes(), (tiny::IntArrayRef{2, 3}));
  EXPECT_EQ(b1.to_vector<bool>(), (std::vector<bool>{true, false, true, false, true, false}));
}

TEST_F(Io, LoadsNumpyScalarEmptyAndVector) {
  const Tensor s = load_npy(numpy_file("scalar_f8.npy"));
  EXPECT_EQ(s.dim(), 0);
  EXPECT_EQ(s.dtype(), tiny::kFloat64);
  EXPECT_EQ(s.item<double>(), 3.25);
  const Tensor e = load_npy(numpy_file("empty_f4.npy"));
  EXPECT_EQ(e.sizes(), (tiny::IntArrayRef{0, 3}));
  EXPECT_EQ(e.dtype(), tiny::kFloat32);
  const Tensor v = load_npy(numpy_file("vector_i8.npy"));
  EXPECT_EQ(v.sizes(), (tiny::IntArrayRef{5}));
  EXPECT_EQ(v.to_vector<int64_t>(), (std::vector<int64_t>{0, 1, 2, 3, 4}));
}

TEST_F(Io, Int8AndInt16WidenToInt64WhileInt32AndUInt8KeepTheirDtype) {
  const std::vector<std::pair<const char*, tiny::Dtype>> files = {
      {"dtype_i1.npy", tiny::kInt64}, {"dtype_i2.npy", tiny::kInt64},
      {"dtype_i4.npy", tiny::kInt32}, {"dtype_u1.npy", tiny::kUInt8}};
  for (const auto& [file, dtype] : files) {
    SCOPED_TRACE(file);
    const Tensor t = load_npy(numpy_file(file));
    EXPECT_EQ(t.dtype(), dtype);
    EXPECT_EQ(t.sizes(), (tiny::IntArrayRef{2, 3}));
    EXPECT_EQ(t.to_vector<int64_t>(), (std::vector<int64_t>{0, 1, 2, 3, 4, 5}));
  }
  // A version 2.0 file of int32, shape (3, 2).
  const Tensor v2 = load_npy(numpy_file("v2_i4.npy"));
  EXPECT_EQ(v2.dtype(), tiny::kInt32);
  EXPECT_EQ(v2.sizes(), (tiny::IntArrayRef{3, 2}));
  EXPECT_EQ(v2.to_vector<int64_t>(), (std::vector<int64_t>{0, 1, 2, 3, 4, 5}));
}

TEST_F(Io, Int32AndUInt8KeepSignAndRange) {
  // Extreme values: numpy's header of dtype_i4.npy / dtype_u1.npy followed by our own data bytes.
  std::vector<char> bytes = slurp(numpy_file("dtype_i4.npy"));
  ASSERT_EQ(bytes.size() % 64, 24u);  // header padded to 64 bytes, then 6 * 4 data bytes
  const size_t header = bytes.size() - 24;
  const int32_t values[6] = {std::numeric_limits<int32_t>::min(), -1, 0, 1, 1 << 30,
                             std::numeric_limits<int32_t>::max()};
  std::memcpy(bytes.data() + header, values, sizeof(values));
  {
    std::ofstream out(path("i4.npy"), std::ios::binary);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  }
  EXPECT_EQ(load_npy(path("i4.npy")).to_vector<int32_t>(),
            (std::vector<int32_t>{std::numeric_limits<int32_t>::min(), -1, 0, 1, 1 << 30,
                                  std::numeric_limits<int32_t>::max()}));
  EXPECT_EQ(load_npy(path("i4.npy")).to_vector<int64_t>(),
            (std::vector<int64_t>{std::numeric_limits<int32_t>::min(), -1, 0, 1, 1 << 30,
                                  std::numeric_limits<int32_t>::max()}));

  bytes = slurp(numpy_file("dtype_u1.npy"));
  ASSERT_EQ(bytes.size() % 64, 6u);
  const unsigned char u[6] = {0, 1, 127, 128, 200, 255};  // no sign extension of 128..255
  std::memcpy(bytes.data() + bytes.size() - 6, u, sizeof(u));
  {
    std::ofstream out(path("u1.npy"), std::ios::binary);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  }
  EXPECT_EQ(load_npy(path("u1.npy")).dtype(), tiny::kUInt8);
  EXPECT_EQ(load_npy(path("u1.npy")).to_vector<int64_t>(), (std::vector<int64_t>{0, 1, 127, 128, 200, 255}));
}

TEST_F(Io, BoolBytesOtherThanZeroAndOneLoadAsTrue) {
  // numpy writes 0/1, but a hostile or hand-made file may hold other bytes: they must become valid bools.
  std::vector<char> bytes = slurp(numpy_file("dtype_b1.npy"));
  ASSERT_EQ(bytes.size() % 64, 6u);
  const char data[6] = {0, 2, 0, 127, static_cast<char>(0xff), 1};
  std::memcpy(bytes.data() + bytes.size() - 6, data, sizeof(data));
  {
    std::ofstream out(path("b1.npy"), std::ios::binary);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  }
  const Tensor t = load_npy(path("b1.npy"));
  EXPECT_EQ(t.to_vector<bool>(), (std::vector<bool>{false, true, false, true, true, true}));
  const bool* raw = t.data_ptr<bool>();
  for (int i = 0; i < 6; ++i) {
    unsigned char byte;
    std::memcpy(&byte, raw + i, 1);
    EXPECT_LE(byte, 1) << "element " << i << " holds byte " << int(byte);
  }
  EXPECT_EQ(t.to(tiny::kInt64).sum().item<int64_t>(), 4);
}

TEST_F(Io, FortranOrderFileLoadsInLogicalOrder) {
  // np.asfortranarray(np.arange(6).reshape(2, 3)): the file holds 0 3 1 4 2 5 (column-major).
  const Tensor t = load_npy(numpy_file("fortran_f4.npy"));
  EXPECT_EQ(t.dtype(), tiny::kFloat32);
  EXPECT_EQ(t.sizes(), (tiny::IntArrayRef{2, 3}));
  EXPECT_TRUE(t.is_contiguous());
  EXPECT_EQ(t.to_vector<float>(), (std::vector<float>{0, 1, 2, 3, 4, 5}));
  EXPECT_EQ(t[1][0].item<float>(), 3.0f);
  EXPECT_EQ(t[0][2].item<float>(), 2.0f);
}

TEST_F(Io, FortranOrderOtherShapes) {
  // fortran_f4.npy's data bytes are 0 3 1 4 2 5. Rewrite its header's shape: in Fortran order element
  // [i, j] of shape (3, 2) sits at byte i + 3j, and [i, 0, k] of shape (3, 1, 2) at i + 3k, so both
  // read, in C order, 0 4 3 2 1 5 (a loader ignoring the flag would give 0 3 1 4 2 5).
  const std::vector<char> bytes = slurp(numpy_file("fortran_f4.npy"));
  const std::string text(bytes.begin(), bytes.end());
  const size_t pos = text.find("(2, 3)");
  ASSERT_NE(pos, std::string::npos);
  const std::vector<float> expected{0, 4, 3, 2, 1, 5};

  std::string two_d = text;
  two_d.replace(pos, 6, "(3, 2)");
  std::ofstream(path("f2.npy"), std::ios::binary) << two_d;
  const Tensor t2 = load_npy(path("f2.npy"));
  EXPECT_EQ(t2.sizes(), (tiny::IntArrayRef{3, 2}));
  EXPECT_EQ(t2.to_vector<float>(), expected);

  std::string three_d = text;
  three_d.replace(pos, 6, "(3,1,2)");  // one character longer: take one padding space out
  const size_t nl = three_d.find('\n');
  ASSERT_NE(nl, std::string::npos);
  ASSERT_EQ(three_d[nl - 1], ' ');
  three_d.erase(nl - 1, 1);
  std::ofstream(path("f3.npy"), std::ios::binary) << three_d;
  const Tensor t3 = load_npy(path("f3.npy"));
  EXPECT_EQ(t3.sizes(), (tiny::IntArrayRef{3, 1, 2}));
  EXPECT_EQ(t3.to_vector<float>(), expected);
}

// ---- errors -----------------------------------------------------------------

TEST_F(Io, MissingFileNamesThePath) {
  const std::string missing = path("no_such_file.npy");
  try {
    load_npy(missing);
    FAIL() << "load_npy of a missing file did not throw";
  } catch (const tiny::IOError& e) {
    EXPECT_NE(std::string(e.what()).find(missing), std::string::npos) << e.what();
  }
}

TEST_F(Io, UnsupportedDtypesSayWhatIsSupported) {
  // float16 ('<f2') and uint16 ('<u2', read as bfloat16 bits) load: see test_half.cpp.
  for (const char* file : {"dtype_u4.npy", "dtype_u8.npy"}) {
    SCOPED_TRACE(file);
    try {
      load_npy(numpy_file(file));
      ADD_FAILURE() << "loading " << file << " did not throw";
    } catch (const tiny::IOError& e) {
      const std::string msg = e.what();
      EXPECT_NE(msg.find(file), std::string::npos) << "message does not name the file: " << msg;
      EXPECT_NE(msg.find("supported"), std::string::npos) << msg;
      EXPECT_NE(msg.find("float32"), std::string::npos) << msg;
      EXPECT_NE(msg.find("float64"), std::string::npos) << msg;
      EXPECT_NE(msg.find("bool"), std::string::npos) << msg;
      EXPECT_NE(msg.find("uint8"), std::string::npos) << msg;
    }
  }
}

TEST_F(Io, OtherBadFilesThrowIOError) {
  for (const char* file : {"big_endian_f4.npy", "complex_c8.npy", "structured.npy"}) {
    SCOPED_TRACE(file);
    EXPECT_THROW(load_npy(numpy_file(file)), tiny::IOError);
  }
}

TEST_F(Io, SaveErrors) {
  EXPECT_THROW(save_npy(path("u.npy"), Tensor()), tiny::ValueError);
  const std::string bad = path("missing_dir/t.npy");
  try {
    save_npy(bad, tiny::tensor({1.0}));
    FAIL() << "save_npy into a missing directory did not throw";
  } catch (const tiny::IOError& e) {
    EXPECT_NE(std::string(e.what()).find("missing_dir"), std::string::npos) << e.what();
  }
}

}  // namespace
