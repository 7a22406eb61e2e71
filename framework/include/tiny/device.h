/// @file device.h
/// @brief Where a tensor lives: `cpu` or `cuda:N` (PyTorch's `torch.device`).
#pragma once

#include <cstdint>
#include <iosfwd>
#include <string>

namespace tiny {

/// @brief The kind of a device.
enum class DeviceType : int8_t {
  CPU = 0,   ///< host memory
  CUDA = 1,  ///< a GPU, real or emulated
};

/// @brief `torch.device('cpu')`'s kind.
inline constexpr DeviceType kCPU = DeviceType::CPU;
/// @brief `torch.device('cuda')`'s kind.
inline constexpr DeviceType kCUDA = DeviceType::CUDA;

/// @brief A device: a kind and an index, printed as `cpu` or `cuda:0`.
class Device {
 public:
  /// @brief The CPU.
  Device() = default;
  /// @brief A device of `type`; `index` -1 means "the current one" for CUDA.
  Device(DeviceType type, int index = -1);  // NOLINT: implicit like torch.device
  /// @brief Parses "cpu", "cuda", "cuda:1" (throws tiny::ValueError otherwise).
  Device(const std::string& spec);  // NOLINT: implicit so that x.to("cuda:0") reads like PyTorch
  /// @brief Same as the string form.
  Device(const char* spec) : Device(std::string(spec)) {}  // NOLINT

  /// @brief The kind.
  DeviceType type() const { return type_; }
  /// @brief The index; -1 for the CPU and for "the current CUDA device".
  int index() const { return index_; }
  /// @brief True when the index is set.
  bool has_index() const { return index_ >= 0; }
  /// @brief True for the CPU.
  bool is_cpu() const { return type_ == DeviceType::CPU; }
  /// @brief True for a GPU, real or emulated.
  bool is_cuda() const { return type_ == DeviceType::CUDA; }
  /// @brief "cpu" or "cuda:0".
  std::string str() const;

  /// @brief Same kind and index.
  bool operator==(const Device& other) const { return type_ == other.type_ && index_ == other.index_; }
  /// @brief Different kind or index.
  bool operator!=(const Device& other) const { return !(*this == other); }

 private:
  DeviceType type_ = DeviceType::CPU;
  int index_ = -1;
};

/// @brief Prints `cpu` or `cuda:0`.
std::ostream& operator<<(std::ostream& out, const Device& device);

}  // namespace tiny
