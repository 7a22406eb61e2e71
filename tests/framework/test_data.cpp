// Tests of tiny::data's data sets, samplers and DataLoader: TensorDataset,
// Subset and random_split; the samplers, with DistributedSampler's partitions
// checked against PyTorch's rules (expected lists written out from PyTorch's
// torch/utils/data/distributed.py, and a line-by-line transcription of it);
// the DataLoader's batches, shuffling, workers (same batches in the same
// order, bounded prefetch, passive waits, grad mode), early exits and
// errors. Every scenario that could hang runs under a time limit.
#include <gtest/gtest.h>
#include <sys/resource.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <future>
#include <memory>
#include <mutex>
#include <numeric>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "tiny/autograd.h"
#include "tiny/data/data.h"
#include "tiny/error.h"
#include "tiny/generator.h"
#include "tiny/ops.h"
#include "tiny/tensor.h"

using tiny::Generator;
using tiny::Tensor;
using namespace tiny::data;  // NOLINT
using Indices = std::vector<int64_t>;

namespace {

// A data set of n examples where example i is data [i, 10*i] (float32) and target i (int64).
std::shared_ptr<TensorDataset> numbered(int64_t n) {
  std::vector<float> values;
  for (int64_t i = 0; i < n; ++i) {
    values.push_back(static_cast<float>(i));
    values.push_back(static_cast<float>(10 * i));
  }
  return std::make_shared<TensorDataset>(tiny::from_vector(values, {n, 2}), tiny::arange(n));
}

Indices targets_of(const Batch& b) { return b.target.to_vector<int64_t>(); }

// Every batch of one epoch, as target lists.
std::vector<Indices> epoch(DataLoader& loader) {
  std::vector<Indices> out;
  for (const Batch& b : loader) out.push_back(targets_of(b));
  return out;
}

Indices flatten(const std::vector<Indices>& batches) {
  Indices out;
  for (const auto& b : batches) out.insert(out.end(), b.begin(), b.end());
  return out;
}

Indices iota(int64_t n) {
  Indices v(static_cast<size_t>(n));
  std::iota(v.begin(), v.end(), int64_t{0});
  return v;
}

// Runs fn on its own thread and returns true when it finishes within
// `seconds`. If it does not, the test process is ended with a message (a hung
// thread would otherwise keep using this test's variables): the test fails
// instead of hanging. An exception from fn is rethrown here.
bool finishes_within(double seconds, std::function<void()> fn) {
  auto done = std::make_shared<std::promise<void>>();
  std::future<void> future = done->get_future();
  std::thread([fn = std::move(fn), done] {
    try {
      fn();
      done->set_value();
    } catch (...) {
      done->set_exception(std::current_exception());
    }
  }).detach();
  if (future.wait_for(std::chrono::duration<double>(seconds)) != std::future_status::ready) {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    std::fprintf(stderr, "FAILED: %s.%s did not finish within %.0f s (a DataLoader hang); exiting\n",
                 info->test_suite_name(), info->name(), seconds);
    std::fflush(stderr);
    std::_Exit(1);
  }
  future.get();
  return true;
}

// A data set with a hook per example: slow, failing, recording, ...
class HookDataset : public Dataset {
 public:
  HookDataset(int64_t n, std::function<void(int64_t)> hook) : n_(n), hook_(std::move(hook)) {}
  int64_t size() const override { return n_; }
  tiny::data::Example get(int64_t index) const override {
    if (hook_) hook_(index);
    return {tiny::full({3}, static_cast<double>(index)), tiny::scalar_tensor(index, tiny::kInt64)};
  }

 private:
  int64_t n_;
  std::function<void(int64_t)> hook_;
};

DataLoaderOptions opts(int64_t batch_size, bool shuffle = false, bool drop_last = false, int workers = 0) {
  DataLoaderOptions o;
  o.batch_size = batch_size;
  o.shuffle = shuffle;
  o.drop_last = drop_last;
  o.num_workers = workers;
  return o;
}

double process_cpu_seconds() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return static_cast<double>(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec) +
         1e-6 * static_cast<double>(usage.ru_utime.tv_usec + usage.ru_stime.tv_usec);
}

}  // namespace

// ---- TensorDataset ----------------------------------------------------------------

TEST(DataTensorDataset, SizeGetAndBatch) {
  auto ds = numbered(5);
  EXPECT_EQ(ds->size(), 5);
  tiny::data::Example e = ds->get(3);
  EXPECT_EQ(e.data.sizes(), (tiny::IntArrayRef{2}));
  EXPECT_EQ(e.data.to_vector<float>(), (std::vector<float>{3, 30}));
  EXPECT_EQ(e.target.dim(), 0);
  EXPECT_EQ(e.target.item<int64_t>(), 3);

  Batch b = ds->get_batch({4, 0, 2});
  EXPECT_EQ(b.data.sizes(), (tiny::IntArrayRef{3, 2}));
  EXPECT_EQ(b.data.dtype(), tiny::kFloat32);
  EXPECT_EQ(b.data.to_vector<float>(), (std::vector<float>{4, 40, 0, 0, 2, 20}));
  EXPECT_EQ(b.target.sizes(), (tiny::IntArrayRef{3}));
  EXPECT_EQ(b.target.dtype(), tiny::kInt64);
  EXPECT_EQ(targets_of(b), (Indices{4, 0, 2}));
  // The fast gather returns new memory, not views of the data set.
  b.data.fill_(-1.0);
  EXPECT_EQ(ds->get(4).data.to_vector<float>(), (std::vector<float>{4, 40}));
}

TEST(DataTensorDataset, FastGatherMatchesStackingGets) {
  // Non-contiguous, 3-D data with repeated indices.
  Tensor data = tiny::arange(0, 4 * 3 * 2, 1).reshape({3, 4, 2}).transpose(0, 1).contiguous().transpose(1, 2);
  ASSERT_FALSE(data.is_contiguous());
  TensorDataset ds(data, tiny::arange(4));
  const Indices idx{3, 1, 1, 0};
  Batch fast = ds.get_batch(idx);
  std::vector<Tensor> rows;
  for (int64_t i : idx) rows.push_back(ds.get(i).data);
  EXPECT_TRUE(tiny::equal(fast.data, tiny::stack(rows)));
  EXPECT_EQ(targets_of(fast), idx);
}

TEST(DataTensorDataset, ErrorsAreClear) {
  try {
    TensorDataset(tiny::zeros({5, 2}), tiny::zeros({4}));
    FAIL() << "expected a ShapeError";
  } catch (const tiny::ShapeError& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("first dimension"), std::string::npos) << m;
    EXPECT_NE(m.find("[5, 2]"), std::string::npos) << m;
    EXPECT_NE(m.find("[4]"), std::string::npos) << m;
  }
  EXPECT_THROW(TensorDataset(tiny::scalar_tensor(1.0), tiny::zeros({1})), tiny::ShapeError);
  auto ds = numbered(3);
  EXPECT_THROW(ds->get(3), tiny::IndexError);
  EXPECT_THROW(ds->get(-1), tiny::IndexError);
  EXPECT_THROW(ds->get_batch({0, 7}), tiny::IndexError);
  EXPECT_THROW(ds->get_batch({}), tiny::ValueError);
}

TEST(DataTensorDataset, DefaultGetBatchStacksExamples) {
  HookDataset ds(4, nullptr);
  Batch b = ds.get_batch({2, 0});
  EXPECT_EQ(b.data.sizes(), (tiny::IntArrayRef{2, 3}));
  EXPECT_EQ(b.data.to_vector<float>(), (std::vector<float>{2, 2, 2, 0, 0, 0}));
  EXPECT_EQ(targets_of(b), (Indices{2, 0}));
}

// ---- Subset and random_split ------------------------------------------------------

TEST(DataSubset, MapsIndices) {
  auto ds = numbered(10);
  Subset sub(ds, {7, 2, 5});
  EXPECT_EQ(sub.size(), 3);
  EXPECT_EQ(sub.get(0).target.item<int64_t>(), 7);
  EXPECT_EQ(targets_of(sub.get_batch({2, 0})), (Indices{5, 7}));
  EXPECT_EQ(sub.get_batch({1}).data.to_vector<float>(), (std::vector<float>{2, 20}));
  EXPECT_THROW(sub.get(3), tiny::IndexError);
  EXPECT_THROW(sub.get_batch({3}), tiny::IndexError);
  EXPECT_THROW(Subset(ds, {10}), tiny::IndexError);
}

TEST(DataRandomSplit, DisjointCoverReproducible) {
  auto ds = numbered(10);
  auto parts = random_split(ds, {7, 3}, Generator(1));
  ASSERT_EQ(parts.size(), 2u);
  EXPECT_EQ(parts[0]->size(), 7);
  EXPECT_EQ(parts[1]->size(), 3);
  Indices all = parts[0]->indices();
  all.insert(all.end(), parts[1]->indices().begin(), parts[1]->indices().end());
  Indices sorted = all;
  std::sort(sorted.begin(), sorted.end());
  EXPECT_EQ(sorted, iota(10));
  // The permutation is randperm(10, generator), cut in order, as in PyTorch.
  EXPECT_EQ(all, tiny::randperm(10, Generator(1)).to_vector<int64_t>());
  // Same seed, same split; another seed, another split.
  EXPECT_EQ(random_split(ds, {7, 3}, Generator(1))[0]->indices(), parts[0]->indices());
  EXPECT_NE(random_split(ds, {7, 3}, Generator(2))[0]->indices(), parts[0]->indices());
  // The subsets read through to the data set.
  EXPECT_EQ(parts[1]->get(0).target.item<int64_t>(), parts[1]->indices()[0]);
}

TEST(DataRandomSplit, DefaultGeneratorFollowsManualSeed) {
  auto ds = numbered(20);
  tiny::manual_seed(123);
  Indices a = random_split(ds, {10, 10})[0]->indices();
  tiny::manual_seed(123);
  Indices b = random_split(ds, {10, 10})[0]->indices();
  EXPECT_EQ(a, b);
}

TEST(DataRandomSplit, FractionsFollowPyTorch113) {
  // floor(size * f) each, then the remainder one by one from the first split.
  EXPECT_EQ(split_lengths(10, {0.8, 0.2}), (Indices{8, 2}));
  EXPECT_EQ(split_lengths(11, {0.3, 0.3, 0.4}), (Indices{4, 3, 4}));
  EXPECT_EQ(split_lengths(5, {0.5, 0.5}), (Indices{3, 2}));
  EXPECT_EQ(split_lengths(1797, {0.8, 0.2}), (Indices{1438, 359}));
  auto ds = numbered(10);
  auto parts = random_split(ds, {0.8, 0.2}, Generator(0));
  EXPECT_EQ(parts[0]->size(), 8);
  EXPECT_EQ(parts[1]->size(), 2);
  // Whole numbers that do not sum to 1 are lengths, as in PyTorch.
  auto by_length = random_split(ds, std::vector<double>{6.0, 4.0}, Generator(0));
  EXPECT_EQ(by_length[0]->size(), 6);
}

TEST(DataRandomSplit, BadLengthsThrow) {
  auto ds = numbered(10);
  EXPECT_THROW(random_split(ds, {7, 4}), tiny::ValueError);
  EXPECT_THROW(random_split(ds, {11, -1}), tiny::ValueError);
  EXPECT_THROW(random_split(ds, {0.5, 0.6}), tiny::ValueError);
  EXPECT_THROW(random_split(ds, {1.5, -0.5}), tiny::ValueError);
  try {
    random_split(ds, {3, 3});
    FAIL();
  } catch (const tiny::ValueError& e) {
    EXPECT_NE(std::string(e.what()).find("sum to 6 but the data set has 10"), std::string::npos) << e.what();
  }
}

// ---- samplers ----------------------------------------------------------------------

TEST(DataSampler, Sequential) {
  SequentialSampler s(5);
  EXPECT_EQ(s.size(), 5);
  EXPECT_EQ(s.indices(), iota(5));
  EXPECT_EQ(s.indices(), iota(5));
  EXPECT_TRUE(SequentialSampler(0).indices().empty());
}

TEST(DataSampler, RandomIsAPermutationPerPassAndReproducible) {
  RandomSampler s(50, Generator(7));
  EXPECT_EQ(s.size(), 50);
  Indices a = s.indices();
  Indices b = s.indices();
  EXPECT_NE(a, b) << "two passes gave the same order";
  for (Indices v : {a, b}) {
    std::sort(v.begin(), v.end());
    EXPECT_EQ(v, iota(50));
  }
  RandomSampler again(50, Generator(7));
  EXPECT_EQ(again.indices(), a);
  EXPECT_EQ(again.indices(), b);
  // Without a generator: tiny's default one, so manual_seed repeats it.
  RandomSampler global(50);
  tiny::manual_seed(99);
  Indices c = global.indices();
  tiny::manual_seed(99);
  EXPECT_EQ(global.indices(), c);
}

// PyTorch's DistributedSampler.__iter__, transcribed line by line (with the
// permutation passed in): the reference the tiny sampler must match.
Indices pytorch_distributed(Indices indices, int64_t replicas, int64_t rank, bool drop_last) {
  const int64_t n = static_cast<int64_t>(indices.size());
  int64_t num_samples = 0;
  if (drop_last && n % replicas != 0) {
    // math.ceil((len(dataset) - num_replicas) / num_replicas)
    const double x = static_cast<double>(n - replicas) / static_cast<double>(replicas);
    num_samples = static_cast<int64_t>(std::ceil(x));
  } else {
    num_samples = static_cast<int64_t>(std::ceil(static_cast<double>(n) / static_cast<double>(replicas)));
  }
  const int64_t total_size = num_samples * replicas;
  if (!drop_last) {
    const int64_t padding = total_size - n;
    if (padding <= n) {
      indices.insert(indices.end(), indices.begin(), indices.begin() + padding);
    } else {
      Indices repeated;
      const int64_t times = static_cast<int64_t>(std::ceil(static_cast<double>(padding) / static_cast<double>(n)));
      for (int64_t t = 0; t < times; ++t) repeated.insert(repeated.end(), indices.begin(), indices.end());
      indices.insert(indices.end(), repeated.begin(), repeated.begin() + padding);
    }
  } else {
    indices.resize(static_cast<size_t>(total_size));
  }
  Indices mine;
  for (int64_t i = rank; i < total_size; i += replicas) mine.push_back(indices[static_cast<size_t>(i)]);
  return mine;
}

TEST(DataSampler, DistributedKnownPartitions) {
  // Worked out by hand from PyTorch's code: 10 examples on 3 ranks, padded with 0, 1.
  const std::vector<Indices> padded = {{0, 3, 6, 9}, {1, 4, 7, 0}, {2, 5, 8, 1}};
  const std::vector<Indices> dropped = {{0, 3, 6}, {1, 4, 7}, {2, 5, 8}};
  for (int64_t r = 0; r < 3; ++r) {
    DistributedSampler s(10, 3, r, /*shuffle=*/false);
    EXPECT_EQ(s.size(), 4);
    EXPECT_EQ(s.total_size(), 12);
    EXPECT_EQ(s.indices(), padded[static_cast<size_t>(r)]);
    DistributedSampler d(10, 3, r, false, 0, /*drop_last=*/true);
    EXPECT_EQ(d.size(), 3);
    EXPECT_EQ(d.indices(), dropped[static_cast<size_t>(r)]);
  }
  // More replicas than examples: the list repeats [0, 1, 0, 1, 0].
  const Indices tiny_set = {0, 1, 0, 1, 0};
  for (int64_t r = 0; r < 5; ++r) {
    DistributedSampler s(2, 5, r, false);
    EXPECT_EQ(s.indices(), (Indices{tiny_set[static_cast<size_t>(r)]}));
    EXPECT_EQ(DistributedSampler(2, 5, r, false, 0, true).size(), 0);
  }
}

TEST(DataSampler, DistributedMatchesPyTorchRules) {
  for (int64_t n : {0, 1, 2, 7, 10, 12, 13, 100}) {
    for (int64_t replicas : {1, 2, 3, 4, 8}) {
      for (bool shuffle : {false, true}) {
        for (bool drop_last : {false, true}) {
          for (uint64_t ep : {0u, 3u}) {
            const uint64_t seed = 5;
            const Indices base = shuffle ? tiny::randperm(n, Generator(seed + ep)).to_vector<int64_t>() : iota(n);
            std::multiset<int64_t> seen;
            std::set<int64_t> distinct;
            int64_t per_rank = -1;
            for (int64_t r = 0; r < replicas; ++r) {
              DistributedSampler s(n, replicas, r, shuffle, seed, drop_last);
              s.set_epoch(ep);
              const Indices mine = s.indices();
              SCOPED_TRACE(testing::Message() << "n=" << n << " replicas=" << replicas << " rank=" << r
                                              << " shuffle=" << shuffle << " drop_last=" << drop_last
                                              << " epoch=" << ep);
              EXPECT_EQ(mine, pytorch_distributed(base, replicas, r, drop_last));
              EXPECT_EQ(static_cast<int64_t>(mine.size()), s.size());
              if (per_rank >= 0) {
                EXPECT_EQ(s.size(), per_rank) << "ranks must get equal shares";
              }
              per_rank = s.size();
              seen.insert(mine.begin(), mine.end());
              distinct.insert(mine.begin(), mine.end());
            }
            if (n == 0) {
              EXPECT_TRUE(seen.empty());
              continue;
            }
            if (!drop_last) {
              // Cover: every index appears; padding repeats only as many as needed.
              EXPECT_EQ(static_cast<int64_t>(distinct.size()), n);
              EXPECT_EQ(static_cast<int64_t>(seen.size()), ((n + replicas - 1) / replicas) * replicas);
            } else {
              // Disjoint: no index twice, and only the tail (< replicas) dropped.
              EXPECT_EQ(seen.size(), distinct.size());
              EXPECT_EQ(static_cast<int64_t>(seen.size()), (n / replicas) * replicas);
            }
            if (n % replicas == 0) {
              EXPECT_EQ(seen.size(), distinct.size()) << "no padding needed, none added";
            }
          }
        }
      }
    }
  }
}

TEST(DataSampler, DistributedEpochsAndErrors) {
  DistributedSampler s(100, 4, 1, true, 42);
  Indices e0 = s.indices();
  EXPECT_EQ(s.indices(), e0) << "the order must depend only on seed + epoch";
  s.set_epoch(1);
  EXPECT_EQ(s.epoch(), 1u);
  EXPECT_NE(s.indices(), e0) << "set_epoch must reshuffle";
  EXPECT_THROW(DistributedSampler(10, 3, 3), tiny::ValueError);
  EXPECT_THROW(DistributedSampler(10, 3, -1), tiny::ValueError);
  EXPECT_THROW(DistributedSampler(10, 0, 0), tiny::ValueError);
}

// ---- DataLoader: batches and order ---------------------------------------------------

TEST(DataLoader, BatchSizesAndLastPartialBatch) {
  auto ds = numbered(10);
  DataLoader loader(ds, opts(3));
  EXPECT_EQ(loader.size(), 4);
  std::vector<Indices> batches = epoch(loader);
  EXPECT_EQ(batches, (std::vector<Indices>{{0, 1, 2}, {3, 4, 5}, {6, 7, 8}, {9}}));
  int count = 0;
  for (const Batch& b : loader) {
    EXPECT_EQ(b.data.dim(), 2);
    EXPECT_EQ(b.data.size(1), 2);
    EXPECT_EQ(b.data.size(0), b.target.size(0));
    EXPECT_EQ(b.data.to_vector<float>()[1], 10.0f * static_cast<float>(b.target.to_vector<int64_t>()[0]));
    ++count;
  }
  EXPECT_EQ(count, 4);

  DataLoader dropping(ds, opts(3, false, /*drop_last=*/true));
  EXPECT_EQ(dropping.size(), 3);
  EXPECT_EQ(epoch(dropping), (std::vector<Indices>{{0, 1, 2}, {3, 4, 5}, {6, 7, 8}}));

  DataLoader exact(ds, opts(5, false, true));
  EXPECT_EQ(exact.size(), 2);
  EXPECT_EQ(epoch(exact).size(), 2u);
  DataLoader big(ds, opts(64));
  EXPECT_EQ(big.size(), 1);
  EXPECT_EQ(epoch(big), (std::vector<Indices>{iota(10)}));
  DataLoader none(ds, opts(64, false, true));
  EXPECT_EQ(none.size(), 0);
  EXPECT_TRUE(none.begin() == none.end());
}

TEST(DataLoader, EmptyDataSet) {
  DataLoader loader(numbered(0), opts(4, true));
  EXPECT_EQ(loader.size(), 0);
  EXPECT_TRUE(epoch(loader).empty());
}

TEST(DataLoader, ShuffleCoversEachIndexOncePerEpochAndEpochsDiffer) {
  auto ds = numbered(103);
  DataLoaderOptions o = opts(10, true);
  o.generator = Generator(2024);
  DataLoader loader(ds, o);
  std::vector<Indices> orders;
  for (int e = 0; e < 3; ++e) {
    std::vector<Indices> batches = epoch(loader);
    ASSERT_EQ(batches.size(), 11u);
    EXPECT_EQ(batches.back().size(), 3u);
    Indices order = flatten(batches);
    Indices sorted = order;
    std::sort(sorted.begin(), sorted.end());
    EXPECT_EQ(sorted, iota(103)) << "epoch " << e << " must visit each index exactly once";
    orders.push_back(order);
  }
  EXPECT_NE(orders[0], orders[1]);
  EXPECT_NE(orders[1], orders[2]);
  EXPECT_NE(orders[0], iota(103));

  // A new loader with the same seed replays the same epochs.
  DataLoaderOptions o2 = opts(10, true);
  o2.generator = Generator(2024);
  DataLoader replay(ds, o2);
  for (int e = 0; e < 3; ++e) EXPECT_EQ(flatten(epoch(replay)), orders[static_cast<size_t>(e)]) << "epoch " << e;

  // Without a generator the default one is used: manual_seed makes it reproducible.
  DataLoader global(ds, opts(10, true));
  tiny::manual_seed(77);
  Indices g1 = flatten(epoch(global));
  tiny::manual_seed(77);
  EXPECT_EQ(flatten(epoch(global)), g1);
}

TEST(DataLoader, CustomSamplerAndDistributed) {
  auto ds = numbered(10);
  DataLoaderOptions o = opts(2);
  auto sampler = std::make_shared<DistributedSampler>(10, 3, 1, false);
  o.sampler = sampler;
  DataLoader loader(ds, o);
  EXPECT_EQ(loader.size(), 2);
  EXPECT_EQ(loader.sampler(), sampler);
  EXPECT_EQ(epoch(loader), (std::vector<Indices>{{1, 4}, {7, 0}}));

  DataLoaderOptions bad = opts(2, /*shuffle=*/true);
  bad.sampler = sampler;
  EXPECT_THROW(DataLoader(ds, bad), tiny::ValueError);
}

TEST(DataLoader, OptionsAreCheckedAndKept) {
  auto ds = numbered(4);
  EXPECT_THROW(DataLoader(ds, opts(0)), tiny::ValueError);
  EXPECT_THROW(DataLoader(ds, opts(1, false, false, -1)), tiny::ValueError);
  DataLoaderOptions o = opts(2);
  o.prefetch_factor = 0;
  EXPECT_THROW(DataLoader(ds, o), tiny::ValueError);
  EXPECT_THROW(DataLoader(nullptr, opts(1)), tiny::ValueError);
  DataLoaderOptions pinned = opts(2);
  pinned.pin_memory = true;  // batches come from pinned memory (an emulated GPU is present)
  DataLoader loader(ds, pinned);
  EXPECT_TRUE(loader.options().pin_memory);
  EXPECT_EQ(epoch(loader).size(), 2u);
  for (const Batch& b : loader) {
    EXPECT_TRUE(b.data.is_pinned());
    EXPECT_TRUE(b.target.is_pinned());
  }
  EXPECT_EQ(loader.dataset(), ds);
}

// PyTorch's DataLoader(dataset, batch_size, shuffle): the other options at their defaults.
TEST(DataLoader, BatchSizeAndShuffleAsPyTorchsPositionalArguments) {
  auto ds = numbered(5);
  DataLoader plain(ds, 2);
  EXPECT_EQ(plain.options().batch_size, 2);
  EXPECT_FALSE(plain.options().shuffle);
  EXPECT_EQ(epoch(plain).size(), 3u);  // 2 + 2 + 1
  DataLoader shuffled(ds, 4, true);
  EXPECT_EQ(shuffled.options().batch_size, 4);
  EXPECT_TRUE(shuffled.options().shuffle);
  EXPECT_EQ(shuffled.options().num_workers, 0);
  EXPECT_THROW(DataLoader(ds, 0), tiny::ValueError);
  EXPECT_TRUE(tiny::equal((*ds)[3].data, ds->get(3).data)) << "dataset[i], as PyTorch's";
}

// ---- DataLoader: workers -----------------------------------------------------------

TEST(DataLoader, WorkersGiveTheSameBatchesInTheSameOrder) {
  // A dataset whose loading time varies, so workers finish out of order.
  auto ds = std::make_shared<HookDataset>(97, [](int64_t i) {
    if (i % 7 == 0) std::this_thread::sleep_for(std::chrono::microseconds(300 * (i % 5)));
  });
  auto reference = [&](bool shuffle, bool drop_last) {
    DataLoaderOptions o = opts(4, shuffle, drop_last, 0);
    o.generator = Generator(11);
    DataLoader loader(ds, o);
    std::vector<std::vector<Indices>> epochs;
    for (int e = 0; e < 2; ++e) epochs.push_back(epoch(loader));
    return epochs;
  };
  for (bool shuffle : {false, true}) {
    for (bool drop_last : {false, true}) {
      const auto expected = reference(shuffle, drop_last);
      for (int workers : {1, 2, 4}) {
        for (int prefetch : {1, 2, 5}) {
          ASSERT_TRUE(finishes_within(60, [&] {
            DataLoaderOptions o = opts(4, shuffle, drop_last, workers);
            o.prefetch_factor = prefetch;
            o.generator = Generator(11);
            DataLoader loader(ds, o);
            for (int e = 0; e < 2; ++e) {
              std::vector<Indices> got;
              for (const Batch& b : loader) {
                // The data matches the targets: whole batches, not mixed ones.
                const std::vector<float> d = b.data.to_vector<float>();
                const Indices t = targets_of(b);
                for (size_t i = 0; i < t.size(); ++i) EXPECT_EQ(d[3 * i], static_cast<float>(t[i]));
                got.push_back(t);
              }
              EXPECT_EQ(got, expected[static_cast<size_t>(e)])
                  << "workers=" << workers << " prefetch=" << prefetch << " shuffle=" << shuffle
                  << " drop_last=" << drop_last << " epoch=" << e;
            }
          }));
        }
      }
    }
  }
}

TEST(DataLoader, PrefetchIsBounded) {
  // Batches of one example; count how many batches the workers have started.
  std::atomic<int64_t> started{0};
  auto ds = std::make_shared<HookDataset>(200, [&](int64_t) { started.fetch_add(1); });
  for (int workers : {1, 3}) {
    for (int prefetch : {1, 2}) {
      started = 0;
      ASSERT_TRUE(finishes_within(30, [&] {
        DataLoaderOptions o = opts(1, false, false, workers);
        o.prefetch_factor = prefetch;
        DataLoader loader(ds, o);
        auto it = loader.begin();  // batch 0 handed out
        const int64_t window = static_cast<int64_t>(workers) * prefetch;
        // The workers fill the window (batches 1 .. window) and must stop there.
        const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
        while (started.load() < 1 + window && std::chrono::steady_clock::now() < deadline) {
          std::this_thread::sleep_for(std::chrono::milliseconds(1));
        }
        EXPECT_EQ(started.load(), 1 + window) << "the workers did not prefetch the window";
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
        EXPECT_EQ(started.load(), 1 + window)
            << "workers=" << workers << " prefetch=" << prefetch << ": more batches than prefetch_factor * num_workers";
        ++it;  // one more handed out: exactly one more may start
        const auto deadline2 = std::chrono::steady_clock::now() + std::chrono::seconds(10);
        while (started.load() < 2 + window && std::chrono::steady_clock::now() < deadline2) {
          std::this_thread::sleep_for(std::chrono::milliseconds(1));
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
        EXPECT_EQ(started.load(), 2 + window);
      }));
    }
  }
}

TEST(DataLoader, WaitingForAWorkerDoesNotSpin) {
  // Each batch takes 500 ms of sleeping in the worker; the main thread waits
  // for it. A busy wait burns about one core for the whole wait; a condition
  // variable almost nothing. The bound is half the wall time, not a fixed
  // number: OpenBLAS threads left spinning by earlier tests in the same
  // process, and a loaded CI machine, add CPU time that is not ours.
  auto ds = std::make_shared<HookDataset>(2, [](int64_t) { std::this_thread::sleep_for(std::chrono::milliseconds(500)); });
  DataLoader loader(ds, opts(1, false, false, 2));
  const double cpu0 = process_cpu_seconds();
  const auto wall0 = std::chrono::steady_clock::now();
  int n = 0;
  for (const Batch& b : loader) n += static_cast<int>(b.target.size(0));
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - wall0).count();
  const double cpu = process_cpu_seconds() - cpu0;
  EXPECT_EQ(n, 2);
  EXPECT_GE(wall, 0.45);
  EXPECT_LT(cpu, 0.5 * wall) << "the process used " << cpu << " s of CPU while waiting " << wall
                             << " s for sleeping workers";
}

TEST(DataLoader, EarlyBreakStopsWorkersWithoutHanging) {
  std::atomic<int64_t> calls{0};
  auto ds = std::make_shared<HookDataset>(10000, [&](int64_t) {
    calls.fetch_add(1);
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  });
  ASSERT_TRUE(finishes_within(20, [&] {
    DataLoader loader(ds, opts(8, true, false, 4));
    for (int e = 0; e < 3; ++e) {
      int seen = 0;
      for (const Batch& b : loader) {
        (void)b;
        if (++seen == 2) break;
      }
      EXPECT_EQ(seen, 2);
    }
  })) << "breaking out of the loop hung";
  // Each break joined the workers, who never load more than the window ahead.
  const int64_t calls_after = calls.load();
  EXPECT_LE(calls_after, 3 * (2 + 4 * 2) * 8);
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_EQ(calls.load(), calls_after) << "a worker kept loading after the loop ended";
}

TEST(DataLoader, DestroyingTheLoaderMidEpochDoesNotHang) {
  auto ds = std::make_shared<HookDataset>(5000, [](int64_t) { std::this_thread::sleep_for(std::chrono::milliseconds(1)); });
  // The usual case: the loop's iterator is gone, then the loader.
  ASSERT_TRUE(finishes_within(20, [&] {
    auto loader = std::make_unique<DataLoader>(ds, opts(4, false, false, 3));
    auto it = loader->begin();
    ++it;
    EXPECT_EQ(targets_of(*it), (Indices{4, 5, 6, 7}));
    loader.reset();  // iterator still alive: the loader stops and joins its workers
    EXPECT_THROW(++it, tiny::Error);  // and the iterator says why it cannot go on
    EXPECT_TRUE(it == DataLoader::Iterator());
  })) << "destroying the loader mid-epoch hung";
  ASSERT_TRUE(finishes_within(20, [&] {
    auto loader = std::make_unique<DataLoader>(ds, opts(4, false, false, 3));
    {
      auto it = loader->begin();
      ++it;
    }  // iterator dropped first
    loader.reset();
  }));
  // A loader that never started an epoch, and one whose epoch ended.
  ASSERT_TRUE(finishes_within(20, [&] {
    auto loader = std::make_unique<DataLoader>(numbered(5), opts(2, false, false, 2));
    EXPECT_EQ(epoch(*loader).size(), 3u);
    loader.reset();
    DataLoader unused(ds, opts(4, false, false, 2));
  }));
}

TEST(DataLoader, WorkerExceptionSurfacesAtItsBatch) {
  // Example 13 is unreadable: with batches of 4 that is batch 3 (indices 12-15).
  auto ds = std::make_shared<HookDataset>(40, [](int64_t i) {
    if (i == 13) throw tiny::IOError("cannot read example 13");
  });
  for (int workers : {0, 1, 3}) {
    ASSERT_TRUE(finishes_within(20, [&] {
      DataLoader loader(ds, opts(4, false, false, workers));
      std::vector<Indices> before;
      try {
        for (const Batch& b : loader) before.push_back(targets_of(b));
        ADD_FAILURE() << "workers=" << workers << ": the error was not rethrown";
      } catch (const tiny::IOError& e) {  // the data set's error type is kept
        const std::string m = e.what();
        EXPECT_NE(m.find("batch 3"), std::string::npos) << m;
        EXPECT_NE(m.find("cannot read example 13"), std::string::npos) << m;
        EXPECT_NE(m.find("12, 13, 14, 15"), std::string::npos) << m;
        if (workers > 0) {
          EXPECT_NE(m.find("worker thread"), std::string::npos) << m;
        }
      }
      EXPECT_EQ(before, (std::vector<Indices>{{0, 1, 2, 3}, {4, 5, 6, 7}, {8, 9, 10, 11}}))
          << "workers=" << workers << ": the batches before the failing one must all arrive, in order";
      // The loader stays usable: a new epoch fails at the same batch again.
      int again = 0;
      EXPECT_THROW(
          {
            for (const Batch& b : loader) {
              (void)b;
              ++again;
            }
          },
          tiny::IOError);
      EXPECT_EQ(again, 3);
    }));
  }
  // A failure in the first batch comes out of begin(); a non-tiny exception becomes tiny::Error.
  auto first = std::make_shared<HookDataset>(8, [](int64_t i) {
    if (i == 0) throw std::runtime_error("boom");
  });
  for (int workers : {0, 2}) {
    DataLoader loader(first, opts(2, false, false, workers));
    try {
      loader.begin();
      ADD_FAILURE() << "no error";
    } catch (const tiny::Error& e) {
      EXPECT_NE(std::string(e.what()).find("batch 0"), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("boom"), std::string::npos) << e.what();
    }
  }
}

TEST(DataLoader, WorkersUseTheCallersGradMode) {
  std::mutex mutex;
  std::set<bool> modes;
  auto ds = std::make_shared<HookDataset>(16, [&](int64_t) {
    std::lock_guard<std::mutex> lock(mutex);
    modes.insert(tiny::is_grad_enabled());
  });
  {
    tiny::NoGradGuard no_grad;
    DataLoader loader(ds, opts(2, false, false, 3));
    EXPECT_EQ(epoch(loader).size(), 8u);
  }
  EXPECT_EQ(modes, (std::set<bool>{false})) << "workers must run with grad mode off under NoGradGuard";
  modes.clear();
  {
    DataLoader loader(ds, opts(2, false, false, 3));
    EXPECT_EQ(epoch(loader).size(), 8u);
  }
  EXPECT_EQ(modes, (std::set<bool>{true}));
}

TEST(DataLoader, IteratorBasics) {
  DataLoader loader(numbered(6), opts(2));
  auto it = loader.begin();
  EXPECT_TRUE(it != loader.end());
  EXPECT_EQ(it->target.size(0), 2);
  auto same = it;
  EXPECT_TRUE(same == it);
  ++it;
  ++it;
  ++it;
  EXPECT_TRUE(it == loader.end());
  EXPECT_THROW(*it, tiny::IndexError);
  EXPECT_THROW(++it, tiny::IndexError);
}
