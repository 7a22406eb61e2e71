// Tests of tiny::data's real data sets: Digits (data/digits/digits.csv,
// compared value by value with the CSV read here independently) and
// FashionMNIST (Debian's dataset-fashion-mnist when installed, skipped with
// the reason otherwise), plus the IDX reader on small files written here,
// plain and gzip-compressed, and the errors for missing, truncated and
// corrupt files.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "tiny/data/data.h"
#include "tiny/error.h"
#include "tiny/ops.h"
#include "tiny/tensor.h"

namespace fs = std::filesystem;
using tiny::Tensor;
using namespace tiny::data;  // NOLINT

namespace {

// A fresh directory per test, removed afterwards.
class DatasetsTemp : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = fs::temp_directory_path() / ("tiny_test_datasets_" + std::to_string(::getpid()) + "_" + info->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  std::string path(const std::string& name) const { return (dir_ / name).string(); }
  fs::path dir_;
};

void write_bytes(const std::string& path, const std::vector<uint8_t>& bytes) {
  std::ofstream out(path, std::ios::binary);
  out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  ASSERT_TRUE(out.good()) << path;
}

void put_be32(std::vector<uint8_t>& out, uint32_t v) {
  for (int shift = 24; shift >= 0; shift -= 8) out.push_back(static_cast<uint8_t>(v >> shift));
}

// An IDX file of unsigned bytes with the given dimensions and data.
std::vector<uint8_t> idx_bytes(const std::vector<uint32_t>& dims, const std::vector<uint8_t>& data) {
  std::vector<uint8_t> out = {0, 0, 0x08, static_cast<uint8_t>(dims.size())};
  for (uint32_t d : dims) put_be32(out, d);
  out.insert(out.end(), data.begin(), data.end());
  return out;
}

uint32_t crc32(const std::vector<uint8_t>& data) {
  uint32_t crc = 0xFFFFFFFFu;
  for (uint8_t byte : data) {
    crc ^= byte;
    for (int k = 0; k < 8; ++k) crc = (crc >> 1) ^ (0xEDB88320u & (0u - (crc & 1u)));
  }
  return ~crc;
}

// A valid gzip file (RFC 1952) holding `data` in stored (uncompressed) deflate blocks.
std::vector<uint8_t> gzip_stored(const std::vector<uint8_t>& data) {
  std::vector<uint8_t> out = {0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 0xff};
  size_t pos = 0;
  do {
    const size_t n = std::min<size_t>(65535, data.size() - pos);
    const bool last = pos + n == data.size();
    out.push_back(last ? 1 : 0);
    out.push_back(static_cast<uint8_t>(n & 0xff));
    out.push_back(static_cast<uint8_t>(n >> 8));
    out.push_back(static_cast<uint8_t>(~n & 0xff));
    out.push_back(static_cast<uint8_t>((~n >> 8) & 0xff));
    out.insert(out.end(), data.begin() + static_cast<std::ptrdiff_t>(pos),
               data.begin() + static_cast<std::ptrdiff_t>(pos + n));
    pos += n;
  } while (pos < data.size());
  const uint32_t crc = crc32(data);
  const uint32_t size = static_cast<uint32_t>(data.size());
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<uint8_t>(crc >> (8 * i)));
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<uint8_t>(size >> (8 * i)));
  return out;
}

// Three 28x28 images (pixel j of image i = (7*i + j) % 256) and their labels.
std::vector<uint8_t> small_pixels() {
  std::vector<uint8_t> p(3 * 784);
  for (size_t i = 0; i < 3; ++i) {
    for (size_t j = 0; j < 784; ++j) p[i * 784 + j] = static_cast<uint8_t>((7 * i + j) % 256);
  }
  return p;
}
const std::vector<uint8_t> kSmallLabels = {9, 0, 3};

// Runs fn, which must throw tiny::IOError whose message holds every one of `parts`.
template <typename Fn>
void expect_io_error(Fn fn, const std::vector<std::string>& parts) {
  try {
    fn();
    ADD_FAILURE() << "expected a tiny::IOError";
  } catch (const tiny::IOError& e) {
    const std::string m = e.what();
    for (const std::string& part : parts) EXPECT_NE(m.find(part), std::string::npos) << "'" << part << "' not in: " << m;
  }
}

// The CSV, parsed here independently of tiny::data: 1797 rows of 65 integers.
std::vector<std::vector<int>> read_csv(const std::string& path) {
  std::ifstream in(path);
  std::vector<std::vector<int>> rows;
  std::string line;
  while (std::getline(in, line)) {
    std::stringstream fields(line);
    std::string field;
    std::vector<int> row;
    while (std::getline(fields, field, ',')) row.push_back(std::stoi(field));
    rows.push_back(row);
  }
  return rows;
}

class EnvVar {
 public:
  EnvVar(const char* name, const std::string& value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    setenv(name, value.c_str(), 1);
  }
  ~EnvVar() {
    if (old_) {
      setenv(name_, old_->c_str(), 1);
    } else {
      unsetenv(name_);
    }
  }

 private:
  const char* name_;
  std::optional<std::string> old_;
};

}  // namespace

// ---- Digits ------------------------------------------------------------------------

TEST(Datasets, DigitsLoadsAll1797ImagesWithLabelsAndRange) {
  Digits train;
  Digits test("", /*train=*/false);
  EXPECT_EQ(train.size(), 1438);
  EXPECT_EQ(test.size(), 359);
  EXPECT_EQ(train.size() + test.size(), 1797);
  for (const Digits* d : {&train, &test}) {
    EXPECT_EQ(d->data().dtype(), tiny::kFloat32);
    EXPECT_EQ(d->data().sizes(), (tiny::IntArrayRef{d->size(), 64}));
    EXPECT_EQ(d->targets().dtype(), tiny::kInt64);
    EXPECT_EQ(d->targets().sizes(), (tiny::IntArrayRef{d->size()}));
    EXPECT_EQ(d->data().min().item<float>(), 0.0f);
    EXPECT_EQ(d->data().max().item<float>(), 1.0f);
  }
  // Class counts of the whole set (scikit-learn's load_digits: 178, 182, ...).
  std::array<int, 10> counts{};
  for (const Digits* d : {&train, &test}) {
    for (int64_t y : d->targets().to_vector<int64_t>()) {
      ASSERT_GE(y, 0);
      ASSERT_LE(y, 9);
      ++counts[static_cast<size_t>(y)];
    }
  }
  EXPECT_EQ(counts, (std::array<int, 10>{178, 182, 177, 183, 181, 182, 181, 179, 174, 180}));
  // The first image starts 0, 0, 5, 13 (pixels / 16) and is a 0.
  const std::vector<float> first = train.get(0).data.to_vector<float>();
  EXPECT_FLOAT_EQ(first[2], 5.0f / 16);
  EXPECT_FLOAT_EQ(first[3], 13.0f / 16);
  EXPECT_EQ(train.get(0).target.item<int64_t>(), 0);
}

TEST(Datasets, DigitsMatchesTheCsvAndTheDocumentedSplit) {
  Digits train;
  Digits test("", false);
  const std::vector<std::vector<int>> rows = read_csv(train.path());
  ASSERT_EQ(rows.size(), 1797u);
  const std::vector<float> xs = train.data().to_vector<float>();
  const std::vector<float> xt = test.data().to_vector<float>();
  const std::vector<int64_t> ys = train.targets().to_vector<int64_t>();
  const std::vector<int64_t> yt = test.targets().to_vector<int64_t>();
  for (size_t r = 0; r < rows.size(); ++r) {
    ASSERT_EQ(rows[r].size(), 65u);
    const bool in_train = r % 5 != 4;  // every fifth line is a test image
    const size_t i = in_train ? r - (r + 1) / 5 : r / 5;
    const std::vector<float>& x = in_train ? xs : xt;
    for (size_t j = 0; j < 64; ++j) ASSERT_EQ(x[i * 64 + j], static_cast<float>(rows[r][j]) / 16.0f) << r << "," << j;
    ASSERT_EQ((in_train ? ys : yt)[i], rows[r][64]) << "row " << r;
  }
}

TEST(Datasets, DigitsDefaultDirAndNormalize) {
  const std::string dir = default_data_dir();
  ASSERT_FALSE(dir.empty());
  EXPECT_TRUE(fs::is_regular_file(fs::path(dir) / "digits" / "digits.csv")) << dir;
  Digits explicit_root(dir);
  EXPECT_EQ(explicit_root.size(), 1438);
  Digits plain;
  Digits normal("", true, Normalize{0.25, 0.5});
  EXPECT_TRUE(tiny::allclose(normal.data(), (plain.data() - 0.25) / 0.5, 1e-6, 1e-6));
  EXPECT_THROW(Digits("", true, Normalize{0.0, 0.0}), tiny::ValueError);
}

TEST_F(DatasetsTemp, DigitsHonoursTinyDataDirAndReportsBadFiles) {
  const std::string shipped = Digits().path();
  fs::create_directories(dir_ / "digits");
  fs::copy_file(shipped, dir_ / "digits" / "digits.csv");
  {
    EnvVar env("TINY_DATA_DIR", dir_.string());
    EXPECT_EQ(default_data_dir(), dir_.string());
    Digits d;
    EXPECT_EQ(d.path(), (dir_ / "digits" / "digits.csv").string());
    EXPECT_EQ(d.size(), 1438);
  }
  // root may also be the folder holding digits.csv itself.
  EXPECT_EQ(Digits((dir_ / "digits").string()).size(), 1438);

  // Missing: names the file and says how to point at it.
  EnvVar env("TINY_DATA_DIR", path("nowhere"));
  expect_io_error([] { Digits d; }, {"nowhere", "digits.csv", "TINY_DATA_DIR"});
  expect_io_error([&] { Digits d(path("elsewhere")); }, {"elsewhere", "no such file"});

  // Truncated: 100 of the 1797 lines.
  fs::create_directories(dir_ / "short");
  {
    std::ifstream in(shipped);
    std::ofstream out(dir_ / "short" / "digits.csv");
    std::string line;
    for (int i = 0; i < 100 && std::getline(in, line); ++i) out << line << "\n";
  }
  expect_io_error([&] { Digits d(path("short")); }, {"holds 100 images, expected 1797"});
  // A malformed line.
  fs::create_directories(dir_ / "bad");
  {
    std::ofstream out(dir_ / "bad" / "digits.csv");
    out << "1,2,3\n";
  }
  expect_io_error([&] { Digits d(path("bad")); }, {"line 1", "65"});
}

TEST(Datasets, DigitsInADataLoader) {
  auto train = std::make_shared<Digits>();
  DataLoaderOptions o;
  o.batch_size = 64;
  o.shuffle = true;
  o.generator = tiny::Generator(0);
  o.num_workers = 2;
  DataLoader loader(train, o);
  EXPECT_EQ(loader.size(), 23);
  int64_t seen = 0;
  for (const Batch& b : loader) {
    EXPECT_EQ(b.data.size(1), 64);
    seen += b.data.size(0);
  }
  EXPECT_EQ(seen, 1438);
}

// ---- FashionMNIST: the real files ------------------------------------------------

TEST(Datasets, FashionMNISTLoadsTheDebianPackage) {
  const fs::path root = FashionMNIST::kDebianRoot;
  for (const char* f : {"train-images-idx3-ubyte", "train-labels-idx1-ubyte", "t10k-images-idx3-ubyte",
                        "t10k-labels-idx1-ubyte"}) {
    if (!fs::exists(root / f) && !fs::exists(root / (std::string(f) + ".gz"))) {
      GTEST_SKIP() << "Fashion-MNIST is not installed (" << (root / f).string()
                   << "[.gz] is missing): sudo apt-get install dataset-fashion-mnist, or run ./workbook";
    }
  }
  FashionMNIST train;
  FashionMNIST test(FashionMNIST::kDebianRoot, false);
  EXPECT_EQ(train.size(), 60000);
  EXPECT_EQ(test.size(), 10000);
  for (const FashionMNIST* d : {&train, &test}) {
    EXPECT_EQ(d->data().dtype(), tiny::kFloat32);
    EXPECT_EQ(d->data().sizes(), (tiny::IntArrayRef{d->size(), 784}));
    EXPECT_EQ(d->targets().dtype(), tiny::kInt64);
    EXPECT_EQ(d->data().min().item<float>(), 0.0f);
    EXPECT_EQ(d->data().max().item<float>(), 1.0f);
    std::array<int64_t, 10> counts{};
    for (int64_t y : d->targets().to_vector<int64_t>()) {
      ASSERT_GE(y, 0);
      ASSERT_LE(y, 9);
      ++counts[static_cast<size_t>(y)];
    }
    for (int64_t c : counts) EXPECT_EQ(c, d->size() / 10) << "Fashion-MNIST is balanced";
  }
  // The documented normalisation constants are the training set's statistics.
  const float* x = train.data().data_ptr<float>();
  const int64_t n = train.data().numel();
  double sum = 0.0;
  double sum_sq = 0.0;
  for (int64_t i = 0; i < n; ++i) {
    sum += x[i];
    sum_sq += static_cast<double>(x[i]) * x[i];
  }
  const double mean = sum / static_cast<double>(n);
  const double std = std::sqrt(sum_sq / static_cast<double>(n) - mean * mean);
  EXPECT_NEAR(mean, FashionMNIST::kMean, 5e-4);
  EXPECT_NEAR(std, FashionMNIST::kStd, 5e-4);
  FashionMNIST normal(FashionMNIST::kDebianRoot, false, Normalize{FashionMNIST::kMean, FashionMNIST::kStd});
  EXPECT_TRUE(tiny::allclose(normal.data(), (test.data() - FashionMNIST::kMean) / FashionMNIST::kStd, 1e-5, 1e-5));
  EXPECT_EQ(FashionMNIST::classes().size(), 10u);
  EXPECT_EQ(FashionMNIST::classes()[9], "Ankle boot");
}

// ---- IDX files written here ---------------------------------------------------------

TEST_F(DatasetsTemp, IdxPlainAndGzipLoad) {
  const std::vector<uint8_t> pixels = small_pixels();
  for (bool gz : {false, true}) {
    SCOPED_TRACE(gz ? "gzip" : "plain");
    const std::string suffix = gz ? ".gz" : "";
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    auto images = idx_bytes({3, 28, 28}, pixels);
    auto labels = idx_bytes({3}, kSmallLabels);
    write_bytes(path("t10k-images-idx3-ubyte" + suffix), gz ? gzip_stored(images) : images);
    write_bytes(path("t10k-labels-idx1-ubyte" + suffix), gz ? gzip_stored(labels) : labels);
    FashionMNIST d(dir_.string(), /*train=*/false);
    EXPECT_EQ(d.images_path(), path("t10k-images-idx3-ubyte" + suffix));
    ASSERT_EQ(d.size(), 3);
    EXPECT_EQ(d.targets().to_vector<int64_t>(), (std::vector<int64_t>{9, 0, 3}));
    const std::vector<float> x = d.data().to_vector<float>();
    for (size_t i = 0; i < pixels.size(); ++i) ASSERT_EQ(x[i], static_cast<float>(pixels[i]) / 255.0f) << i;
    IdxFile f = read_idx(path("t10k-labels-idx1-ubyte" + suffix));
    EXPECT_EQ(f.shape, (std::vector<int64_t>{3}));
    EXPECT_EQ(f.data, kSmallLabels);
  }
  // A gzip file larger than one stored block (and one read chunk of the reader).
  std::vector<uint8_t> big(3'000'000);
  for (size_t i = 0; i < big.size(); ++i) big[i] = static_cast<uint8_t>(i * 31 + 7);
  write_bytes(path("big.gz"), gzip_stored(idx_bytes({3000, 1000}, big)));
  IdxFile f = read_idx(path("big.gz"), 2);
  EXPECT_EQ(f.shape, (std::vector<int64_t>{3000, 1000}));
  EXPECT_EQ(f.data, big);
}

TEST_F(DatasetsTemp, IdxErrorsNameTheFileAndTheProblem) {
  const std::vector<uint8_t> pixels = small_pixels();
  const std::string images = path("train-images-idx3-ubyte");
  const std::string labels = path("train-labels-idx1-ubyte");
  const auto load = [&] { FashionMNIST d(dir_.string(), true); };

  // Missing files: says which and how to install them.
  expect_io_error(load, {"train-images-idx3-ubyte.gz", "no such file",
                         "sudo apt-get install dataset-fashion-mnist", "./workbook"});
  write_bytes(labels, idx_bytes({3}, kSmallLabels));

  // Bad magic: a text file, and a file of int32 (type 0x0C) data.
  write_bytes(images, {'h', 'e', 'l', 'l', 'o', ' ', 'w', 'o', 'r', 'l', 'd'});
  expect_io_error(load, {images, "bad magic number 0x68656C6C", "dataset-fashion-mnist"});
  auto ints = idx_bytes({3, 28, 28}, pixels);
  ints[2] = 0x0C;
  write_bytes(images, ints);
  expect_io_error(load, {images, "bad magic number 0x00000C03"});
  // The labels file where the images should be: 1 dimension, not 3.
  write_bytes(images, idx_bytes({3}, kSmallLabels));
  expect_io_error(load, {images, "1 dimensions", "expected 3"});

  // Truncated data, truncated header, trailing bytes.
  auto cut = idx_bytes({3, 28, 28}, pixels);
  cut.resize(cut.size() - 100);
  write_bytes(images, cut);
  expect_io_error(load, {images, "truncated", "3 x 28 x 28 = 2352 bytes", "only 2252 follow"});
  write_bytes(images, {0, 0, 8, 3, 0, 0});
  expect_io_error(load, {images, "truncated", "header"});
  auto longer = idx_bytes({3, 28, 28}, pixels);
  longer.push_back(1);
  write_bytes(images, longer);
  expect_io_error(load, {images, "1 unexpected bytes"});

  // Counts of images and labels differ.
  write_bytes(images, idx_bytes({3, 28, 28}, pixels));
  write_bytes(labels, idx_bytes({2}, {1, 2}));
  expect_io_error(load, {"counts of images and labels differ", images, "3 images", labels, "2 labels"});
  // A label out of range.
  write_bytes(labels, idx_bytes({3}, {1, 2, 10}));
  expect_io_error(load, {labels, "label 2 is 10"});

  // A gzip file cut short.
  write_bytes(labels, idx_bytes({3}, kSmallLabels));
  fs::remove(images);
  auto gz = gzip_stored(idx_bytes({3, 28, 28}, pixels));
  gz.resize(gz.size() / 2);
  write_bytes(images + ".gz", gz);
  expect_io_error(load, {images + ".gz"});
  expect_io_error([&] { read_idx(images + ".gz"); }, {images + ".gz", "truncated"});
  FashionMNIST ok_after_fix = [&] {
    write_bytes(images + ".gz", gzip_stored(idx_bytes({3, 28, 28}, pixels)));
    return FashionMNIST(dir_.string(), true);
  }();
  EXPECT_EQ(ok_after_fix.size(), 3);
}
