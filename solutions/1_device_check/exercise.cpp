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
  // BEGIN SOLUTION: turn "cpu", "auto", "cuda" or "cuda:N" into a device, falling back to cpu without a GPU
  if (requested == "cpu") return tiny::Device(tiny::DeviceType::CPU);
  const bool any_gpu = requested == "auto" || requested == "cuda";
  const bool one_gpu = requested.rfind("cuda:", 0) == 0 && requested.size() > 5 &&
                       requested.find_first_not_of("0123456789", 5) == std::string::npos;
  if (!any_gpu && !one_gpu) {
    throw tiny::ValueError("choose_device: '" + requested + "' is not a device: use cpu, auto, cuda or cuda:N");
  }
  const int count = count_devices();
  if (count == 0) return tiny::Device(tiny::DeviceType::CPU);  // no GPU here: fall back to the CPU
  if (any_gpu) return tiny::Device(tiny::DeviceType::CUDA, 0);
  const int index = requested.size() <= 8 ? std::stoi(requested.substr(5)) : count;
  if (index >= count) {
    throw tiny::DeviceError("choose_device: " + requested + " does not exist: this machine has " +
                            std::to_string(count) + " GPU(s), cuda:0 to cuda:" + std::to_string(count - 1) +
                            "; pick one of them or use cpu");
  }
  return tiny::Device(tiny::DeviceType::CUDA, index);
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
