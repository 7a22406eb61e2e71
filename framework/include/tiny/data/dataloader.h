/// @file dataloader.h
/// @brief `DataLoader`: batches of a data set, shuffled or not, optionally prefetched by worker threads (PyTorch's `torch.utils.data.DataLoader`).
///
/// ```cpp
/// auto train = std::make_shared<tiny::data::Digits>();   // torchvision-style data set
/// tiny::data::DataLoaderOptions options;                   // DataLoader(train, batch_size=64,
/// options.batch_size = 64;                                  //            shuffle=True,
/// options.shuffle = true;                                   //            generator=g)
/// options.generator = tiny::Generator(0);
/// tiny::data::DataLoader loader(train, options);
/// for (int epoch = 0; epoch < 10; ++epoch)
///   for (const tiny::data::Batch& batch : loader) { ... batch.data, batch.target ... }
/// ```
#pragma once

#include <cstddef>
#include <cstdint>
#include <iterator>
#include <memory>
#include <mutex>
#include <optional>
#include <type_traits>
#include <utility>
#include <vector>

#include "tiny/data/dataset.h"
#include "tiny/data/sampler.h"
#include "tiny/generator.h"

namespace tiny::data {

/// @brief The settings of a DataLoader, named as PyTorch's `DataLoader(...)` keyword arguments.
struct DataLoaderOptions {
  /// @brief Examples per batch, >= 1 (PyTorch's `batch_size`).
  int64_t batch_size = 1;
  /// @brief Reshuffle the indices at every epoch (PyTorch's `shuffle`); not with `sampler`.
  bool shuffle = false;
  /// @brief Drop the last batch when it is smaller than batch_size (PyTorch's `drop_last`).
  bool drop_last = false;
  /// @brief Background threads that prepare batches; 0 loads in the iterating thread (PyTorch's `num_workers`, threads instead of processes).
  int num_workers = 0;
  /// @brief Put batches in pinned (page-locked) memory (PyTorch's `pin_memory`).
  ///
  /// Batches come from the pinned host allocator, so `.to(device,
  /// non_blocking=true)` copies run asynchronously. Needs a GPU (real or
  /// emulated): without one, iterating raises tiny::DeviceError.
  bool pin_memory = false;
  /// @brief Batches each worker may have prepared ahead, >= 1 (PyTorch's `prefetch_factor`).
  ///
  /// At most `prefetch_factor * num_workers` batches are loaded but not yet
  /// handed out at any time. Ignored when num_workers == 0.
  int prefetch_factor = 2;
  /// @brief The generator `shuffle` draws from (PyTorch's `generator`); default: tiny's default CPU generator.
  std::optional<Generator> generator{};
  /// @brief A custom order, e.g. a DistributedSampler (PyTorch's `sampler`); mutually exclusive with `shuffle`.
  std::shared_ptr<Sampler> sampler{};
};

/// @cond
namespace detail {
class LoaderEpoch;  // one epoch's batches and workers (dataloader.cpp)
}
/// @endcond

/// @brief Iterates over a data set in batches (PyTorch's `torch.utils.data.DataLoader`).
///
/// Every `for (const Batch& b : loader)` is one epoch: it asks the sampler for
/// a new order (so shuffled epochs differ), cuts it into batches of
/// batch_size indices, and asks the data set for each with get_batch().
///
/// With num_workers > 0, that many std::threads load batches in the
/// background, each applying the tiny::ThreadLocalState (grad mode, current
/// device, autocast) of the thread that started the epoch, as if it loaded the
/// batches itself, and the batches still arrive in order, exactly the
/// ones num_workers == 0 gives. Breaking out of the loop, or destroying the
/// loader, stops and joins the workers (after the batches they are loading).
/// An exception thrown by the data set is rethrown by the loop at the batch
/// where it happened (the batches before it are all delivered), with the
/// batch index, its data set indices and the worker in its message. tiny's
/// error types (IOError, IndexError, ShapeError, ValueError, ...) are kept;
/// any other exception becomes a tiny::Error. The epoch ends there; the next
/// range-for starts a new one.
class DataLoader {
 public:
  /// @brief One epoch's position; an input iterator over Batches (PyTorch's `_DataLoaderIter`).
  class Iterator {
   public:
    using iterator_category = std::input_iterator_tag;  ///< single pass
    using value_type = Batch;                           ///< what it yields
    using difference_type = std::ptrdiff_t;             ///< unused
    using pointer = const Batch*;                       ///< pointer to a batch
    using reference = const Batch&;                     ///< reference to a batch

    /// @brief The end iterator.
    Iterator() = default;
    /// @brief The current batch.
    const Batch& operator*() const;
    /// @brief The current batch's members.
    const Batch* operator->() const { return &**this; }
    /// @brief Moves to the next batch (waits for a worker if needed; rethrows its error).
    Iterator& operator++();
    /// @brief True when both are at the end, or are the same position of the same epoch.
    bool operator==(const Iterator& other) const;
    /// @brief Negation of ==.
    bool operator!=(const Iterator& other) const { return !(*this == other); }

   private:
    friend class DataLoader;
    explicit Iterator(std::shared_ptr<detail::LoaderEpoch> epoch);
    bool at_end() const;
    std::shared_ptr<detail::LoaderEpoch> epoch_;
  };

  /// @brief Loads `dataset` with `options`; throws tiny::ValueError on a bad option.
  explicit DataLoader(std::shared_ptr<Dataset> dataset, DataLoaderOptions options = {});
  /// @brief PyTorch's `DataLoader(dataset, batch_size, shuffle)`, the other options at their defaults.
  template <class BatchSize, std::enable_if_t<std::is_integral_v<BatchSize>, int> = 0>
  DataLoader(std::shared_ptr<Dataset> dataset, BatchSize batch_size, bool shuffle = false)
      : DataLoader(std::move(dataset), DataLoaderOptions{static_cast<int64_t>(batch_size), shuffle}) {}
  /// @brief Stops and joins the workers of every epoch still running.
  ~DataLoader();
  DataLoader(const DataLoader&) = delete;
  DataLoader& operator=(const DataLoader&) = delete;

  /// @brief Starts an epoch: draws the order, starts the workers, loads the first batch.
  Iterator begin();
  /// @brief The end of any epoch.
  Iterator end() { return Iterator(); }

  /// @brief Batches per epoch (PyTorch's `len(loader)`).
  int64_t size() const;
  /// @brief The data set (PyTorch's `loader.dataset`).
  const std::shared_ptr<Dataset>& dataset() const { return dataset_; }
  /// @brief The sampler giving each epoch's order (PyTorch's `loader.sampler`).
  const std::shared_ptr<Sampler>& sampler() const { return sampler_; }
  /// @brief The options the loader was made with.
  const DataLoaderOptions& options() const { return options_; }

 private:
  std::shared_ptr<Dataset> dataset_;
  DataLoaderOptions options_;
  std::shared_ptr<Sampler> sampler_;
  std::mutex epochs_mutex_;
  std::vector<std::weak_ptr<detail::LoaderEpoch>> epochs_;
};

}  // namespace tiny::data
