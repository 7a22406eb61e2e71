/// @file cuda.h
/// @brief GPU devices and their memory, as `torch.cuda` (real GPUs, or the emulated GPU without one).
///
/// Without a usable NVIDIA GPU, `cuda:N` devices are emulated on the CPU
/// (`TINY_EMULATED_GPUS`, default 2): separate memory, a capacity
/// (`TINY_EMULATED_GPU_MEMORY`) and asynchronous streams behave as on a GPU;
/// speed does not.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "tiny/device.h"

namespace tiny::cuda {

/// @brief True when `cuda:N` tensors can be created (`torch.cuda.is_available()`).
bool is_available();
/// @brief Number of GPUs (`torch.cuda.device_count()`).
int device_count();
/// @brief True when device `index` is the emulated GPU rather than real hardware.
bool is_emulated(int index = -1);
/// @brief The device's name (`torch.cuda.get_device_name`); an emulated one says "EMULATED".
std::string get_device_name(int index = -1);

/// @brief What a device offers (`torch.cuda.get_device_properties`).
struct DeviceProperties {
  std::string name;               ///< as get_device_name
  size_t total_memory = 0;        ///< bytes
  int multi_processor_count = 0;  ///< the emulator: its share of host cores
  int major = 0;                  ///< compute capability, major
  int minor = 0;                  ///< compute capability, minor
  bool is_emulated = false;       ///< true for the emulated GPU
};
/// @brief Properties of device `index` (-1: the current device).
DeviceProperties get_device_properties(int index = -1);

/// @brief The calling thread's current device (`torch.cuda.current_device()`).
int current_device();
/// @brief Makes `index` the calling thread's current device (`torch.cuda.set_device`).
void set_device(int index);

/// @brief Makes a device current for a scope (`with torch.cuda.device(i):`).
class DeviceGuard {
 public:
  /// @brief Switches to `index`, remembering the previous device.
  explicit DeviceGuard(int index);
  /// @brief Switches back.
  ~DeviceGuard();
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;

 private:
  int previous_;
};

/// @brief Waits until all work queued on the device has run (`torch.cuda.synchronize`).
void synchronize(int index = -1);

/// @brief One line for a demo's first output, e.g. "cuda:0 - EMULATED on your CPU (4.00 GiB limit)".
std::string device_banner(const Device& device);

/// @brief Bytes held by tensors on the device (`torch.cuda.memory_allocated`).
size_t memory_allocated(int index = -1);
/// @brief Peak of memory_allocated since start or the last reset (`torch.cuda.max_memory_allocated`).
size_t max_memory_allocated(int index = -1);
/// @brief Bytes the caching allocator holds, in use or cached (`torch.cuda.memory_reserved`).
size_t memory_reserved(int index = -1);
/// @brief Peak of memory_reserved (`torch.cuda.max_memory_reserved`).
size_t max_memory_reserved(int index = -1);
/// @brief Starts the peaks again from the current values (`torch.cuda.reset_peak_memory_stats`).
void reset_peak_memory_stats(int index = -1);
/// @brief Gives cached, unused memory back to the device, after synchronizing (`torch.cuda.empty_cache`).
void empty_cache();
/// @brief A readable table of the allocator's statistics (`torch.cuda.memory_summary`).
std::string memory_summary(int index = -1);

}  // namespace tiny::cuda
