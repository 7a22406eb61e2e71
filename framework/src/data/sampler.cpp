// tiny::data samplers (PyTorch's torch/utils/data/sampler.py and distributed.py).
#include "tiny/data/sampler.h"

#include <numeric>
#include <utility>

#include "tiny/error.h"
#include "tiny/ops.h"

namespace tiny::data {

SequentialSampler::SequentialSampler(int64_t size) : size_(size) {
  TINY_CHECK(size >= 0, ValueError, "SequentialSampler: the size must be non-negative, got ", size);
}

int64_t SequentialSampler::size() const { return size_; }

std::vector<int64_t> SequentialSampler::indices() {
  std::vector<int64_t> out(static_cast<size_t>(size_));
  std::iota(out.begin(), out.end(), int64_t{0});
  return out;
}

RandomSampler::RandomSampler(int64_t size, std::optional<Generator> generator)
    : size_(size), generator_(std::move(generator)) {
  TINY_CHECK(size >= 0, ValueError, "RandomSampler: the size must be non-negative, got ", size);
}

int64_t RandomSampler::size() const { return size_; }

std::vector<int64_t> RandomSampler::indices() {
  // randperm falls back to default_cpu_generator() when generator_ is empty,
  // looked up at each pass (so a later tiny::manual_seed counts).
  return randperm(size_, generator_).to_vector<int64_t>();
}

DistributedSampler::DistributedSampler(int64_t dataset_size, int64_t num_replicas, int64_t rank, bool shuffle,
                                       uint64_t seed, bool drop_last)
    : dataset_size_(dataset_size),
      num_replicas_(num_replicas),
      rank_(rank),
      shuffle_(shuffle),
      seed_(seed),
      drop_last_(drop_last) {
  TINY_CHECK(dataset_size >= 0, ValueError, "DistributedSampler: the data set size must be non-negative, got ",
             dataset_size);
  TINY_CHECK(num_replicas >= 1, ValueError, "DistributedSampler: num_replicas must be at least 1, got ",
             num_replicas);
  TINY_CHECK(rank >= 0 && rank < num_replicas, ValueError, "DistributedSampler: invalid rank ", rank,
             ", rank should be in the interval [0, ", num_replicas - 1, "]");
  // PyTorch: drop_last and an uneven split give ceil((N - R) / R) = floor(N / R);
  // otherwise ceil(N / R).
  num_samples_ = drop_last ? dataset_size / num_replicas : (dataset_size + num_replicas - 1) / num_replicas;
}

int64_t DistributedSampler::size() const { return num_samples_; }

std::vector<int64_t> DistributedSampler::indices() {
  std::vector<int64_t> all;
  if (shuffle_) {
    // Every rank seeds its own generator the same way, so all draw one permutation.
    all = randperm(dataset_size_, Generator(seed_ + epoch_)).to_vector<int64_t>();
  } else {
    all.resize(static_cast<size_t>(dataset_size_));
    std::iota(all.begin(), all.end(), int64_t{0});
  }
  const int64_t total = total_size();
  if (total > dataset_size_) {
    // Pad by repeating from the start, as often as needed (PyTorch's
    // `indices += (indices * ceil(padding / len(indices)))[:padding]`).
    all.reserve(static_cast<size_t>(total));
    for (int64_t j = 0; dataset_size_ > 0 && static_cast<int64_t>(all.size()) < total; ++j) {
      all.push_back(all[static_cast<size_t>(j % dataset_size_)]);
    }
  } else {
    all.resize(static_cast<size_t>(total));  // drop_last: cut the tail
  }
  std::vector<int64_t> mine;
  mine.reserve(static_cast<size_t>(num_samples_));
  for (int64_t i = rank_; i < total; i += num_replicas_) mine.push_back(all[static_cast<size_t>(i)]);
  return mine;
}

}  // namespace tiny::data
