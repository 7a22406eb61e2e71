/// @file sampler.h
/// @brief Samplers: the order in which a DataLoader visits a data set (PyTorch's `torch.utils.data.Sampler`s).
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "tiny/generator.h"

namespace tiny::data {

/// @brief Yields the indices of one pass over a data set (PyTorch's `torch.utils.data.Sampler`).
///
/// The DataLoader calls indices() once at the start of every epoch (every
/// range-for over it), from the thread that iterates.
class Sampler {
 public:
  virtual ~Sampler() = default;
  /// @brief Number of indices one pass yields (PyTorch's `len(sampler)`).
  virtual int64_t size() const = 0;
  /// @brief The indices of the next pass, size() of them (PyTorch's `list(iter(sampler))`).
  virtual std::vector<int64_t> indices() = 0;
};

/// @brief `0, 1, ..., size-1` every pass (PyTorch's `SequentialSampler`).
class SequentialSampler : public Sampler {
 public:
  /// @brief Visits a data set of `size` examples in order.
  explicit SequentialSampler(int64_t size);
  /// @brief The data set size (PyTorch's `len(sampler)`).
  int64_t size() const override;
  /// @brief `0..size-1` (PyTorch's `iter(sampler)`).
  std::vector<int64_t> indices() override;

 private:
  int64_t size_;
};

/// @brief A fresh random permutation every pass (PyTorch's `RandomSampler(data, generator=g)`).
///
/// Each pass draws `randperm(size, generator)`, which advances the generator,
/// so epochs differ and a generator seeded the same way repeats the same
/// sequence of epochs. Without a generator, tiny's default CPU generator is
/// used at each pass (reproducible with `tiny::manual_seed`).
class RandomSampler : public Sampler {
 public:
  /// @brief Shuffles `size` indices with `generator` (default: tiny::default_cpu_generator()).
  explicit RandomSampler(int64_t size, std::optional<Generator> generator = std::nullopt);
  /// @brief The data set size (PyTorch's `len(sampler)`).
  int64_t size() const override;
  /// @brief A new permutation of `0..size-1` (PyTorch's `iter(sampler)`).
  std::vector<int64_t> indices() override;

 private:
  int64_t size_;
  std::optional<Generator> generator_;
};

/// @brief The share of the indices that one of `num_replicas` processes takes (PyTorch's `DistributedSampler`).
///
/// As in PyTorch: with `shuffle`, the indices are `randperm(dataset_size)` drawn
/// from a generator seeded with `seed + epoch` (so every rank draws the same
/// permutation and set_epoch() changes it), else `0..dataset_size-1`. Without
/// `drop_last` the list is padded to a multiple of `num_replicas` by repeating
/// it from the start; with `drop_last` it is cut to one. Rank `r` then takes
/// the elements at positions r, r + num_replicas, r + 2*num_replicas, ...
/// Every rank gets size() = ceil(dataset_size / num_replicas) indices
/// (drop_last: floor). The permutation itself is tiny's Philox randperm, not
/// PyTorch's mt19937 one, so shuffled orders differ from PyTorch's.
class DistributedSampler : public Sampler {
 public:
  /// @brief Rank `rank`'s share of `dataset_size` indices among `num_replicas` replicas.
  ///
  /// Throws tiny::ValueError unless 0 <= rank < num_replicas and dataset_size >= 0.
  DistributedSampler(int64_t dataset_size, int64_t num_replicas, int64_t rank, bool shuffle = true,
                     uint64_t seed = 0, bool drop_last = false);
  /// @brief Indices per pass for this rank (PyTorch's `num_samples`).
  int64_t size() const override;
  /// @brief This rank's indices for the current epoch (PyTorch's `iter(sampler)`).
  std::vector<int64_t> indices() override;
  /// @brief Sets the epoch that seeds the shuffle; call it before every epoch (PyTorch's `set_epoch`).
  void set_epoch(uint64_t epoch) { epoch_ = epoch; }
  /// @brief The epoch set last (0 at first).
  uint64_t epoch() const { return epoch_; }
  /// @brief The padded (or cut) length of the index list over all ranks (PyTorch's `total_size`).
  int64_t total_size() const { return num_samples_ * num_replicas_; }

 private:
  int64_t dataset_size_;
  int64_t num_replicas_;
  int64_t rank_;
  bool shuffle_;
  uint64_t seed_;
  bool drop_last_;
  uint64_t epoch_ = 0;
  int64_t num_samples_;
};

}  // namespace tiny::data
