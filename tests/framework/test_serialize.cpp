// Tests of tiny::save / tiny::load (safetensors checkpoints): round trips,
// the bytes on disk against the format, atomic writes, every load error, hostile
// bytes, and interoperability with PyTorch through committed files in
// tests/parity/safetensors/ (see tests/parity/README.md, "Safetensors").
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "io/safetensors.h"
#include "test_util.h"
#include "tiny/error.h"
#include "tiny/io.h"
#include "tiny/ops.h"
#include "tiny/serialize.h"
#include "tiny/state_dict.h"
#include "tiny/tensor.h"

#ifndef TINY_PARITY_DIR
#define TINY_PARITY_DIR "tests/parity/fixtures"
#endif

namespace fs = std::filesystem;
using tiny_test::expect_error;
using tiny::StateDict;
using tiny::Tensor;

namespace {

std::string parity_file(const std::string& name) { return std::string(TINY_PARITY_DIR) + "/../safetensors/" + name; }

using tiny_test::slurp;
using tiny_test::spit;

// The 8 little-endian bytes of n. (Files are built as strings: GCC 12 warns
// falsely (-Warray-bounds) about inserting into a vector of known size.)
std::string le64_text(uint64_t n) {
  std::string out(8, '\0');
  for (int i = 0; i < 8; ++i) out[i] = static_cast<char>((n >> (8 * i)) & 0xff);
  return out;
}

std::vector<char> le64(uint64_t n) {
  const std::string s = le64_text(n);
  return std::vector<char>(s.begin(), s.end());
}

// A file of the given header (used as is: no padding added) and data section.
std::vector<char> file_bytes(const std::string& header, const std::vector<char>& data = {}) {
  const std::string out = le64_text(header.size()) + header + std::string(data.begin(), data.end());
  return std::vector<char>(out.begin(), out.end());
}


// Each test's scratch directory.
struct TempDir : tiny_test::TempDir {
  TempDir() : tiny_test::TempDir("tiny-serialize-test") {}
};

// The raw bytes of a tensor's elements in row-major order.
std::vector<char> element_bytes(const Tensor& t) {
  const Tensor c = t.detach().cpu().contiguous();
  const size_t n = static_cast<size_t>(c.numel()) * c.element_size();
  std::vector<char> out(n);
  if (n) std::memcpy(out.data(), c.raw_data_ptr(), n);
  return out;
}

// Same dtype, shape and bytes (so NaN payloads and -0.0 count too); a plain CPU tensor.
void expect_same(const Tensor& got, const Tensor& want, const std::string& name) {
  ASSERT_TRUE(got.defined()) << name;
  EXPECT_EQ(got.dtype(), want.dtype()) << name;
  EXPECT_EQ(got.sizes(), want.sizes()) << name;
  EXPECT_TRUE(got.is_cpu()) << name;
  EXPECT_TRUE(got.is_contiguous()) << name;
  EXPECT_FALSE(got.requires_grad()) << name;
  EXPECT_EQ(element_bytes(got), element_bytes(want)) << name;
}

std::vector<std::string> names_of(const StateDict& s) {
  std::vector<std::string> out;
  for (const auto& [name, t] : s) out.push_back(name);
  return out;
}

StateDict save_and_load(const StateDict& state, const TempDir& dir, const std::string& name = "ckpt.safetensors") {
  tiny::save(state, dir.file(name));
  return tiny::load(dir.file(name));
}

// A checkpoint with one tensor of every dtype, 0-d and empty ones, and metadata.
StateDict sample_state() {
  StateDict s;
  s.insert("w", tiny::from_vector<float>({1.5f, -2.0f, 0.25f, 3.0f, -0.0f, 7.0f}, {2, 3}));
  s.insert("b", tiny::from_vector<double>({0.1, -1e300}, {2}));
  s.insert("n", tiny::scalar_tensor(int64_t{42}, tiny::kInt64));
  s.insert("m", tiny::from_vector<bool>({true, false, true}, {3}));
  s.insert("e", tiny::empty({0, 2}, tiny::kFloat32));
  s.metadata["epoch"] = "2";
  return s;
}

// ---------------------------------------------------------------- round trips

TEST(Serialize, RoundTripEveryDtype) {
  TempDir dir;
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  StateDict s;
  s.insert("f32", tiny::from_vector<float>({1.0f, -0.0f, nan, inf, -inf, 1e-45f, 3.4e38f, 0.1f}, {2, 4}));
  s.insert("f64", tiny::from_vector<double>({0.1, -1e-308, 1e308, std::nan(""), 5e-324}, {5}));
  s.insert("i64", tiny::from_vector<int64_t>({std::numeric_limits<int64_t>::min(), -1, 0, 1,
                                              std::numeric_limits<int64_t>::max(), 1LL << 53},
                                             {3, 2}));
  s.insert("bool", tiny::from_vector<bool>({true, false, false, true, true, false}, {1, 2, 3}));
  s.insert("i32", tiny::from_vector<int32_t>({std::numeric_limits<int32_t>::min(), -1, 0, 7,
                                              std::numeric_limits<int32_t>::max()}, {5}));
  s.insert("u8", tiny::from_vector<uint8_t>({0, 1, 127, 128, 255, 200}, {2, 3}));
  const StateDict back = save_and_load(s, dir);
  ASSERT_EQ(names_of(back), names_of(s));
  for (const auto& [name, t] : s) expect_same(back.at(name), t, name);
  EXPECT_TRUE(back.metadata.empty());
}

TEST(Serialize, RoundTripZeroDimAndEmptyTensors) {
  TempDir dir;
  StateDict s;
  s.insert("f32_0d", tiny::scalar_tensor(2.5, tiny::kFloat32));
  s.insert("f64_0d", tiny::scalar_tensor(-0.125, tiny::kFloat64));
  s.insert("i64_0d", tiny::scalar_tensor(int64_t{-7}, tiny::kInt64));
  s.insert("bool_0d", tiny::scalar_tensor(true, tiny::kBool));
  s.insert("f32_empty", tiny::empty({0}, tiny::kFloat32));
  s.insert("f64_empty", tiny::empty({3, 0, 2}, tiny::kFloat64));
  s.insert("i64_empty", tiny::empty({0, 5}, tiny::kInt64));
  s.insert("bool_empty", tiny::empty({2, 0}, tiny::kBool));
  s.insert("after", tiny::from_vector<float>({9.0f}, {1}));  // data right after the empty ones
  const StateDict back = save_and_load(s, dir);
  ASSERT_EQ(names_of(back), names_of(s));
  for (const auto& [name, t] : s) expect_same(back.at(name), t, name);
  EXPECT_EQ(back.at("f32_0d").dim(), 0);
  EXPECT_EQ(back.at("f32_0d").item<float>(), 2.5f);
  EXPECT_EQ(back.at("bool_0d").item<bool>(), true);
  EXPECT_EQ(back.at("f64_empty").sizes(), (tiny::IntArrayRef{3, 0, 2}));
}

TEST(Serialize, RoundTripNonContiguousTensors) {
  TempDir dir;
  const Tensor base = tiny::arange(0.0, 24.0, 1.0, tiny::kFloat32).view({2, 3, 4});
  const Tensor ibase = tiny::arange(12).view({3, 4});
  StateDict s;
  s.insert("transposed", base.transpose(0, 2));          // [4, 3, 2]
  s.insert("strided", base.slice(2, 0, 4, 2));             // every other column
  s.insert("offset", base.select(0, 1).narrow(1, 1, 2));  // a view with a storage offset
  s.insert("expanded", tiny::from_vector<double>({1.0, 2.0}, {2, 1}).expand({2, 3}));  // stride 0
  s.insert("int_t", ibase.t());
  s.insert("bool_t", ibase.gt(tiny::scalar_tensor(int64_t{5}, tiny::kInt64)).t());
  for (const auto& [name, t] : s) ASSERT_FALSE(t.is_contiguous()) << name;
  const StateDict back = save_and_load(s, dir);
  ASSERT_EQ(names_of(back), names_of(s));
  for (const auto& [name, t] : s) expect_same(back.at(name), t.contiguous(), name);
  EXPECT_EQ(back.at("transposed").sizes(), (tiny::IntArrayRef{4, 3, 2}));
  // Element [1][2][0] of the transpose is base[0][2][1] = 9.
  EXPECT_EQ(back.at("transposed").select(0, 1).select(0, 2).select(0, 0).item<float>(), 9.0f);
}

TEST(Serialize, TensorsThatRequireGradAreSavedAsPlainData) {
  TempDir dir;
  Tensor w = tiny::from_vector<float>({1.0f, 2.0f}, {2});
  w.requires_grad_(true);
  StateDict s;
  s.insert("w", w);
  s.insert("y", w.mul(tiny::scalar_tensor(3.0)));  // a non-leaf with a graph
  const StateDict back = save_and_load(s, dir);
  expect_same(back.at("w"), w.detach(), "w");
  EXPECT_EQ(back.at("y").to_vector<float>(), (std::vector<float>{3.0f, 6.0f}));
}

TEST(Serialize, MetadataRoundTrip) {
  TempDir dir;
  StateDict s = sample_state();
  s.metadata.clear();
  s.metadata["lr"] = "0.001";
  s.metadata["optimizer"] = "SGD(momentum=0.9)";
  s.metadata["quotes \"and\" \\backslashes\\"] = "line 1\nline 2\ttab \x01 control";
  s.metadata["unicode"] = "\xc3\xa9t\xc3\xa9 \xe2\x86\x92 \xf0\x9f\x9a\x80";  // été → 🚀
  s.metadata[""] = "";
  const StateDict back = save_and_load(s, dir);
  EXPECT_EQ(back.metadata, s.metadata);
}

TEST(Serialize, KeyOrderIsPreserved) {
  TempDir dir;
  // Not alphabetical, and mixed dtypes (the reference writer would sort by dtype, then name).
  const std::vector<std::string> order = {"z.last", "a.first", "m.weight", "B", "m.bias", "0", "__meta", ""};
  StateDict s;
  for (size_t i = 0; i < order.size(); ++i) {
    if (i % 3 == 0) s.insert(order[i], tiny::full({int64_t(i) + 1}, 1.0, tiny::kFloat64));
    else if (i % 3 == 1) s.insert(order[i], tiny::empty({int64_t(i) % 2}, tiny::kInt64).fill_(int64_t(i)));
    else s.insert(order[i], tiny::ones({2}, tiny::kBool));
  }
  const StateDict back = save_and_load(s, dir);
  EXPECT_EQ(names_of(back), order);
  for (const auto& [name, t] : s) expect_same(back.at(name), t, name);
}

TEST(Serialize, EmptyStateDict) {
  TempDir dir;
  const StateDict back = save_and_load(StateDict(), dir);
  EXPECT_TRUE(back.empty());
  EXPECT_TRUE(back.metadata.empty());
}

TEST(Serialize, SavesDeviceTensorsThroughTheCpu) {
  Tensor dev;
  try {
    dev = tiny::from_vector<float>({1.0f, 2.0f, 3.0f}, {3}).to("cuda:0");
  } catch (const tiny::Error& e) {
    GTEST_SKIP() << "no cuda:0 device (real or emulated) in this build: " << e.what();
  }
  TempDir dir;
  StateDict s;
  s.insert("dev", dev);
  s.insert("dev_t", tiny::arange(6).view({2, 3}).to("cuda:0").t());
  const StateDict back = save_and_load(s, dir);
  EXPECT_TRUE(back.at("dev").is_cpu());
  EXPECT_EQ(back.at("dev").to_vector<float>(), (std::vector<float>{1.0f, 2.0f, 3.0f}));
  EXPECT_EQ(back.at("dev_t").to_vector<int64_t>(), (std::vector<int64_t>{0, 3, 1, 4, 2, 5}));
}

// ---------------------------------------------------------------- the bytes on disk

std::string padded(std::string json) {
  json.append((8 - json.size() % 8) % 8, ' ');
  return json;
}

TEST(SafetensorsFormat, MatchesTheReferenceImplementationsBytes) {
  // The expected bytes are the test vectors of the reference implementation
  // (huggingface/safetensors, safetensors/src/tensor.rs: test_empty and
  // test_serialization_forced_alignement).
  TempDir dir;
  tiny::save(StateDict(), dir.file("empty.safetensors"));
  EXPECT_EQ(slurp(dir.file("empty.safetensors")),
            (std::vector<char>{8, 0, 0, 0, 0, 0, 0, 0, '{', '}', ' ', ' ', ' ', ' ', ' ', ' '}));

  StateDict meta_only;
  meta_only.metadata["framework"] = "pt";
  tiny::save(meta_only, dir.file("meta.safetensors"));
  const std::vector<int> expected_meta = {40,  0,   0,   0,   0,   0,   0,   0,   123, 34,  95,  95,  109, 101,
                                          116, 97,  100, 97,  116, 97,  95,  95,  34,  58,  123, 34,  102, 114,
                                          97,  109, 101, 119, 111, 114, 107, 34,  58,  34,  112, 116, 34,  125,
                                          125, 32,  32,  32,  32,  32};
  EXPECT_EQ(slurp(dir.file("meta.safetensors")), std::vector<char>(expected_meta.begin(), expected_meta.end()));

  StateDict one;
  one.insert("attn0", tiny::arange(0.0, 6.0, 1.0, tiny::kFloat32).view({1, 1, 2, 3}));
  tiny::save(one, dir.file("attn0.safetensors"));
  const std::vector<int> expected_attn0 = {
      72,  0,   0,   0,   0,   0,   0,   0,   123, 34,  97,  116, 116, 110, 48,  34,  58,  123, 34,  100, 116,
      121, 112, 101, 34,  58,  34,  70,  51,  50,  34,  44,  34,  115, 104, 97,  112, 101, 34,  58,  91,  49,
      44,  49,  44,  50,  44,  51,  93,  44,  34,  100, 97,  116, 97,  95,  111, 102, 102, 115, 101, 116, 115,
      34,  58,  91,  48,  44,  50,  52,  93,  125, 125, 32,  32,  32,  32,  32,  32,  32,  0,   0,   0,   0,
      0,   0,   128, 63,  0,   0,   0,   64,  0,   0,   64,  64,  0,   0,   128, 64,  0,   0,   160, 64};
  EXPECT_EQ(slurp(dir.file("attn0.safetensors")), std::vector<char>(expected_attn0.begin(), expected_attn0.end()));
}

TEST(SafetensorsFormat, HandBuiltHeaderByteForByte) {
  TempDir dir;
  StateDict s;
  s.insert("w", tiny::from_vector<float>({1.0f, -2.0f}, {2}));
  s.insert("flag", tiny::scalar_tensor(true, tiny::kBool));
  s.insert("steps", tiny::from_vector<int64_t>({258}, {1}));
  s.insert("none", tiny::empty({0, 3}, tiny::kFloat64));
  s.insert("x", tiny::scalar_tensor(0.5, tiny::kFloat64));
  s.metadata["lr"] = "0.1";
  s.metadata["epoch"] = "3";
  tiny::save(s, dir.file("a.safetensors"));

  // Metadata first (its keys sorted), then the tensors in insertion order,
  // compact JSON, space-padded to a multiple of 8; data back to back.
  const std::string header = padded(
      "{\"__metadata__\":{\"epoch\":\"3\",\"lr\":\"0.1\"},"
      "\"w\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
      "\"flag\":{\"dtype\":\"BOOL\",\"shape\":[],\"data_offsets\":[8,9]},"
      "\"steps\":{\"dtype\":\"I64\",\"shape\":[1],\"data_offsets\":[9,17]},"
      "\"none\":{\"dtype\":\"F64\",\"shape\":[0,3],\"data_offsets\":[17,17]},"
      "\"x\":{\"dtype\":\"F64\",\"shape\":[],\"data_offsets\":[17,25]}}");
  ASSERT_EQ(header.size() % 8, 0u);
  const std::vector<int> data = {
      0x00, 0x00, 0x80, 0x3f, 0x00, 0x00, 0x00, 0xc0,  // 1.0f, -2.0f
      0x01,                                            // true
      0x02, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,  // 258
      0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0xe0, 0x3f,  // 0.5
  };
  std::vector<char> expected = file_bytes(header);
  for (int b : data) expected.push_back(static_cast<char>(b));
  EXPECT_EQ(slurp(dir.file("a.safetensors")), expected);
  EXPECT_EQ(tiny::io::detail::make_safetensors_header(s, "x"), header);
}

TEST(SafetensorsFormat, NamesAreEscapedAsJson) {
  TempDir dir;
  StateDict s;
  s.insert("a\"b\\c\nd\x01\xc3\xa9", tiny::scalar_tensor(int64_t{1}, tiny::kInt64));
  EXPECT_EQ(tiny::io::detail::make_safetensors_header(s, "x"),
            padded("{\"a\\\"b\\\\c\\nd\\u0001\xc3\xa9\":{\"dtype\":\"I64\",\"shape\":[],\"data_offsets\":[0,8]}}"));
  EXPECT_EQ(names_of(save_and_load(s, dir)), names_of(s));
}

TEST(SafetensorsFormat, LoadsTensorsInDataOrderWhateverTheJsonOrder) {
  // Some writers (json.dumps(sort_keys=True), old safetensors versions) order
  // the JSON keys differently from the data; the data order is the tensors' order.
  TempDir dir;
  const std::string header = padded(
      "{\"a\":{\"dtype\":\"I64\",\"shape\":[1],\"data_offsets\":[8,16]},"
      "\"e2\":{\"dtype\":\"F32\",\"shape\":[0],\"data_offsets\":[8,8]},"
      "\"__metadata__\":{\"k\":\"v\"},"
      "\"z\":{\"dtype\":\"I64\",\"shape\":[],\"data_offsets\":[0,8]},"
      "\"e1\":{\"dtype\":\"F32\",\"shape\":[0],\"data_offsets\":[8,8]}}");
  const std::string data = le64_text(5) + le64_text(6);
  spit(dir.file("f.safetensors"), file_bytes(header, std::vector<char>(data.begin(), data.end())));
  const StateDict s = tiny::load(dir.file("f.safetensors"));
  // Empty tensors at the same offset keep their header order.
  EXPECT_EQ(names_of(s), (std::vector<std::string>{"z", "e2", "e1", "a"}));
  EXPECT_EQ(s.at("z").item<int64_t>(), 5);
  EXPECT_EQ(s.at("a").to_vector<int64_t>(), std::vector<int64_t>{6});
  EXPECT_EQ(s.metadata.at("k"), "v");
}

TEST(SafetensorsFormat, AcceptsAnyJsonWhitespaceAndNoPadding) {
  TempDir dir;
  spit(dir.file("f.safetensors"),
       file_bytes(" \n{ \"t\" :\t{\"shape\": [ 2 ], \"data_offsets\": [0, 2], \"dtype\": \"BOOL\"} }\r\n",
                  {1, 0}));
  const StateDict s = tiny::load(dir.file("f.safetensors"));
  EXPECT_EQ(s.at("t").to_vector<bool>(), (std::vector<bool>{true, false}));
}

TEST(SafetensorsFormat, BoolBytesOtherThanZeroAndOneLoadAsTrue) {
  TempDir dir;
  spit(dir.file("f.safetensors"),
       file_bytes(padded("{\"t\":{\"dtype\":\"BOOL\",\"shape\":[3],\"data_offsets\":[0,3]}}"), {0, 2, '\xff'}));
  const Tensor t = tiny::load(dir.file("f.safetensors")).at("t");
  EXPECT_EQ(t.to_vector<bool>(), (std::vector<bool>{false, true, true}));
  EXPECT_EQ(element_bytes(t), (std::vector<char>{0, 1, 1}));  // stored as valid C++ bools
}

// ---------------------------------------------------------------- save errors

TEST(SerializeSaveErrors, BadStatesAreRefusedWithoutWritingAnything) {
  TempDir dir;
  const std::string path = dir.file("x.safetensors");
  {
    StateDict s;
    s.insert("ok", tiny::ones({1}));
    s.insert("undefined", Tensor());
    expect_error<tiny::ValueError>([&] { tiny::save(s, path); }, {path, "'undefined'", "undefined"});
  }
  {
    StateDict s;
    s.insert("__metadata__", tiny::ones({1}));
    expect_error<tiny::ValueError>([&] { tiny::save(s, path); }, {path, "__metadata__", "rename"});
  }
  {
    StateDict s;
    s.insert("bad\xff" "name", tiny::ones({1}));
    expect_error<tiny::ValueError>([&] { tiny::save(s, path); }, {path, "tensor name", "bad\\xffname", "UTF-8"});
  }
  {
    StateDict s;
    s.metadata["k"] = "\xc3";  // a truncated UTF-8 sequence
    expect_error<tiny::ValueError>([&] { tiny::save(s, path); }, {path, "metadata value", "UTF-8"});
  }
  expect_error<tiny::ValueError>([&] { tiny::save(StateDict(), ""); }, {"path is empty"});
  EXPECT_TRUE(dir.entries().empty());
}

// ---------------------------------------------------------------- atomic writes

TEST(SerializeAtomic, OverwritesAnExistingCheckpointCompletely) {
  TempDir dir;
  StateDict big;
  big.insert("big", tiny::ones({1000}, tiny::kFloat64));
  tiny::save(big, dir.file("c.safetensors"));
  const StateDict small = sample_state();
  tiny::save(small, dir.file("c.safetensors"));
  const StateDict back = tiny::load(dir.file("c.safetensors"));
  EXPECT_EQ(names_of(back), names_of(small));
  EXPECT_EQ(dir.entries(), std::vector<std::string>{"c.safetensors"});  // no temporary file left
}

// Runs tiny::save(state, path) and returns the IOError's message ("" if it did
// not throw); as root, in an unprivileged child (see test_util.h).
std::string save_error_message(const StateDict& state, const std::string& path, bool* skipped) {
  return tiny_test::io_error_as_unprivileged([&] { tiny::save(state, path); }, skipped);
}

TEST(SerializeAtomic, ReadOnlyDirectoryFailsAndKeepsTheOldCheckpoint) {
  TempDir dir;
  const StateDict old = sample_state();
  tiny::save(old, dir.file("c.safetensors"));
  const auto old_bytes = slurp(dir.file("c.safetensors"));
  // r-x for everyone: as root, the unprivileged child can enter but not write.
  fs::permissions(dir.path(),
                  fs::perms::owner_read | fs::perms::owner_exec | fs::perms::group_read | fs::perms::group_exec |
                      fs::perms::others_read | fs::perms::others_exec,
                  fs::perm_options::replace);
  StateDict next;
  next.insert("w", tiny::zeros({100}));
  bool skipped = false;
  const std::string message = save_error_message(next, dir.file("c.safetensors"), &skipped);
  fs::permissions(dir.path(), fs::perms::owner_all, fs::perm_options::replace);
  if (skipped) GTEST_SKIP() << "running as root and cannot drop privileges to test directory permissions";
  for (const std::string& part : {dir.file("c.safetensors"), std::string("cannot create a file in"),
                                 std::string("permissions")})
    EXPECT_NE(message.find(part), std::string::npos) << "'" << part << "' not in: '" << message << "'";
  EXPECT_EQ(slurp(dir.file("c.safetensors")), old_bytes);
  const StateDict back = tiny::load(dir.file("c.safetensors"));
  ASSERT_EQ(names_of(back), names_of(old));
  for (const auto& [name, t] : old) expect_same(back.at(name), t, name);
  EXPECT_EQ(back.metadata, old.metadata);
  EXPECT_EQ(dir.entries(), std::vector<std::string>{"c.safetensors"});
}

TEST(SerializeAtomic, PathIsADirectory) {
  TempDir dir;
  fs::create_directory(dir.file("ckpt"));
  tiny::save(sample_state(), dir.file("ckpt/inner.safetensors"));
  expect_error([&] { tiny::save(sample_state(), dir.file("ckpt")); },
               {dir.file("ckpt"), "is a directory", "model.safetensors"});
  EXPECT_TRUE(fs::is_directory(dir.file("ckpt")));
  EXPECT_EQ(names_of(tiny::load(dir.file("ckpt/inner.safetensors"))), names_of(sample_state()));
  EXPECT_EQ(dir.entries(), std::vector<std::string>{"ckpt"});
}

TEST(SerializeAtomic, MissingDirectory) {
  TempDir dir;
  expect_error([&] { tiny::save(sample_state(), dir.file("nope/c.safetensors")); },
               {dir.file("nope/c.safetensors"), "does not exist"});
}

TEST(SerializeAtomic, FailureMidWriteKeepsTheOldCheckpoint) {
  // RLIMIT_FSIZE makes write() fail with EFBIG part way through (works as root too).
  TempDir dir;
  const StateDict old = sample_state();
  tiny::save(old, dir.file("c.safetensors"));
  const auto old_bytes = slurp(dir.file("c.safetensors"));
  StateDict big;
  big.insert("a", tiny::ones({1000}));
  big.insert("b", tiny::ones({1 << 17}, tiny::kFloat64));  // 1 MiB
  const std::string message = tiny_test::io_error_under_file_size_limit(64 * 1024,
                                                                     [&] { tiny::save(big, dir.file("c.safetensors")); });
  EXPECT_NE(message.find("cannot write"), std::string::npos) << message;
  EXPECT_NE(message.find("left unchanged"), std::string::npos) << message;
  EXPECT_EQ(slurp(dir.file("c.safetensors")), old_bytes);
  EXPECT_EQ(names_of(tiny::load(dir.file("c.safetensors"))), names_of(old));
  EXPECT_EQ(dir.entries(), std::vector<std::string>{"c.safetensors"});  // the temporary file was removed
}

TEST(SerializeAtomic, WritesThroughASymlink) {
  TempDir dir;
  tiny::save(StateDict(), dir.file("real.safetensors"));
  fs::create_symlink("real.safetensors", dir.file("link.safetensors"));
  tiny::save(sample_state(), dir.file("link.safetensors"));
  EXPECT_TRUE(fs::is_symlink(dir.file("link.safetensors")));
  EXPECT_EQ(names_of(tiny::load(dir.file("real.safetensors"))), names_of(sample_state()));
}

// ---------------------------------------------------------------- load errors

class SafetensorsLoad : public ::testing::Test {
 protected:
  // Writes `bytes` to bad.safetensors and expects tiny::load to fail with every part in the message
  // (the file's path always among them).
  void expect_load_error(const std::vector<char>& bytes, std::vector<std::string> parts) {
    spit(path(), bytes);
    parts.push_back(path());
    expect_error([&] { tiny::load(path()); }, parts);
    // The in-memory parser says the same (from an exact-size heap copy, so ASan sees any overread).
    std::unique_ptr<char[]> copy(new char[bytes.size() + 1]);
    if (!bytes.empty()) std::memcpy(copy.get(), bytes.data(), bytes.size());
    parts.back() = "mem.safetensors";
    expect_error([&] { tiny::io::detail::parse_safetensors(copy.get(), bytes.size(), "mem.safetensors"); }, parts);
  }
  // A file of one header (padded) and `data_size` zero bytes.
  void expect_header_error(const std::string& header, size_t data_size, const std::vector<std::string>& parts) {
    expect_load_error(file_bytes(padded(header), std::vector<char>(data_size, 0)), parts);
  }
  std::string path() const { return dir_.file("bad.safetensors"); }
  TempDir dir_;
};

std::string entry(const std::string& name, const std::string& dtype, const std::string& shape,
                  const std::string& offsets) {
  return "\"" + name + "\":{\"dtype\":" + dtype + ",\"shape\":" + shape + ",\"data_offsets\":" + offsets + "}";
}

TEST_F(SafetensorsLoad, MissingFileAndDirectory) {
  expect_error([&] { tiny::load(dir_.file("nope.safetensors")); }, {"No such file", dir_.file("nope.safetensors")});
  expect_error([&] { tiny::load(dir_.path()); }, {dir_.path(), "is a directory"});
}

TEST_F(SafetensorsLoad, TooShort) {
  for (size_t n = 0; n < 8; ++n)
    expect_load_error(std::vector<char>(n, 0), {"too short", std::to_string(n) + " bytes"});
}

TEST_F(SafetensorsLoad, HeaderLengthLargerThanTheFile) {
  const std::string bytes = le64_text(64) + "{}      ";  // 16 bytes in all
  expect_load_error(std::vector<char>(bytes.begin(), bytes.end()),
                    {"header length is 64 bytes", "larger than the file", "16 bytes", "truncated"});
}

TEST_F(SafetensorsLoad, HugeHeaderLengthsAreRefusedBeforeAnyAllocation) {
  for (uint64_t n : {uint64_t{100'000'001}, uint64_t{1} << 40, std::numeric_limits<uint64_t>::max() - 7,
                     std::numeric_limits<uint64_t>::max()})
    expect_load_error(le64(n), {"header length is " + std::to_string(n), "100000000-byte limit"});
}

TEST_F(SafetensorsLoad, EmptyHeader) { expect_load_error(le64(0), {"header", "empty"}); }

TEST_F(SafetensorsLoad, InvalidJson) {
  expect_header_error("{not json}", 0, {"not valid JSON", "at byte"});
  expect_header_error("{\"a\":", 0, {"not valid JSON"});
  expect_header_error("{} trailing", 0, {"not valid JSON"});
  expect_header_error("{\"\xff\":1}", 0, {"not valid JSON", "UTF-8"});  // not UTF-8
  expect_header_error("{/* c */}", 0, {"not valid JSON"});                // comments are not JSON
  expect_load_error(file_bytes(std::string("{}\0\0\0\0\0\0", 8)), {"not valid JSON"});  // NUL padding
}

TEST_F(SafetensorsLoad, HeaderIsNotAnObject) {
  expect_header_error("[]", 0, {"must be a JSON object", "an array"});
  expect_header_error("\"text\"", 0, {"must be a JSON object", "a string"});
  expect_header_error("42", 0, {"must be a JSON object", "a number"});
}

TEST_F(SafetensorsLoad, MissingFields) {
  expect_header_error("{\"t\":{\"shape\":[1],\"data_offsets\":[0,4]}}", 4, {"tensor 't'", "lacks \"dtype\""});
  expect_header_error("{\"t\":{\"dtype\":\"F32\",\"data_offsets\":[0,4]}}", 4, {"tensor 't'", "lacks \"shape\""});
  expect_header_error("{\"t\":{\"dtype\":\"F32\",\"shape\":[1]}}", 4, {"tensor 't'", "lacks \"data_offsets\""});
  expect_header_error("{\"t\":{}}", 0, {"tensor 't'", "lacks \"dtype\", \"shape\", \"data_offsets\""});
}

TEST_F(SafetensorsLoad, IllTypedFields) {
  expect_header_error("{" + entry("t", "5", "[1]", "[0,4]") + "}", 4, {"tensor 't'", "dtype must be a string"});
  expect_header_error("{" + entry("t", "\"F32\"", "\"1\"", "[0,4]") + "}", 4, {"tensor 't'", "shape must be a list"});
  expect_header_error("{" + entry("t", "\"F32\"", "[1.5]", "[0,4]") + "}", 4, {"tensor 't'", "1.5", "not an integer"});
  expect_header_error("{" + entry("t", "\"F32\"", "[-1]", "[0,4]") + "}", 4, {"tensor 't'", "negative dimension -1"});
  expect_header_error("{" + entry("t", "\"F32\"", "[[1]]", "[0,4]") + "}", 4, {"shape must hold integers only"});
  expect_header_error("{" + entry("t", "\"F32\"", "[true]", "[0,4]") + "}", 4, {"shape must hold integers only"});
  expect_header_error("{" + entry("t", "\"F32\"", "[1]", "{}") + "}", 4, {"data_offsets must be a list"});
  expect_header_error("{" + entry("t", "\"F32\"", "[1]", "[0]") + "}", 4, {"data_offsets must be [begin, end]", "has 1 value"});
  expect_header_error("{" + entry("t", "\"F32\"", "[1]", "[0,4,8]") + "}", 4, {"more than 2 values"});
  expect_header_error("{" + entry("t", "\"F32\"", "[1]", "[\"0\",4]") + "}", 4, {"data_offsets must hold integers"});
  expect_header_error("{" + entry("t", "\"F32\"", "[1]", "[-4,0]") + "}", 4, {"negative value -4"});
  expect_header_error("{" + entry("t", "\"F32\"", "[1]", "[0,1e30]") + "}", 4, {"data_offsets", "not an integer"});
  expect_header_error("{" + entry("t", "\"F32\"", "[1]", "[0,99999999999999999999]") + "}", 4,
                      {"data_offsets", "99999999999999999999", "not an integer"});
  expect_header_error("{" + entry("t", "null", "[1]", "[0,4]") + "}", 4, {"dtype must be a string", "null"});
  expect_header_error("{\"t\":[1,2]}", 0, {"tensor 't'", "must be an object", "an array"});
  expect_header_error("{\"t\":\"F32\"}", 0, {"tensor 't'", "must be an object", "a string"});
  expect_header_error("{\"__metadata__\":[]}", 0, {"__metadata__ must be an object of strings"});
  expect_header_error("{\"__metadata__\":{\"epoch\":3}}", 0, {"__metadata__ value of 'epoch' must be a string"});
  expect_header_error("{\"__metadata__\":{\"a\":{\"b\":\"c\"}}}", 0, {"value of 'a' must be a string", "an object"});
}

TEST_F(SafetensorsLoad, UnexpectedAndDuplicateFields) {
  expect_header_error("{\"t\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4],\"offsets\":[0,4]}}", 4,
                      {"tensor 't'", "unexpected field 'offsets'"});
  expect_header_error("{\"t\":{\"dtype\":\"F32\",\"dtype\":\"F64\",\"shape\":[1],\"data_offsets\":[0,4]}}", 4,
                      {"tensor 't'", "the field 'dtype' appears twice"});
}

TEST_F(SafetensorsLoad, UnknownAndUnsupportedDtypes) {
  expect_header_error("{" + entry("t", "\"F128\"", "[1]", "[0,16]") + "}", 16,
                      {"tensor 't'", "unknown dtype 'F128'", "F32", "BF16"});
  expect_header_error("{" + entry("t", "\"f32\"", "[1]", "[0,4]") + "}", 4, {"unknown dtype 'f32'"});
  expect_header_error("{" + entry("h", "\"I16\"", "[2]", "[0,4]") + "}", 4,
                      {"tensor 'h'", "dtype I16 is not supported", "F16, BF16, F32, F64, I64, I32, U8 and BOOL", "t.float()"});
  expect_header_error("{" + entry("i", "\"U32\"", "[2]", "[0,8]") + "}", 8, {"dtype U32 is not supported"});
}

TEST_F(SafetensorsLoad, DuplicateNames) {
  expect_header_error("{" + entry("t", "\"F32\"", "[1]", "[0,4]") + "," + entry("t", "\"F32\"", "[1]", "[4,8]") + "}",
                      8, {"the name 't' appears twice", "duplicate"});
  expect_header_error("{\"__metadata__\":{},\"__metadata__\":{}}", 0, {"'__metadata__' appears twice"});
  expect_header_error("{\"__metadata__\":{\"k\":\"a\",\"k\":\"b\"}}", 0, {"__metadata__ has the key 'k' twice"});
}

TEST_F(SafetensorsLoad, ShapeAndOffsetsDisagree) {
  expect_header_error("{" + entry("t", "\"F32\"", "[2,3]", "[0,20]") + "}", 20,
                      {"tensor 't'", "shape [2, 3] of dtype F32 needs 24 bytes", "data_offsets [0, 20] span 20"});
  expect_header_error("{" + entry("t", "\"F64\"", "[]", "[0,0]") + "}", 0, {"shape [] of dtype F64 needs 8 bytes"});
  expect_header_error("{" + entry("t", "\"I64\"", "[0,4]", "[0,8]") + "}", 8, {"needs 0 bytes", "span 8"});
}

TEST_F(SafetensorsLoad, OffsetsEndBeforeTheyBegin) {
  expect_header_error("{" + entry("t", "\"F32\"", "[1]", "[8,4]") + "}", 8, {"tensor 't'", "[8, 4] end before"});
}

TEST_F(SafetensorsLoad, OffsetsOutOfRange) {
  expect_header_error("{" + entry("t", "\"F32\"", "[4]", "[0,16]") + "}", 12,
                      {"tensor 't'", "[0, 16] are out of range", "only 12 bytes", "truncated"});
  expect_header_error("{" + entry("t", "\"BOOL\"", "[1]", "[18446744073709551614,18446744073709551615]") + "}", 4,
                      {"out of range"});
}

TEST_F(SafetensorsLoad, OverlappingData) {
  expect_header_error("{" + entry("a", "\"F32\"", "[2]", "[0,8]") + "," + entry("b", "\"F32\"", "[2]", "[4,12]") + "}",
                      12, {"tensor 'b' [4, 12] overlaps that of tensor 'a' [0, 8]"});
  expect_header_error("{" + entry("a", "\"F32\"", "[2]", "[0,8]") + "," + entry("b", "\"I64\"", "[1]", "[0,8]") + "}",
                      8, {"overlaps"});
  // An empty tensor pointing inside another's bytes.
  expect_header_error("{" + entry("a", "\"F32\"", "[2]", "[0,8]") + "," + entry("e", "\"F32\"", "[0]", "[4,4]") + "}",
                      8, {"tensor 'e' [4, 4] overlaps that of tensor 'a'"});
}

TEST_F(SafetensorsLoad, HolesInTheData) {
  expect_header_error("{" + entry("a", "\"F32\"", "[1]", "[0,4]") + "," + entry("b", "\"F32\"", "[1]", "[8,12]") + "}",
                      12, {"bytes [4, 8) of the data section belong to no tensor", "before tensor 'b'"});
  expect_header_error("{" + entry("a", "\"F32\"", "[1]", "[4,8]") + "}", 8, {"bytes [0, 4)", "belong to no tensor"});
  expect_header_error("{" + entry("a", "\"F32\"", "[1]", "[0,4]") + "}", 12,
                      {"the last 8 of the 12 bytes of the data section belong to no tensor"});
  expect_header_error("{}", 3, {"the last 3 of the 3 bytes"});
}

TEST_F(SafetensorsLoad, SizesThatOverflow) {
  expect_header_error("{" + entry("t", "\"F32\"", "[4611686018427387904,4]", "[0,0]") + "}", 0,
                      {"tensor 't'", "too large", "overflows 64 bits"});
  expect_header_error("{" + entry("t", "\"F64\"", "[4294967296,4294967296,0]", "[0,0]") + "}", 0, {"overflows"});
  expect_header_error("{" + entry("t", "\"BOOL\"", "[9223372036854775808]", "[0,0]") + "}", 0,
                      {"dimension 9223372036854775808 larger than 2^63 - 1"});
  std::string dims = "[1";
  for (int i = 0; i < 64; ++i) dims += ",1";
  expect_header_error("{" + entry("t", "\"BOOL\"", dims + "]", "[0,1]") + "}", 1, {"more than 64 dimensions"});
}

TEST_F(SafetensorsLoad, HostileNamesAreShownSafely) {
  const std::string long_name(500, 'x');
  expect_header_error("{" + entry(long_name, "\"F32\"", "[1]", "[0,8]") + "}", 8,
                      {"tensor '" + std::string(80, 'x') + "...'"});
  expect_header_error("{" + entry("a\\nb\\u0000c", "\"X\"", "[1]", "[0,8]") + "}", 8, {"tensor 'a\\x0ab\\x00c'"});
}

// ---------------------------------------------------------------- hostile bytes

std::vector<char> valid_file_bytes(const TempDir& dir) {
  StateDict s = sample_state();
  s.metadata["note"] = "x";
  tiny::save(s, dir.file("valid.safetensors"));
  return slurp(dir.file("valid.safetensors"));
}

TEST(SafetensorsHostile, EveryTruncationFailsCleanly) {
  TempDir dir;
  const std::vector<char> valid = valid_file_bytes(dir);
  ASSERT_GT(valid.size(), 100u);
  for (size_t len = 0; len < valid.size(); ++len) {
    const std::vector<char> prefix(valid.begin(), valid.begin() + static_cast<std::ptrdiff_t>(len));
    spit(dir.file("cut.safetensors"), prefix);
    EXPECT_THROW(tiny::load(dir.file("cut.safetensors")), tiny::IOError) << "truncated at " << len;
    std::unique_ptr<char[]> copy(new char[len + 1]);
    if (len) std::memcpy(copy.get(), prefix.data(), len);
    EXPECT_THROW(tiny::io::detail::parse_safetensors(copy.get(), len, "cut"), tiny::IOError) << "truncated at " << len;
  }
  EXPECT_EQ(names_of(tiny::io::detail::parse_safetensors(valid.data(), valid.size(), "whole")),
            names_of(sample_state()));
}

TEST(SafetensorsHostile, RandomCorruptionNeverCrashes) {
  // Random byte changes, insertions and deletions: each file either loads or
  // throws tiny::IOError; nothing else (no crash, no other exception).
  TempDir dir;
  const std::vector<char> valid = valid_file_bytes(dir);
  std::mt19937 rng(12345);
  const char interesting[] = {'{', '}', '[', ']', '"', ',', ':', '0', '9', '-', ' ', '\0', '\xff', 'e', '.'};
  int loaded = 0, refused = 0;
  for (int round = 0; round < 3000; ++round) {
    std::vector<char> bytes = valid;
    const int edits = 1 + static_cast<int>(rng() % 3);
    for (int e = 0; e < edits; ++e) {
      const size_t at = rng() % bytes.size();
      const char c = rng() % 2 ? interesting[rng() % sizeof interesting] : static_cast<char>(rng() & 0xff);
      switch (rng() % 4) {
        case 0: bytes.insert(bytes.begin() + static_cast<std::ptrdiff_t>(at), c); break;
        case 1:
          if (bytes.size() > 1) bytes.erase(bytes.begin() + static_cast<std::ptrdiff_t>(at));
          break;
        default: bytes[at] = c; break;
      }
    }
    std::unique_ptr<char[]> copy(new char[bytes.size()]);
    std::memcpy(copy.get(), bytes.data(), bytes.size());
    try {
      tiny::io::detail::parse_safetensors(copy.get(), bytes.size(), "fuzz");
      ++loaded;
    } catch (const tiny::IOError&) {
      ++refused;
    }
  }
  EXPECT_GT(refused, 0);
  EXPECT_GT(loaded, 0);  // edits inside tensor data leave a valid file
}

// ---------------------------------------------------------------- PyTorch interoperability

TEST(SafetensorsParity, LoadsTheFileWrittenByPyTorch) {
  // from_torch.safetensors was written by tests/parity/safetensors_check.py from
  // torch tensors, laid out as safetensors.torch.save_file does (sorted by dtype
  // alignment, then name); each tensor is also in from_torch_expected/<name>.npy,
  // written by numpy from the same torch tensor.
  const StateDict s = tiny::load(parity_file("from_torch.safetensors"));
  const std::vector<std::string> order = {"labels",        "steps",       "encoder.bias", "empty",  "encoder.weight",
                                          "head.weight_t", "temperature", "token_ids",    "pixels", "mask"};
  EXPECT_EQ(names_of(s), order);
  for (const auto& name : order) {
    const Tensor expected = tiny::io::load_npy(parity_file("from_torch_expected/" + name + ".npy"));
    expect_same(s.at(name), expected, name);
  }
  EXPECT_EQ(s.at("steps").dim(), 0);
  EXPECT_EQ(s.at("steps").item<int64_t>(), 123456789012345);
  EXPECT_EQ(s.at("labels").to_vector<int64_t>(),
            (std::vector<int64_t>{std::numeric_limits<int64_t>::min(), -1, 0, 7, std::numeric_limits<int64_t>::max()}));
  EXPECT_EQ(s.at("empty").sizes(), (tiny::IntArrayRef{0, 4}));
  EXPECT_EQ(s.at("temperature").item<float>(), 0.25f);
  EXPECT_EQ(s.at("head.weight_t").sizes(), (tiny::IntArrayRef{3, 4}));
  EXPECT_EQ(s.at("token_ids").dtype(), tiny::kInt32);
  EXPECT_EQ(s.at("token_ids").to_vector<int32_t>(),
            (std::vector<int32_t>{std::numeric_limits<int32_t>::min(), -1, 0, std::numeric_limits<int32_t>::max()}));
  EXPECT_EQ(s.at("pixels").dtype(), tiny::kUInt8);
  EXPECT_EQ(s.at("pixels").to_vector<uint8_t>(), (std::vector<uint8_t>{0, 1, 127, 128, 200, 255}));
  const std::map<std::string, std::string> meta = {
      {"framework", "pt"}, {"epoch", "7"}, {"note", "written by PyTorch \xe2\x86\x92 tiny"}};
  EXPECT_EQ(s.metadata, meta);
}

// The checkpoint that safetensors_check.py expects from tiny (its tiny_expected()).
StateDict state_for_pytorch() {
  StateDict s;
  const Tensor weight = tiny::arange(0.0, 6.0, 1.0, tiny::kFloat32).sub(2.5).mul(0.5).view({2, 3});
  s.insert("weight", weight);
  s.insert("weight_t", weight.t());  // non-contiguous: saved contiguous
  s.insert("bias", tiny::from_vector<double>({0.1, -2.0, 1e300}, {3}));
  s.insert("step", tiny::scalar_tensor(int64_t{1234567890123}, tiny::kInt64));
  s.insert("ids", tiny::from_vector<int64_t>(
                      {std::numeric_limits<int64_t>::min(), -1, 0, std::numeric_limits<int64_t>::max()}, {4}));
  s.insert("mask", tiny::from_vector<bool>({true, false, false, true}, {2, 2}));
  s.insert("empty", tiny::zeros({0, 3}));
  s.insert("scale", tiny::scalar_tensor(0.1, tiny::kFloat32));
  s.insert("pixels", tiny::from_vector<uint8_t>({255, 0, 128}, {3}));
  s.insert("counts", tiny::from_vector<int32_t>({std::numeric_limits<int32_t>::min(), 5}, {1, 2}));
  s.metadata["epoch"] = "3";
  s.metadata["note"] = "tiny \xe2\x86\x92 torch \"ok\"\n";
  return s;
}

TEST(SafetensorsParity, WritesTheFileForPyTorch) {
  // Writes the checkpoint that safetensors_check.py reads with PyTorch, and
  // checks it is byte-identical to the committed from_tiny.safetensors (which
  // the script verified). Set TINY_SAFETENSORS_OUT to keep the written file,
  // e.g. to rewrite the committed one (tests/parity/README.md, "Safetensors").
  TempDir dir;
  const char* out_env = std::getenv("TINY_SAFETENSORS_OUT");
  const std::string out = out_env && *out_env ? out_env : dir.file("from_tiny.safetensors");
  const StateDict s = state_for_pytorch();
  tiny::save(s, out);
  const std::vector<char> written = slurp(out);
  EXPECT_EQ(written, slurp(parity_file("from_tiny.safetensors")))
      << "tiny::save no longer writes the committed " << parity_file("from_tiny.safetensors")
      << "; if the change is intended, rewrite it and check it with PyTorch (tests/parity/README.md)";
  const StateDict back = tiny::load(out);
  ASSERT_EQ(names_of(back), names_of(s));
  for (const auto& [name, t] : s) expect_same(back.at(name), t.contiguous(), name);
  EXPECT_EQ(back.metadata, s.metadata);
}

}  // namespace
