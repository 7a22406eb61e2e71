// The thread pools behind parallel_for. See thread_pool.h for the contract.
//
// A ThreadPool is a size rule (a share of num_threads()) and a WorkerSet, the
// threads themselves, made on first use. After a fork the child's pools see
// that their WorkerSet belongs to the parent (a fork generation counter,
// runtime/fork.h) and make a fresh one.
//
// How one call runs: the caller publishes a Job (on its own stack), bumps a
// generation counter and wakes the workers with one notify. Every thread,
// caller included, then claims chunk indices from one atomic counter until
// none are left. The caller closes the job and waits until every worker that
// joined it has left; workers that wake up late see the job closed and go back
// to sleep. Every wait polls for 30 us (runtime/spin.h), then sleeps on a
// condition variable: an idle worker costs no CPU after that. A pool whose
// owner signals it is busy (an emulated GPU with kernels queued) has its idle
// workers poll on, up to 500 us, and its owner can wake them ahead of work (warm_up).
#include "runtime/thread_pool.h"

#include <cblas.h>
#include <pthread.h>
#include <sched.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <condition_variable>
#include <cstdlib>
#include <exception>
#include <memory>
#include <mutex>
#include <string>
#include <system_error>
#include <thread>
#include <utility>
#include <vector>

#include "runtime/fork.h"
#include "runtime/spin.h"

#include "tiny/error.h"
#include "tiny/parallel.h"

namespace tiny::runtime {
namespace {

// CPU_SETSIZE: more CPUs than sched_getaffinity's default mask can describe.
constexpr int kMaxThreads = 1024;

thread_local bool t_in_parallel_region = false;

// Marks the current thread as inside a parallel region for one scope, and
// restores the previous value even when a chunk throws.
class ParallelRegionGuard {
 public:
  ParallelRegionGuard() : previous_(t_in_parallel_region) { t_in_parallel_region = true; }
  ~ParallelRegionGuard() { t_in_parallel_region = previous_; }
  ParallelRegionGuard(const ParallelRegionGuard&) = delete;
  ParallelRegionGuard& operator=(const ParallelRegionGuard&) = delete;

 private:
  bool previous_;
};

// End of the chunk that starts at chunk_begin, written so it cannot overflow.
int64_t chunk_end(int64_t chunk_begin, int64_t end, int64_t grain) {
  return end - chunk_begin > grain ? chunk_begin + grain : end;
}

void run_inline(int64_t begin, int64_t end, int64_t grain,
                const std::function<void(int64_t, int64_t)>& fn) {
  ParallelRegionGuard guard;
  for (int64_t b = begin; b < end;) {
    const int64_t e = chunk_end(b, end, grain);
    fn(b, e);
    b = e;
  }
}

// One parallel_for call as the workers see it. It lives on the caller's stack;
// the caller does not return before every worker has stopped using it.
struct Job {
  const std::function<void(int64_t, int64_t)>* fn;
  int64_t begin, end, grain, chunks;
  std::atomic<int64_t> next_chunk{0};
  std::atomic<bool> failed{false};
  std::mutex error_mutex;
  int64_t failed_chunk = INT64_MAX;  // guarded by error_mutex
  std::exception_ptr error;          // guarded by error_mutex
};

// Claims and runs chunks until none are left or one has failed. Chunks are
// claimed in increasing order, so when chunk i fails every chunk below i has
// already been claimed and will finish: the lowest failing chunk is found
// whatever the timing.
void run_chunks(Job& job) {
  ParallelRegionGuard guard;
  while (!job.failed.load(std::memory_order_relaxed)) {
    const int64_t i = job.next_chunk.fetch_add(1, std::memory_order_relaxed);
    if (i >= job.chunks) return;
    const int64_t b = job.begin + i * job.grain;
    try {
      (*job.fn)(b, chunk_end(b, job.end, job.grain));
    } catch (...) {
      std::lock_guard<std::mutex> lock(job.error_mutex);
      if (i < job.failed_chunk) {
        job.failed_chunk = i;
        job.error = std::current_exception();
      }
      job.failed.store(true, std::memory_order_relaxed);
    }
  }
}

// The pool parallel_for uses on this thread; nullptr means the global pool.
thread_local ThreadPool* t_bound_pool = nullptr;

std::mutex g_config_mutex;
std::atomic<int> g_num_threads{0};  // 0 until the first num_threads()

}  // namespace

class WorkerSet {
 public:
  WorkerSet(std::string name, uint64_t fork_generation, const std::atomic<int64_t>* busy)
      : fork_generation(fork_generation), name_(std::move(name)), owner_busy_(busy) {}
  // Only for a WorkerSet of this process with no call running (see ~ThreadPool).
  ~WorkerSet() { stop_workers(); }
  WorkerSet(const WorkerSet&) = delete;
  WorkerSet& operator=(const WorkerSet&) = delete;

  // Held by the one caller the workers serve at a time.
  std::mutex call_mutex;
  // fork_generation() when this set was made: another value means a fork
  // happened since, and these workers are the parent's.
  const uint64_t fork_generation;

  // Makes the set have `count` workers. Caller holds call_mutex.
  void ensure_workers(int count) {
    if (static_cast<int>(workers_.size()) == count) return;
    stop_workers();
    uint64_t generation;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      generation = generation_;
    }
    for (int i = 0; i < count; ++i) {
      try {
        workers_.emplace_back([this, i, generation] { worker_loop(i, generation); });
      } catch (const std::system_error& e) {
        TINY_THROW(Error, "could not start thread pool worker ", i + 1, " of ", count, " (",
                   e.what(), "); use fewer threads with tiny::set_num_threads(n) or TINY_NUM_THREADS");
      }
    }
    // Wait until every worker is parked in worker_loop. A thread still being
    // started holds locks of the C library (or of a sanitizer's runtime); a
    // fork() then would copy them held, and the child's first thread would
    // hang on them. Once per resize, so it costs nothing per parallel_for.
    std::unique_lock<std::mutex> lock(mutex_);
    done_cv_.wait(lock, [&] { return started_ == count; });
  }

  // Runs every chunk of `job` on at most `helpers` workers and the calling
  // thread. Caller holds call_mutex.
  void run(Job& job, int64_t helpers) {
    // Only as many workers as there are chunks beyond the caller's first join.
    helpers = std::min({helpers, static_cast<int64_t>(workers_.size()), job.chunks - 1});
    {
      std::lock_guard<std::mutex> lock(mutex_);
      job_ = &job;
      slots_ = static_cast<int>(helpers);  // a polling worker joins without a notify: it takes a slot
      ++generation_;
      published_.store(generation_, std::memory_order_release);
    }
    if (helpers == static_cast<int64_t>(workers_.size())) {
      work_cv_.notify_all();
    } else {
      for (int64_t i = 0; i < helpers; ++i) work_cv_.notify_one();
    }

    run_chunks(job);

    std::unique_lock<std::mutex> lock(mutex_);
    job_ = nullptr;  // workers that wake from now on skip this job
    if (active_ != 0) {
      lock.unlock();
      spin_until([this] { return busy_.load(std::memory_order_acquire) == 0; });
      lock.lock();
    }
    done_cv_.wait(lock, [this] { return active_ == 0; });
  }

  // Wakes the sleeping workers to poll for a parallel_for that is coming.
  void warm_up() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      ++warm_;
    }
    work_cv_.notify_all();
  }

 private:
  void worker_loop(int index, uint64_t seen_generation) {
    const std::string name = name_ + "-" + std::to_string(index + 1);
    pthread_setname_np(pthread_self(), name.substr(0, 15).c_str());  // shows in top -H and gdb

    std::unique_lock<std::mutex> lock(mutex_);
    ++started_;
    uint64_t seen_warm = warm_;
    done_cv_.notify_all();  // ensure_workers waits for every worker to get here
    for (;;) {
      if (!stop_ && generation_ == seen_generation) {
        lock.unlock();
        spin_until(
            [&] {
              return stopping_.load(std::memory_order_relaxed) ||
                     published_.load(std::memory_order_acquire) != seen_generation;
            },
            [&] { return owner_busy_ != nullptr && owner_busy_->load(std::memory_order_relaxed) > 0; });
        lock.lock();
      }
      work_cv_.wait(lock, [&] { return stop_ || generation_ != seen_generation || warm_ != seen_warm; });
      if (stop_) return;
      seen_warm = warm_;
      if (generation_ == seen_generation) continue;  // warm_up: back to polling
      seen_generation = generation_;
      Job* job = job_;
      if (job == nullptr || slots_ == 0) continue;  // the caller finished alone, or enough workers joined
      --slots_;
      ++active_;
      busy_.fetch_add(1, std::memory_order_relaxed);
      lock.unlock();
      run_chunks(*job);
      lock.lock();
      busy_.fetch_sub(1, std::memory_order_release);
      if (--active_ == 0 && job_ == nullptr) done_cv_.notify_one();
    }
  }

  void stop_workers() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stop_ = true;
      stopping_.store(true, std::memory_order_relaxed);
    }
    work_cv_.notify_all();
    for (std::thread& worker : workers_) worker.join();
    workers_.clear();
    started_ = 0;
    stop_ = false;
    stopping_.store(false, std::memory_order_relaxed);
  }

  const std::string name_;
  const std::atomic<int64_t>* owner_busy_;  // see ThreadPool's constructor
  std::mutex mutex_;  // guards everything below
  std::condition_variable work_cv_;
  std::condition_variable done_cv_;
  std::vector<std::thread> workers_;
  uint64_t generation_ = 0;  // bumped per job (not the fork generation)
  Job* job_ = nullptr;
  int active_ = 0;   // workers inside the current job
  int slots_ = 0;    // workers that may still join it
  // Mirrors read without the mutex while spinning: generation_, active_, stop_.
  std::atomic<uint64_t> published_{0};
  std::atomic<int> busy_{0};
  std::atomic<bool> stopping_{false};
  uint64_t warm_ = 0;  // bumped by warm_up
  int started_ = 0;  // workers that reached worker_loop
  bool stop_ = false;
};

namespace {

// An empty TINY_NUM_THREADS counts as unset, as `TINY_NUM_THREADS= ./prog` means.
int parse_num_threads_env(const std::string& value) {
  const bool digits = !value.empty() && value.size() <= 4 &&
                      std::all_of(value.begin(), value.end(), [](char c) { return c >= '0' && c <= '9'; });
  const int n = digits ? std::stoi(value) : 0;
  TINY_CHECK(n >= 1 && n <= kMaxThreads, ValueError, "TINY_NUM_THREADS=\"", value,
             "\" is not a valid thread count: expected a whole number from 1 to ", kMaxThreads,
             " (for example TINY_NUM_THREADS=4), or leave it unset to use every CPU this process may run on");
  return n;
}

int default_num_threads() {
  const char* env = std::getenv("TINY_NUM_THREADS");
  if (env != nullptr && env[0] != '\0') return parse_num_threads_env(env);
  cpu_set_t cpus;
  if (sched_getaffinity(0, sizeof(cpus), &cpus) == 0 && CPU_COUNT(&cpus) > 0) {
    return std::min(CPU_COUNT(&cpus), kMaxThreads);
  }
  const unsigned hardware = std::thread::hardware_concurrency();
  return hardware == 0 ? 1 : std::min(static_cast<int>(hardware), kMaxThreads);
}

}  // namespace

int num_threads() {
  int n = g_num_threads.load(std::memory_order_acquire);
  if (n > 0) return n;
  std::lock_guard<std::mutex> lock(g_config_mutex);
  n = g_num_threads.load(std::memory_order_relaxed);
  if (n == 0) {
    n = default_num_threads();  // may throw: then the next call tries again
    // OpenBLAS stays at one thread: tiny splits GEMMs over its own pools (backend/cpu/gemm.cpp).
    openblas_set_num_threads(1);
    g_num_threads.store(n, std::memory_order_release);
  }
  return n;
}

void set_num_threads(int n) {
  TINY_CHECK(n >= 1 && n <= kMaxThreads, ValueError, "set_num_threads: expected a thread count from 1 to ",
             kMaxThreads, ", got ", n);
  TINY_CHECK(!t_in_parallel_region, Error, "set_num_threads(", n,
             ") was called inside a parallel_for chunk; call it outside parallel regions, "
             "for example before the training loop");
  std::lock_guard<std::mutex> lock(g_config_mutex);
  // Each pool is resized by its next parallel_for, under its call lock, so
  // this is safe even while another thread is inside parallel_for.
  g_num_threads.store(n, std::memory_order_release);
}

bool in_parallel_region() { return t_in_parallel_region; }

int64_t num_chunks(int64_t begin, int64_t end, int64_t grain) {
  TINY_CHECK(grain >= 1, ValueError, "parallel_for: grain must be at least 1, got ", grain);
  if (end <= begin) return 0;
  int64_t length;
  TINY_CHECK(!__builtin_sub_overflow(end, begin, &length), ValueError, "parallel_for: the range [", begin,
             ", ", end, ") has more than 2^63 - 1 elements");
  return (length - 1) / grain + 1;
}

ThreadPool::ThreadPool(int share, std::string name, std::atomic<int>* group, const std::atomic<int64_t>* busy)
    : share_(share), name_(std::move(name)), group_(group), busy_(busy) {
  TINY_CHECK(share >= 1, ValueError, "ThreadPool: share must be at least 1 (the pool uses num_threads() / share "
             "threads), got ", share);
  fork_generation();  // registers the fork handler: a set made before a fork is the parent's
}

ThreadPool::~ThreadPool() {
  WorkerSet* workers = workers_.load(std::memory_order_acquire);
  // Workers made before a fork are the parent's: they cannot be joined here.
  if (workers != nullptr && workers->fork_generation == fork_generation()) {
    delete workers;
  }
}

int ThreadPool::size() const { return std::max(1, num_threads() / share_); }

void ThreadPool::warm_up() {
  WorkerSet* set = workers_.load(std::memory_order_acquire);
  if (set != nullptr && set->fork_generation == fork_generation()) set->warm_up();
}

WorkerSet& ThreadPool::workers() {
  const uint64_t generation = fork_generation();
  WorkerSet* current = workers_.load(std::memory_order_acquire);
  while (current == nullptr || current->fork_generation != generation) {
    // First use, or first use since a fork: the parent's set is leaked, as its
    // threads cannot be joined here. No lock is taken, so none held by a
    // parent thread at fork time can block the child.
    auto fresh = std::make_unique<WorkerSet>(name_, generation, busy_);
    if (workers_.compare_exchange_strong(current, fresh.get(), std::memory_order_acq_rel)) return *fresh.release();
    // Another thread installed a set first: `current` now holds it.
  }
  return *current;
}

namespace {

// Counts one call among its group's running ones for the call's duration.
class GroupMember {
 public:
  explicit GroupMember(std::atomic<int>* group)
      : group_(group), running_(group == nullptr ? 0 : group->fetch_add(1, std::memory_order_acq_rel) + 1) {}
  ~GroupMember() {
    if (group_ != nullptr) group_->fetch_sub(1, std::memory_order_acq_rel);
  }
  GroupMember(const GroupMember&) = delete;
  GroupMember& operator=(const GroupMember&) = delete;
  int running() const { return running_; }

 private:
  std::atomic<int>* group_;
  int running_;
};

}  // namespace

void ThreadPool::parallel_for(int64_t begin, int64_t end, int64_t grain,
                              const std::function<void(int64_t, int64_t)>& fn) {
  const int64_t chunks = num_chunks(begin, end, grain);
  if (chunks == 0) return;
  const GroupMember member(chunks > 1 && !t_in_parallel_region ? group_ : nullptr);
  const int threads = group_ == nullptr ? size() : std::max(1, num_threads() / std::max(1, member.running()));
  if (chunks == 1 || threads == 1 || t_in_parallel_region) {
    run_inline(begin, end, grain, fn);
    return;
  }
  WorkerSet& set = workers();
  std::unique_lock<std::mutex> call(set.call_mutex, std::try_to_lock);
  if (!call.owns_lock()) {  // another thread's parallel_for has this pool
    run_inline(begin, end, grain, fn);
    return;
  }
  // A grouped pool keeps the workers of its largest call, so lending threads
  // back and forth starts and stops none.
  set.ensure_workers((group_ == nullptr ? threads : num_threads()) - 1);

  Job job;
  job.fn = &fn;
  job.begin = begin;
  job.end = end;
  job.grain = grain;
  job.chunks = chunks;
  set.run(job, threads - 1);
  if (job.error) std::rethrow_exception(job.error);
}

ThreadPool& global_thread_pool() {
  static ThreadPool* const pool = new ThreadPool(1, "tiny-pool");  // never destroyed: see thread_pool.h
  return *pool;
}

ThreadPool* bind_thread_pool(ThreadPool* pool) {
  ThreadPool* previous = t_bound_pool;
  t_bound_pool = pool;
  return previous;
}

ThreadPool& current_thread_pool() { return t_bound_pool != nullptr ? *t_bound_pool : global_thread_pool(); }

void parallel_for(int64_t begin, int64_t end, int64_t grain,
                  const std::function<void(int64_t, int64_t)>& fn) {
  current_thread_pool().parallel_for(begin, end, grain, fn);
}

}  // namespace tiny::runtime

namespace tiny {

void set_num_threads(int n) { runtime::set_num_threads(n); }

int get_num_threads() { return runtime::num_threads(); }

}  // namespace tiny
