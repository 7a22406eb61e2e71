// The one per-thread state that worker threads inherit (PyTorch's
// at::ThreadLocalState): grad mode, the current device and the autocast state,
// stored here in core. Applying or restoring is plain writes plus one call to
// the hook amp registers; nothing here reaches a higher layer.
#include "core/thread_local_state.h"

#include <atomic>

namespace tiny {

namespace {
thread_local bool t_grad_enabled = true;
thread_local int t_current_device = 0;
thread_local AutocastState t_autocast;
// Constant-initialized, so amp's registration during static initialization finds it ready.
std::atomic<detail::AutocastStateHook> g_autocast_hook{nullptr};

void notify_autocast(detail::AutocastChange change) {
  if (const detail::AutocastStateHook hook = g_autocast_hook.load(std::memory_order_acquire)) hook(change);
}
}  // namespace

namespace detail {
int current_device_index() { return t_current_device; }
void set_current_device_index(int index) { t_current_device = index; }
AutocastState& autocast_state() { return t_autocast; }
void set_autocast_state_hook(AutocastStateHook hook) { g_autocast_hook.store(hook, std::memory_order_release); }
}  // namespace detail

bool is_grad_enabled() { return t_grad_enabled; }
void set_grad_enabled(bool enabled) { t_grad_enabled = enabled; }

ThreadLocalState ThreadLocalState::capture() {
  ThreadLocalState state;
  state.grad_enabled = t_grad_enabled;
  state.current_device = t_current_device;
  state.autocast = t_autocast;
  return state;
}

ThreadLocalStateGuard::ThreadLocalStateGuard(const ThreadLocalState& state) : previous_(ThreadLocalState::capture()) {
  t_grad_enabled = state.grad_enabled;
  t_current_device = state.current_device;
  t_autocast = state.autocast;
  notify_autocast(detail::AutocastChange::Applied);
}

ThreadLocalStateGuard::~ThreadLocalStateGuard() {
  t_grad_enabled = previous_.grad_enabled;
  t_current_device = previous_.current_device;
  t_autocast = previous_.autocast;
  notify_autocast(detail::AutocastChange::Restored);
}

}  // namespace tiny
