// tiny::data::DataLoader (PyTorch's torch/utils/data/dataloader.py), with
// threads where PyTorch has worker processes.
//
// One epoch is a LoaderEpoch: the list of batches (index lists) drawn from the
// sampler when the epoch starts, and either nothing else (num_workers == 0:
// the iterating thread loads each batch) or a pool of workers. Workers claim
// batch numbers in increasing order, load them, and put them in the batch's
// slot; the iterating thread takes slot k, k+1, ... in order, waiting on a
// condition variable (no busy waiting). A worker may only claim batch k when
// k < delivered + prefetch_factor * num_workers, which bounds the batches that
// are loaded (or being loaded) but not yet handed out. Stopping (end of the
// loop, break, destruction of the loader) sets a flag, wakes everyone and
// joins: a worker finishes the batch it is loading and exits.
//
// Modelled time (the emulated GPU's clock, docs/performance_model.md): the
// iterating thread computes, when it takes batch k, when that batch would be
// ready, from the data set's declared cost (Dataset::modelled_load_ns) and
// PyTorch's schedule, whichever thread really loaded it: batch k goes to worker
// k % num_workers; the first prefetch_factor * num_workers batches are handed
// to the workers when the epoch starts, and batch k + prefetch_factor *
// num_workers when batch k is taken; a worker loads its batches one after
// another, from the epoch's start. The iterating thread waits (in modelled
// time) until its batch is ready, or, without workers, pays the cost itself.
#include "tiny/data/dataloader.h"

#include <algorithm>
#include <condition_variable>
#include <exception>
#include <sstream>
#include <string>
#include <thread>
#include <utility>

#include "gpu/model/timeline.h"
#include "gpu/model/trace.h"
#include "tiny/autograd.h"
#include "tiny/error.h"

namespace tiny::data {

namespace detail {

namespace {

// Rethrows `error` with `context` in front of its message, keeping tiny's
// error type so callers can still catch IOError, IndexError, ...
[[noreturn]] void rethrow_with_context(const std::exception_ptr& error, const std::string& context) {
  try {
    std::rethrow_exception(error);
  } catch (const ShapeError& e) {
    throw ShapeError(context + e.what());
  } catch (const DeviceError& e) {
    throw DeviceError(context + e.what());
  } catch (const DtypeError& e) {
    throw DtypeError(context + e.what());
  } catch (const IndexError& e) {
    throw IndexError(context + e.what());
  } catch (const ValueError& e) {
    throw ValueError(context + e.what());
  } catch (const IOError& e) {
    throw IOError(context + e.what());
  } catch (const NotImplemented& e) {
    throw NotImplemented(context + e.what());
  } catch (const std::exception& e) {
    throw Error(context + e.what());
  } catch (...) {
    throw Error(context + "an exception that is not a std::exception");
  }
}

std::string describe_indices(const std::vector<int64_t>& indices) {
  std::ostringstream out;
  const size_t shown = indices.size() <= 8 ? indices.size() : 8;
  for (size_t i = 0; i < shown; ++i) out << (i ? ", " : "") << indices[i];
  if (shown < indices.size()) out << ", ... (" << indices.size() << " in all)";
  return out.str();
}

}  // namespace

class LoaderEpoch {
 public:
  LoaderEpoch(std::shared_ptr<Dataset> dataset, std::vector<std::vector<int64_t>> batches, int num_workers,
              int prefetch_factor, bool pin_memory)
      : pin_memory_(pin_memory),
        dataset_(std::move(dataset)),
        batches_(std::move(batches)),
        slots_(batches_.size()),
        capacity_(static_cast<int64_t>(prefetch_factor) * num_workers),
        state_(ThreadLocalState::capture()),
        start_ns_(gpu::model::host_now()),
        worker_free_ns_(static_cast<size_t>(num_workers), start_ns_) {
    taken_ns_.reserve(batches_.size());
    workers_.reserve(static_cast<size_t>(num_workers));
    try {
      for (int w = 0; w < num_workers; ++w) workers_.emplace_back([this, w] { work(w); });
    } catch (...) {
      stop();  // could not start a thread: do not leave the others running
      throw;
    }
  }

  // Batch k, in pinned memory when asked, so `.to(device, non_blocking=true)`
  // can copy it asynchronously (the worker pays for the pinning copy).
  Batch load(int64_t k) const {
    Batch batch = dataset_->get_batch(batches_[static_cast<size_t>(k)]);
    if (pin_memory_) {
      batch.data = batch.data.pin_memory();
      batch.target = batch.target.pin_memory();
    }
    return batch;
  }

  ~LoaderEpoch() { stop(); }
  LoaderEpoch(const LoaderEpoch&) = delete;
  LoaderEpoch& operator=(const LoaderEpoch&) = delete;

  // Loads the next batch into current(); false when the epoch is over.
  bool advance() {
    current_ = Batch();
    if (next_ >= num_batches()) return false;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (stopping_) {
        next_ = num_batches();
        TINY_THROW(Error, "DataLoader: the loader was destroyed while an epoch was still being iterated; "
                          "keep the DataLoader alive until the loop ends");
      }
    }
    const int64_t k = next_++;
    const gpu::model::HostStamp asked_at = gpu::model::host_stamp();
    if (workers_.empty()) {
      try {
        current_ = load(k);
      } catch (...) {
        next_ = num_batches();  // the epoch ends with the error
        rethrow_with_context(std::current_exception(), context(k, -1));
      }
      gpu::model::host_advance(modelled_cost(k));
      trace_next(asked_at);
      return true;
    }
    Slot slot;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      ready_cv_.wait(lock, [&] { return slots_[static_cast<size_t>(k)].ready || stopping_; });
      if (stopping_) {
        next_ = num_batches();
        TINY_THROW(Error, "DataLoader: the loader was destroyed while an epoch was still being iterated; "
                          "keep the DataLoader alive until the loop ends");
      }
      slot = std::move(slots_[static_cast<size_t>(k)]);
      delivered_ = k + 1;
    }
    work_cv_.notify_all();  // a place in the prefetch window is free
    if (slot.error) {
      next_ = num_batches();
      stop();  // nothing after the failing batch will be handed out
      rethrow_with_context(slot.error, context(k, slot.worker));
    }
    current_ = std::move(slot.batch);
    wait_modelled(k);
    trace_next(asked_at);
    return true;
  }

  // Stops and joins the workers; idempotent, called from the iterating thread.
  void stop() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stopping_ = true;
    }
    work_cv_.notify_all();
    ready_cv_.notify_all();
    for (std::thread& t : workers_) {
      if (t.joinable()) t.join();
    }
  }

  const Batch& current() const { return current_; }
  int64_t position() const { return next_; }
  int64_t num_batches() const { return static_cast<int64_t>(batches_.size()); }

 private:
  struct Slot {
    bool ready = false;
    Batch batch;
    std::exception_ptr error;
    int worker = -1;
  };

  // The profiler shows each batch the loop takes, as PyTorch's does (a
  // record_function around the iterator's __next__, same name): the modelled
  // time the loop spent loading the batch itself, or waiting for its worker.
  void trace_next(const gpu::model::HostStamp& asked_at) const {
    if (!gpu::model::tracing()) return;
    gpu::model::TraceEvent e;
    e.kind = gpu::model::TraceEvent::Kind::cpu_op;
    e.name = e.op = workers_.empty() ? "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__"
                                     : "enumerate(DataLoader)#_MultiProcessingDataLoaderIter.__next__";
    gpu::model::end_host_range(e, asked_at);
    gpu::model::trace(std::move(e));
  }

  int64_t modelled_cost(int64_t k) const { return dataset_->modelled_load_ns(batches_[static_cast<size_t>(k)]); }

  // The iterating thread takes batch k (workers only): in modelled time it
  // waits until the batch's worker has loaded it (see the top of this file).
  void wait_modelled(int64_t k) {
    const int64_t handed_out = k < capacity_ ? start_ns_ : taken_ns_[static_cast<size_t>(k - capacity_)];
    int64_t& worker_free = worker_free_ns_[static_cast<size_t>(k % static_cast<int64_t>(worker_free_ns_.size()))];
    worker_free = std::max(worker_free, handed_out) + modelled_cost(k);
    gpu::model::host_wait_until(worker_free);
    taken_ns_.push_back(gpu::model::host_now());
  }

  std::string context(int64_t k, int worker) const {
    std::ostringstream out;
    out << "DataLoader: loading batch " << k << " (of " << num_batches() << " in this epoch; data set indices "
        << describe_indices(batches_[static_cast<size_t>(k)]) << ") failed";
    if (worker >= 0) out << " in worker thread " << worker;
    out << ": ";
    return out.str();
  }

  void work(int worker) {
    ThreadLocalStateGuard guard(state_);  // the grad mode of the thread that started the epoch
    for (;;) {
      int64_t k = 0;
      {
        std::unique_lock<std::mutex> lock(mutex_);
        work_cv_.wait(lock, [&] {
          return stopping_ || claimed_ >= num_batches() || claimed_ < delivered_ + capacity_;
        });
        if (stopping_ || claimed_ >= num_batches()) return;
        k = claimed_++;
      }
      Slot slot;
      slot.worker = worker;
      try {
        slot.batch = load(k);
      } catch (...) {
        slot.error = std::current_exception();
      }
      {
        std::lock_guard<std::mutex> lock(mutex_);
        slot.ready = true;
        slots_[static_cast<size_t>(k)] = std::move(slot);
      }
      ready_cv_.notify_all();
    }
  }

  const bool pin_memory_;
  std::shared_ptr<Dataset> dataset_;
  std::vector<std::vector<int64_t>> batches_;
  std::vector<Slot> slots_;
  const int64_t capacity_;
  const ThreadLocalState state_;

  std::mutex mutex_;
  std::condition_variable work_cv_;   // workers wait here for room in the window
  std::condition_variable ready_cv_;  // the iterating thread waits here for its batch
  bool stopping_ = false;
  int64_t claimed_ = 0;    // next batch a worker will take (guarded by mutex_)
  int64_t delivered_ = 0;  // batches handed out so far (guarded by mutex_)

  int64_t next_ = 0;  // next batch to hand out (iterating thread only)
  Batch current_;
  // Modelled time (iterating thread only): the epoch's start, when each worker
  // is done with the batches handed to it so far, when each batch was taken.
  const int64_t start_ns_;
  std::vector<int64_t> worker_free_ns_;
  std::vector<int64_t> taken_ns_;
  std::vector<std::thread> workers_;
};

}  // namespace detail

// ---- Iterator ----------------------------------------------------------------

DataLoader::Iterator::Iterator(std::shared_ptr<detail::LoaderEpoch> epoch) : epoch_(std::move(epoch)) {}

bool DataLoader::Iterator::at_end() const { return epoch_ == nullptr; }

const Batch& DataLoader::Iterator::operator*() const {
  TINY_CHECK(!at_end(), IndexError, "DataLoader: dereferenced the end iterator (there is no batch there)");
  return epoch_->current();
}

DataLoader::Iterator& DataLoader::Iterator::operator++() {
  TINY_CHECK(!at_end(), IndexError, "DataLoader: incremented the end iterator");
  std::shared_ptr<detail::LoaderEpoch> epoch = epoch_;
  bool more = false;
  try {
    more = epoch->advance();
  } catch (...) {
    epoch_.reset();  // an error ends the epoch; its workers are joined when the last handle goes
    throw;
  }
  if (!more) {
    epoch->stop();
    epoch_.reset();
  }
  return *this;
}

bool DataLoader::Iterator::operator==(const Iterator& other) const {
  if (at_end() || other.at_end()) return at_end() && other.at_end();
  return epoch_ == other.epoch_ && epoch_->position() == other.epoch_->position();
}

// ---- DataLoader ----------------------------------------------------------------

DataLoader::DataLoader(std::shared_ptr<Dataset> dataset, DataLoaderOptions options)
    : dataset_(std::move(dataset)), options_(std::move(options)) {
  TINY_CHECK(dataset_ != nullptr, ValueError, "DataLoader: the data set is null");
  TINY_CHECK(options_.batch_size >= 1, ValueError,
             "DataLoader: batch_size should be a positive integer value, but got batch_size=", options_.batch_size);
  TINY_CHECK(options_.num_workers >= 0, ValueError,
             "DataLoader: num_workers option should be non-negative; use num_workers=0 to disable multithreading "
             "(got ", options_.num_workers, ")");
  TINY_CHECK(options_.prefetch_factor >= 1, ValueError, "DataLoader: prefetch_factor must be at least 1, got ",
             options_.prefetch_factor);
  if (options_.sampler) {
    TINY_CHECK(!options_.shuffle, ValueError,
               "DataLoader: sampler option is mutually exclusive with shuffle (a custom sampler decides the order; "
               "for a DistributedSampler pass shuffle to the sampler)");
    sampler_ = options_.sampler;
  } else if (options_.shuffle) {
    sampler_ = std::make_shared<RandomSampler>(dataset_->size(), options_.generator);
  } else {
    sampler_ = std::make_shared<SequentialSampler>(dataset_->size());
  }
}

DataLoader::~DataLoader() {
  std::lock_guard<std::mutex> lock(epochs_mutex_);
  for (const auto& weak : epochs_) {
    if (auto epoch = weak.lock()) epoch->stop();
  }
}

int64_t DataLoader::size() const {
  const int64_t n = sampler_->size();
  const int64_t b = options_.batch_size;
  return options_.drop_last ? n / b : (n + b - 1) / b;
}

DataLoader::Iterator DataLoader::begin() {
  const std::vector<int64_t> order = sampler_->indices();
  const int64_t b = options_.batch_size;
  std::vector<std::vector<int64_t>> batches;
  batches.reserve(static_cast<size_t>(order.size() / static_cast<size_t>(b) + 1));
  for (size_t start = 0; start < order.size(); start += static_cast<size_t>(b)) {
    const size_t stop = std::min(order.size(), start + static_cast<size_t>(b));
    if (options_.drop_last && stop - start < static_cast<size_t>(b)) break;
    batches.emplace_back(order.begin() + static_cast<std::ptrdiff_t>(start),
                         order.begin() + static_cast<std::ptrdiff_t>(stop));
  }
  auto epoch = std::make_shared<detail::LoaderEpoch>(dataset_, std::move(batches), options_.num_workers,
                                                     options_.prefetch_factor, options_.pin_memory);
  {
    std::lock_guard<std::mutex> lock(epochs_mutex_);
    // Forget epochs that are over, then remember this one for the destructor.
    std::vector<std::weak_ptr<detail::LoaderEpoch>> alive;
    for (auto& weak : epochs_) {
      if (!weak.expired()) alive.push_back(std::move(weak));
    }
    alive.push_back(epoch);
    epochs_ = std::move(alive);
  }
  Iterator it(std::move(epoch));
  ++it;  // load the first batch (or reach the end of an empty epoch)
  return it;
}

}  // namespace tiny::data
