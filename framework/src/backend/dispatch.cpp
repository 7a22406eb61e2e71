#include "backend/dispatch.h"

#include "gpu/device_context.h"

namespace tiny {

const char* backend_name(Backend backend) {
  switch (backend) {
    case Backend::CPU: return "cpu";
    case Backend::Emulated: return "emulated cuda";
    case Backend::CUDA: return "cuda";
  }
  return "unknown";
}

Backend backend_of(const Device& device) {
  if (device.is_cpu()) return Backend::CPU;
  gpu::resolve_index(device);  // throws, naming the devices that exist
  // Which runtime serves cuda:N is chosen once (gpu::device_runtime()).
  return gpu::device_runtime_is_cuda() ? Backend::CUDA : Backend::Emulated;
}

std::vector<StubListing>& all_stubs() {
  static auto* stubs = new std::vector<StubListing>();
  return *stubs;
}

bool list_stub(const char* name, bool (*has)(Backend backend)) {
  all_stubs().push_back(StubListing{name, has});
  return true;
}

}  // namespace tiny
