// One default generator per device (DESIGN.md section 5).
#include <memory>
#include <mutex>
#include <vector>

#include "core/device_hooks.h"
#include "tiny/generator.h"

namespace tiny {

Generator& default_generator(const Device& device) {
  if (device.is_cpu()) return default_cpu_generator();
  const int index = detail::gpu_hooks().resolve_index(device);
  static std::mutex mutex;
  // Never destroyed: random ops may run during exit.
  static auto* generators = new std::vector<std::unique_ptr<Generator>>();
  std::lock_guard<std::mutex> lock(mutex);
  if (generators->size() <= static_cast<size_t>(index)) generators->resize(static_cast<size_t>(index) + 1);
  auto& slot = (*generators)[static_cast<size_t>(index)];
  if (!slot) {
    slot = std::make_unique<Generator>();
    detail::register_default_generator(*slot);  // manual_seed reaches it (and seeds it now if already called)
  }
  return *slot;
}

}  // namespace tiny
