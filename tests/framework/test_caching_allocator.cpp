// Tests of the device caching allocator alone, above a fake runtime: size
// rounding, pools and segment sizes, splitting and merging, reuse, per-stream
// pools and record_stream events, empty_cache, out-of-memory and its retry,
// statistics, memory_summary, thread safety. Expected values are computed by
// hand from the rules in gpu/caching_allocator.h.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "gpu/caching_allocator.h"
#include "gpu/runtime.h"
#include "tiny/error.h"

namespace gpu = tiny::gpu;
using gpu::CachingAllocator;

namespace {

constexpr size_t KiB = 1024;
constexpr size_t MiB = 1024 * KiB;

// A gpu::Runtime made of plain host memory, so the allocator is tested without
// the emulator: a capacity counted on raw mallocs, counted raw calls and
// synchronizations, and events that stay incomplete until the test completes
// them (or something synchronizes on them).
class FakeRuntime : public gpu::Runtime {
 public:
  explicit FakeRuntime(size_t capacity) : capacity_(capacity) {}
  ~FakeRuntime() override {
    for (auto& [ptr, size] : blocks_) std::free(ptr);
  }

  const char* kind() const override { return "emulated"; }
  int device_count() const override { return 1; }
  gpu::DeviceProperties properties(int) const override {
    gpu::DeviceProperties p;
    p.name = "fake device (emulated)";
    p.total_memory = capacity_;
    p.emulated = true;
    return p;
  }

  void* raw_malloc(int, size_t nbytes) override {
    std::lock_guard<std::mutex> lock(mutex_);
    if (used_ + nbytes > capacity_) return nullptr;
    void* ptr = std::aligned_alloc(512, nbytes);
    if (ptr == nullptr) return nullptr;
    used_ += nbytes;
    blocks_[ptr] = nbytes;
    ++raw_mallocs;
    return ptr;
  }
  void raw_free(int, void* ptr) override {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = blocks_.find(ptr);
    ASSERT_NE(it, blocks_.end()) << "raw_free of a pointer raw_malloc did not return";
    used_ -= it->second;
    blocks_.erase(it);
    std::free(ptr);
    ++raw_frees;
  }
  size_t free_memory(int) const override {
    std::lock_guard<std::mutex> lock(mutex_);
    return capacity_ - used_;
  }
  size_t outstanding_segments() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return blocks_.size();
  }

  void* pinned_malloc(size_t nbytes) override { return std::malloc(nbytes); }
  void pinned_free(void* ptr) override { std::free(ptr); }
  bool is_pinned(const void*) const override { return false; }

  gpu::Stream default_stream(int device) override { return {device, 0}; }
  gpu::Stream create_stream(int device) override { return {device, ++last_stream_}; }
  void destroy_stream(gpu::Stream) override {}
  bool stream_query(gpu::Stream) override { return true; }
  void stream_synchronize(gpu::Stream) override { ++synchronizations; }
  void device_synchronize(int) override {
    std::lock_guard<std::mutex> lock(mutex_);
    ++synchronizations;
    for (auto& [id, event] : events_) event.complete = true;  // everything queued has run
  }

  void memcpy_async(void*, const void*, size_t, gpu::CopyKind, gpu::Stream) override {}
  void memset_async(void*, int, size_t, gpu::Stream) override {}

  gpu::Event create_event(int, bool) override {
    std::lock_guard<std::mutex> lock(mutex_);
    ++events_created;
    gpu::Event e{next_event_++};
    events_[e.id] = FakeEvent{};
    return e;
  }
  void destroy_event(gpu::Event e) override {
    std::lock_guard<std::mutex> lock(mutex_);
    events_.erase(e.id);
  }
  void record_event(gpu::Event e, gpu::Stream stream) override {
    std::lock_guard<std::mutex> lock(mutex_);
    events_.at(e.id) = FakeEvent{stream, true, false};
  }
  bool event_query(gpu::Event e) override {
    std::lock_guard<std::mutex> lock(mutex_);
    return events_.at(e.id).complete;
  }
  void event_synchronize(gpu::Event e) override {
    std::lock_guard<std::mutex> lock(mutex_);
    ++synchronizations;
    events_.at(e.id).complete = true;
  }
  void stream_wait_event(gpu::Stream, gpu::Event) override {}
  float event_elapsed_ms(gpu::Event, gpu::Event) override { return 0; }
  gpu::Counters counters(int) const override { return {}; }
  void reset_counters(int) override {}

  // The work queued on `stream` so far has run: its events complete.
  void complete_stream(gpu::Stream stream) {
    std::lock_guard<std::mutex> lock(mutex_);
    for (auto& [id, event] : events_) {
      if (event.recorded && event.stream == stream) event.complete = true;
    }
  }
  // Events recorded on `stream` and not complete yet.
  int pending_on(gpu::Stream stream) const {
    std::lock_guard<std::mutex> lock(mutex_);
    int n = 0;
    for (auto& [id, event] : events_) n += event.recorded && event.stream == stream && !event.complete;
    return n;
  }

  std::atomic<int> raw_mallocs{0}, raw_frees{0}, synchronizations{0}, events_created{0};

 private:
  struct FakeEvent {
    gpu::Stream stream;
    bool recorded = false;
    bool complete = true;  // an event never recorded counts as complete, as in CUDA
  };
  mutable std::mutex mutex_;
  size_t capacity_;
  size_t used_ = 0;
  std::map<void*, size_t> blocks_;
  std::map<int64_t, FakeEvent> events_;
  int64_t next_event_ = 0;
  int64_t last_stream_ = 0;
};

class CachingAllocatorTest : public ::testing::Test {
 protected:
  explicit CachingAllocatorTest(size_t capacity = 1024 * MiB)
      : rt(capacity), alloc(std::make_unique<CachingAllocator>(rt, 0)), s0(rt.default_stream(0)) {}

  int64_t allocated(int pool = gpu::kAggregatePool) const { return alloc->stats().allocated_bytes[pool].current; }
  int64_t reserved(int pool = gpu::kAggregatePool) const { return alloc->stats().reserved_bytes[pool].current; }
  int64_t inactive_split(int pool = gpu::kAggregatePool) const {
    return alloc->stats().inactive_split_bytes[pool].current;
  }
  static char* at(void* p, size_t bytes) { return static_cast<char*>(p) + bytes; }

  FakeRuntime rt;
  std::unique_ptr<CachingAllocator> alloc;
  gpu::Stream s0;
};

// A device of 64 MiB, for out-of-memory traces.
class CachingAllocatorOomTest : public CachingAllocatorTest {
 protected:
  CachingAllocatorOomTest() : CachingAllocatorTest(64 * MiB) {}
};

TEST_F(CachingAllocatorTest, RoundsRequestsUpTo512Bytes) {
  EXPECT_EQ(CachingAllocator::round_size(1), 512u);
  EXPECT_EQ(CachingAllocator::round_size(512), 512u);
  EXPECT_EQ(CachingAllocator::round_size(513), 1024u);
  EXPECT_EQ(CachingAllocator::round_size(1000), 1024u);
  EXPECT_EQ(CachingAllocator::round_size(3 * MiB + 1), 3 * MiB + 512);

  EXPECT_EQ(alloc->allocate(0, s0), nullptr);
  void* p = alloc->allocate(1, s0);
  EXPECT_EQ(alloc->allocation_size(p), 512u);
  EXPECT_EQ(allocated(), 512);
  EXPECT_EQ(alloc->stats().requested_bytes[gpu::kAggregatePool].current, 1);
  void* q = alloc->allocate(1000, s0);
  EXPECT_EQ(alloc->allocation_size(q), 1024u);
  EXPECT_EQ(q, at(p, 512));  // packed right after p in the same segment
  EXPECT_EQ(allocated(), 1536);
  alloc->free(p);
  alloc->free(q);
  alloc->free(nullptr);  // a no-op, as cudaFree(nullptr)
}

TEST_F(CachingAllocatorTest, SegmentSizesPerPool) {
  EXPECT_EQ(CachingAllocator::segment_size(512), 2 * MiB);
  EXPECT_EQ(CachingAllocator::segment_size(1 * MiB), 2 * MiB);
  EXPECT_EQ(CachingAllocator::segment_size(1 * MiB + 512), 20 * MiB);
  EXPECT_EQ(CachingAllocator::segment_size(10 * MiB - 512), 20 * MiB);
  EXPECT_EQ(CachingAllocator::segment_size(10 * MiB), 10 * MiB);
  EXPECT_EQ(CachingAllocator::segment_size(10 * MiB + 512), 12 * MiB);
  EXPECT_EQ(CachingAllocator::segment_size(13 * MiB), 14 * MiB);

  void* small = alloc->allocate(1 * MiB, s0);  // the largest small request
  EXPECT_EQ(reserved(gpu::kSmallPool), int64_t(2 * MiB));
  EXPECT_EQ(reserved(gpu::kLargePool), 0);
  void* mid = alloc->allocate(1 * MiB + 1, s0);  // large pool, shared 20 MiB segment
  EXPECT_EQ(reserved(gpu::kLargePool), int64_t(20 * MiB));
  // Own segment, rounded to 2 MiB. (On another stream: on s0 best fit would
  // take it from the 20 MiB segment's free remainder.)
  void* big = alloc->allocate(10 * MiB + 1, rt.create_stream(0));
  EXPECT_EQ(reserved(gpu::kLargePool), int64_t(32 * MiB));
  EXPECT_EQ(reserved(), int64_t(34 * MiB));
  // The 2 MiB - 512 B left in its segment (> 1 MiB) is split off and kept.
  EXPECT_EQ(alloc->allocation_size(big), 10 * MiB + 512);
  EXPECT_EQ(inactive_split(gpu::kLargePool), int64_t(20 * MiB - (1 * MiB + 512) + 2 * MiB - 512));
  EXPECT_EQ(rt.raw_mallocs, 3);
  const auto st = alloc->stats();
  EXPECT_EQ(st.segment[gpu::kSmallPool].current, 1);
  EXPECT_EQ(st.segment[gpu::kLargePool].current, 2);
  EXPECT_EQ(st.allocation[gpu::kSmallPool].current, 1);
  EXPECT_EQ(st.allocation[gpu::kLargePool].current, 2);
  for (void* p : {small, mid, big}) alloc->free(p);
}

TEST_F(CachingAllocatorTest, SplitRemainderIsReused) {
  // Small pool: a 1 MiB request splits its 2 MiB segment; the next 1 MiB
  // request takes the remainder without asking the device.
  void* a = alloc->allocate(1 * MiB, s0);
  EXPECT_EQ(inactive_split(gpu::kSmallPool), int64_t(1 * MiB));
  void* b = alloc->allocate(1 * MiB, s0);
  EXPECT_EQ(b, at(a, 1 * MiB));
  EXPECT_EQ(rt.raw_mallocs, 1);
  EXPECT_EQ(inactive_split(), 0);

  // Large pool: 3 MiB from a 20 MiB segment leaves 17 MiB; 5 MiB comes from it.
  void* c = alloc->allocate(3 * MiB, s0);
  EXPECT_EQ(inactive_split(gpu::kLargePool), int64_t(17 * MiB));
  void* d = alloc->allocate(5 * MiB, s0);
  EXPECT_EQ(d, at(c, 3 * MiB));
  EXPECT_EQ(inactive_split(gpu::kLargePool), int64_t(12 * MiB));
  EXPECT_EQ(rt.raw_mallocs, 2);
  for (void* p : {a, b, c, d}) alloc->free(p);
}

TEST_F(CachingAllocatorTest, LargeRemainderOfOneMiBIsNotSplit) {
  void* a = alloc->allocate(9 * MiB, s0);  // 20 MiB segment: 9 MiB + 11 MiB free
  void* b = alloc->allocate(10 * MiB, s0);  // best fit is the 11 MiB block: 1 MiB would remain
  EXPECT_EQ(b, at(a, 9 * MiB));
  EXPECT_EQ(alloc->allocation_size(b), 11 * MiB);  // the remainder stays with the block
  EXPECT_EQ(allocated(), int64_t(20 * MiB));
  EXPECT_EQ(rt.raw_mallocs, 1);
  alloc->free(a);
  alloc->free(b);
}

TEST_F(CachingAllocatorTest, BestFitPicksSmallestBlockThatFits) {
  // Two free holes in one segment, 4 MiB and 2 MiB: a 2 MiB request takes the 2 MiB hole.
  void* a = alloc->allocate(4 * MiB, s0);
  void* sep1 = alloc->allocate(2 * MiB, s0);
  void* b = alloc->allocate(2 * MiB, s0);
  void* sep2 = alloc->allocate(2 * MiB, s0);
  alloc->free(a);
  alloc->free(b);
  EXPECT_EQ(alloc->allocate(2 * MiB, s0), b);
  alloc->free(b);
  for (void* p : {sep1, sep2}) alloc->free(p);
}

TEST_F(CachingAllocatorTest, FreeMergesNeighboursBackIntoOneBlock) {
  void* a = alloc->allocate(512 * KiB, s0);
  void* b = alloc->allocate(512 * KiB, s0);
  void* c = alloc->allocate(512 * KiB, s0);  // [a][b][c][512 KiB free]
  EXPECT_EQ(alloc->stats().inactive_split[gpu::kAggregatePool].current, 1);
  alloc->free(b);  // [a][b free][c][free]
  EXPECT_EQ(alloc->stats().inactive_split[gpu::kAggregatePool].current, 2);
  EXPECT_EQ(inactive_split(), int64_t(1 * MiB));
  alloc->free(a);  // [a+b free][c][free]
  EXPECT_EQ(alloc->stats().inactive_split[gpu::kAggregatePool].current, 2);
  EXPECT_EQ(inactive_split(), int64_t(1536 * KiB));
  alloc->free(c);  // one free 2 MiB block: not split any more
  EXPECT_EQ(alloc->stats().inactive_split[gpu::kAggregatePool].current, 0);
  EXPECT_EQ(inactive_split(), 0);
  // The merged block starts at the segment base and is released whole.
  EXPECT_EQ(alloc->allocate(1 * MiB, s0), a);
  alloc->free(a);
  alloc->empty_cache();
  EXPECT_EQ(reserved(), 0);
  EXPECT_EQ(rt.raw_frees, 1);
}

TEST_F(CachingAllocatorTest, ReuseDoesNotCallRawMalloc) {
  void* first = alloc->allocate(4 * MiB, s0);
  alloc->free(first);
  for (int i = 0; i < 100; ++i) {
    void* p = alloc->allocate(4 * MiB, s0);
    EXPECT_EQ(p, first);
    alloc->free(p);
  }
  EXPECT_EQ(rt.raw_mallocs, 1);
  EXPECT_EQ(rt.raw_frees, 0);
  const auto st = alloc->stats();
  EXPECT_EQ(st.num_device_alloc, 1);
  EXPECT_EQ(st.allocation[gpu::kAggregatePool].allocated, 101);
  EXPECT_EQ(st.allocation[gpu::kAggregatePool].freed, 101);
}

TEST_F(CachingAllocatorTest, PoolsArePerStream) {
  gpu::Stream s1 = rt.create_stream(0);
  void* p = alloc->allocate(12 * MiB, s0);
  alloc->free(p);
  void* q = alloc->allocate(12 * MiB, s1);  // s0's cached block is not for s1
  EXPECT_NE(q, p);
  EXPECT_EQ(rt.raw_mallocs, 2);
  alloc->free(q);
  EXPECT_EQ(alloc->allocate(12 * MiB, s0), p);
  EXPECT_EQ(alloc->allocate(12 * MiB, s1), q);
  alloc->free(p);
  alloc->free(q);
}

TEST_F(CachingAllocatorTest, RecordStreamDelaysReuseUntilEventsComplete) {
  gpu::Stream s1 = rt.create_stream(0);
  gpu::Stream s2 = rt.create_stream(0);
  void* p = alloc->allocate(12 * MiB, s0);
  alloc->record_stream(p, s1);
  alloc->record_stream(p, s2);
  alloc->record_stream(p, s1);  // recorded once per stream
  alloc->free(p);
  EXPECT_EQ(rt.pending_on(s1), 1);
  EXPECT_EQ(rt.pending_on(s2), 1);
  // Freed but not reusable: no longer allocated, still active.
  EXPECT_EQ(allocated(), 0);
  EXPECT_EQ(alloc->stats().active_bytes[gpu::kAggregatePool].current, int64_t(12 * MiB));

  void* q = alloc->allocate(12 * MiB, s0);  // s1 and s2 may still use p
  EXPECT_NE(q, p);
  EXPECT_EQ(rt.raw_mallocs, 2);
  alloc->free(q);

  rt.complete_stream(s1);  // s2 is still behind
  void* r = alloc->allocate(12 * MiB, s0);
  EXPECT_EQ(r, q);
  void* r2 = alloc->allocate(12 * MiB, s0);
  EXPECT_NE(r2, p);
  EXPECT_EQ(rt.raw_mallocs, 3);
  alloc->free(r);
  alloc->free(r2);

  rt.complete_stream(s2);  // now every user is done: p goes back to s0's pool
  void* t = alloc->allocate(12 * MiB, s0);
  EXPECT_EQ(alloc->stats().active_bytes[gpu::kAggregatePool].current, int64_t(12 * MiB));
  void* t2 = alloc->allocate(12 * MiB, s0);
  void* t3 = alloc->allocate(12 * MiB, s0);
  std::vector<void*> got{t, t2, t3};
  EXPECT_NE(std::find(got.begin(), got.end(), p), got.end());
  EXPECT_EQ(rt.raw_mallocs, 3);
  for (void* x : got) alloc->free(x);
  EXPECT_EQ(rt.events_created, 2);
}

TEST_F(CachingAllocatorTest, RecordStreamOnAllocatingStreamIsNoOp) {
  void* p = alloc->allocate(12 * MiB, s0);
  alloc->record_stream(p, s0);
  alloc->free(p);
  EXPECT_EQ(rt.events_created, 0);
  EXPECT_EQ(alloc->stats().active_bytes[gpu::kAggregatePool].current, 0);
  EXPECT_EQ(alloc->allocate(12 * MiB, s0), p);  // reused at once
  alloc->free(p);
}

TEST_F(CachingAllocatorTest, EmptyCacheReleasesOnlyFullyFreeSegments) {
  void* a = alloc->allocate(4 * MiB, s0);   // segment A, 20 MiB: [a 4][b 4][12 free]
  void* b = alloc->allocate(4 * MiB, s0);
  void* c = alloc->allocate(14 * MiB, s0);  // too big for A's hole: segment B, 14 MiB
  void* d = alloc->allocate(14 * MiB, s0);  // segment C, 14 MiB
  EXPECT_EQ(reserved(), int64_t(48 * MiB));
  alloc->free(a);  // A: [4 free][b][12 free] -- fragmented
  alloc->free(c);  // B: one free block
  EXPECT_EQ(inactive_split(), int64_t(16 * MiB));
  const int syncs = rt.synchronizations;

  alloc->empty_cache();
  EXPECT_EQ(rt.synchronizations, syncs + 1);  // the device first
  EXPECT_EQ(reserved(), int64_t(34 * MiB));    // only B went: 48 - 14
  EXPECT_EQ(rt.raw_frees, 1);
  EXPECT_EQ(inactive_split(), int64_t(16 * MiB));  // what empty_cache cannot give back
  EXPECT_EQ(allocated(), int64_t(18 * MiB));

  alloc->free(b);  // A merges back into one block
  EXPECT_EQ(inactive_split(), 0);
  alloc->empty_cache();
  EXPECT_EQ(reserved(), int64_t(14 * MiB));  // C with d
  EXPECT_EQ(rt.raw_frees, 2);
  EXPECT_EQ(alloc->num_segments(), 1u);
  alloc->free(d);
  alloc->empty_cache();
  EXPECT_EQ(reserved(), 0);
  EXPECT_EQ(rt.outstanding_segments(), 0u);
  const auto st = alloc->stats();
  EXPECT_EQ(st.num_device_alloc, 3);
  EXPECT_EQ(st.num_device_free, 3);
}

TEST_F(CachingAllocatorTest, EmptyCacheWaitsForRecordedStreams) {
  gpu::Stream s1 = rt.create_stream(0);
  void* p = alloc->allocate(12 * MiB, s0);
  alloc->record_stream(p, s1);
  alloc->free(p);
  alloc->empty_cache();  // synchronizes, so s1's event is done and p's segment goes
  EXPECT_EQ(reserved(), 0);
  EXPECT_EQ(alloc->stats().active_bytes[gpu::kAggregatePool].current, 0);
}

TEST_F(CachingAllocatorOomTest, OutOfMemoryRaisesWithPyTorchMessage) {
  void* a = alloc->allocate(40 * MiB, s0);
  try {
    alloc->allocate(30 * MiB, s0);
    FAIL() << "expected tiny::OutOfMemoryError";
  } catch (const tiny::OutOfMemoryError& e) {
    EXPECT_EQ(std::string(e.what()),
              "CUDA out of memory. Tried to allocate 30.00 MiB. GPU 0 has a total capacity of 64.00 MiB of which "
              "24.00 MiB is free. Of the allocated memory 40.00 MiB is allocated by tiny, and 0 bytes is reserved "
              "by tiny but unallocated. If reserved but unallocated memory is large, call "
              "tiny::cuda::empty_cache() to release it.");
  }
  auto st = alloc->stats();
  EXPECT_EQ(st.num_ooms, 1);
  EXPECT_EQ(st.num_alloc_retries, 1);
  // Still consistent: what fits still succeeds.
  EXPECT_EQ(allocated(), int64_t(40 * MiB));
  void* b = alloc->allocate(20 * MiB, s0);
  EXPECT_NE(b, nullptr);
  EXPECT_EQ(reserved(), int64_t(60 * MiB));
  alloc->free(a);
  alloc->free(b);
}

TEST_F(CachingAllocatorOomTest, OutOfMemoryReportsReservedButUnallocated) {
  // A fragmented segment cannot be released: its free part shows in the
  // message as reserved but unallocated.
  void* a = alloc->allocate(4 * MiB, s0);     // 20 MiB segment, 16 MiB free in it
  void* big = alloc->allocate(40 * MiB, s0);  // 4 MiB left on the device
  try {
    alloc->allocate(18 * MiB, s0);  // more than the 16 MiB hole: needs an 18 MiB segment
    FAIL() << "expected tiny::OutOfMemoryError";
  } catch (const tiny::OutOfMemoryError& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("Tried to allocate 18.00 MiB. GPU 0 has a total capacity of 64.00 MiB of which 4.00 MiB "
                       "is free. Of the allocated memory 44.00 MiB is allocated by tiny, and 16.00 MiB is "
                       "reserved by tiny but unallocated."),
              std::string::npos)
        << msg;
  }
  EXPECT_EQ(rt.raw_frees, 0);  // nothing whole to give back
  void* c = alloc->allocate(16 * MiB, s0);  // the hole still serves what fits
  EXPECT_EQ(c, at(a, 4 * MiB));
  for (void* p : {a, big, c}) alloc->free(p);
}

TEST_F(CachingAllocatorOomTest, RetryAfterReleasingCachedSegmentsAvoidsOom) {
  void* a = alloc->allocate(40 * MiB, s0);
  alloc->free(a);  // cached: 40 MiB reserved, 24 MiB left on the device
  EXPECT_EQ(reserved(), int64_t(40 * MiB));
  // Too big for the cached block and for the device: raw_malloc fails once,
  // a's segment is released, the retry succeeds.
  void* b = alloc->allocate(42 * MiB, s0);
  EXPECT_NE(b, nullptr);
  auto st = alloc->stats();
  EXPECT_EQ(st.num_alloc_retries, 1);
  EXPECT_EQ(st.num_ooms, 0);
  EXPECT_EQ(rt.raw_frees, 1);
  EXPECT_EQ(reserved(), int64_t(42 * MiB));
  EXPECT_GE(rt.synchronizations, 1);  // cached blocks may have had queued work
  alloc->free(b);
}

TEST_F(CachingAllocatorTest, StatisticsCurrentPeakAndReset) {
  void* a = alloc->allocate(3 * MiB, s0);
  void* b = alloc->allocate(5 * MiB, s0);
  void* s = alloc->allocate(1000, s0);
  EXPECT_EQ(alloc->memory_allocated(), 8 * MiB + 1024);
  EXPECT_EQ(alloc->max_memory_allocated(), 8 * MiB + 1024);
  EXPECT_EQ(alloc->memory_reserved(), 22 * MiB);
  alloc->free(a);
  EXPECT_EQ(alloc->memory_allocated(), 5 * MiB + 1024);
  EXPECT_EQ(alloc->max_memory_allocated(), 8 * MiB + 1024);
  alloc->reset_peak_stats();
  EXPECT_EQ(alloc->max_memory_allocated(), 5 * MiB + 1024);
  EXPECT_EQ(alloc->max_memory_reserved(), 22 * MiB);

  auto st = alloc->stats();
  EXPECT_EQ(st.allocated_bytes[gpu::kLargePool].current, int64_t(5 * MiB));
  EXPECT_EQ(st.allocated_bytes[gpu::kLargePool].allocated, int64_t(8 * MiB));
  EXPECT_EQ(st.allocated_bytes[gpu::kLargePool].freed, int64_t(3 * MiB));
  EXPECT_EQ(st.allocated_bytes[gpu::kSmallPool].current, 1024);
  EXPECT_EQ(st.allocation[gpu::kAggregatePool].current, 2);
  EXPECT_EQ(st.allocation[gpu::kAggregatePool].allocated, 3);
  EXPECT_EQ(st.active_bytes[gpu::kAggregatePool].current, int64_t(5 * MiB + 1024));
  // Free inside split segments: large [3 free][5][12 free] -> 15 MiB, small 2 MiB - 1 KiB.
  EXPECT_EQ(st.inactive_split_bytes[gpu::kLargePool].current, int64_t(15 * MiB));
  EXPECT_EQ(st.inactive_split_bytes[gpu::kSmallPool].current, int64_t(2 * MiB - 1024));
  EXPECT_EQ(st.requested_bytes[gpu::kAggregatePool].current, int64_t(5 * MiB + 1000));

  alloc->reset_accumulated_stats();
  st = alloc->stats();
  EXPECT_EQ(st.allocation[gpu::kAggregatePool].allocated, 0);
  EXPECT_EQ(st.allocation[gpu::kAggregatePool].current, 2);
  alloc->free(b);
  alloc->free(s);
  EXPECT_EQ(alloc->memory_allocated(), 0u);
}

TEST_F(CachingAllocatorTest, MemorySummaryTable) {
  void* a = alloc->allocate(4 * MiB, s0);  // large: 20 MiB segment
  void* b = alloc->allocate(1000, s0);     // small: 2 MiB segment, 1 KiB block
  alloc->free(a);
  const std::string summary = alloc->memory_summary();
  for (const char* label : {"device ID 0", "Metric", "Cur Usage", "Peak Usage", "Tot Alloc", "Tot Freed",
                            "Allocated memory", "Active memory", "Reserved memory", "Non-releasable memory",
                            "from large pool", "from small pool", "Allocations", "Reserved segments"}) {
    EXPECT_NE(summary.find(label), std::string::npos) << label << "\n" << summary;
  }
  // Reserved 22 MiB, all of it still reserved; its unit is chosen by the
  // all-pools value, so the pool rows share it.
  EXPECT_NE(summary.find("| Reserved memory       |  22528 KiB |  22528 KiB |  22528 KiB |      0 B   |"),
            std::string::npos)
      << summary;
  EXPECT_NE(summary.find("|       from large pool |  20480 KiB |  20480 KiB |  20480 KiB |      0 B   |"),
            std::string::npos)
      << summary;
  // Allocated: now 1 KiB (small), peak 4 MiB + 1 KiB, 4 MiB freed.
  EXPECT_NE(summary.find("| Allocated memory      |   1024 B   |   4097 KiB |   4097 KiB |   4096 KiB |"),
            std::string::npos)
      << summary;
  EXPECT_NE(summary.find("| Allocations           |       1    |       2    |       2    |       1    |"),
            std::string::npos)
      << summary;
  // Every line of the box is equally wide.
  size_t start = 0;
  while (start < summary.size()) {
    const size_t end = summary.find('\n', start);
    EXPECT_EQ(end - start, 77u) << summary.substr(start, end - start);
    start = end + 1;
  }
  alloc->free(b);
}

TEST_F(CachingAllocatorTest, RejectsUnknownPointersAndOtherDevices) {
  int not_device_memory = 0;
  EXPECT_THROW(alloc->free(&not_device_memory), tiny::Error);
  void* p = alloc->allocate(100, s0);
  alloc->free(p);
  EXPECT_THROW(alloc->free(p), tiny::Error);  // double free
  EXPECT_THROW(alloc->record_stream(p, s0), tiny::Error);
  EXPECT_THROW(alloc->allocation_size(p), tiny::Error);
  EXPECT_THROW(alloc->allocate(100, gpu::Stream{1, 0}), tiny::DeviceError);
}

TEST_F(CachingAllocatorTest, DestructorGivesEverySegmentBack) {
  gpu::Stream s1 = rt.create_stream(0);
  alloc->allocate(100, s0);
  void* p = alloc->allocate(4 * MiB, s0);
  alloc->record_stream(p, s1);
  alloc->free(p);  // waiting for s1's event
  alloc->allocate(12 * MiB, s1);
  EXPECT_EQ(rt.outstanding_segments(), 3u);
  alloc.reset();
  EXPECT_EQ(rt.outstanding_segments(), 0u);
}

TEST_F(CachingAllocatorTest, ThreadsAllocatingAndFreeing) {
  constexpr int kThreads = 8;
  constexpr int kIterations = 2000;
  std::vector<gpu::Stream> streams{s0, rt.create_stream(0)};
  std::atomic<int> corrupted{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      std::mt19937 rng(t);
      std::uniform_int_distribution<size_t> size_dist(1, 3 * MiB);
      std::vector<std::pair<unsigned char*, size_t>> live;
      const gpu::Stream stream = streams[t % 2];
      for (int i = 0; i < kIterations; ++i) {
        if (live.size() < 6 && (live.empty() || rng() % 2 == 0)) {
          const size_t n = size_dist(rng);
          auto* p = static_cast<unsigned char*>(alloc->allocate(n, stream));
          // Mark both ends: an overlap with another live block would overwrite them.
          p[0] = static_cast<unsigned char>(t);
          p[n - 1] = static_cast<unsigned char>(t);
          live.emplace_back(p, n);
        } else {
          const size_t k = rng() % live.size();
          auto [p, n] = live[k];
          if (p[0] != t || p[n - 1] != t) ++corrupted;
          alloc->free(p);
          live.erase(live.begin() + static_cast<std::ptrdiff_t>(k));
        }
        if (i % 100 == 99 && t == 0) alloc->empty_cache();
      }
      for (auto [p, n] : live) {
        if (p[0] != t || p[n - 1] != t) ++corrupted;
        alloc->free(p);
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(corrupted, 0);
  auto st = alloc->stats();
  EXPECT_EQ(st.allocated_bytes[gpu::kAggregatePool].current, 0);
  EXPECT_EQ(st.active_bytes[gpu::kAggregatePool].current, 0);
  EXPECT_EQ(st.inactive_split_bytes[gpu::kAggregatePool].current, 0);  // every segment merged back whole
  alloc->empty_cache();
  EXPECT_EQ(reserved(), 0);
  EXPECT_EQ(rt.raw_mallocs, rt.raw_frees);
}

}  // namespace
