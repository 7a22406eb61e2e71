// Real data sets: Digits (CSV shipped in data/digits) and FashionMNIST (IDX
// files from Debian's dataset-fashion-mnist, read with zlib's gz* functions,
// which read gzip-compressed and plain files alike).
#include "tiny/data/datasets.h"

#include <zlib.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>
#include <string>
#include <utility>

#include "tiny/error.h"
#include "tiny/ops.h"

namespace fs = std::filesystem;

namespace tiny::data {

namespace {

bool is_file(const fs::path& p) {
  std::error_code ec;
  return fs::is_regular_file(p, ec);
}

void check_normalize(const char* who, const std::optional<Normalize>& normalize) {
  if (normalize) {
    TINY_CHECK(normalize->std > 0.0, ValueError, who, ": Normalize.std must be positive, got ", normalize->std);
  }
}

// Pixels in 0..max_value to float32 in [0, 1], then (x - mean) / std.
Tensor scale_pixels(const std::vector<uint8_t>& pixels, size_t offset, int64_t rows, int64_t cols, float max_value,
                    const std::optional<Normalize>& normalize) {
  Tensor out = empty({rows, cols}, TensorOptions(kFloat32));
  float* dst = out.data_ptr<float>();
  const float mean = normalize ? static_cast<float>(normalize->mean) : 0.0f;
  const float inv_std = normalize ? static_cast<float>(1.0 / normalize->std) : 1.0f;
  const size_t n = static_cast<size_t>(rows * cols);
  for (size_t i = 0; i < n; ++i) {
    const float x = static_cast<float>(pixels[offset + i]) / max_value;
    dst[i] = normalize ? (x - mean) * inv_std : x;
  }
  return out;
}

// ---- Digits -------------------------------------------------------------------

constexpr int64_t kDigitsRows = Digits::kNumTrain + Digits::kNumTest;  // 1797

std::string resolve_digits_path(const std::string& root_arg) {
  std::string root = root_arg.empty() ? default_data_dir() : root_arg;
  TINY_CHECK(!root.empty(), IOError,
             "Digits: cannot find tiny's data folder (the repository's data/, which holds digits/digits.csv): "
             "pass it as root, e.g. Digits(\"/path/to/repo/data\"), or set TINY_DATA_DIR=/path/to/repo/data");
  const fs::path nested = fs::path(root) / "digits" / "digits.csv";
  const fs::path flat = fs::path(root) / "digits.csv";
  if (is_file(nested)) return nested.string();
  if (is_file(flat)) return flat.string();
  TINY_THROW(IOError, "Digits: cannot open '", nested.string(), "' (no such file; also tried '", flat.string(),
             "'). The file ships with the repository in data/digits/digits.csv: pass the folder holding it as root",
             root_arg.empty() ? " or set TINY_DATA_DIR to the repository's data/ folder" : "",
             root_arg.empty() && std::getenv("TINY_DATA_DIR") ? " (TINY_DATA_DIR is set to '" : "",
             root_arg.empty() && std::getenv("TINY_DATA_DIR") ? std::getenv("TINY_DATA_DIR") : "",
             root_arg.empty() && std::getenv("TINY_DATA_DIR") ? "')" : "");
}

TensorDataset load_digits(const std::string& path, bool train, const std::optional<Normalize>& normalize) {
  check_normalize("Digits", normalize);
  std::ifstream in(path);
  TINY_CHECK(in.good(), IOError, "Digits: cannot open '", path, "': ", std::strerror(errno));
  std::vector<uint8_t> pixels;
  std::vector<int64_t> labels;
  pixels.reserve(static_cast<size_t>(kDigitsRows * Digits::kNumFeatures));
  labels.reserve(static_cast<size_t>(kDigitsRows));
  std::string line;
  int64_t line_no = 0;
  while (std::getline(in, line)) {
    ++line_no;
    if (line.empty() || line == "\r") continue;
    const char* p = line.c_str();
    for (int64_t field = 0; field <= Digits::kNumFeatures; ++field) {
      char* end = nullptr;
      const long value = std::strtol(p, &end, 10);
      TINY_CHECK(end != p, IOError, "Digits: '", path, "' line ", line_no, ": field ", field + 1,
                 " is not an integer (each line must hold 64 pixels and a label, comma-separated)");
      const bool last = field == Digits::kNumFeatures;
      if (last) {
        TINY_CHECK(value >= 0 && value < Digits::kNumClasses, IOError, "Digits: '", path, "' line ", line_no,
                   ": the label is ", value, ", expected 0 to 9");
        labels.push_back(value);
      } else {
        TINY_CHECK(value >= 0 && value <= 16, IOError, "Digits: '", path, "' line ", line_no, ": pixel ", field,
                   " is ", value, ", expected 0 to 16");
        pixels.push_back(static_cast<uint8_t>(value));
      }
      p = end;
      if (!last) {
        TINY_CHECK(*p == ',', IOError, "Digits: '", path, "' line ", line_no, ": expected 65 comma-separated "
                   "values (64 pixels and a label), found only ", field + 1);
        ++p;
      }
    }
    while (*p == '\r' || *p == ' ') ++p;
    TINY_CHECK(*p == '\0', IOError, "Digits: '", path, "' line ", line_no,
               ": more than 65 values (expected 64 pixels and a label)");
  }
  const int64_t rows = static_cast<int64_t>(labels.size());
  TINY_CHECK(rows == kDigitsRows, IOError, "Digits: '", path, "' holds ", rows, " images, expected ", kDigitsRows,
             ": the file is truncated or is not the one shipped in data/digits (see its README.md for the checksum)");
  // Every fifth image (rows 4, 9, 14, ...) is a test image. The file is
  // ordered roughly by writer, so a block split (the last 360 rows) tests on
  // writers never seen in training: an MLP then scores ~91% in tiny and in
  // PyTorch alike, against ~97% on this interleaved split.
  std::vector<uint8_t> split_pixels;
  std::vector<int64_t> split_labels;
  for (int64_t r = 0; r < rows; ++r) {
    if (Digits::is_test_row(r) == train) continue;
    split_pixels.insert(split_pixels.end(), pixels.begin() + r * Digits::kNumFeatures,
                        pixels.begin() + (r + 1) * Digits::kNumFeatures);
    split_labels.push_back(labels[static_cast<size_t>(r)]);
  }
  const int64_t count = static_cast<int64_t>(split_labels.size());
  Tensor data = scale_pixels(split_pixels, 0, count, Digits::kNumFeatures, 16.0f, normalize);
  Tensor targets = from_vector(split_labels);
  return TensorDataset(data, targets);
}

// ---- IDX / FashionMNIST ----------------------------------------------------------------

const char* const kFashionHint =
    "Fashion-MNIST comes from Debian's package dataset-fashion-mnist, which puts it in "
    "/usr/share/datasets/fashion-mnist: install it with `sudo apt-get install dataset-fashion-mnist` "
    "(./workbook installs it for you), or pass the folder holding the IDX files as root";

uint32_t big_endian_u32(const uint8_t* p) {
  return (static_cast<uint32_t>(p[0]) << 24) | (static_cast<uint32_t>(p[1]) << 16) |
         (static_cast<uint32_t>(p[2]) << 8) | static_cast<uint32_t>(p[3]);
}

// The whole content of a file, decompressed if it is gzip.
std::vector<uint8_t> read_maybe_gzip(const std::string& path) {
  TINY_CHECK(is_file(path), IOError, "cannot open '", path, "': no such file");
  gzFile file = gzopen(path.c_str(), "rb");
  TINY_CHECK(file != nullptr, IOError, "cannot open '", path, "': ", std::strerror(errno));
  gzbuffer(file, 1 << 17);
  std::vector<uint8_t> bytes;
  constexpr size_t kChunk = 1 << 20;
  for (;;) {
    const size_t old_size = bytes.size();
    bytes.resize(old_size + kChunk);
    const int got = gzread(file, bytes.data() + old_size, static_cast<unsigned>(kChunk));
    if (got < 0) {
      int code = 0;
      const std::string message = gzerror(file, &code);
      gzclose(file);
      TINY_THROW(IOError, "'", path, "' is corrupt or truncated: decompressing it failed (", message, ")");
    }
    bytes.resize(old_size + static_cast<size_t>(got));
    if (got == 0) break;
  }
  int code = Z_OK;
  const std::string message = gzerror(file, &code);
  gzclose(file);
  TINY_CHECK(code == Z_OK || code == Z_STREAM_END, IOError, "'", path,
             "' is corrupt or truncated: decompressing it failed (", message, ")");
  return bytes;
}

std::string find_idx(const std::string& root, const std::string& name) {
  const fs::path plain = fs::path(root) / name;
  const fs::path gz = fs::path(root) / (name + ".gz");
  if (is_file(plain)) return plain.string();
  if (is_file(gz)) return gz.string();
  TINY_THROW(IOError, "FashionMNIST: cannot open '", gz.string(), "' (no such file; also tried '", plain.string(),
             "'). ", kFashionHint, ".");
}

}  // namespace

std::string default_data_dir() {
  if (const char* env = std::getenv("TINY_DATA_DIR"); env != nullptr && *env != '\0') return env;
  // Walks up from `start` looking for data/digits/digits.csv.
  const auto search_up = [](const fs::path& start) -> std::string {
    for (fs::path dir = start; !dir.empty(); dir = dir.parent_path()) {
      if (is_file(dir / "data" / "digits" / "digits.csv")) return (dir / "data").string();
      if (dir == dir.root_path()) break;
    }
    return "";
  };
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    if (std::string found = search_up(exe.parent_path()); !found.empty()) return found;
  }
  const fs::path cwd = fs::current_path(ec);
  if (!ec) {
    if (std::string found = search_up(cwd); !found.empty()) return found;
  }
#ifdef TINY_DEFAULT_DATA_DIR
  return TINY_DEFAULT_DATA_DIR;
#else
  // The repository this library was built from (not __FILE__: ccache compiles with relative paths).
  const fs::path data = fs::path(TINY_SOURCE_DATA_DIR);
  if (data.is_absolute() && is_file(data / "digits" / "digits.csv")) return data.string();
  return "";
#endif
}

IdxFile read_idx(const std::string& path, int expected_dims) {
  std::vector<uint8_t> bytes = read_maybe_gzip(path);
  TINY_CHECK(bytes.size() >= 4, IOError, "'", path, "' is truncated: ", bytes.size(),
             " bytes, but an IDX file starts with a 4-byte magic number");
  const uint32_t magic = big_endian_u32(bytes.data());
  const int dims = bytes[3];
  if (bytes[0] != 0 || bytes[1] != 0 || bytes[2] != 0x08 || dims == 0) {
    char hex[16];
    std::snprintf(hex, sizeof hex, "0x%08X", magic);
    TINY_THROW(IOError, "'", path, "' has a bad magic number ", hex,
               ": it is not an IDX file of unsigned bytes (expected 0x00000803 for images, 0x00000801 for labels)");
  }
  if (expected_dims > 0) {
    TINY_CHECK(dims == expected_dims, IOError, "'", path, "' has ", dims, " dimensions (magic 0x0000080", dims,
               "), expected ", expected_dims, " (magic 0x0000080", expected_dims, ")");
  }
  const size_t header = 4 + 4 * static_cast<size_t>(dims);
  TINY_CHECK(bytes.size() >= header, IOError, "'", path, "' is truncated: its header needs ", header,
             " bytes for ", dims, " dimensions, the file has ", bytes.size());
  IdxFile out;
  size_t expected = 1;
  std::string shape_text;
  for (int d = 0; d < dims; ++d) {
    const uint32_t n = big_endian_u32(bytes.data() + 4 + 4 * static_cast<size_t>(d));
    out.shape.push_back(static_cast<int64_t>(n));
    shape_text += (d ? " x " : "") + std::to_string(n);
    // A corrupt header can claim 2^64 bytes, which would wrap around to a small count that the data matches.
    TINY_CHECK(!__builtin_mul_overflow(expected, static_cast<size_t>(n), &expected), IOError, "'", path,
               "' is corrupt: its header's dimensions ", shape_text, "... multiply to more than 2^64 bytes");
  }
  const size_t present = bytes.size() - header;
  TINY_CHECK(present >= expected, IOError, "'", path, "' is truncated: its header promises ", shape_text, " = ",
             expected, " bytes of data but only ", present, " follow");
  TINY_CHECK(present == expected, IOError, "'", path, "' is corrupt: ", present - expected,
             " unexpected bytes follow the ", shape_text, " = ", expected, " bytes of data its header promises");
  bytes.erase(bytes.begin(), bytes.begin() + static_cast<std::ptrdiff_t>(header));
  out.data = std::move(bytes);
  return out;
}

// ---- Digits --------------------------------------------------------------------

Digits::Digits(const std::string& root, bool train, std::optional<Normalize> normalize)
    : TensorDataset(load_digits(resolve_digits_path(root), train, normalize)), path_(resolve_digits_path(root)) {}

// ---- FashionMNIST -------------------------------------------------------------------

namespace {

struct FashionFiles {
  std::string images;
  std::string labels;
};

FashionFiles find_fashion(const std::string& root, bool train) {
  const std::string prefix = train ? "train" : "t10k";
  return {find_idx(root, prefix + "-images-idx3-ubyte"), find_idx(root, prefix + "-labels-idx1-ubyte")};
}

TensorDataset load_fashion(const FashionFiles& files, const std::optional<Normalize>& normalize) {
  check_normalize("FashionMNIST", normalize);
  IdxFile images;
  IdxFile labels;
  try {
    images = read_idx(files.images, 3);
    labels = read_idx(files.labels, 1);
  } catch (const IOError& e) {
    TINY_THROW(IOError, "FashionMNIST: ", e.what(),
               ". Reinstall the files with `sudo apt-get install --reinstall dataset-fashion-mnist`; ", kFashionHint,
               ".");
  }
  TINY_CHECK(images.shape[1] == 28 && images.shape[2] == 28, IOError, "FashionMNIST: '", files.images,
             "' holds ", images.shape[1], "x", images.shape[2], " images, expected 28x28. ", kFashionHint, ".");
  const int64_t n = images.shape[0];
  TINY_CHECK(n == labels.shape[0], IOError, "FashionMNIST: the counts of images and labels differ: '", files.images,
             "' holds ", n, " images but '", files.labels, "' holds ", labels.shape[0],
             " labels (a file is truncated or belongs to the other split). ", kFashionHint, ".");
  std::vector<int64_t> targets(static_cast<size_t>(n));
  for (size_t i = 0; i < targets.size(); ++i) {
    TINY_CHECK(labels.data[i] < FashionMNIST::kNumClasses, IOError, "FashionMNIST: '", files.labels,
               "' is corrupt: label ", i, " is ", static_cast<int>(labels.data[i]), ", expected 0 to 9");
    targets[i] = labels.data[i];
  }
  Tensor data = scale_pixels(images.data, 0, n, 28 * 28, 255.0f, normalize);
  return TensorDataset(data, from_vector(targets));
}

}  // namespace

FashionMNIST::FashionMNIST(const std::string& root, bool train, std::optional<Normalize> normalize)
    : TensorDataset(load_fashion(find_fashion(root, train), normalize)) {
  const FashionFiles files = find_fashion(root, train);
  images_path_ = files.images;
  labels_path_ = files.labels;
}

const std::vector<std::string>& FashionMNIST::classes() {
  static const std::vector<std::string> names = {"T-shirt/top", "Trouser", "Pullover", "Dress", "Coat",
                                                 "Sandal",      "Shirt",   "Sneaker",  "Bag",   "Ankle boot"};
  return names;
}

}  // namespace tiny::data
