// A short poll before a thread sleeps on a condition variable.
//
// tiny's threads hand each other work microseconds apart (a training step's
// parallel loops, the emulated GPU's kernels and synchronizations), and waking
// a thread asleep in a futex costs tens of microseconds on a VM: a loop of
// 100 us of work on 2 threads took 96-110 us before, 52 us polling
// (bench_threads' BM_ParallelForWork/threads:2). Polling for kSpinNs first catches
// the next hand-off; bounding it leaves the core to whoever needs it soon
// after (libgomp's default of 300,000 polls once made a 512^3 sgemm 2.5x
// slower: runtime/thread_pool.h).
#pragma once

#include <chrono>
#include <cstdint>

namespace tiny::runtime {

inline constexpr int64_t kSpinNs = 30000;

// Polls done() until it returns true (then true) or kSpinNs have passed (then false).
template <typename Done>
bool spin_until(Done&& done) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::nanoseconds(kSpinNs);
  for (;;) {
    for (int i = 0; i < 64; ++i) {
      if (done()) return true;
#if defined(__x86_64__) || defined(__i386__)
      __builtin_ia32_pause();
#endif
    }
    if (std::chrono::steady_clock::now() >= until) return false;
  }
}

}  // namespace tiny::runtime
