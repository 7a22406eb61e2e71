// The thread pools of `tiny` (DESIGN.md section 3, "Threads").
//
// Why pools of our own and not OpenMP: libgomp's idle threads spin (300,000
// polls by default), and a spinning thread steals the cores OpenBLAS needs
// right after (a 512^3 sgemm went from 1.96 ms to 5.0 ms). Here an idle worker
// polls for 30 us, then sleeps on a condition variable, and a caller waiting
// for its workers does the same (runtime/spin.h). OpenBLAS runs
// single-threaded, on blocks of each GEMM that parallel_for hands out
// (backend/cpu/gemm.cpp): one set of threads, never two.
//
// Why chunks of a fixed `grain`: a reduction that sums each chunk and then
// combines the partial results in chunk order gives bitwise the same answer
// with 1 thread or 64, because the chunk boundaries never depend on the
// thread count. Only which thread runs which chunk changes.
//
// Which pool: parallel_for runs on the pool bound to the calling thread
// (bind_thread_pool), else on the global pool. Each emulated GPU owns a pool of
// its own, its fair share being num_threads() / devices, and its stream
// workers are bound to it: two devices running kernels at once each use their
// own threads, as two GPUs each use their own multiprocessors, and a device
// running alone borrows the idle ones' (a group, below). Every other thread
// uses the global pool (num_threads() threads).
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <string>

namespace tiny::runtime {

// Threads parallel_for may use, the caller included (always >= 1).
// The first call reads TINY_NUM_THREADS, else the CPUs this process may run on
// (sched_getaffinity, which respects taskset, cgroups' cpusets and CTest's
// resource limits), else std::thread::hardware_concurrency(). A bad
// TINY_NUM_THREADS throws tiny::ValueError here, on every call until fixed.
int num_threads();

// Sets tiny's thread count to n (OpenBLAS stays at one thread: GEMMs are split over tiny's pools).
// n must be in [1, 1024], else tiny::ValueError. Call it when no parallel_for
// is running (for example from the main thread between steps); calling it
// from inside a parallel_for chunk throws tiny::Error. Every pool takes its
// new size (max(1, n / share)) at its next parallel_for; a call already
// running finishes with the old one.
void set_num_threads(int n);

// True while the current thread runs a parallel_for chunk, on any thread.
bool in_parallel_region();

// Number of chunks parallel_for uses for [begin, end): ceil((end - begin) / grain),
// 0 when end <= begin. grain must be >= 1, else tiny::ValueError.
int64_t num_chunks(int64_t begin, int64_t end, int64_t grain);

class WorkerSet;  // the workers themselves (thread_pool.cpp)

// A set of worker threads parallel_for can run on. It uses
// max(1, num_threads() / share) threads, the thread that calls parallel_for
// included, so it follows set_num_threads and TINY_NUM_THREADS: the count is
// read by every parallel_for, and the workers are resized then (under the
// pool's own lock, so never while another call is running on it). Workers are
// started by the first parallel_for that needs them and sleep when idle.
//
// A pool serves one parallel_for at a time; a second thread calling in while
// it is busy runs its chunks inline (the contract of parallel_for).
//
// Pools of one group (the emulated GPUs' pools: one group per process) lend
// each other their threads: a call on a grouped pool uses
// max(1, num_threads() / k) threads, k being the group's pools running a
// parallel_for at that moment, itself included. A device busy alone runs on
// every core; two busy at once share them (the one that started first keeps
// its threads until its call ends). size() stays the fair share.
//
// Fork: a child made by fork() has none of the parent's workers. A pool used
// in the child forgets them (leaking them: they cannot be joined there) and
// starts fresh ones on its next parallel_for, as the global pool always has.
class ThreadPool {
 public:
  // share >= 1 (else tiny::ValueError). `name` prefixes the workers' thread
  // names (shown by top -H and gdb; Linux keeps the first 15 characters).
  // `group`, when given, counts the group's pools running a parallel_for
  // (above); it must outlive the pool. `busy`, when given, is the owner's
  // count of work under way (an emulated GPU's queued kernels): while it is
  // above 0, idle workers poll for the next parallel_for for up to
  // 500 us (runtime/spin.h) rather than 30 us. It must outlive the pool.
  ThreadPool(int share, std::string name, std::atomic<int>* group = nullptr,
             const std::atomic<int64_t>* busy = nullptr);
  // Joins the workers. No parallel_for may be running on the pool, and no
  // thread may still be bound to it. (The global pool and the process-wide
  // emulator's pools are never destroyed.)
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  // The threads a parallel_for on this pool uses, the caller included:
  // max(1, num_threads() / share()).
  int size() const;
  int share() const { return share_; }
  const std::string& name() const { return name_; }

  // runtime::parallel_for on this pool, whatever pool the calling thread is
  // bound to (same contract).
  void parallel_for(int64_t begin, int64_t end, int64_t grain,
                    const std::function<void(int64_t, int64_t)>& fn);

  // Wakes the pool's sleeping workers to poll for a parallel_for that is
  // coming (the emulated GPU calls it when a device gets work after being
  // idle): a worker woken at the parallel_for itself joins it tens of
  // microseconds late. Does nothing before the pool's first parallel_for.
  void warm_up();

 private:
  WorkerSet& workers();  // the current process's workers (fresh ones after a fork)

  int share_;
  std::string name_;
  std::atomic<int>* group_;
  const std::atomic<int64_t>* busy_;
  std::atomic<WorkerSet*> workers_{nullptr};
};

// The pool of every thread not bound to another one: num_threads() threads.
// Created on first use and never destroyed (joining workers from a static
// destructor can hang at exit, and tensors freed during shutdown may still call in).
ThreadPool& global_thread_pool();

// Makes parallel_for on the calling thread use `pool` (nullptr: the global
// pool) and returns the previous binding. Emulated GPU stream workers bind to
// their device's pool when they start.
ThreadPool* bind_thread_pool(ThreadPool* pool);

// The pool parallel_for uses on the calling thread.
ThreadPool& current_thread_pool();

// Runs fn(chunk_begin, chunk_end) for every chunk of [begin, end), where chunk i
// is [begin + i*grain, min(begin + (i+1)*grain, end)), and returns when all are
// done, on the calling thread's pool (current_thread_pool()). The calling
// thread runs chunks too.
//
// Runs inline on the caller, in chunk order, when there is one chunk, when
// the pool's size() is 1, when called from inside a chunk (nesting), or when
// another thread is already running a parallel_for on the same pool (a pool
// serves one call at a time; waiting for it could deadlock).
//
// If fn throws, chunks not yet started may be skipped; once every worker has
// left the call, the exception of the lowest-index failing chunk is rethrown
// here. (Chunks are started in index order, so every chunk below a failing one
// has run: the exception reported does not depend on timing.)
void parallel_for(int64_t begin, int64_t end, int64_t grain,
                  const std::function<void(int64_t, int64_t)>& fn);

}  // namespace tiny::runtime
