// The storage behind tiny::ThreadLocalState (tiny/thread_local_state.h), for
// the layers above core that own the meaning of each field. Core keeps the
// thread-locals and includes nothing above it; the layers above reach them
// here (as c10 keeps the thread-local state below ATen):
//   - grad mode: tiny::is_grad_enabled / set_grad_enabled (public);
//   - the current device: the GPU layer validates an index (gpu::set_current_device,
//     which knows how many devices exist) and then writes it here;
//   - the autocast state: amp changes it in its guards, and registers a hook
//     that core calls after a ThreadLocalStateGuard writes it, so amp can refresh
//     its derived fast-path flag and drop its weight-cast cache.
#pragma once

#include "tiny/thread_local_state.h"

namespace tiny::detail {

// The calling thread's current device index (0 on every new thread). The
// setter does not validate: callers write an index they checked (or one that
// was current on another thread).
int current_device_index();
void set_current_device_index(int index);

// The calling thread's autocast state. Whoever changes it tells amp through
// its own refresh (amp's guards) or the hook below (ThreadLocalStateGuard).
AutocastState& autocast_state();

// What a ThreadLocalStateGuard did to the autocast state.
enum class AutocastChange {
  Applied,   // the guard's constructor wrote the captured state
  Restored,  // its destructor wrote back the thread's own state
};
using AutocastStateHook = void (*)(AutocastChange change);
// Registered once by amp when the library loads; nullptr (no hook) is allowed.
void set_autocast_state_hook(AutocastStateHook hook);

}  // namespace tiny::detail
