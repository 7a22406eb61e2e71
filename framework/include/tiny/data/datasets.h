/// @file datasets.h
/// @brief Real data sets: `Digits` (shipped in data/digits) and `FashionMNIST` (Debian's dataset-fashion-mnist), like `torchvision.datasets`.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "tiny/data/dataset.h"

namespace tiny::data {

/// @brief `(x - mean) / std` applied to every pixel after scaling to [0, 1] (torchvision's `transforms.Normalize((mean,), (std,))`).
struct Normalize {
  double mean = 0.0;  ///< subtracted first
  double std = 1.0;   ///< then divided by; must be > 0
};

/// @brief The folder holding tiny's shipped data sets (`data/` of the repository), or "" if none is found.
///
/// First match wins: the environment variable `TINY_DATA_DIR` (returned as
/// given, even if it does not exist, so a typo gives a clear error later); a
/// folder `data/` holding `digits/digits.csv` found by walking up from the
/// running executable's folder, then from the current working directory; the
/// repository's `data/` folder as recorded
/// when tiny was compiled (the compile definition `TINY_DEFAULT_DATA_DIR` when
/// the build sets one, else the path of tiny's own sources). PyTorch has no
/// equivalent: torchvision data sets always take a `root`.
std::string default_data_dir();

/// @brief The UCI / scikit-learn 8x8 handwritten digits: 1,797 images of 0-9 (scikit-learn's `load_digits()` as a torchvision-style data set).
///
/// Read from `digits/digits.csv` under the data folder (see data/digits/README.md).
/// `data()` is float32 [N, 64], pixels / 16 so in [0, 1] (then normalised if
/// asked); `targets()` is int64 [N] in 0..9. Fixed split, no shuffling: every
/// fifth image (file rows 4, 9, 14, ...) is a test image (359), the rest train (1,438).
class Digits : public TensorDataset {
 public:
  /// @brief Images in the training split.
  static constexpr int64_t kNumTrain = 1438;
  /// @brief Images in the test split.
  static constexpr int64_t kNumTest = 359;
  /// @brief True when row `r` of the file belongs to the test split.
  static constexpr bool is_test_row(int64_t r) { return r % 5 == 4; }
  /// @brief Pixels per image (8 x 8).
  static constexpr int64_t kNumFeatures = 64;
  /// @brief Number of classes.
  static constexpr int64_t kNumClasses = 10;

  /// @brief Loads the `train` or test split (torchvision's `MNIST(root, train)`).
  ///
  /// `root` is the folder holding `digits/digits.csv` (or `digits.csv` itself);
  /// empty means default_data_dir(), which `TINY_DATA_DIR` overrides. A missing
  /// or malformed file throws tiny::IOError naming it and what is wrong.
  explicit Digits(const std::string& root = "", bool train = true,
                  std::optional<Normalize> normalize = std::nullopt);
  /// @brief The CSV file that was read.
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

/// @brief Zalando's Fashion-MNIST: 28x28 grey-scale clothes in 10 classes, 60,000 train / 10,000 test (PyTorch's `torchvision.datasets.FashionMNIST`).
///
/// Reads the IDX files `{train,t10k}-{images-idx3,labels-idx1}-ubyte`, gzip
/// compressed (`.gz`, as Debian ships them) or not, from `root`; Debian's
/// package `dataset-fashion-mnist` puts them in /usr/share/datasets/fashion-mnist
/// (`sudo apt-get install dataset-fashion-mnist`; `./workbook` installs it).
/// `data()` is float32 [N, 784], pixels / 255 so in [0, 1] (then normalised if
/// asked); `targets()` is int64 [N] in 0..9. A missing, truncated or corrupt file
/// throws tiny::IOError naming the file, what is wrong and how to get it.
class FashionMNIST : public TensorDataset {
 public:
  /// @brief Where Debian's dataset-fashion-mnist package installs the files.
  static constexpr const char* kDebianRoot = "/usr/share/datasets/fashion-mnist";
  /// @brief Mean of the training pixels in [0, 1], for Normalize (the value torchvision tutorials use).
  static constexpr double kMean = 0.2860;
  /// @brief Standard deviation of the training pixels in [0, 1], for Normalize.
  static constexpr double kStd = 0.3530;
  /// @brief Number of classes.
  static constexpr int64_t kNumClasses = 10;

  /// @brief Loads the `train` (60,000) or test (10,000) split from `root` (torchvision's `FashionMNIST(root, train)`).
  explicit FashionMNIST(const std::string& root = kDebianRoot, bool train = true,
                        std::optional<Normalize> normalize = std::nullopt);
  /// @brief The class names, index = label ("T-shirt/top", "Trouser", ...) (torchvision's `classes`).
  static const std::vector<std::string>& classes();
  /// @brief The images file that was read.
  const std::string& images_path() const { return images_path_; }
  /// @brief The labels file that was read.
  const std::string& labels_path() const { return labels_path_; }

 private:
  std::string images_path_;
  std::string labels_path_;
};

/// @brief An IDX file of unsigned bytes: its dimensions and raw data (the format of (Fashion-)MNIST).
struct IdxFile {
  std::vector<int64_t> shape;  ///< e.g. {60000, 28, 28}
  std::vector<uint8_t> data;   ///< product(shape) bytes, row-major
};

/// @brief Reads an IDX file of unsigned bytes, gzip-compressed or not (torchvision's `read_image_file` / `read_label_file`).
///
/// Throws tiny::IOError naming the file when it is missing, is not a ubyte IDX
/// file (bad magic), has `expected_dims` != its dimension count (when
/// expected_dims > 0), is truncated, or has bytes after the data.
IdxFile read_idx(const std::string& path, int expected_dims = 0);

}  // namespace tiny::data
