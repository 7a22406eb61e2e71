// Tests of tiny's CPU caching allocator: alignment, reuse, statistics, the
// cache limit, thread safety, messages.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "runtime/cpu_allocator.h"
#include "tiny/error.h"

namespace rt = tiny::runtime;

namespace {

constexpr size_t KiB = 1024;
constexpr size_t MiB = 1024 * KiB;
constexpr size_t GiB = 1024 * MiB;

// Starts a test from an empty cache, and puts the cache limit back after it.
class CleanAllocator {
 public:
  CleanAllocator() : limit_(rt::cpu_cache_limit()) {
    rt::cpu_empty_cache();
    rt::cpu_reset_peak_stats();
    start = rt::cpu_allocator_stats();
  }
  ~CleanAllocator() { rt::cpu_set_cache_limit(limit_); }

  rt::CpuAllocatorStats start{};

 private:
  size_t limit_;
};

}  // namespace

TEST(CpuAllocator, RoundSizeFollowsTheDocumentedClasses) {
  EXPECT_EQ(rt::cpu_round_size(0), 0u);
  EXPECT_EQ(rt::cpu_round_size(1), 64u);
  EXPECT_EQ(rt::cpu_round_size(64), 64u);
  EXPECT_EQ(rt::cpu_round_size(65), 128u);
  EXPECT_EQ(rt::cpu_round_size(100), 128u);
  EXPECT_EQ(rt::cpu_round_size(4096), 4096u);
  EXPECT_EQ(rt::cpu_round_size(4097), 5 * KiB);
  EXPECT_EQ(rt::cpu_round_size(5000), 5 * KiB);
  EXPECT_EQ(rt::cpu_round_size(7 * KiB + 1), 8 * KiB);
  EXPECT_EQ(rt::cpu_round_size(8 * KiB + 1), 10 * KiB);
  EXPECT_EQ(rt::cpu_round_size(MiB), MiB);
  EXPECT_EQ(rt::cpu_round_size(MiB + 1), MiB + 256 * KiB);
  EXPECT_EQ(rt::cpu_round_size(3 * MiB), 3 * MiB);
  EXPECT_EQ(rt::cpu_round_size(size_t{1} << 62), size_t{1} << 62);
  // Never more than 25% (or 63 bytes) above the request, never below it.
  std::mt19937_64 random(7);
  for (int i = 0; i < 100000; ++i) {
    const size_t n = 1 + random() % (size_t{1} << (1 + random() % 40));
    const size_t r = rt::cpu_round_size(n);
    ASSERT_GE(r, n);
    ASSERT_LE(r, std::max(n + 63, n + n / 4)) << n;
    ASSERT_EQ(r % 64, 0u) << n;
    ASSERT_EQ(rt::cpu_round_size(r), r) << "a class size is its own class";
  }
}

TEST(CpuAllocator, ZeroBytesIsNullAndFreeingNullIsANoOp) {
  CleanAllocator clean;
  EXPECT_EQ(rt::cpu_malloc(0), nullptr);
  rt::cpu_free(nullptr, 0);
  rt::cpu_free(nullptr, 100);
  const rt::CpuAllocatorStats now = rt::cpu_allocator_stats();
  EXPECT_EQ(now.num_allocs, clean.start.num_allocs);
  EXPECT_EQ(now.allocated_bytes, clean.start.allocated_bytes);
}

TEST(CpuAllocator, FreeingWithAnImpossibleSizeThrows) {
  void* p = rt::cpu_malloc(100);
  EXPECT_THROW(rt::cpu_free(p, 0), tiny::Error);
  EXPECT_THROW(rt::cpu_free(p, SIZE_MAX), tiny::Error);
  rt::cpu_free(p, 100);
}

TEST(CpuAllocator, BlocksAre64ByteAlignedAndWritable) {
  std::vector<std::pair<void*, size_t>> blocks;
  for (size_t n : {size_t{1}, size_t{63}, size_t{64}, size_t{65}, size_t{1000}, size_t{4097}, size_t{100000},
                   MiB - 1, MiB, 3 * MiB + 5}) {
    void* p = rt::cpu_malloc(n);
    ASSERT_NE(p, nullptr);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % 64, 0u) << n;
    static_cast<char*>(p)[0] = 1;
    static_cast<char*>(p)[n - 1] = 1;
    blocks.emplace_back(p, n);
  }
  for (auto [p, n] : blocks) rt::cpu_free(p, n);
}

TEST(CpuAllocator, FreedBlockIsReusedForTheSameSizeClass) {
  CleanAllocator clean;
  for (size_t n : {size_t{100}, size_t{5000}, 4 * MiB}) {
    void* first = rt::cpu_malloc(n);
    rt::cpu_free(first, n);
    const rt::CpuAllocatorStats before = rt::cpu_allocator_stats();
    void* second = rt::cpu_malloc(n);
    const rt::CpuAllocatorStats after = rt::cpu_allocator_stats();
    EXPECT_EQ(second, first) << n;
    EXPECT_EQ(after.num_cache_hits, before.num_cache_hits + 1);
    EXPECT_EQ(after.num_system_allocs, before.num_system_allocs);
    // Another request of the same class reuses it too.
    rt::cpu_free(second, n);
    void* third = rt::cpu_malloc(rt::cpu_round_size(n) - 1);
    EXPECT_EQ(third, first);
    rt::cpu_free(third, rt::cpu_round_size(n) - 1);
  }
}

TEST(CpuAllocator, StatisticsMatchHandComputedValues) {
  CleanAllocator clean;
  // 100 B -> 128 B, 5000 B -> 5 KiB, 1 MiB -> 1 MiB.
  void* a = rt::cpu_malloc(100);
  void* b = rt::cpu_malloc(5000);
  void* c = rt::cpu_malloc(MiB);
  rt::CpuAllocatorStats s = rt::cpu_allocator_stats();
  EXPECT_EQ(s.allocated_bytes - clean.start.allocated_bytes, 128 + 5 * KiB + MiB);
  EXPECT_EQ(s.peak_allocated_bytes - clean.start.allocated_bytes, 128 + 5 * KiB + MiB);
  EXPECT_EQ(s.cached_bytes, 0u);
  EXPECT_EQ(s.num_allocs - clean.start.num_allocs, 3u);
  EXPECT_EQ(s.num_system_allocs - clean.start.num_system_allocs, 3u);
  EXPECT_EQ(s.num_cache_hits - clean.start.num_cache_hits, 0u);

  rt::cpu_free(c, MiB);
  s = rt::cpu_allocator_stats();
  EXPECT_EQ(s.allocated_bytes - clean.start.allocated_bytes, 128 + 5 * KiB);
  EXPECT_EQ(s.peak_allocated_bytes - clean.start.allocated_bytes, 128 + 5 * KiB + MiB);
  EXPECT_EQ(s.cached_bytes, MiB);

  rt::cpu_reset_peak_stats();
  EXPECT_EQ(rt::cpu_allocator_stats().peak_allocated_bytes, s.allocated_bytes);

  void* d = rt::cpu_malloc(MiB);  // a hit: nothing new from the system
  s = rt::cpu_allocator_stats();
  EXPECT_EQ(d, c);
  EXPECT_EQ(s.cached_bytes, 0u);
  EXPECT_EQ(s.num_allocs - clean.start.num_allocs, 4u);
  EXPECT_EQ(s.num_cache_hits - clean.start.num_cache_hits, 1u);
  EXPECT_EQ(s.num_system_allocs - clean.start.num_system_allocs, 3u);
  EXPECT_EQ(s.peak_allocated_bytes - clean.start.allocated_bytes, 128 + 5 * KiB + MiB);

  rt::cpu_free(a, 100);
  rt::cpu_free(b, 5000);
  rt::cpu_free(d, MiB);
  s = rt::cpu_allocator_stats();
  EXPECT_EQ(s.allocated_bytes, clean.start.allocated_bytes);
  EXPECT_EQ(s.cached_bytes, 128 + 5 * KiB + MiB);
}

TEST(CpuAllocator, EmptyCacheReturnsEveryCachedBlock) {
  CleanAllocator clean;
  std::vector<void*> blocks;
  for (int i = 0; i < 10; ++i) blocks.push_back(rt::cpu_malloc(KiB * (i + 1) * 100));
  for (int i = 0; i < 10; ++i) rt::cpu_free(blocks[i], KiB * (i + 1) * 100);
  EXPECT_GT(rt::cpu_allocator_stats().cached_bytes, 0u);
  rt::cpu_empty_cache();
  EXPECT_EQ(rt::cpu_allocator_stats().cached_bytes, 0u);
  const uint64_t system_allocs = rt::cpu_allocator_stats().num_system_allocs;
  void* p = rt::cpu_malloc(100 * KiB);  // must come from the system again
  EXPECT_EQ(rt::cpu_allocator_stats().num_system_allocs, system_allocs + 1);
  rt::cpu_free(p, 100 * KiB);
}

TEST(CpuAllocator, CacheLimitEvictsTheOldestBlocks) {
  CleanAllocator clean;
  rt::cpu_set_cache_limit(3 * MiB);
  EXPECT_EQ(rt::cpu_cache_limit(), 3 * MiB);
  void* blocks[4];
  for (void*& p : blocks) p = rt::cpu_malloc(MiB);
  for (void* p : blocks) rt::cpu_free(p, MiB);  // the fourth pushes the first out
  EXPECT_EQ(rt::cpu_allocator_stats().cached_bytes, 3 * MiB);

  // The three most recent come back, newest first; then the cache is empty.
  for (int i = 3; i >= 1; --i) {
    void* p = rt::cpu_malloc(MiB);
    EXPECT_EQ(p, blocks[i]);
    blocks[i] = p;
  }
  EXPECT_EQ(rt::cpu_allocator_stats().cached_bytes, 0u);
  const uint64_t system_allocs = rt::cpu_allocator_stats().num_system_allocs;
  blocks[0] = rt::cpu_malloc(MiB);
  EXPECT_EQ(rt::cpu_allocator_stats().num_system_allocs, system_allocs + 1);
  for (void* p : blocks) rt::cpu_free(p, MiB);

  // A block larger than the limit goes straight back to the system.
  rt::cpu_empty_cache();
  void* big = rt::cpu_malloc(4 * MiB);
  rt::cpu_free(big, 4 * MiB);
  EXPECT_EQ(rt::cpu_allocator_stats().cached_bytes, 0u);

  // Lowering the limit evicts at once.
  void* small[3];
  for (void*& p : small) p = rt::cpu_malloc(MiB);
  for (void* p : small) rt::cpu_free(p, MiB);
  EXPECT_EQ(rt::cpu_allocator_stats().cached_bytes, 3 * MiB);
  rt::cpu_set_cache_limit(MiB + 1);
  EXPECT_EQ(rt::cpu_allocator_stats().cached_bytes, MiB);
  EXPECT_EQ(rt::cpu_malloc(MiB), small[2]) << "the newest block stays";
  rt::cpu_free(small[2], MiB);
}

TEST(CpuAllocator, ZeroLimitTurnsCachingOff) {
  CleanAllocator clean;
  rt::cpu_set_cache_limit(0);
  void* p = rt::cpu_malloc(1000);
  rt::cpu_free(p, 1000);
  EXPECT_EQ(rt::cpu_allocator_stats().cached_bytes, 0u);
}

TEST(CpuAllocator, ManyThreadsStayConsistent) {
  CleanAllocator clean;
  constexpr int kThreads = 8;
  constexpr int kSteps = 20000;
  // Blocks pass between threads through a shared pool, so many are freed on
  // another thread than the one that allocated them.
  std::mutex shared_mutex;
  std::vector<std::pair<void*, size_t>> shared;
  auto work = [&](int seed) {
    std::mt19937 random(seed);
    std::vector<std::pair<void*, size_t>> mine;
    for (int step = 0; step < kSteps; ++step) {
      const size_t n = 1 + random() % (random() % 4 == 0 ? 2 * MiB : 16 * KiB);
      if (random() % 2 == 0 || mine.empty()) {
        auto* p = static_cast<unsigned char*>(rt::cpu_malloc(n));
        p[0] = static_cast<unsigned char>(n);  // a block handed to two owners would show here
        p[n - 1] = static_cast<unsigned char>(n);
        mine.emplace_back(p, n);
      } else {
        auto [p, m] = mine.back();
        mine.pop_back();
        auto* bytes = static_cast<unsigned char*>(p);
        if (bytes[0] != static_cast<unsigned char>(m) || bytes[m - 1] != static_cast<unsigned char>(m)) std::abort();
        if (random() % 3 == 0) {
          std::lock_guard<std::mutex> lock(shared_mutex);
          shared.emplace_back(p, m);
          if (shared.size() > 16) {
            rt::cpu_free(shared.front().first, shared.front().second);
            shared.erase(shared.begin());
          }
        } else {
          rt::cpu_free(p, m);
        }
      }
    }
    for (auto [p, m] : mine) rt::cpu_free(p, m);
  };
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) threads.emplace_back(work, t);
  for (std::thread& t : threads) t.join();
  for (auto [p, m] : shared) rt::cpu_free(p, m);

  const rt::CpuAllocatorStats s = rt::cpu_allocator_stats();
  EXPECT_EQ(s.allocated_bytes, clean.start.allocated_bytes);
  EXPECT_EQ(s.num_allocs - clean.start.num_allocs,
            (s.num_cache_hits - clean.start.num_cache_hits) + (s.num_system_allocs - clean.start.num_system_allocs));
  EXPECT_GT(s.num_cache_hits, clean.start.num_cache_hits);
  EXPECT_LE(s.cached_bytes, rt::cpu_cache_limit());
  rt::cpu_empty_cache();
  EXPECT_EQ(rt::cpu_allocator_stats().cached_bytes, 0u);
}

TEST(CpuAllocator, OutOfMemoryIsAClearError) {
  CleanAllocator clean;
  for (size_t n : {size_t{1} << 60, SIZE_MAX}) {
    try {
      rt::cpu_malloc(n);
      FAIL() << "no exception for " << n;
    } catch (const tiny::Error& e) {
      EXPECT_NE(std::string(e.what()).find("CPU out of memory: tried to allocate " + rt::format_bytes(n)),
                std::string::npos)
          << e.what();
    }
  }
  EXPECT_EQ(rt::cpu_allocator_stats().num_allocs, clean.start.num_allocs);
  EXPECT_EQ(rt::cpu_allocator_stats().allocated_bytes, clean.start.allocated_bytes);
}

TEST(CpuAllocator, FormatBytes) {
  EXPECT_EQ(rt::format_bytes(0), "0 bytes");
  EXPECT_EQ(rt::format_bytes(512), "512 bytes");
  EXPECT_EQ(rt::format_bytes(1536), "1.50 KiB");
  EXPECT_EQ(rt::format_bytes(20 * MiB), "20.00 MiB");
  EXPECT_EQ(rt::format_bytes(3 * GiB / 2), "1.50 GiB");
  EXPECT_EQ(rt::format_bytes(size_t{1} << 60), "1.00 EiB");
}

TEST(CpuAllocator, ParseByteSize) {
  EXPECT_EQ(rt::parse_byte_size("X", "0"), 0u);
  EXPECT_EQ(rt::parse_byte_size("X", "4096"), 4096u);
  EXPECT_EQ(rt::parse_byte_size("X", "512MiB"), 512 * MiB);
  EXPECT_EQ(rt::parse_byte_size("X", "2GiB"), 2 * GiB);
  EXPECT_EQ(rt::parse_byte_size("X", " 2 gib "), 2 * GiB);
  EXPECT_EQ(rt::parse_byte_size("X", "1.5G"), 3 * GiB / 2);
  EXPECT_EQ(rt::parse_byte_size("X", "64KB"), 64 * KiB);
  EXPECT_EQ(rt::parse_byte_size("X", "3B"), 3u);
  for (const char* bad : {"", "abc", "12XB", "-1", "1e3", "GiB", "1.5.2G", "inf", "99999999999TiB"}) {
    try {
      rt::parse_byte_size("TINY_CPU_CACHE_LIMIT", bad);
      ADD_FAILURE() << "accepted \"" << bad << "\"";
    } catch (const tiny::ValueError& e) {
      EXPECT_NE(std::string(e.what()).find(std::string("TINY_CPU_CACHE_LIMIT=\"") + bad + "\""), std::string::npos)
          << e.what();
    }
  }
}

// The environment is read once per process: these run in a fresh process each.
TEST(CpuAllocator, CacheLimitComesFromTheEnvironment) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        setenv("TINY_CPU_CACHE_LIMIT", "2MiB", 1);
        std::exit(rt::cpu_cache_limit() == 2 * MiB ? 0 : 1);
      },
      testing::ExitedWithCode(0), "");
  EXPECT_EXIT(
      {
        unsetenv("TINY_CPU_CACHE_LIMIT");
        std::exit(rt::cpu_cache_limit() == GiB ? 0 : 1);
      },
      testing::ExitedWithCode(0), "");
}

TEST(CpuAllocator, BadCacheLimitThrowsValueError) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        setenv("TINY_CPU_CACHE_LIMIT", "lots", 1);
        try {
          rt::cpu_malloc(100);
          std::exit(1);
        } catch (const tiny::ValueError& e) {
          std::fprintf(stderr, "%s\n", e.what());
          std::exit(0);
        }
      },
      testing::ExitedWithCode(0), "TINY_CPU_CACHE_LIMIT=\"lots\".*512MiB");
}
