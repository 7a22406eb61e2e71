// The registry of core/device_hooks.h.
#include "core/device_hooks.h"

namespace tiny::detail {

namespace {
// Constant-initialised, so a registration from another file's static
// initialiser finds it ready whatever the order.
GpuHooks g_hooks;
bool g_registered = false;
}  // namespace

void register_gpu_hooks(const GpuHooks& hooks) {
  g_hooks = hooks;
  g_registered = hooks.resolve_index != nullptr && hooks.allocator != nullptr;
}

const GpuHooks& gpu_hooks() {
  TINY_CHECK(g_registered, DeviceError, "no GPU layer is registered with tiny's core, so cuda tensors cannot be "
             "made (a build of tiny without src/gpu?)");
  return g_hooks;
}

}  // namespace tiny::detail
