// The int32 and uint8 dtypes (issue 23, item 5): PyTorch 1.13's promotion
// table, wrapping uint8 arithmetic, true division to float, sums in int64,
// conversions, integer matrix products and int32 indices, checked against
// tests/parity/int_fixtures (written by make_int_fixtures.py) on the CPU and
// the emulated GPU, contiguous and not. Integer results must match exactly,
// in value and in dtype; float results to 1e-6.
#include <gtest/gtest.h>

#include <filesystem>
#include <functional>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "test_util.h"
#include "tiny/cuda.h"
#include "tiny/io.h"
#include "tiny/nn/functional.h"
#include "tiny/ops.h"

#ifndef TINY_PARITY_DIR
#define TINY_PARITY_DIR "tests/parity/fixtures"
#endif

namespace fs = std::filesystem;
namespace F = tiny::nn::functional;
using tiny::Tensor;
using Inputs = std::map<std::string, Tensor>;

namespace {

const std::string kDir = std::string(TINY_PARITY_DIR) + "/../int_fixtures";

// tiny's dtype codes in order, as CODES in make_int_fixtures.py.
const std::vector<tiny::Dtype> kCodes = {tiny::kBool,    tiny::kInt64,    tiny::kFloat32, tiny::kFloat64,
                                         tiny::kFloat16, tiny::kBFloat16, tiny::kInt32,   tiny::kUInt8};

// Mirrors CASES in tests/parity/make_int_fixtures.py.
const std::map<std::string, std::function<Tensor(const Inputs&)>>& table() {
  using T = const Inputs&;
  static const std::map<std::string, std::function<Tensor(const Inputs&)>> t = {
      {"add_u8_wraps", [](T a) { return a.at("a") + a.at("b"); }},
      {"sub_u8_wraps", [](T a) { return a.at("a") - a.at("b"); }},
      {"mul_u8_broadcast", [](T a) { return a.at("a") * a.at("b"); }},
      {"neg_u8", [](T a) { return -a.at("a"); }},
      {"add_u8_i32", [](T a) { return a.at("a") + a.at("b"); }},
      {"add_i32_i64", [](T a) { return a.at("a") + a.at("b"); }},
      {"add_u8_bool", [](T a) { return a.at("a") + a.at("b"); }},
      {"mul_i32_f32", [](T a) { return a.at("a") * a.at("b"); }},
      {"add_u8_int_scalar", [](T a) { return a.at("a") + 7; }},
      {"mul_i32_int_scalar", [](T a) { return a.at("a") * -3; }},
      {"mul_i32_float_scalar", [](T a) { return a.at("a") * 2.5; }},
      {"add_u8_i64_0d", [](T a) { return a.at("a") + a.at("b"); }},
      {"div_i32_true", [](T a) { return a.at("a") / a.at("b"); }},
      {"div_u8_scalar", [](T a) { return a.at("a") / 4; }},
      {"abs_i32", [](T a) { return tiny::abs(a.at("a")); }},
      {"abs_u8", [](T a) { return tiny::abs(a.at("a")); }},
      {"sign_i32", [](T a) { return tiny::sign(a.at("a")); }},
      {"relu_i32", [](T a) { return tiny::relu(a.at("a")); }},
      {"clamp_i32", [](T a) { return tiny::clamp(a.at("a"), -20, 30); }},
      {"pow_i32_scalar", [](T a) { return a.at("a").pow(3); }},
      {"pow_u8_scalar_wraps", [](T a) { return a.at("a").pow(2); }},
      {"maximum_u8", [](T a) { return tiny::maximum(a.at("a"), a.at("b")); }},
      {"minimum_i32", [](T a) { return tiny::minimum(a.at("a"), a.at("b")); }},
      {"lt_i32_u8", [](T a) { return a.at("a") < a.at("b"); }},
      {"eq_u8_scalar", [](T a) { return a.at("a") == 1; }},
      {"where_u8_i32", [](T a) { return tiny::where(a.at("cond"), a.at("a"), a.at("b")); }},
      {"sum_u8_all", [](T a) { return a.at("a").sum(); }},
      {"sum_i32_dim", [](T a) { return a.at("a").sum({1}); }},
      {"prod_u8_dim", [](T a) { return tiny::prod(a.at("a"), 1); }},
      {"cumsum_i32", [](T a) { return tiny::cumsum(a.at("a"), 1); }},
      {"amax_u8_dim", [](T a) { return tiny::amax(a.at("a"), {0}); }},
      {"max_i32_all", [](T a) { return a.at("a").max(); }},
      {"argmax_u8_dim", [](T a) { return tiny::argmax(a.at("a"), 1); }},
      {"sort_i32", [](T a) { return std::get<0>(tiny::sort(a.at("a"), 1)); }},
      {"to_f32_from_u8", [](T a) { return a.at("a").to(tiny::kFloat32); }},
      {"to_i32_from_f32_truncates", [](T a) { return a.at("a").to(tiny::kInt32); }},
      {"to_u8_from_i32_wraps", [](T a) { return a.at("a").to(tiny::kUInt8); }},
      {"to_u8_from_f32", [](T a) { return a.at("a").to(tiny::kUInt8); }},
      {"to_i32_from_bool", [](T a) { return a.at("a").to(tiny::kInt32); }},
      {"to_i64_from_u8", [](T a) { return a.at("a").to(tiny::kInt64); }},
      {"mm_i32", [](T a) { return tiny::mm(a.at("a"), a.at("b")); }},
      {"mm_u8_wraps", [](T a) { return tiny::mm(a.at("a"), a.at("b")); }},
      {"index_select_i32_index", [](T a) { return tiny::index_select(a.at("x"), 0, a.at("index")); }},
      {"embedding_i32_indices", [](T a) { return F::embedding(a.at("index"), a.at("weight")); }},
      {"arange_u8",
       [](T a) { return tiny::arange(7, tiny::TensorOptions(tiny::kUInt8).device(a.at("device").device())); }},
      {"arange_i32_step",
       [](T a) { return tiny::arange(-4, 9, 3, tiny::TensorOptions(tiny::kInt32).device(a.at("device").device())); }},
  };
  return t;
}

// The same values in a non-contiguous layout (a transposed copy, transposed back).
Tensor non_contiguous(const Tensor& t) {
  if (t.dim() < 2) return t;
  return t.transpose(0, t.dim() - 1).contiguous().transpose(0, t.dim() - 1);
}

void run_case(const std::string& name, const tiny::Device& device, bool contiguous) {
  SCOPED_TRACE(name + " on " + device.str() + (contiguous ? "" : " non-contiguous"));
  const std::string dir = kDir + "/" + name + "/";
  Inputs in;
  for (const auto& entry : fs::directory_iterator(dir)) {
    const std::string stem = entry.path().stem().string();
    if (stem == "out") continue;
    Tensor t = tiny::io::load_npy(entry.path().string()).to(device);
    in[stem] = contiguous ? t : non_contiguous(t);
  }
  in["device"] = tiny::empty({0}, tiny::TensorOptions().device(device));  // where the creation cases make theirs
  const Tensor out = table().at(name)(in);
  const Tensor want = tiny::io::load_npy(dir + "out.npy");
  ASSERT_EQ(out.dtype(), want.dtype()) << "PyTorch's result is " << want.dtype() << ", tiny's " << out.dtype();
  ASSERT_EQ(out.sizes(), want.sizes());
  EXPECT_EQ(out.device(), device);
  if (want.is_floating_point()) {
    EXPECT_TRUE(tiny::allclose(out.cpu(), want, 1e-6, 1e-6)) << out.cpu() << "\nwant " << want;
  } else {
    EXPECT_TRUE(tiny::equal(out.cpu(), want)) << out.cpu() << "\nwant " << want;
  }
}

bool have_gpu() { return tiny::cuda::device_count() > 0; }

}  // namespace

TEST(IntDtypeParity, TableCoversEveryFixture) {
  std::set<std::string> on_disk, in_table = {"promote_types"};
  for (const auto& entry : fs::directory_iterator(kDir)) on_disk.insert(entry.path().filename().string());
  for (const auto& [name, fn] : table()) in_table.insert(name);
  EXPECT_EQ(on_disk, in_table);
}

TEST(IntDtypeParity, PromoteTypesIsPyTorchsForEveryPair) {
  const std::vector<int64_t> codes = tiny::io::load_npy(kDir + "/promote_types/out.npy").to_vector<int64_t>();
  ASSERT_EQ(codes.size(), kCodes.size() * kCodes.size());
  for (size_t i = 0; i < kCodes.size(); ++i) {
    for (size_t j = 0; j < kCodes.size(); ++j) {
      EXPECT_EQ(tiny::promote_types(kCodes[i], kCodes[j]), kCodes[static_cast<size_t>(codes[i * kCodes.size() + j])])
          << kCodes[i] << " with " << kCodes[j];
    }
  }
}

TEST(IntDtypeParity, MatchesPyTorchOnTheCpuAndTheEmulatedGpu) {
  std::vector<tiny::Device> devices = {tiny::Device("cpu")};
  if (have_gpu()) devices.push_back(tiny::Device("cuda:0"));
  for (const auto& device : devices) {
    for (const auto& [name, fn] : table()) {
      run_case(name, device, true);
      run_case(name, device, false);
    }
  }
}

TEST(IntDtypes, NamesSizesAndCodesAreTorchs) {
  EXPECT_STREQ(tiny::dtype_name(tiny::kInt32), "int32");
  EXPECT_STREQ(tiny::dtype_name(tiny::kUInt8), "uint8");
  EXPECT_EQ(tiny::element_size(tiny::kInt32), 4u);
  EXPECT_EQ(tiny::element_size(tiny::kUInt8), 1u);
  EXPECT_EQ(tiny::kInt, tiny::kInt32);
  // Codes are stable: a checkpoint or a trace written today reads the same tomorrow.
  EXPECT_EQ(static_cast<int>(tiny::kInt32), 6);
  EXPECT_EQ(static_cast<int>(tiny::kUInt8), 7);
  for (tiny::Dtype d : {tiny::kUInt8, tiny::kInt32, tiny::kInt64}) {
    EXPECT_TRUE(tiny::is_integral(d)) << d;
    EXPECT_FALSE(tiny::is_floating_point(d)) << d;
  }
  EXPECT_FALSE(tiny::is_integral(tiny::kBool));
  EXPECT_FALSE(tiny::is_integral(tiny::kFloat32));
}

// PyTorch's layout, with tiny's prefix (as every tiny tensor prints).
TEST(IntDtypes, PrintLikePyTorch) {
  std::ostringstream a, b;
  a << tiny::from_vector<int32_t>({-5, 7, 100});
  b << tiny::from_vector<uint8_t>({200, 3, 0});
  EXPECT_EQ(a.str(), "tensor([ -5,   7, 100], dtype=tiny.int32)");
  EXPECT_EQ(b.str(), "tensor([200,   3,   0], dtype=tiny.uint8)");
}

TEST(IntDtypes, ItemAndToVectorKeepTheValues) {
  const Tensor u = tiny::from_vector<uint8_t>({255, 0, 128});
  EXPECT_EQ(u.to_vector<uint8_t>(), (std::vector<uint8_t>{255, 0, 128}));
  EXPECT_EQ(u.select(0, 0).item<int64_t>(), 255);  // no sign extension
  const Tensor i = tiny::from_vector<int32_t>({-2147483647 - 1, 2147483647});
  EXPECT_EQ(i.select(0, 0).item<int64_t>(), -2147483648LL);
  EXPECT_EQ(i.to_vector<int32_t>(), (std::vector<int32_t>{-2147483647 - 1, 2147483647}));
  EXPECT_EQ(tiny::full({2}, 300, tiny::TensorOptions(tiny::kUInt8)).to_vector<uint8_t>(),
            (std::vector<uint8_t>{44, 44}));  // as torch.full((2,), 300, dtype=torch.uint8)
}

TEST(IntDtypes, FloatOnlyOpsSayWhatToDo) {
  const Tensor i = tiny::from_vector<int32_t>({1, 2, 3});
  try {
    (void)tiny::mean(i);
    ADD_FAILURE() << "mean of int32 must fail, as in PyTorch";
  } catch (const tiny::DtypeError& e) {
    EXPECT_NE(std::string(e.what()).find("int32"), std::string::npos) << e.what();
  }
  try {
    (void)F::cross_entropy(tiny::randn({2, 3}), tiny::from_vector<int32_t>({0, 1}));
    ADD_FAILURE() << "cross_entropy takes int64 class indices only, as in PyTorch";
  } catch (const tiny::DtypeError& e) {
    EXPECT_NE(std::string(e.what()).find("int32"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("kInt64"), std::string::npos) << e.what();
  }
  // Float math on integers computes on a float copy, as PyTorch promotes.
  EXPECT_EQ(tiny::sqrt(i).dtype(), tiny::kFloat32);
  EXPECT_EQ(tiny::exp(tiny::from_vector<uint8_t>({0})).item<float>(), 1.0f);
}

TEST(IntDtypes, CheckpointsAndNpyFilesKeepTheDtype) {
  const tiny_test::TempDir tmp;
  const fs::path dir = tmp.path();
  const Tensor u = tiny::from_vector<uint8_t>({0, 255, 17, 128}, {2, 2});
  const Tensor i = tiny::from_vector<int32_t>({-9, 1 << 30});
  tiny::io::save_npy((dir / "u.npy").string(), u);
  tiny::io::save_npy((dir / "i.npy").string(), i);
  const Tensor u2 = tiny::io::load_npy((dir / "u.npy").string());
  const Tensor i2 = tiny::io::load_npy((dir / "i.npy").string());
  EXPECT_EQ(u2.dtype(), tiny::kUInt8);
  EXPECT_EQ(i2.dtype(), tiny::kInt32);
  EXPECT_TRUE(tiny::equal(u2, u));
  EXPECT_TRUE(tiny::equal(i2, i));
}
