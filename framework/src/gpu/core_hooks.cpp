// The GPU layer's side of core/device_hooks.h: it tells core how to resolve a
// cuda device and which allocator serves cuda:N tensors, when the library
// loads, so that core never includes gpu/.
#include <memory>
#include <mutex>
#include <vector>

#include "core/device_hooks.h"
#include "gpu/device_context.h"

namespace tiny::gpu {

namespace {

// GPU memory comes from the device's caching allocator, on the device's
// current stream (the stream that will use it first).
class DeviceAllocator final : public Allocator {
 public:
  explicit DeviceAllocator(int device) : device_(device) {}
  void* allocate(size_t nbytes) override { return device_allocator(device_).allocate(nbytes, current_stream(device_)); }
  void deallocate(void* ptr, size_t) override {
    if (ptr != nullptr) device_allocator(device_).free(ptr);
  }

 private:
  int device_;
};

Allocator* tensor_allocator(int index) {
  static std::mutex mutex;
  static auto* allocators = new std::vector<std::unique_ptr<DeviceAllocator>>();  // never destroyed
  std::lock_guard<std::mutex> lock(mutex);
  if (allocators->size() <= static_cast<size_t>(index)) allocators->resize(static_cast<size_t>(index) + 1);
  auto& slot = (*allocators)[static_cast<size_t>(index)];
  if (!slot) slot = std::make_unique<DeviceAllocator>(index);
  return slot.get();
}

const bool registered = [] {
  detail::GpuHooks hooks;
  hooks.resolve_index = &resolve_index;
  hooks.allocator = &tensor_allocator;
  detail::register_gpu_hooks(hooks);
  return true;
}();

}  // namespace

}  // namespace tiny::gpu
