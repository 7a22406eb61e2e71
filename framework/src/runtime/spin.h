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
// The longest a thread polls while its owner says work is coming (below).
inline constexpr int64_t kBusySpinNs = 500000;

// Polls done() until it returns true (then true), or until it has polled for
// kSpinNs (then false); while keep_polling() returns true it polls on, up to
// kBusySpinNs in all. An emulated GPU's pool polls on while the device has
// kernels queued: the gaps between their parallel loops are short, and a
// worker asleep at the next one joins it tens of microseconds late.
template <typename Done, typename KeepPolling>
bool spin_until(Done&& done, KeepPolling&& keep_polling) {
  const auto start = std::chrono::steady_clock::now();
  const auto last = start + std::chrono::nanoseconds(kBusySpinNs);
  const auto until = start + std::chrono::nanoseconds(kSpinNs);
  for (;;) {
    for (int i = 0; i < 64; ++i) {
      if (done()) return true;
#if defined(__x86_64__) || defined(__i386__)
      __builtin_ia32_pause();
#endif
    }
    const auto now = std::chrono::steady_clock::now();
    if (now >= until && (now >= last || !keep_polling())) return false;
  }
}

template <typename Done>
bool spin_until(Done&& done) {
  return spin_until(done, [] { return false; });
}

}  // namespace tiny::runtime
