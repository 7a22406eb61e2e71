// tiny::data data sets: the default batch collation, TensorDataset's row
// gather, Subset and random_split (PyTorch's torch/utils/data/dataset.py).
#include "tiny/data/dataset.h"

#include <cmath>
#include <cstring>
#include <numeric>
#include <string>
#include <utility>

#include "tiny/error.h"
#include "tiny/ops.h"

namespace tiny::data {

namespace {

void check_index(const char* who, int64_t index, int64_t size) {
  TINY_CHECK(index >= 0 && index < size, IndexError, who, ": index ", index, " is out of range for a data set of ",
             size, " examples (valid: 0 to ", size - 1, ")");
}

// rows[indices] of a CPU tensor that is contiguous, as one new contiguous
// tensor: one memcpy per row.
Tensor gather_rows(const Tensor& source, const std::vector<int64_t>& indices) {
  IntArrayRef shape = source.sizes();
  shape[0] = static_cast<int64_t>(indices.size());
  Tensor out = empty(shape, TensorOptions(source.dtype()));
  const int64_t rows = source.size(0);
  const size_t row_bytes =
      static_cast<size_t>(rows == 0 ? 0 : source.numel() / rows) * source.element_size();
  const auto* src = static_cast<const char*>(source.raw_data_ptr());
  auto* dst = static_cast<char*>(out.raw_data_ptr());
  for (size_t i = 0; i < indices.size(); ++i) {
    std::memcpy(dst + i * row_bytes, src + static_cast<size_t>(indices[i]) * row_bytes, row_bytes);
  }
  return out;
}

}  // namespace

// ---- Dataset ----------------------------------------------------------------

Batch Dataset::get_batch(const std::vector<int64_t>& indices) const {
  TINY_CHECK(!indices.empty(), ValueError, "Dataset::get_batch: no indices were given (a batch needs at least one)");
  std::vector<Tensor> data;
  std::vector<Tensor> targets;
  data.reserve(indices.size());
  targets.reserve(indices.size());
  for (int64_t index : indices) {
    Example example = get(index);
    data.push_back(std::move(example.data));
    targets.push_back(std::move(example.target));
  }
  return {stack(data), stack(targets)};
}

// ---- TensorDataset -----------------------------------------------------------

TensorDataset::TensorDataset(Tensor data, Tensor targets) {
  TINY_CHECK(data.defined() && targets.defined(), ValueError,
             "TensorDataset: data and targets must both be defined tensors");
  TINY_CHECK(data.dim() >= 1 && targets.dim() >= 1, ShapeError,
             "TensorDataset: data and targets need a first dimension that numbers the examples, got data ",
             shape_str(data.sizes()), " and targets ", shape_str(targets.sizes()));
  TINY_CHECK(data.size(0) == targets.size(0), ShapeError,
             "TensorDataset: data and targets must have the same size in the first dimension (one row per example), "
             "got data ", shape_str(data.sizes()), " and targets ", shape_str(targets.sizes()),
             " (PyTorch: 'Size mismatch between tensors')");
  // Contiguous once here, so that every batch is a plain row copy.
  data_ = data.contiguous();
  targets_ = targets.contiguous();
}

int64_t TensorDataset::size() const { return data_.size(0); }

Example TensorDataset::get(int64_t index) const {
  check_index("TensorDataset", index, size());
  return {data_.select(0, index), targets_.select(0, index)};
}

Batch TensorDataset::get_batch(const std::vector<int64_t>& indices) const {
  TINY_CHECK(!indices.empty(), ValueError, "TensorDataset::get_batch: no indices were given");
  const int64_t n = size();
  for (int64_t index : indices) check_index("TensorDataset", index, n);
  // The memcpy gather needs host memory, and would cut the graph of tensors
  // that require gradients: those take the general (stacking) path.
  const auto fast = [](const Tensor& t) { return t.is_cpu() && t.is_contiguous() && !t.requires_grad(); };
  if (fast(data_) && fast(targets_)) return {gather_rows(data_, indices), gather_rows(targets_, indices)};
  return Dataset::get_batch(indices);
}

// ---- Subset ------------------------------------------------------------------

Subset::Subset(std::shared_ptr<Dataset> dataset, std::vector<int64_t> indices)
    : dataset_(std::move(dataset)), indices_(std::move(indices)) {
  TINY_CHECK(dataset_ != nullptr, ValueError, "Subset: the data set is null");
  const int64_t n = dataset_->size();
  for (int64_t index : indices_) check_index("Subset", index, n);
}

int64_t Subset::size() const { return static_cast<int64_t>(indices_.size()); }

Example Subset::get(int64_t index) const {
  check_index("Subset", index, size());
  return dataset_->get(indices_[static_cast<size_t>(index)]);
}

namespace {
std::vector<int64_t> map_indices(const std::vector<int64_t>& indices, const std::vector<int64_t>& selected) {
  std::vector<int64_t> mapped;
  mapped.reserve(indices.size());
  const auto n = static_cast<int64_t>(selected.size());
  for (int64_t index : indices) {
    check_index("Subset", index, n);
    mapped.push_back(selected[static_cast<size_t>(index)]);
  }
  return mapped;
}
}  // namespace

Batch Subset::get_batch(const std::vector<int64_t>& indices) const {
  return dataset_->get_batch(map_indices(indices, indices_));
}

int64_t Subset::modelled_load_ns(const std::vector<int64_t>& indices) const {
  return dataset_->modelled_load_ns(map_indices(indices, indices_));
}

// ---- random_split ----------------------------------------------------------------

std::vector<std::shared_ptr<Subset>> random_split(const std::shared_ptr<Dataset>& dataset,
                                                  const std::vector<int64_t>& lengths,
                                                  std::optional<Generator> generator) {
  TINY_CHECK(dataset != nullptr, ValueError, "random_split: the data set is null");
  int64_t total = 0;
  for (size_t i = 0; i < lengths.size(); ++i) {
    TINY_CHECK(lengths[i] >= 0, ValueError, "random_split: length ", i, " is negative (", lengths[i], ")");
    total += lengths[i];
  }
  const int64_t n = dataset->size();
  TINY_CHECK(total == n, ValueError, "random_split: the lengths sum to ", total, " but the data set has ", n,
             " examples; they must be equal (PyTorch: 'Sum of input lengths does not equal the length of the input "
             "dataset!'), or pass fractions that sum to 1 such as {0.8, 0.2}");
  const std::vector<int64_t> perm = randperm(n, std::move(generator)).to_vector<int64_t>();
  std::vector<std::shared_ptr<Subset>> out;
  out.reserve(lengths.size());
  int64_t offset = 0;
  for (int64_t length : lengths) {
    std::vector<int64_t> part(perm.begin() + offset, perm.begin() + offset + length);
    out.push_back(std::make_shared<Subset>(dataset, std::move(part)));
    offset += length;
  }
  return out;
}

std::vector<int64_t> split_lengths(int64_t size, const std::vector<double>& fractions) {
  TINY_CHECK(size >= 0, ValueError, "random_split: the data set size must be non-negative, got ", size);
  TINY_CHECK(!fractions.empty(), ValueError, "random_split: no fractions were given");
  double sum = 0.0;
  for (size_t i = 0; i < fractions.size(); ++i) {
    TINY_CHECK(fractions[i] >= 0.0 && fractions[i] <= 1.0, ValueError, "random_split: fraction at index ", i,
               " is not between 0 and 1 (got ", fractions[i], ")");
    sum += fractions[i];
  }
  TINY_CHECK(std::fabs(sum - 1.0) <= 1e-9, ValueError, "random_split: the fractions sum to ", sum,
             ", not 1; pass fractions that sum to 1 such as {0.8, 0.2}, or integer lengths that sum to ", size);
  std::vector<int64_t> lengths;
  lengths.reserve(fractions.size());
  int64_t assigned = 0;
  for (double f : fractions) {
    lengths.push_back(static_cast<int64_t>(std::floor(static_cast<double>(size) * f)));
    assigned += lengths.back();
  }
  // PyTorch 1.13: the remainder goes one by one to the splits in order.
  const int64_t remainder = size - assigned;
  for (int64_t i = 0; i < remainder; ++i) lengths[static_cast<size_t>(i) % lengths.size()] += 1;
  return lengths;
}

std::vector<std::shared_ptr<Subset>> random_split(const std::shared_ptr<Dataset>& dataset,
                                                  const std::vector<double>& fractions,
                                                  std::optional<Generator> generator) {
  TINY_CHECK(dataset != nullptr, ValueError, "random_split: the data set is null");
  // Like PyTorch, whole numbers that do not sum to 1 are lengths: {1437.0, 360.0}.
  const double sum = std::accumulate(fractions.begin(), fractions.end(), 0.0);
  bool whole = !fractions.empty() && std::fabs(sum - 1.0) > 1e-9;
  for (double f : fractions) whole = whole && f >= 0.0 && std::floor(f) == f;
  if (whole) {
    return random_split(dataset, std::vector<int64_t>(fractions.begin(), fractions.end()), std::move(generator));
  }
  return random_split(dataset, split_lengths(dataset->size(), fractions), std::move(generator));
}

}  // namespace tiny::data
