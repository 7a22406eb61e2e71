// Tests of tiny's thread pool: every index once, chunking independent of the
// thread count, exceptions, nesting, thread-count settings, passive waits,
// pools of their own (bound per thread, sized to a share, fork-safe).
#include <cblas.h>
#include <pthread.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <mutex>
#include <set>
#include <stdexcept>
#include <string>
#include <thread>
#include <tuple>
#include <utility>
#include <vector>

#include "rendezvous.h"
#include "runtime/fork.h"
#include "runtime/thread_pool.h"
#include "tiny/error.h"
#include "tiny/parallel.h"

namespace rt = tiny::runtime;

namespace {

// Sets the thread count for one test and puts the previous one back.
class ThreadCount {
 public:
  explicit ThreadCount(int n) : previous_(rt::num_threads()) { rt::set_num_threads(n); }
  ~ThreadCount() { rt::set_num_threads(previous_); }

 private:
  int previous_;
};

using Chunks = std::vector<std::pair<int64_t, int64_t>>;

// The chunks parallel_for hands out, indexed by chunk number.
Chunks record_chunks(int64_t begin, int64_t end, int64_t grain) {
  Chunks chunks(rt::num_chunks(begin, end, grain), {-1, -1});
  rt::parallel_for(begin, end, grain, [&](int64_t b, int64_t e) { chunks[(b - begin) / grain] = {b, e}; });
  return chunks;
}

// Sums each chunk on its own, then the partial sums in chunk order: the way a
// deterministic reduction kernel works.
float chunked_sum(const std::vector<float>& x, int64_t grain) {
  std::vector<float> partial(rt::num_chunks(0, x.size(), grain));
  rt::parallel_for(0, x.size(), grain, [&](int64_t b, int64_t e) {
    float s = 0;
    for (int64_t i = b; i < e; ++i) s += x[i];
    partial[b / grain] = s;
  });
  float total = 0;
  for (float p : partial) total += p;
  return total;
}

double process_cpu_seconds() {
  timespec t{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return t.tv_sec + t.tv_nsec * 1e-9;
}

// CPU time of this process's threads whose name starts with `prefix` (a
// pool's workers: ThreadPool names them), from /proc's schedstat (nanoseconds).
double threads_cpu_seconds(const std::string& prefix) {
  double total = 0;
  for (const auto& task : std::filesystem::directory_iterator("/proc/self/task")) {
    std::ifstream comm(task.path() / "comm");
    std::string name;
    std::getline(comm, name);
    if (name.rfind(prefix, 0) != 0) continue;
    std::ifstream schedstat(task.path() / "schedstat");
    uint64_t ns = 0;
    schedstat >> ns;
    total += static_cast<double>(ns) * 1e-9;
  }
  return total;
}

void sleep_ms(int ms) { std::this_thread::sleep_for(std::chrono::milliseconds(ms)); }

}  // namespace

TEST(ThreadPool, NumChunks) {
  EXPECT_EQ(rt::num_chunks(0, 0, 1), 0);
  EXPECT_EQ(rt::num_chunks(5, 3, 2), 0);
  EXPECT_EQ(rt::num_chunks(0, 10, 100), 1);
  EXPECT_EQ(rt::num_chunks(0, 10, 10), 1);
  EXPECT_EQ(rt::num_chunks(0, 11, 10), 2);
  EXPECT_EQ(rt::num_chunks(-7, 13, 3), 7);
  EXPECT_EQ(rt::num_chunks(0, INT64_MAX, INT64_MAX), 1);
}

TEST(ThreadPool, GrainMustBePositive) {
  EXPECT_THROW(rt::num_chunks(0, 10, 0), tiny::ValueError);
  EXPECT_THROW(rt::parallel_for(0, 10, -1, [](int64_t, int64_t) {}), tiny::ValueError);
}

TEST(ThreadPool, VisitsEveryIndexExactlyOnce) {
  const std::vector<std::tuple<int64_t, int64_t, int64_t>> ranges = {
      {0, 0, 1},   {5, 5, 3},    {5, 3, 2},      {0, 1, 1},      {0, 10, 100}, {0, 10, 10},
      {0, 11, 10}, {-7, 13, 3},  {0, 1000, 1},   {0, 1000, 7},   {3, 1003, 64}, {100, 1100, 999},
      {0, 4097, 4096}, {-500, -1, 17}, {0, 100000, 1000}};
  for (int threads : {1, 2, 3, 8}) {
    ThreadCount count(threads);
    for (const auto& range : ranges) {
      const auto [begin, end, grain] = range;
      const int64_t first = begin, max_chunk = grain;  // lambdas may not capture bindings before C++20 (clang)
      const int64_t n = std::max<int64_t>(end - begin, 0);
      std::vector<std::atomic<int>> visits(n);
      std::atomic<int64_t> calls{0};
      rt::parallel_for(begin, end, grain, [&](int64_t b, int64_t e) {
        ASSERT_LT(b, e);
        ASSERT_LE(e - b, max_chunk);
        ++calls;
        for (int64_t i = b; i < e; ++i) ++visits[i - first];
      });
      for (int64_t i = 0; i < n; ++i) {
        ASSERT_EQ(visits[i].load(), 1) << "index " << begin + i << " of [" << begin << ", " << end << ") grain "
                                       << grain << " with " << threads << " threads";
      }
      EXPECT_EQ(calls.load(), rt::num_chunks(begin, end, grain));
    }
  }
}

TEST(ThreadPool, ChunkBoundariesDoNotDependOnThreadCount) {
  for (const auto& [begin, end, grain] : std::vector<std::tuple<int64_t, int64_t, int64_t>>{
           {0, 1000, 7}, {-7, 13, 3}, {0, 65536, 4096}, {10, 11, 5}}) {
    Chunks one, two, four;
    {
      ThreadCount count(1);
      one = record_chunks(begin, end, grain);
    }
    {
      ThreadCount count(2);
      two = record_chunks(begin, end, grain);
    }
    {
      ThreadCount count(4);
      four = record_chunks(begin, end, grain);
    }
    EXPECT_EQ(one, two);
    EXPECT_EQ(one, four);
    for (size_t i = 0; i < one.size(); ++i) {
      EXPECT_EQ(one[i].first, begin + static_cast<int64_t>(i) * grain);
      EXPECT_EQ(one[i].second, std::min(end, one[i].first + grain));
    }
  }
}

TEST(ThreadPool, ChunkedFloatSumIsBitwiseEqualForAnyThreadCount) {
  // Values of very different magnitudes, so that summation order shows in the bits.
  std::vector<float> x(1 << 20);
  uint32_t state = 12345;
  for (float& v : x) {
    state = state * 1664525u + 1013904223u;
    v = static_cast<float>(state >> 8) / (1 << 24) * ((state & 1) ? 1e4f : 1e-3f);
  }
  float sums[3];
  const int threads[3] = {1, 2, 3};
  for (int t = 0; t < 3; ++t) {
    ThreadCount count(threads[t]);
    sums[t] = chunked_sum(x, 4096);
    for (int repeat = 0; repeat < 5; ++repeat) {
      const float again = chunked_sum(x, 4096);
      ASSERT_EQ(std::memcmp(&again, &sums[t], sizeof(float)), 0);
    }
  }
  EXPECT_EQ(std::memcmp(&sums[0], &sums[1], sizeof(float)), 0) << sums[0] << " vs " << sums[1];
  EXPECT_EQ(std::memcmp(&sums[0], &sums[2], sizeof(float)), 0) << sums[0] << " vs " << sums[2];
}

TEST(ThreadPool, ReallyRunsOnSeveralThreads) {
  ThreadCount count(2);
  std::mutex mutex;
  std::set<std::thread::id> seen;
  rt::parallel_for(0, 8, 1, [&](int64_t, int64_t) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    std::lock_guard<std::mutex> lock(mutex);
    seen.insert(std::this_thread::get_id());
  });
  EXPECT_EQ(seen.size(), 2u);
  EXPECT_EQ(seen.count(std::this_thread::get_id()), 1u) << "the caller takes part";
}

TEST(ThreadPool, RethrowsTheLowestFailingChunk) {
  for (int threads : {1, 2, 4}) {
    ThreadCount count(threads);
    for (int repeat = 0; repeat < 200; ++repeat) {
      std::atomic<int> ran_below_3{0};
      try {
        rt::parallel_for(0, 20, 1, [&](int64_t b, int64_t) {
          if (b < 3) ++ran_below_3;
          // Chunk 7 fails fast; chunk 3 fails a little later: 3 must still win.
          if (b == 3) {
            if (repeat % 2 == 0) std::this_thread::sleep_for(std::chrono::microseconds(200));
            throw std::runtime_error("chunk 3 failed");
          }
          if (b == 7) throw std::runtime_error("chunk 7 failed");
        });
        FAIL() << "no exception";
      } catch (const std::runtime_error& e) {
        ASSERT_STREQ(e.what(), "chunk 3 failed") << threads << " threads, repeat " << repeat;
      }
      ASSERT_EQ(ran_below_3.load(), 3);
    }
    // The pool is still usable.
    std::atomic<int64_t> total{0};
    rt::parallel_for(0, 1000, 10, [&](int64_t b, int64_t e) { total += e - b; });
    EXPECT_EQ(total.load(), 1000);
    EXPECT_FALSE(rt::in_parallel_region());
  }
}

TEST(ThreadPool, RethrowsExceptionsOfAnyType) {
  ThreadCount count(2);
  EXPECT_THROW(rt::parallel_for(0, 100, 1, [](int64_t b, int64_t) {
                 if (b == 50) throw 42;
               }),
               int);
  EXPECT_THROW(rt::parallel_for(0, 100, 10, [](int64_t, int64_t) { TINY_THROW(ValueError, "bad"); }),
               tiny::ValueError);
}

TEST(ThreadPool, InParallelRegionOnlyInsideChunks) {
  ThreadCount count(2);
  EXPECT_FALSE(rt::in_parallel_region());
  std::atomic<int> inside{0};
  rt::parallel_for(0, 64, 1, [&](int64_t, int64_t) { inside += rt::in_parallel_region(); });
  EXPECT_EQ(inside.load(), 64);
  rt::parallel_for(0, 1, 1, [&](int64_t, int64_t) { EXPECT_TRUE(rt::in_parallel_region()); });
  EXPECT_FALSE(rt::in_parallel_region());
}

TEST(ThreadPool, NestedParallelForRunsInline) {
  for (int threads : {1, 2, 4}) {
    ThreadCount count(threads);
    std::vector<std::atomic<int>> visits(8 * 100);
    std::atomic<bool> stayed_on_thread{true};
    rt::parallel_for(0, 8, 1, [&](int64_t outer, int64_t) {
      const std::thread::id me = std::this_thread::get_id();
      int64_t expected_begin = 0;
      rt::parallel_for(0, 100, 10, [&](int64_t b, int64_t e) {
        if (std::this_thread::get_id() != me || b != expected_begin) stayed_on_thread = false;
        expected_begin = e;  // inline means in chunk order
        for (int64_t i = b; i < e; ++i) ++visits[outer * 100 + i];
      });
    });
    EXPECT_TRUE(stayed_on_thread.load());
    for (auto& v : visits) ASSERT_EQ(v.load(), 1);
  }
}

TEST(ThreadPool, ConcurrentCallersDoNotDeadlock) {
  ThreadCount count(2);
  auto caller = [](int64_t* result) {
    for (int repeat = 0; repeat < 300; ++repeat) {
      std::atomic<int64_t> total{0};
      rt::parallel_for(0, 10000, 100, [&](int64_t b, int64_t e) {
        int64_t s = 0;
        for (int64_t i = b; i < e; ++i) s += i;
        total += s;
      });
      if (total.load() != 10000LL * 9999 / 2) return;
      *result += 1;
    }
  };
  int64_t a = 0, b = 0;
  std::thread other(caller, &b);
  caller(&a);
  other.join();
  EXPECT_EQ(a, 300);
  EXPECT_EQ(b, 300);
}

TEST(ThreadPool, SetNumThreadsRejectsBadCounts) {
  try {
    rt::set_num_threads(0);
    FAIL() << "no exception";
  } catch (const tiny::ValueError& e) {
    EXPECT_NE(std::string(e.what()).find("got 0"), std::string::npos) << e.what();
  }
  EXPECT_THROW(tiny::set_num_threads(-3), tiny::ValueError);
  EXPECT_THROW(tiny::set_num_threads(100000), tiny::ValueError);
  EXPECT_GE(rt::num_threads(), 1);
}

// OpenBLAS stays single-threaded: GEMMs are split over tiny's pool instead.
TEST(ThreadPool, SetNumThreadsSetsTinyAndLeavesOpenBlasAtOneThread) {
  const int before = tiny::get_num_threads();
  for (int n : {1, 2, 3, 1}) {
    tiny::set_num_threads(n);
    EXPECT_EQ(tiny::get_num_threads(), n);
    EXPECT_EQ(rt::num_threads(), n);
    EXPECT_EQ(openblas_get_num_threads(), 1);
    std::atomic<int64_t> total{0};
    rt::parallel_for(0, 1000, 10, [&](int64_t b, int64_t e) { total += e - b; });
    EXPECT_EQ(total.load(), 1000);
  }
  tiny::set_num_threads(before);
}

TEST(ThreadPool, SetNumThreadsInsideAChunkThrows) {
  ThreadCount count(2);
  EXPECT_THROW(rt::parallel_for(0, 4, 1, [](int64_t, int64_t) { rt::set_num_threads(1); }), tiny::Error);
  EXPECT_EQ(rt::num_threads(), 2);
}

// Workers poll for 30 us after a job (runtime/spin.h), then sleep: over 200 ms
// idle the pool must use almost no CPU (an unbounded poll would use 200 ms per worker).
TEST(ThreadPool, IdleWorkersStopPollingAndSleep) {
  ThreadCount count(std::max(2, static_cast<int>(std::thread::hardware_concurrency())));
  rt::parallel_for(0, 100, 1, [](int64_t, int64_t) {});  // starts the workers
  // OpenBLAS's own workers spin for about 2^28 cycles after openblas_set_num_threads
  // (and after every BLAS call) before they sleep: let them, as only tiny's pool is measured.
  std::this_thread::sleep_for(std::chrono::milliseconds(400));
  std::vector<double> out(1 << 16);
  rt::parallel_for(0, out.size(), 1024, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) out[i] = static_cast<double>(i) * 0.5;
  });
  const double cpu_before = process_cpu_seconds();
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  const double idle_cpu = process_cpu_seconds() - cpu_before;
  EXPECT_LT(idle_cpu, 0.020) << "the pool used " << idle_cpu * 1000 << " ms of CPU while idle for 200 ms";
}

// An emulated GPU's pool is told when its device has kernels queued: its
// workers then poll for the next parallel_for for up to 500 us, not 30 us,
// and never for as long as the device stays busy (a long kernel without
// parallel loops must not keep a core spinning).
TEST(ThreadPool, WorkersOfABusyOwnerPollLongerButNotForever) {
  if (access("/proc/self/schedstat", F_OK) != 0) GTEST_SKIP() << "no /proc/self/schedstat: no per-thread CPU time here";
  ThreadCount count(2);
  std::atomic<int64_t> busy{0};
  rt::ThreadPool pool(1, "tpbusy", nullptr, &busy);
  const auto job = [&] { pool.parallel_for(0, 64, 1, [](int64_t, int64_t) {}); };
  const auto polling_after_a_job = [&](int window_ms) {
    sleep_ms(50);  // the worker sleeps
    const double before = threads_cpu_seconds("tpbusy");
    job();
    sleep_ms(window_ms);
    return threads_cpu_seconds("tpbusy") - before;
  };
  job();  // starts the worker
  const double idle_owner = polling_after_a_job(20);
  busy = 1;
  const double busy_owner = polling_after_a_job(200);
  EXPECT_GT(busy_owner, 150e-6) << "a worker of a busy pool should poll about 500 us after a job";
  EXPECT_GT(busy_owner, 2 * idle_owner) << "idle owner: " << idle_owner * 1e6 << " us, busy: " << busy_owner * 1e6
                                        << " us of polling";
  EXPECT_LT(busy_owner, 0.010) << "the worker polled " << busy_owner * 1e3
                               << " ms in 200 ms while its owner stayed busy: the poll is not bounded";
}

// warm_up wakes sleeping workers to poll (for the next parallel_for) without giving them work.
TEST(ThreadPool, WarmUpWakesSleepingWorkersToPoll) {
  if (access("/proc/self/schedstat", F_OK) != 0) GTEST_SKIP() << "no /proc/self/schedstat: no per-thread CPU time here";
  ThreadCount count(2);
  rt::ThreadPool pool(1, "tpwarm");
  pool.warm_up();  // before the first parallel_for there are no workers: nothing to do
  std::atomic<int64_t> total{0};
  pool.parallel_for(0, 100, 1, [&](int64_t b, int64_t e) { total += e - b; });
  sleep_ms(50);
  double before = threads_cpu_seconds("tpwarm");
  for (int i = 0; i < 10; ++i) sleep_ms(2);
  const double asleep = threads_cpu_seconds("tpwarm") - before;
  before = threads_cpu_seconds("tpwarm");
  for (int i = 0; i < 10; ++i) {
    pool.warm_up();
    sleep_ms(2);
  }
  const double warmed = threads_cpu_seconds("tpwarm") - before;
  // Polling: 10 x 30 us; a wake-up alone costs a few us.
  EXPECT_GT(warmed, 150e-6) << "10 warm_up calls made the worker use " << warmed * 1e6 << " us of CPU";
  EXPECT_LT(asleep, 50e-6) << "a sleeping worker used " << asleep * 1e6 << " us of CPU";
  // Work still runs exactly once after warm-ups.
  pool.parallel_for(0, 1000, 10, [&](int64_t b, int64_t e) { total += e - b; });
  EXPECT_EQ(total.load(), 1100);
}

// runtime::fork_generation tells a forked child from its parent (without
// getpid, a system call per query).
TEST(ForkGeneration, DiffersInAChildAndNotInTheParent) {
  const uint64_t parent = rt::fork_generation();
  const pid_t child = fork();
  ASSERT_NE(child, -1);
  if (child == 0) _exit(rt::fork_generation() != parent ? 0 : 1);
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0) << "the child saw the parent's fork generation";
  EXPECT_EQ(rt::fork_generation(), parent);
}

TEST(ThreadPool, WorksInAForkedChild) {
  ThreadCount count(2);
  rt::parallel_for(0, 100, 1, [](int64_t, int64_t) {});  // the parent's workers exist
  const pid_t child = fork();
  ASSERT_NE(child, -1);
  if (child == 0) {
    std::atomic<int64_t> total{0};
    rt::parallel_for(0, 1000, 10, [&](int64_t b, int64_t e) { total += e - b; });
    _exit(total.load() == 1000 ? 0 : 1);
  }
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0);
}

// The environment is read once per process: these run in a fresh process each.
TEST(ThreadPool, EnvironmentSetsTheDefaultCount) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        setenv("TINY_NUM_THREADS", "3", 1);
        const bool ok = rt::num_threads() == 3 && openblas_get_num_threads() == 1;
        std::exit(ok ? 0 : 1);
      },
      testing::ExitedWithCode(0), "");
}

TEST(ThreadPool, BadEnvironmentValueThrowsValueError) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  for (const char* bad : {"abc", "0", "-2", "2x", "99999"}) {
    EXPECT_EXIT(
        {
          setenv("TINY_NUM_THREADS", bad, 1);
          for (int attempt = 0; attempt < 2; ++attempt) {  // throws every time, not only the first
            try {
              rt::parallel_for(0, 10, 1, [](int64_t, int64_t) {});
              std::exit(1);
            } catch (const tiny::ValueError& e) {
              std::fprintf(stderr, "%s\n", e.what());
            }
          }
          std::exit(0);
        },
        testing::ExitedWithCode(0), std::string("TINY_NUM_THREADS=\"") + bad + "\".*from 1 to 1024");
  }
}

// --- Pools of their own (each emulated GPU has one) ---

using tiny_test::SeenThreads;

TEST(ThreadPool, ShareMustBePositive) {
  EXPECT_THROW(rt::ThreadPool(0, "bad"), tiny::ValueError);
  EXPECT_THROW(rt::ThreadPool(-2, "bad"), tiny::ValueError);
}

TEST(ThreadPool, SizeIsTheShareOfTheThreadCountAndFollowsSetNumThreads) {
  const int before = rt::num_threads();
  rt::ThreadPool half(2, "tiny-half"), third(3, "tiny-third");
  EXPECT_EQ(rt::global_thread_pool().share(), 1);
  for (int n : {1, 2, 3, 4, 5, 7, 8}) {
    rt::set_num_threads(n);
    EXPECT_EQ(rt::global_thread_pool().size(), n);
    EXPECT_EQ(half.size(), std::max(1, n / 2)) << n;
    EXPECT_EQ(third.size(), std::max(1, n / 3)) << n;
  }
  rt::set_num_threads(before);
}

TEST(ThreadPool, OwnPoolRunsOnItsOwnWorkersAndNoMore) {
  ThreadCount count(4);
  rt::ThreadPool pool(2, "tiny-mine");
  ASSERT_EQ(pool.size(), 2);
  // Both chunks must be running at once: the pool really has 2 threads.
  tiny_test::Rendezvous both(2);
  std::atomic<int> met{0};
  SeenThreads seen;
  pool.parallel_for(0, 2, 1, [&](int64_t, int64_t) {
    seen.add();
    if (both.arrive_and_wait()) ++met;
  });
  EXPECT_EQ(met.load(), 2) << "the pool's 2 threads never ran chunks at the same time";
  EXPECT_EQ(seen.ids.size(), 2u);
  EXPECT_EQ(seen.ids.count(std::this_thread::get_id()), 1u) << "the caller takes part";
  EXPECT_EQ(seen.names.count("tiny-mine-1"), 1u) << "the other thread is the pool's own worker";

  // Many chunks: never more threads than the pool's size.
  SeenThreads many;
  pool.parallel_for(0, 64, 1, [&](int64_t, int64_t) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
    many.add();
  });
  EXPECT_LE(many.ids.size(), 2u);

  // Resized by set_num_threads: with 2 threads in all, a share of 2 is 1 thread.
  rt::set_num_threads(2);
  SeenThreads alone;
  pool.parallel_for(0, 16, 1, [&](int64_t, int64_t) { alone.add(); });
  EXPECT_EQ(alone.ids, std::set<std::thread::id>{std::this_thread::get_id()});
}

TEST(ThreadPool, BoundPoolIsTheOneParallelForUses) {
  ThreadCount count(4);
  rt::ThreadPool pool(2, "tiny-bound");
  EXPECT_EQ(&rt::current_thread_pool(), &rt::global_thread_pool()) << "an unbound thread uses the global pool";
  SeenThreads seen;
  bool bound_ok = false, met = false;
  std::thread user([&] {
    EXPECT_EQ(rt::bind_thread_pool(&pool), nullptr);
    bound_ok = &rt::current_thread_pool() == &pool;
    tiny_test::Rendezvous both(2);
    std::atomic<int> arrived{0};
    rt::parallel_for(0, 2, 1, [&](int64_t, int64_t) {
      seen.add();
      if (both.arrive_and_wait()) ++arrived;
    });
    met = arrived.load() == 2;
    EXPECT_EQ(rt::bind_thread_pool(nullptr), &pool);
    EXPECT_EQ(&rt::current_thread_pool(), &rt::global_thread_pool());
  });
  user.join();
  EXPECT_TRUE(bound_ok);
  EXPECT_TRUE(met);
  EXPECT_EQ(seen.names.count("tiny-bound-1"), 1u) << "the chunks ran on the bound pool's worker";
  EXPECT_EQ(&rt::current_thread_pool(), &rt::global_thread_pool()) << "binding is per thread";
}

// What each emulated GPU needs: two pools serve two calls at the same time.
// (One pool serves one call at a time: the second caller would run inline,
// and the 4 chunks below could never all be running at once.)
TEST(ThreadPool, TwoPoolsServeTwoCallersAtOnce) {
  ThreadCount count(4);
  rt::ThreadPool first(2, "tiny-first"), second(2, "tiny-second");
  tiny_test::Rendezvous all(4);
  std::atomic<int> met{0};
  SeenThreads seen[2];
  auto caller = [&](rt::ThreadPool* pool, SeenThreads* out) {
    rt::bind_thread_pool(pool);
    rt::parallel_for(0, 2, 1, [&](int64_t, int64_t) {
      out->add();
      if (all.arrive_and_wait()) ++met;
    });
  };
  std::thread a(caller, &first, &seen[0]), b(caller, &second, &seen[1]);
  a.join();
  b.join();
  EXPECT_EQ(met.load(), 4) << "the 4 chunks never ran at the same time: " << met.load()
                           << " saw all 4 arrive within the timeout";
  EXPECT_EQ(seen[0].ids.size(), 2u);
  EXPECT_EQ(seen[1].ids.size(), 2u);
  for (const auto& id : seen[0].ids) EXPECT_EQ(seen[1].ids.count(id), 0u) << "a thread served both pools";
  EXPECT_EQ(seen[0].names.count("tiny-first-1"), 1u);
  EXPECT_EQ(seen[1].names.count("tiny-second-1"), 1u);
}

// The emulated GPUs' pools: one busy alone runs on every core, not on its
// share; two busy at once still each run on threads of their own.
TEST(ThreadPool, PoolsOfAGroupLendTheirThreadsToTheOneThatIsBusy) {
  ThreadCount count(4);
  std::atomic<int> group{0};
  rt::ThreadPool first(2, "tiny-first", &group), second(2, "tiny-second", &group);
  EXPECT_EQ(first.size(), 2) << "size() stays the fair share (the multiprocessor_count reported)";
  tiny_test::Rendezvous four(4);
  std::atomic<int> met{0};
  SeenThreads alone;
  first.parallel_for(0, 4, 1, [&](int64_t, int64_t) {
    alone.add();
    if (four.arrive_and_wait()) ++met;
  });
  EXPECT_EQ(met.load(), 4) << "a pool busy alone did not run 4 chunks at once on 4 threads";
  EXPECT_EQ(alone.ids.size(), 4u);
  EXPECT_EQ(group.load(), 0) << "the call no longer counts as running";
  SeenThreads many;
  first.parallel_for(0, 64, 1, [&](int64_t, int64_t) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
    many.add();
  });
  EXPECT_LE(many.ids.size(), 4u) << "never more threads than num_threads()";

  // Both busy: the one that starts second gets num_threads() / 2 of its own.
  std::atomic<bool> release{false};
  std::thread holder([&] {
    first.parallel_for(0, 2, 1, [&](int64_t, int64_t) {
      while (!release.load()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    });
  });
  while (group.load() != 1) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  SeenThreads shared;
  tiny_test::Rendezvous two(2);
  std::atomic<int> both{0};
  second.parallel_for(0, 8, 1, [&](int64_t, int64_t) {
    shared.add();
    if (two.arrive_and_wait(std::chrono::seconds(2))) ++both;
  });
  release = true;
  holder.join();
  EXPECT_EQ(shared.ids.size(), 2u) << "with the other pool running, a call gets half the threads";
  for (const std::string& name : shared.names) EXPECT_EQ(name.rfind("tiny-first", 0), std::string::npos) << name;
}

TEST(ThreadPool, OwnPoolKeepsTheContract) {
  ThreadCount count(4);
  rt::ThreadPool pool(2, "tiny-contract");
  // Bitwise the same sum as the global pool's and as one thread's.
  std::vector<float> x(100000);
  for (size_t i = 0; i < x.size(); ++i) x[i] = 1.0f / static_cast<float>(i + 1) * (i % 3 == 0 ? -1.0f : 1.0f);
  const float global = chunked_sum(x, 1000);
  std::vector<float> partial(rt::num_chunks(0, x.size(), 1000));
  pool.parallel_for(0, x.size(), 1000, [&](int64_t b, int64_t e) {
    float s = 0;
    for (int64_t i = b; i < e; ++i) s += x[i];
    partial[b / 1000] = s;
  });
  float own = 0;
  for (float p : partial) own += p;
  EXPECT_EQ(std::memcmp(&global, &own, sizeof(float)), 0) << global << " vs " << own;
  // The lowest failing chunk's exception, whatever the timing.
  try {
    pool.parallel_for(0, 100, 1, [](int64_t b, int64_t) {
      if (b == 37 || b == 80) throw std::runtime_error("chunk " + std::to_string(b));
    });
    FAIL() << "no exception";
  } catch (const std::runtime_error& e) {
    EXPECT_STREQ(e.what(), "chunk 37");
  }
  // Nesting runs inline on the chunk's thread, even into another pool.
  std::atomic<bool> stayed{true};
  pool.parallel_for(0, 4, 1, [&](int64_t, int64_t) {
    const auto me = std::this_thread::get_id();
    rt::parallel_for(0, 8, 1, [&](int64_t, int64_t) {
      if (std::this_thread::get_id() != me) stayed = false;
    });
  });
  EXPECT_TRUE(stayed.load());
}

// When parallel_for returns, every worker it started is already running the
// pool's loop (it has named itself), never still being started: a fork()
// then would copy a half-made thread, with the C library's (or a sanitizer's)
// locks held, and the child's first thread would hang on them.
TEST(ThreadPool, WorkersAreRunningWhenParallelForReturns) {
  ThreadCount count(4);
  // Every pool stays alive to the end: a thread exiting while
  // /proc/self/task is listed can hide others from the listing.
  std::vector<std::unique_ptr<rt::ThreadPool>> pools;
  for (int round = 0; round < 20; ++round) {
    const std::string name = "tiny-st" + std::to_string(round);
    pools.push_back(std::make_unique<rt::ThreadPool>(1, name));
    pools.back()->parallel_for(0, 2, 1, [](int64_t, int64_t) {});  // the caller may run both chunks alone
    const std::multiset<std::string> names = tiny_test::thread_names();
    for (int i = 1; i <= 3; ++i) {
      EXPECT_EQ(names.count(name + "-" + std::to_string(i)), 1u)
          << "round " << round << ": worker " << i << " of pool " << name << " was not running yet";
    }
  }
}

TEST(ThreadPool, OwnPoolWorksInAForkedChild) {
  ThreadCount count(4);
  rt::ThreadPool pool(2, "tiny-forked");
  pool.parallel_for(0, 100, 1, [](int64_t, int64_t) {});  // the parent's workers exist
  const pid_t child = fork();
  ASSERT_NE(child, -1);
  if (child == 0) {
    // The parent's worker does not exist here: the pool must start a fresh
    // one, and really use it (both chunks meet), not hang nor run inline.
    tiny_test::Rendezvous both(2);
    std::atomic<int> met{0};
    pool.parallel_for(0, 2, 1, [&](int64_t, int64_t) {
      if (both.arrive_and_wait(std::chrono::seconds(10))) ++met;
    });
    std::atomic<int64_t> total{0};
    pool.parallel_for(0, 1000, 10, [&](int64_t b, int64_t e) { total += e - b; });
    _exit(met.load() == 2 && total.load() == 1000 ? 0 : 1);
  }
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0);
  // And the parent's pool still works.
  std::atomic<int64_t> total{0};
  pool.parallel_for(0, 1000, 10, [&](int64_t b, int64_t e) { total += e - b; });
  EXPECT_EQ(total.load(), 1000);
}
