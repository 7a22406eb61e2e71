/// @file lessons/1_device_check/exercise.h
/// @brief Lesson 1: find the GPUs and pick a device, with a CPU fallback.
///
/// Implement these in exercise.cpp; `./workbook check 1` (or `ctest -R lesson_1`) checks them.
#pragma once

#include <string>
#include <vector>

#include "tiny/tiny.h"

namespace lesson1 {

/// @brief How many GPUs this program can use; 0 when there is none.
///
/// PyTorch: `torch.cuda.device_count()` (0 when `torch.cuda.is_available()` is false).
int count_devices();

/// @brief Every device a tensor can live on here: `cuda:0`, `cuda:1`, ... then `cpu` last.
///
/// PyTorch has no single call for this; its pieces are `torch.cuda.device_count()` and
/// `torch.device("cuda", i)` / `torch.device("cpu")` (tiny: `tiny::Device(tiny::DeviceType::CUDA, i)`, ...).
std::vector<tiny::Device> available_devices();

/// @brief The device to train on, from what the user asked for.
///
/// - `"auto"`: the current GPU (with its index, as for "cuda") when a GPU is available, otherwise
///   the CPU. This is the only fallback.
/// - anything else is parsed by `tiny::Device`, as `torch.device` parses it: text that is not a device
///   (`"gpu"`, `"cuda:x"`, an index too long to be a number) throws its tiny::ValueError.
/// - `"cpu"`: the CPU.
/// - `"cuda"`: the current GPU (`torch.device("cuda")` means the current device), returned with
///   its index (`cuda:1` after `set_device(1)`): a device without one is not equal to the
///   devices of the tensors made on it. `"cuda:N"`: GPU N.
///   With no GPU at all, throw a tiny::DeviceError that says so and what to ask for instead
///   (the user asked for a GPU by name: training on the CPU would hide that there is none).
///   When GPUs exist but N is not one of them, throw a tiny::DeviceError whose message
///   names the request and the devices that exist (a typo must not silently train on the CPU).
///
/// PyTorch: `torch.device("cuda" if torch.cuda.is_available() else "cpu")` for "auto", `torch.device(requested)` otherwise.
tiny::Device choose_device(const std::string& requested);

/// @brief What a person wants to know about a device before training on it.
struct DeviceDescription {
  std::string name;         ///< the device's name (`torch.cuda.get_device_name`); "cpu" for the CPU
  double memory_gib = 0;    ///< total memory in GiB (2^30 bytes); 0 for the CPU
  bool emulated = false;    ///< true for the emulated GPU, false for real hardware and the CPU
};

/// @brief Describes `device` (any device from available_devices()).
///
/// PyTorch: `p = torch.cuda.get_device_properties(i)`; `p.name`, `p.total_memory / 2**30`.
DeviceDescription describe_device(const tiny::Device& device);

}  // namespace lesson1
