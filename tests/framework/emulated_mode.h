// The emulated GPU's execution mode for one test (DESIGN.md section 4).
//
// Tests that observe asynchrony (work still queued after a launch returns, a
// gate holding a stream, an error that waits for the next synchronization)
// pin the threaded mode with ThreadedMode, so that the suite also passes when
// it runs under TINY_LAUNCH_BLOCKING=1 (the extended tier does), where every
// launch would otherwise run, or wait for its gate, before returning.
#pragma once

#include <stdexcept>

#include "gpu/emulated/emulated_runtime.h"

namespace tiny_test {

using EmulatedMode = tiny::gpu::EmulatedRuntime::Mode;

inline tiny::gpu::EmulatedRuntime& emulated_runtime_or_throw() {
  tiny::gpu::EmulatedRuntime* rt = tiny::gpu::emulated_runtime();
  if (rt == nullptr) throw std::runtime_error("these tests need the emulated GPU: unset TINY_EMULATED_GPUS");
  return *rt;
}

// Sets the execution mode for one scope and puts the previous one back after it.
class ModeGuard {
 public:
  explicit ModeGuard(EmulatedMode mode) : previous_(emulated_runtime_or_throw().mode()) {
    emulated_runtime_or_throw().set_mode(mode);
  }
  ~ModeGuard() { emulated_runtime_or_throw().set_mode(previous_); }
  ModeGuard(const ModeGuard&) = delete;
  ModeGuard& operator=(const ModeGuard&) = delete;

 private:
  EmulatedMode previous_;
};

// For a test of asynchrony: threaded, whatever TINY_LAUNCH_BLOCKING says.
class ThreadedMode : public ModeGuard {
 public:
  ThreadedMode() : ModeGuard(EmulatedMode::threaded) {}
};

}  // namespace tiny_test
