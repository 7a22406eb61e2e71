// The one thread pool of `tiny` (DESIGN.md section 3, "Threads").
//
// Why a pool of our own and not OpenMP: libgomp's idle threads spin, and a
// spinning thread steals the cores OpenBLAS needs right after (a 512^3 sgemm
// went from 1.96 ms to 5.0 ms). Here idle workers sleep on a condition
// variable, and the same thread count is given to OpenBLAS, so the two take
// turns on the same cores instead of fighting for them.
//
// Why chunks of a fixed `grain`: a reduction that sums each chunk and then
// combines the partial results in chunk order gives bitwise the same answer
// with 1 thread or 64, because the chunk boundaries never depend on the
// thread count. Only which thread runs which chunk changes.
#pragma once

#include <cstdint>
#include <functional>

namespace tiny::runtime {

// Threads parallel_for may use, the caller included (always >= 1).
// The first call reads TINY_NUM_THREADS, else the CPUs this process may run on
// (sched_getaffinity, which respects taskset, cgroups' cpusets and CTest's
// resource limits), else std::thread::hardware_concurrency(). A bad
// TINY_NUM_THREADS throws tiny::ValueError here, on every call until fixed.
int num_threads();

// Sets the thread count of tiny and of OpenBLAS (openblas_set_num_threads) to n.
// n must be in [1, 1024], else tiny::ValueError. Call it when no parallel_for
// is running (for example from the main thread between steps); calling it
// from inside a parallel_for chunk throws tiny::Error.
void set_num_threads(int n);

// True while the current thread runs a parallel_for chunk, on any thread.
bool in_parallel_region();

// Number of chunks parallel_for uses for [begin, end): ceil((end - begin) / grain),
// 0 when end <= begin. grain must be >= 1, else tiny::ValueError.
int64_t num_chunks(int64_t begin, int64_t end, int64_t grain);

// Runs fn(chunk_begin, chunk_end) for every chunk of [begin, end), where chunk i
// is [begin + i*grain, min(begin + (i+1)*grain, end)), and returns when all are
// done. The calling thread runs chunks too.
//
// Runs inline on the caller, in chunk order, when there is one chunk, when
// num_threads() == 1, when called from inside a chunk (nesting), or when
// another thread is already running a parallel_for (the pool serves one call
// at a time; waiting for it could deadlock).
//
// If fn throws, chunks not yet started may be skipped; once every worker has
// left the call, the exception of the lowest-index failing chunk is rethrown
// here. (Chunks are started in index order, so every chunk below a failing one
// has run: the exception reported does not depend on timing.)
void parallel_for(int64_t begin, int64_t end, int64_t grain,
                  const std::function<void(int64_t, int64_t)>& fn);

}  // namespace tiny::runtime
