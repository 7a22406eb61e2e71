/// @file parallel.h
/// @brief How many CPU threads `tiny` uses (PyTorch's `torch.set_num_threads`).
///
/// `tiny` runs CPU kernels, matrix products included, on a thread pool of its
/// own (OpenBLAS itself runs single-threaded on blocks of each product), so
/// nothing fights over the cores. Each emulated GPU owns an equal
/// share of these threads (`get_num_threads() / device_count()`, at least 1, its
/// `multi_processor_count`) in a pool of its own, so devices running at the
/// same time (DataParallel replicas) do not wait for each other. The default is the
/// `TINY_NUM_THREADS` environment variable if set, else every CPU the process
/// may run on. Results do not depend on the thread count: work is split into
/// chunks whose boundaries are fixed, so sums come out bitwise the same with 1
/// thread or many.
#pragma once

namespace tiny {

/// @brief Uses `n` threads (the calling thread included) for CPU kernels and matrix products.
///
/// Throws tiny::ValueError unless 1 <= n <= 1024. Call it outside of running
/// kernels, typically once before training. Each emulated GPU's share becomes
/// `max(1, n / device_count())` from its next kernel on.
/// Example: `tiny::set_num_threads(1);` to time a single-threaded baseline.
void set_num_threads(int n);

/// @brief The number of threads CPU kernels use, the calling thread included (always at least 1).
///
/// Throws tiny::ValueError on first use if `TINY_NUM_THREADS` is set to something
/// other than a whole number from 1 to 1024.
int get_num_threads();

}  // namespace tiny
