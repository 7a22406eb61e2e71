// Fault injection for the reliability tests (issue: "Fault injection"):
// a planned failure at the N-th time the program passes a named site, so a
// test can put an out-of-memory or a crash at a chosen (random, seeded) point
// and check that it ends with a clear error and nothing lost.
//
// Plans come from the environment, TINY_FAULT_INJECT="site@N[,site@N...]"
// (read once, at the first check), or from arm() in a test. Sites:
//   device_malloc@N  the N-th allocation asked of a GPU's memory fails as if
//                    the device were full, and so does the caching
//                    allocator's one retry after it freed its cache: the
//                    caller gets tiny::OutOfMemoryError (emulated GPU)
//   file_write@N     the process is killed (SIGKILL, as a power cut or the
//                    OOM killer) once N bytes of a file have been written by
//                    an atomic writer (checkpoints, .npy)
// Without a plan every check is one relaxed atomic load.
#pragma once

#include <cstdint>
#include <string>

namespace tiny::fault {

/// Plans the faults of `spec` ("device_malloc@3,file_write@4096"), replacing
/// any earlier plan and restarting the counts; "" clears. Throws
/// tiny::ValueError for an unknown site or a count that is not a number >= 1.
void arm(const std::string& spec);

/// True when this pass through `device_malloc` is to fail.
bool device_malloc_fails();

/// Counts `n` more bytes written; kills the process when a file_write plan is reached.
void file_bytes_written(uint64_t n);

}  // namespace tiny::fault
