// Lesson 1: find the GPUs and pick a device.
#include "exercise.h"

namespace lesson1 {

int count_devices() {
  // BEGIN SOLUTION: return how many GPUs there are (0 when tiny::cuda::is_available() is false)
  return tiny::cuda::is_available() ? tiny::cuda::device_count() : 0;
  // END SOLUTION
}

std::vector<tiny::Device> available_devices() {
  // BEGIN SOLUTION: list cuda:0, cuda:1, ... for each GPU, then cpu last
  std::vector<tiny::Device> devices;
  for (int i = 0; i < count_devices(); ++i) devices.emplace_back(tiny::DeviceType::CUDA, i);
  devices.emplace_back(tiny::DeviceType::CPU);
  return devices;
  // END SOLUTION
}

tiny::Device choose_device(const std::string& requested) {
  // BEGIN SOLUTION: "auto" falls back to the CPU; otherwise parse with tiny::Device and check that GPU exists
  const int count = count_devices();
  if (requested == "auto") {  // the only fallback: "a GPU if there is one"
    return count > 0 ? tiny::Device(tiny::kCUDA, tiny::cuda::current_device()) : tiny::Device(tiny::kCPU);
  }
  const tiny::Device device(requested);  // as torch.device(requested): tiny::ValueError for text that is no device
  if (device.is_cpu()) return device;
  if (count == 0) {
    throw tiny::DeviceError("choose_device: " + requested +
                            " was asked for, but no GPU is available here (tiny::cuda::is_available() is false); "
                            "ask for auto to fall back to the CPU, or for cpu");
  }
  const int index = device.has_index() ? device.index() : tiny::cuda::current_device();  // "cuda": the current GPU
  if (index >= count) {
    throw tiny::DeviceError("choose_device: " + requested + " does not exist: this machine has " +
                            std::to_string(count) + " GPU(s), cuda:0 to cuda:" + std::to_string(count - 1) +
                            "; pick one of them or use cpu");
  }
  return tiny::Device(tiny::kCUDA, index);
  // END SOLUTION
}

DeviceDescription describe_device(const tiny::Device& device) {
  // BEGIN SOLUTION: fill in the name, the memory in GiB and whether the device is emulated
  if (device.is_cpu()) return {"cpu", 0.0, false};
  const tiny::cuda::DeviceProperties p = tiny::cuda::get_device_properties(device.index());
  return {p.name, static_cast<double>(p.total_memory) / (1024.0 * 1024.0 * 1024.0), p.is_emulated};
  // END SOLUTION
}

}  // namespace lesson1
