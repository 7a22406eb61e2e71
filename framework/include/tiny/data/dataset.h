/// @file dataset.h
/// @brief Data sets: `Dataset`, `TensorDataset`, `Subset`, `random_split` (PyTorch's `torch.utils.data`).
///
/// A data set is a numbered collection of examples, each a (data, target) pair
/// of tensors. The DataLoader (dataloader.h) asks a data set for whole batches
/// with get_batch(), so a data set held in memory can copy rows in one pass
/// instead of building and stacking one example at a time.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include "tiny/generator.h"
#include "tiny/tensor.h"

namespace tiny::data {

/// @brief One example: an input and its target (PyTorch's `(x, y)` tuple returned by `dataset[i]`).
struct Example {
  Tensor data;    ///< the input, e.g. float32 [64] for one Digits image
  Tensor target;  ///< the target, e.g. a 0-d int64 class index
};

/// @brief A batch: inputs and targets stacked along a new first dimension (what PyTorch's `default_collate` returns).
struct Batch {
  Tensor data;    ///< [batch_size, ...] inputs
  Tensor target;  ///< [batch_size, ...] targets
};

/// @brief A map-style data set: a size and an example per index (PyTorch's `torch.utils.data.Dataset`).
///
/// Subclasses implement size() and get(); they may override get_batch() with a
/// faster gather. get() and get_batch() must be safe to call from several
/// threads at once (DataLoader workers do), which they are when they only read.
class Dataset {
 public:
  virtual ~Dataset() = default;
  /// @brief Number of examples (PyTorch's `len(dataset)`).
  virtual int64_t size() const = 0;
  /// @brief Example `index`, 0 <= index < size() (PyTorch's `dataset[index]`).
  virtual Example get(int64_t index) const = 0;
  /// @brief `get(index)`: `(*dataset)[0]` is PyTorch's `dataset[0]`.
  Example operator[](int64_t index) const { return get(index); }
  /// @brief The examples at `indices`, stacked (PyTorch's `default_collate([dataset[i] for i in indices])`).
  ///
  /// The default calls get() for each index and stacks data and targets with
  /// tiny::stack. `indices` must not be empty.
  virtual Batch get_batch(const std::vector<int64_t>& indices) const;
  /// @brief What producing the batch at `indices` costs the host, in nanoseconds of the emulated GPU's modelled time.
  ///
  /// The default, 0, says reading examples held in memory is free there, as
  /// other host code is. A data set whose examples cost real CPU work
  /// (decoding images, augmenting them: torchvision's transforms) returns that
  /// work's cost here, measured once. The DataLoader charges it to the
  /// iterating thread (num_workers == 0) or to worker k % num_workers for
  /// batch k, as PyTorch hands batches out, so a data-loading bottleneck shows
  /// in modelled time the same on every machine (docs/performance_model.md).
  virtual int64_t modelled_load_ns(const std::vector<int64_t>& indices) const {
    (void)indices;
    return 0;
  }
};

/// @brief A data set over two tensors whose first dimension indexes examples (PyTorch's `TensorDataset(data, targets)`).
///
/// get(i) returns views `{data[i], targets[i]}`; get_batch() copies the rows of a
/// CPU data set with one memcpy per row (other devices fall back to stacking).
class TensorDataset : public Dataset {
 public:
  /// @brief Wraps `data` [N, ...] and `targets` [N, ...]; throws tiny::ShapeError if the first dimensions differ.
  TensorDataset(Tensor data, Tensor targets);
  /// @brief N, the size of the first dimension (PyTorch's `len(dataset)`).
  int64_t size() const override;
  /// @brief `{data[index], targets[index]}` as views (PyTorch's `dataset[index]`).
  Example get(int64_t index) const override;
  /// @brief The rows at `indices`, copied into new contiguous tensors (PyTorch's `dataset[indices]` on tensors).
  Batch get_batch(const std::vector<int64_t>& indices) const override;
  /// @brief All inputs, [N, ...] (PyTorch's `dataset.tensors[0]`).
  const Tensor& data() const { return data_; }
  /// @brief All targets, [N, ...] (PyTorch's `dataset.tensors[1]`).
  const Tensor& targets() const { return targets_; }

 private:
  Tensor data_;
  Tensor targets_;
};

/// @brief The examples of another data set at the given indices, in that order (PyTorch's `torch.utils.data.Subset`).
class Subset : public Dataset {
 public:
  /// @brief Selects `indices` of `dataset`; throws tiny::IndexError if one is out of range.
  Subset(std::shared_ptr<Dataset> dataset, std::vector<int64_t> indices);
  /// @brief Number of selected indices (PyTorch's `len(subset)`).
  int64_t size() const override;
  /// @brief `dataset.get(indices[index])` (PyTorch's `subset[index]`).
  Example get(int64_t index) const override;
  /// @brief The underlying data set's get_batch() of the mapped indices, so its fast path is kept.
  Batch get_batch(const std::vector<int64_t>& indices) const override;
  /// @brief The underlying data set's modelled_load_ns() of the mapped indices.
  int64_t modelled_load_ns(const std::vector<int64_t>& indices) const override;
  /// @brief The data set indexed into (PyTorch's `subset.dataset`).
  const std::shared_ptr<Dataset>& dataset() const { return dataset_; }
  /// @brief The selected indices (PyTorch's `subset.indices`).
  const std::vector<int64_t>& indices() const { return indices_; }

 private:
  std::shared_ptr<Dataset> dataset_;
  std::vector<int64_t> indices_;
};

/// @brief Splits `dataset` at random into non-overlapping Subsets of the given lengths (PyTorch's `random_split`).
///
/// The lengths must sum to `dataset->size()` (else tiny::ValueError). The
/// indices are `randperm(size, generator)` cut in order, as in PyTorch; the
/// default generator is tiny's default CPU generator (`manual_seed` fixes it).
std::vector<std::shared_ptr<Subset>> random_split(const std::shared_ptr<Dataset>& dataset,
                                                  const std::vector<int64_t>& lengths,
                                                  std::optional<Generator> generator = std::nullopt);

/// @brief random_split by fractions summing to 1, e.g. `{0.8, 0.2}` (PyTorch 1.13's `random_split(ds, [0.8, 0.2])`).
///
/// As in PyTorch, each length is floor(fraction * size) and the remaining
/// examples are handed out one at a time to the splits in order (round robin).
/// Fractions must be in [0, 1] and sum to 1 (within 1e-9), else tiny::ValueError.
std::vector<std::shared_ptr<Subset>> random_split(const std::shared_ptr<Dataset>& dataset,
                                                  const std::vector<double>& fractions,
                                                  std::optional<Generator> generator = std::nullopt);

/// @brief random_split with literal lengths, `random_split(ds, {800, 200})` (picks the integer overload).
inline std::vector<std::shared_ptr<Subset>> random_split(const std::shared_ptr<Dataset>& dataset,
                                                         std::initializer_list<int> lengths,
                                                         std::optional<Generator> generator = std::nullopt) {
  return random_split(dataset, std::vector<int64_t>(lengths.begin(), lengths.end()), std::move(generator));
}
/// @brief random_split with literal int64 lengths, `random_split(ds, {n, size - n})`.
inline std::vector<std::shared_ptr<Subset>> random_split(const std::shared_ptr<Dataset>& dataset,
                                                         std::initializer_list<int64_t> lengths,
                                                         std::optional<Generator> generator = std::nullopt) {
  return random_split(dataset, std::vector<int64_t>(lengths), std::move(generator));
}
/// @brief random_split with literal fractions, `random_split(ds, {0.8, 0.2})` (picks the fraction overload).
inline std::vector<std::shared_ptr<Subset>> random_split(const std::shared_ptr<Dataset>& dataset,
                                                         std::initializer_list<double> fractions,
                                                         std::optional<Generator> generator = std::nullopt) {
  return random_split(dataset, std::vector<double>(fractions), std::move(generator));
}

/// @brief The lengths random_split uses for `fractions` of `size` examples (PyTorch 1.13's rule, exposed for tests).
std::vector<int64_t> split_lengths(int64_t size, const std::vector<double>& fractions);

}  // namespace tiny::data
