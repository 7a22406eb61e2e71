// Lesson 1: find the GPUs and pick a device.
#include "exercise.h"

namespace lesson1 {

int count_devices() {
  TINY_TODO("lesson 1: return how many GPUs there are (0 when tiny::cuda::is_available() is false)");
}

std::vector<tiny::Device> available_devices() {
  TINY_TODO("lesson 1: list cuda:0, cuda:1, ... for each GPU, then cpu last");
}

tiny::Device choose_device(const std::string& requested) {
  TINY_TODO("lesson 1: \"auto\" falls back to the CPU; otherwise parse with tiny::Device and check that GPU exists");
}

DeviceDescription describe_device(const tiny::Device& device) {
  TINY_TODO("lesson 1: fill in the name, the memory in GiB and whether the device is emulated");
}

}  // namespace lesson1
