// Tests of the .npy format layer: round trips, files written by numpy, every
// error message, hostile bytes, and atomic writes.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "io/npy_format.h"
#include "test_util.h"
#include "tiny/error.h"

#ifndef TINY_TEST_DATA_DIR
#define TINY_TEST_DATA_DIR "tests/framework/data"
#endif

namespace fs = std::filesystem;
using tiny_test::expect_error;
using tiny::io::detail::NpyArray;
using tiny::io::detail::parse_npy;
using tiny::io::detail::read_npy_file;
using tiny::io::detail::serialize_npy;
using tiny::io::detail::write_npy_file;

namespace {

std::string data_file(const std::string& name) { return std::string(TINY_TEST_DATA_DIR) + "/npy/" + name; }

using tiny_test::slurp;
using tiny_test::spit;

std::vector<char> bytes_of(const std::string& s) { return std::vector<char>(s.begin(), s.end()); }

// Parses from an exact-size heap copy, so that a read past the end is caught by ASan.
NpyArray parse_exact(const std::vector<char>& bytes, size_t len, const std::string& name = "mem.npy") {
  std::unique_ptr<char[]> copy(new char[len ? len : 1]);
  if (len) std::memcpy(copy.get(), bytes.data(), len);
  return parse_npy(len ? copy.get() : nullptr, len, name);
}

// A .npy preamble of the given version around `header` (no padding added).
std::vector<char> with_preamble(const std::string& header, int major = 1, int minor = 0) {
  std::string out("\x93NUMPY", 6);
  out += static_cast<char>(major);
  out += static_cast<char>(minor);
  const uint32_t len = static_cast<uint32_t>(header.size());
  out += static_cast<char>(len & 0xff);
  out += static_cast<char>((len >> 8) & 0xff);
  if (major != 1) {
    out += static_cast<char>((len >> 16) & 0xff);
    out += static_cast<char>((len >> 24) & 0xff);
  }
  out += header;
  return bytes_of(out);
}


void expect_parse_error(const std::vector<char>& bytes, const std::vector<std::string>& parts) {
  expect_error([&] { parse_exact(bytes, bytes.size(), "bad.npy"); }, parts);
}

// Each test's scratch directory.
struct TempDir : tiny_test::TempDir {
  TempDir() : tiny_test::TempDir("tiny-npy-test") {}
};

const std::vector<std::string> kAllDescrs = {"<f2", "<f4", "<f8", "|i1", "<i2", "<i4",
                                             "<i8", "|u1", "<u2", "<u4", "<u8", "|b1"};

int64_t numel(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (auto d : shape) n *= d;
  return n;
}

std::vector<char> random_bytes(size_t n, const std::string& descr, uint32_t seed) {
  std::mt19937 gen(seed);
  std::vector<char> out(n);
  for (auto& b : out) b = static_cast<char>(descr == "|b1" ? gen() % 2 : gen() & 0xff);
  return out;
}

// Little-endian bytes of arange(n) converted to `descr` (bool: i % 2 == 0).
std::vector<char> arange_bytes(const std::string& descr, int64_t n) {
  std::vector<char> out;
  auto put = [&out](const void* p, size_t k) {
    const char* c = static_cast<const char*>(p);
    out.insert(out.end(), c, c + k);
  };
  static const uint16_t half[] = {0x0000, 0x3c00, 0x4000, 0x4200, 0x4400, 0x4500};
  for (int64_t i = 0; i < n; ++i) {
    const char kind = descr[1];
    const int size = descr[2] - '0';
    if (kind == 'b') {
      const char v = i % 2 == 0;
      put(&v, 1);
    } else if (kind == 'f' && size == 2) {
      put(&half[i], 2);
    } else if (kind == 'f' && size == 4) {
      const float v = static_cast<float>(i);
      put(&v, 4);
    } else if (kind == 'f') {
      const double v = static_cast<double>(i);
      put(&v, 8);
    } else {
      const uint64_t v = static_cast<uint64_t>(i);  // little-endian: the low bytes come first
      put(&v, static_cast<size_t>(size));
    }
  }
  return out;
}

}  // namespace

// ------------------------------------------------------------------ round trips

TEST(NpyFormat, RoundTripEveryDtypeAndShape) {
  TempDir dir;
  const std::vector<std::vector<int64_t>> shapes = {{}, {0}, {3}, {2, 3}, {2, 0, 4}, {1, 1, 1, 1}, {3, 1, 2, 2}};
  uint32_t seed = 1;
  for (const auto& descr : kAllDescrs) {
    for (const auto& shape : shapes) {
      const size_t nbytes = static_cast<size_t>(numel(shape)) * tiny::io::detail::descr_itemsize(descr);
      const auto data = random_bytes(nbytes, descr, seed++);
      const std::string path = dir.file("a.npy");
      write_npy_file(path, descr, shape, data.data(), nbytes);
      const NpyArray a = read_npy_file(path);
      EXPECT_EQ(a.descr, descr);
      EXPECT_EQ(a.shape, shape);
      EXPECT_FALSE(a.fortran_order);
      EXPECT_EQ(a.data, data) << descr;
      EXPECT_EQ(a.itemsize(), tiny::io::detail::descr_itemsize(descr));
      EXPECT_EQ(a.numel(), numel(shape));

      // The file's bytes are the in-memory serialization, and parse back the same.
      const auto file = slurp(path);
      EXPECT_EQ(file, serialize_npy(descr, shape, data.data(), nbytes, "x"));
      const NpyArray b = parse_exact(file, file.size());
      EXPECT_EQ(b.data, data);
      EXPECT_EQ(b.shape, shape);
    }
  }
  EXPECT_EQ(dir.entries(), std::vector<std::string>{"a.npy"});  // no temporary files left behind
}

TEST(NpyFormat, WrittenHeaderIsVersion1AlignedTo64) {
  for (const auto& shape : std::vector<std::vector<int64_t>>{{}, {7}, {123456789, 0}, std::vector<int64_t>(64, 1)}) {
    const std::vector<float> data(static_cast<size_t>(numel(shape)));
    const auto bytes = serialize_npy("<f4", shape, data.data(), data.size() * 4, "x");
    ASSERT_GE(bytes.size(), 10u);
    EXPECT_EQ(bytes[6], 1);
    EXPECT_EQ(bytes[7], 0);
    const size_t header_len = static_cast<unsigned char>(bytes[8]) | static_cast<unsigned char>(bytes[9]) << 8;
    EXPECT_EQ((10 + header_len) % 64, 0u);
    EXPECT_EQ(bytes[10 + header_len - 1], '\n');
    EXPECT_EQ(bytes.size(), 10 + header_len + static_cast<size_t>(numel(shape)) * 4);
  }
}

TEST(NpyFormat, WritesTheSameBytesAsNumpy) {
  for (const auto& descr : kAllDescrs) {
    const std::string code = descr.substr(1);
    const auto expected = slurp(data_file("dtype_" + code + ".npy"));
    const auto data = arange_bytes(descr, 6);
    EXPECT_EQ(serialize_npy(descr, {2, 3}, data.data(), data.size(), "x"), expected) << descr;
  }
  const auto vec = arange_bytes("<i8", 5);
  EXPECT_EQ(serialize_npy("<i8", {5}, vec.data(), vec.size(), "x"), slurp(data_file("vector_i8.npy")));
  const double scalar = 3.25;
  EXPECT_EQ(serialize_npy("<f8", {}, &scalar, 8, "x"), slurp(data_file("scalar_f8.npy")));
  EXPECT_EQ(serialize_npy("<f4", {0, 3}, nullptr, 0, "x"), slurp(data_file("empty_f4.npy")));
}

// ------------------------------------------------------------------ files written by numpy

TEST(NpyFormat, ReadsEveryDtypeWrittenByNumpy) {
  for (const auto& descr : kAllDescrs) {
    const NpyArray a = read_npy_file(data_file("dtype_" + descr.substr(1) + ".npy"));
    EXPECT_EQ(a.descr, descr);
    EXPECT_EQ(a.shape, (std::vector<int64_t>{2, 3}));
    EXPECT_FALSE(a.fortran_order);
    EXPECT_EQ(a.data, arange_bytes(descr, 6)) << descr;
  }
}

TEST(NpyFormat, ReadsScalarEmptyAndVectorFromNumpy) {
  const NpyArray s = read_npy_file(data_file("scalar_f8.npy"));
  EXPECT_EQ(s.descr, "<f8");
  EXPECT_TRUE(s.shape.empty());
  ASSERT_EQ(s.data.size(), 8u);
  double v;
  std::memcpy(&v, s.data.data(), 8);
  EXPECT_EQ(v, 3.25);

  const NpyArray e = read_npy_file(data_file("empty_f4.npy"));
  EXPECT_EQ(e.shape, (std::vector<int64_t>{0, 3}));
  EXPECT_TRUE(e.data.empty());
  EXPECT_EQ(e.numel(), 0);

  const NpyArray vec = read_npy_file(data_file("vector_i8.npy"));
  EXPECT_EQ(vec.shape, (std::vector<int64_t>{5}));
  EXPECT_EQ(vec.data, arange_bytes("<i8", 5));
}

TEST(NpyFormat, ReadsFortranOrderFlagAndLeavesDataInColumnMajorOrder) {
  const NpyArray a = read_npy_file(data_file("fortran_f4.npy"));
  EXPECT_TRUE(a.fortran_order);
  EXPECT_EQ(a.shape, (std::vector<int64_t>{2, 3}));
  ASSERT_EQ(a.data.size(), 24u);
  float v[6];
  std::memcpy(v, a.data.data(), 24);
  const float column_major[6] = {0, 3, 1, 4, 2, 5};
  for (int i = 0; i < 6; ++i) EXPECT_EQ(v[i], column_major[i]) << i;
}

TEST(NpyFormat, ReadsVersion2And3) {
  const NpyArray a = read_npy_file(data_file("v2_i4.npy"));
  EXPECT_EQ(a.descr, "<i4");
  EXPECT_EQ(a.shape, (std::vector<int64_t>{3, 2}));
  EXPECT_EQ(a.data, arange_bytes("<i4", 6));

  const NpyArray b = read_npy_file(data_file("v3_f4.npy"));
  EXPECT_EQ(b.shape, (std::vector<int64_t>{4}));
  EXPECT_EQ(b.data, arange_bytes("<f4", 4));
}

TEST(NpyFormat, ReadsVersion2HeaderLongerThan64KiB) {
  std::string header = "{'descr': '<u2', 'fortran_order': False, 'shape': (2,), }";
  header.append(70000 - header.size() - 1, ' ');
  header += '\n';
  auto bytes = with_preamble(header, 2);
  bytes.push_back('\x01');
  bytes.push_back('\x00');
  bytes.push_back('\x02');
  bytes.push_back('\x01');
  const NpyArray a = parse_exact(bytes, bytes.size());
  EXPECT_EQ(a.shape, (std::vector<int64_t>{2}));
  EXPECT_EQ(a.data, (std::vector<char>{1, 0, 2, 1}));
}

TEST(NpyFormat, AcceptsEquivalentHeaderSpellings) {
  // Double quotes, another key order, no trailing comma, Python 2 longs, other whitespace.
  auto bytes = with_preamble("{\"shape\":(2L,1L),\"fortran_order\":True,\"descr\":\"|f4\"}\n\t \r\n");
  bytes.resize(bytes.size() + 8, '\0');
  const NpyArray a = parse_exact(bytes, bytes.size());
  EXPECT_EQ(a.descr, "<f4");
  EXPECT_TRUE(a.fortran_order);
  EXPECT_EQ(a.shape, (std::vector<int64_t>{2, 1}));
  // Python 3 headers (format 3.0) never carry the 'L' suffix.
  expect_error([] {
    const auto v3 = with_preamble("{'descr': '<f4', 'fortran_order': False, 'shape': (2L,)}\n", 3);
    parse_exact(v3, v3.size());
  }, {"expected an integer"});
}

// ------------------------------------------------------------------ errors

TEST(NpyFormatErrors, MissingFile) {
  expect_error([] { read_npy_file("definitely/not/here/x.npy"); }, {"No such file: definitely/not/here/x.npy"});
}

TEST(NpyFormatErrors, DirectoryIsNotAFile) {
  TempDir dir;
  expect_error([&] { read_npy_file(dir.path()); }, {dir.path(), "is a directory"});
}

TEST(NpyFormatErrors, BadMagic) {
  expect_parse_error(bytes_of("hello world, this is text"), {"bad.npy", "bad magic", "hello ", "numpy.save"});
  expect_parse_error(bytes_of(std::string("PK\x03\x04 zip", 8)), {"bad.npy", ".npz", "numpy.load"});
  expect_parse_error({}, {"bad.npy", "truncated", "0 bytes"});
  TempDir dir;
  spit(dir.file("text.npy"), bytes_of("not numpy at all"));
  expect_error([&] { read_npy_file(dir.file("text.npy")); }, {dir.file("text.npy"), "bad magic"});
}

TEST(NpyFormatErrors, UnsupportedVersion) {
  const std::string header = "{'descr': '<f4', 'fortran_order': False, 'shape': (), }\n";
  expect_parse_error(with_preamble(header, 4, 0), {"bad.npy", "unsupported .npy format version 4.0", "1.0, 2.0 and 3.0"});
  expect_parse_error(with_preamble(header, 1, 1), {"unsupported .npy format version 1.1"});
  expect_parse_error(with_preamble(header, 0, 0), {"unsupported .npy format version 0.0"});
}

TEST(NpyFormatErrors, MalformedHeaderDicts) {
  struct Case {
    std::string header;
    std::string expected;
  };
  const std::vector<Case> cases = {
      {"", "must start with '{'"},
      {"['descr', '<f4']", "must start with '{'"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (2,), ", "expected a quoted key"},
      {"{'descr': '<f4', 'fortran_order': False}", "missing key(s): 'shape'"},
      {"{}", "missing key(s): 'descr' 'fortran_order' 'shape'"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (2,), 'extra': 1}", "unexpected key 'extra'"},
      {"{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, 'shape': (2,)}", "'descr' appears twice"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (2)}", "write (3,) rather than (3)"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': [2, 3]}", "'shape' must be a tuple"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (2, -3)}", "negative dimension"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (2.5,)}", "expected an integer"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999999999999,)}", "does not fit in 64 bits"},
      {"{'descr': '<f4', 'fortran_order': 'yes', 'shape': (2,)}", "must be True or False"},
      {"{'descr': '<f4', 'fortran_order': Falsey, 'shape': (2,)}", "must be True or False"},
      {"{'descr': '<f4'; 'fortran_order': False, 'shape': (2,)}", "expected ',' or '}'"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (2,)", "expected ',' or '}' after a value"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (2,)} x", "after the closing '}'"},
      {"{'descr': 5, 'fortran_order': False, 'shape': (2,)}", "'descr' must be a dtype string"},
      {"{'descr': '<f4' 'fortran_order': False, 'shape': (2,)}", "expected ',' or '}'"},
      {"{'descr': '\\x3cf4', 'fortran_order': False, 'shape': (2,)}", "escape sequences"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (2 3)}", "expected ',' or ')'"},
      {"{'desc", "unterminated string"},
      {std::string("{'descr': '<f4', \0'fortran_order': False, 'shape': (2,)}", 57), "\\x00"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.header);
    expect_parse_error(with_preamble(c.header + "\n"), {"bad.npy", "malformed .npy header", c.expected, "numpy.save"});
  }
  std::string many = "{'descr': '<f4', 'fortran_order': False, 'shape': (";
  for (int i = 0; i < 65; ++i) many += "1,";
  expect_parse_error(with_preamble(many + ")}\n"), {"more than 64 dimensions"});
}

TEST(NpyFormatErrors, UnknownDescr) {
  expect_error([] { read_npy_file(data_file("complex_c8.npy")); },
               {"complex_c8.npy", "unsupported dtype (descr '<c8')", "'<f4'", "astype('<f4')"});
  for (const std::string d : {"<U5", "|O", "<f16", "<M8[ns]", "<i3", "f4", "<F4", "|V8"}) {
    SCOPED_TRACE(d);
    expect_parse_error(with_preamble("{'descr': '" + d + "', 'fortran_order': False, 'shape': ()}\n"),
                       {"bad.npy", "unsupported dtype", "astype("});
  }
  expect_error([] { read_npy_file(data_file("structured.npy")); },
               {"structured.npy", "structured dtypes", "not supported"});
}

TEST(NpyFormatErrors, BigEndianDescr) {
  expect_error([] { read_npy_file(data_file("big_endian_f4.npy")); },
               {"big_endian_f4.npy", "big-endian", "'>f4'", "arr.astype('<f4')"});
  expect_parse_error(with_preamble("{'descr': '>i8', 'fortran_order': False, 'shape': ()}\n"),
                     {"big-endian", "arr.astype('<i8')"});
  // One-byte types have no byte order: any spelling is fine and normalized.
  auto bytes = with_preamble("{'descr': '>u1', 'fortran_order': False, 'shape': (1,)}\n");
  bytes.push_back(7);
  EXPECT_EQ(parse_exact(bytes, bytes.size()).descr, "|u1");
}

TEST(NpyFormatErrors, ShapeProductOverflow) {
  // 2^32 * 2^32 elements overflow 64 bits, even behind a zero dimension (as in numpy).
  for (const std::string shape : {"(4294967296, 4294967296)", "(0, 4294967296, 4294967296)", "(2305843009213693952,)"}) {
    SCOPED_TRACE(shape);
    expect_parse_error(with_preamble("{'descr': '<f4', 'fortran_order': False, 'shape': " + shape + "}\n"),
                       {"bad.npy", "too large", "overflows 64 bits"});
  }
}

TEST(NpyFormatErrors, DataSizeDoesNotMatchShape) {
  auto bytes = slurp(data_file("dtype_f4.npy"));  // shape (2, 3): 24 bytes of data after a 128-byte header
  ASSERT_EQ(bytes.size(), 152u);
  expect_parse_error(std::vector<char>(bytes.begin(), bytes.end() - 4),
                     {"bad.npy", "data size does not match", "(2, 3)", "needs 24 bytes", "has 20 bytes", "truncated"});
  bytes.insert(bytes.end(), {1, 2, 3});
  expect_parse_error(bytes, {"needs 24 bytes", "has 27 bytes", "3 extra bytes"});

  // A header claiming a huge array in a tiny file is refused before anything is allocated.
  auto huge = with_preamble("{'descr': '<f8', 'fortran_order': False, 'shape': (1099511627776, 1024)}\n");
  expect_parse_error(huge, {"needs 9007199254740992 bytes", "has 0 bytes"});
  TempDir dir;
  spit(dir.file("huge.npy"), huge);
  expect_error([&] { read_npy_file(dir.file("huge.npy")); }, {dir.file("huge.npy"), "needs 9007199254740992 bytes"});
}

TEST(NpyFormatErrors, HeaderLengthBeyondEndOfFile) {
  auto bytes = bytes_of(std::string("\x93NUMPY\x02\x00\xff\xff\xff\xff{}", 14));
  expect_parse_error(bytes, {"bad.npy", "truncated", "header is 4294967295 bytes long", "only 2 bytes follow"});
  TempDir dir;
  spit(dir.file("h.npy"), bytes);
  expect_error([&] { read_npy_file(dir.file("h.npy")); }, {"h.npy", "header is 4294967295 bytes long"});
}

// ------------------------------------------------------------------ hostile bytes

TEST(NpyFormatRobustness, EveryTruncationOfAValidFileIsAnError) {
  TempDir dir;
  for (const std::string name : {"dtype_f8.npy", "v2_i4.npy", "v3_f4.npy", "scalar_f8.npy", "fortran_f4.npy"}) {
    const auto bytes = slurp(data_file(name));
    for (size_t len = 0; len < bytes.size(); ++len) {
      SCOPED_TRACE(name + " truncated to " + std::to_string(len));
      EXPECT_THROW(parse_exact(bytes, len), tiny::IOError);
      spit(dir.file("t.npy"), std::vector<char>(bytes.begin(), bytes.begin() + static_cast<long>(len)));
      EXPECT_THROW(read_npy_file(dir.file("t.npy")), tiny::IOError);
    }
    EXPECT_NO_THROW(parse_exact(bytes, bytes.size()));
  }
}

TEST(NpyFormatRobustness, RandomMutationsNeverCrash) {
  // Each mutated file either parses (and then is self-consistent) or raises IOError.
  std::mt19937 gen(1234);
  int parsed = 0, refused = 0;
  for (const std::string name : {"dtype_f4.npy", "v2_i4.npy", "empty_f4.npy", "scalar_f8.npy"}) {
    const auto original = slurp(data_file(name));
    for (int trial = 0; trial < 3000; ++trial) {
      auto bytes = original;
      const int edits = 1 + static_cast<int>(gen() % 4);
      for (int e = 0; e < edits; ++e) {
        const size_t at = gen() % std::min<size_t>(bytes.size(), 80);  // mostly the preamble and header
        switch (gen() % 3) {
          case 0: bytes[at] = static_cast<char>(gen()); break;
          case 1: bytes.erase(bytes.begin() + static_cast<long>(at)); break;
          default: bytes.insert(bytes.begin() + static_cast<long>(at), "(),:'0123456789 \xff"[gen() % 18]); break;
        }
      }
      try {
        const NpyArray a = parse_exact(bytes, bytes.size());
        EXPECT_EQ(a.data.size(), static_cast<size_t>(a.numel()) * a.itemsize());
        ++parsed;
      } catch (const tiny::IOError&) {
        ++refused;
      }
    }
  }
  EXPECT_GT(refused, 0);
  EXPECT_GT(parsed + refused, 0);
}

// ------------------------------------------------------------------ atomic writes

namespace {
std::vector<char> small_valid_file(TempDir& dir, const std::string& name) {
  const float old_values[3] = {1.5f, 2.5f, 3.5f};
  write_npy_file(dir.file(name), "<f4", {3}, old_values, sizeof old_values);
  return slurp(dir.file(name));
}
}  // namespace

TEST(NpyFormatAtomicWrite, OverwritesAnExistingFileCompletely) {
  TempDir dir;
  small_valid_file(dir, "a.npy");
  const std::vector<int64_t> big(1000, 0);
  write_npy_file(dir.file("a.npy"), "<i8", {1000}, big.data(), big.size() * 8);
  const NpyArray a = read_npy_file(dir.file("a.npy"));
  EXPECT_EQ(a.shape, (std::vector<int64_t>{1000}));
  EXPECT_EQ(dir.entries(), std::vector<std::string>{"a.npy"});
}

TEST(NpyFormatAtomicWrite, PathIsADirectory) {
  TempDir dir;
  fs::create_directory(dir.file("sub"));
  const auto kept = small_valid_file(dir, "sub/keep.npy");
  const float v = 1;
  expect_error([&] { write_npy_file(dir.file("sub"), "<f4", {}, &v, 4); }, {dir.file("sub"), "is a directory"});
  EXPECT_TRUE(fs::is_directory(dir.file("sub")));
  EXPECT_EQ(slurp(dir.file("sub/keep.npy")), kept);
  EXPECT_EQ(dir.entries(), std::vector<std::string>{"sub"});
}

TEST(NpyFormatAtomicWrite, MissingDirectory) {
  TempDir dir;
  const float v = 1;
  expect_error([&] { write_npy_file(dir.file("nope/x.npy"), "<f4", {}, &v, 4); },
               {dir.file("nope/x.npy"), "does not exist"});
}

TEST(NpyFormatAtomicWrite, UnwritableDirectoryLeavesOldFileIntact) {
  TempDir dir;
  const auto old = small_valid_file(dir, "a.npy");
  // r-x for everyone: as root, the unprivileged child can enter but not write.
  fs::permissions(dir.path(),
                  fs::perms::owner_read | fs::perms::owner_exec | fs::perms::group_read | fs::perms::group_exec |
                      fs::perms::others_read | fs::perms::others_exec,
                  fs::perm_options::replace);
  const std::vector<float> v(100, 9.0f);
  bool skipped = false;
  const std::string message = tiny_test::io_error_as_unprivileged(
      [&] { write_npy_file(dir.file("a.npy"), "<f4", {100}, v.data(), 400); }, &skipped);
  fs::permissions(dir.path(), fs::perms::owner_all, fs::perm_options::replace);
  if (skipped) GTEST_SKIP() << "running as root and cannot drop privileges to test directory permissions";
  EXPECT_NE(message.find(dir.file("a.npy")), std::string::npos) << message;
  EXPECT_NE(message.find("permissions"), std::string::npos) << message;
  EXPECT_EQ(slurp(dir.file("a.npy")), old);
  EXPECT_EQ(dir.entries(), std::vector<std::string>{"a.npy"});
}

TEST(NpyFormatAtomicWrite, FailureMidWriteLeavesOldFileIntact) {
  // RLIMIT_FSIZE makes write() fail with EFBIG part way through (works as root too).
  TempDir dir;
  const auto old = small_valid_file(dir, "a.npy");
  const std::vector<double> v(1 << 17, 2.0);  // 1 MiB
  const std::string message = tiny_test::io_error_under_file_size_limit(
      64 * 1024, [&] { write_npy_file(dir.file("a.npy"), "<f8", {1 << 17}, v.data(), v.size() * 8); });
  EXPECT_NE(message.find("cannot write"), std::string::npos) << message;
  EXPECT_NE(message.find("left unchanged"), std::string::npos) << message;
  EXPECT_EQ(slurp(dir.file("a.npy")), old);
  EXPECT_EQ(dir.entries(), std::vector<std::string>{"a.npy"});  // the temporary file was removed
}

TEST(NpyFormatAtomicWrite, WritesThroughASymlink) {
  TempDir dir;
  small_valid_file(dir, "real.npy");
  fs::create_symlink("real.npy", dir.file("link.npy"));
  const int32_t v[2] = {4, 5};
  write_npy_file(dir.file("link.npy"), "<i4", {2}, v, 8);
  EXPECT_TRUE(fs::is_symlink(dir.file("link.npy")));
  EXPECT_EQ(read_npy_file(dir.file("real.npy")).shape, (std::vector<int64_t>{2}));
}

TEST(NpyFormatAtomicWrite, BadArguments) {
  TempDir dir;
  const float v[4] = {};
  expect_error<tiny::ValueError>([&] { write_npy_file(dir.file("a.npy"), "<f4", {2, 3}, v, 16); },
                                 {"a.npy", "needs 24 bytes", "16 were given"});
  expect_error<tiny::ValueError>([&] { write_npy_file(dir.file("a.npy"), ">f4", {4}, v, 16); },
                                 {"unsupported dtype string '>f4'"});
  expect_error<tiny::ValueError>([&] { write_npy_file(dir.file("a.npy"), "<f4", {-1, 4}, v, 16); },
                                 {"negative dimension"});
  expect_error<tiny::ValueError>([&] { write_npy_file(dir.file("a.npy"), "<f4", {4}, nullptr, 16); },
                                 {"null"});
  expect_error<tiny::ValueError>([&] { write_npy_file("", "<f4", {4}, v, 16); }, {"path is empty"});
  EXPECT_TRUE(dir.entries().empty());
}
