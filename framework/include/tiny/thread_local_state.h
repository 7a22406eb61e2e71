/// @file thread_local_state.h
/// @brief Every per-thread setting a worker thread must inherit, as one value (PyTorch's `at::ThreadLocalState`).
///
/// Grad mode, the current GPU and the autocast state are per thread. Code that
/// runs user work on another thread (DataParallel's replicas, DataLoader's
/// workers) captures the caller's settings with ThreadLocalState::capture()
/// and applies them in the worker with one ThreadLocalStateGuard, which
/// restores the worker's own settings when it ends:
///
///     const tiny::ThreadLocalState state = tiny::ThreadLocalState::capture();  // caller's thread
///     std::thread worker([&] {
///       tiny::ThreadLocalStateGuard guard(state);  // grad mode, device, autocast: all of them
///       model->forward(x);
///     });
///
/// The state lives in core (framework/src/core/thread_local_state.cpp), below
/// autograd, the GPU layer and amp, so one struct and one guard serve them all.
#pragma once

#include "tiny/dtype.h"

namespace tiny {

/// @brief Everything autocast keeps per thread (the fields of PyTorch's autocast thread-locals).
///
/// A plain value: `tiny::amp::AutocastState` is the same type. It changes
/// through `tiny::amp::autocast` guards; ThreadLocalState carries it.
struct AutocastState {
  bool cuda_enabled = false;    ///< autocast on for cuda tensors
  Dtype cuda_dtype = kFloat16;  ///< the cuda autocast dtype
  bool cpu_enabled = false;     ///< autocast on for cpu tensors
  Dtype cpu_dtype = kBFloat16;  ///< the cpu autocast dtype
  int nesting = 0;              ///< guards entered and not yet left (the weight-cast cache is dropped at 0)
  bool cache_enabled = true;    ///< weight casts are cached
};

/// @brief The calling thread's settings as one value: grad mode, current GPU and autocast.
///
/// Capture it on the thread whose settings should apply, then apply it on
/// another thread with ThreadLocalStateGuard.
struct ThreadLocalState {
  bool grad_enabled = true;  ///< `tiny::is_grad_enabled()` of the thread that captured it
  int current_device = 0;    ///< `tiny::cuda::current_device()` of the thread that captured it
  AutocastState autocast;    ///< the autocast state of the thread that captured it
  /// @brief Captures the calling thread's settings (plain thread-local reads: starts no GPU runtime).
  static ThreadLocalState capture();
};

/// @brief Applies a captured ThreadLocalState to this thread for a scope, restoring all of this thread's own after.
///
/// Applying sets grad mode, the current device and the autocast state;
/// restoring sets back all three. When the restored autocast state is outside
/// any autocast guard (nesting 0), the weight casts cached under the applied
/// state are dropped, as leaving the outermost `tiny::amp::autocast` does.
/// The device index is not validated again: it was valid on the thread that
/// captured it (every thread starts on device 0, also without any GPU).
class ThreadLocalStateGuard {
 public:
  /// @brief Applies `state`, remembering this thread's own.
  explicit ThreadLocalStateGuard(const ThreadLocalState& state);
  /// @brief Restores this thread's own state.
  ~ThreadLocalStateGuard();
  /// @brief Not copyable: one guard, one scope.
  ThreadLocalStateGuard(const ThreadLocalStateGuard&) = delete;
  /// @brief Not copyable.
  ThreadLocalStateGuard& operator=(const ThreadLocalStateGuard&) = delete;

 private:
  ThreadLocalState previous_;
};

/// @brief True when ops record the graph on this thread (PyTorch's `torch.is_grad_enabled`).
bool is_grad_enabled();
/// @brief Turns graph recording on or off for this thread (`torch.set_grad_enabled`).
void set_grad_enabled(bool enabled);

}  // namespace tiny
