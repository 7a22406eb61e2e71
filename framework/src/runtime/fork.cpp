// The fork generation of runtime/fork.h.
#include "runtime/fork.h"

#include <pthread.h>

#include <atomic>

namespace tiny::runtime {

namespace {

std::atomic<uint64_t> g_generation{0};

void on_fork_child() { g_generation.fetch_add(1, std::memory_order_acq_rel); }

}  // namespace

uint64_t fork_generation() {
  static const bool registered = (pthread_atfork(nullptr, nullptr, on_fork_child), true);
  (void)registered;
  return g_generation.load(std::memory_order_acquire);
}

}  // namespace tiny::runtime
