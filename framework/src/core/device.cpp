#include "tiny/device.h"

#include <cctype>
#include <ostream>

#include "tiny/error.h"

namespace tiny {

Device::Device(DeviceType type, int index) : type_(type), index_(type == DeviceType::CPU ? -1 : index) {
  TINY_CHECK(type != DeviceType::CPU || index <= 0, ValueError, "the CPU has no device index, got cpu:", index);
  TINY_CHECK(index >= -1, ValueError, "device index must be -1 (current) or non-negative, got ", index);
}

Device::Device(const std::string& spec) {
  const auto bad = [&spec]() {
    return ValueError("Expected one of cpu, cuda device type at start of device string: '" + spec +
                      "' (write \"cpu\", \"cuda\" or \"cuda:N\")");
  };
  const size_t colon = spec.find(':');
  const std::string kind = spec.substr(0, colon);
  if (kind == "cpu") {
    type_ = DeviceType::CPU;
  } else if (kind == "cuda") {
    type_ = DeviceType::CUDA;
  } else {
    throw bad();
  }
  if (colon == std::string::npos) return;
  const std::string digits = spec.substr(colon + 1);
  TINY_CHECK(!digits.empty(), ValueError, "Invalid device string: '", spec,
             "' (the index after ':' must be a number, e.g. cuda:0)");
  for (char c : digits) {
    TINY_CHECK(std::isdigit(static_cast<unsigned char>(c)), ValueError, "Invalid device string: '", spec,
               "' (the index after ':' must be a number, e.g. cuda:0)");
  }
  // PyTorch's words when its std::stoi overflows; no machine has a million GPUs.
  TINY_CHECK(digits.size() <= 6, ValueError, "Could not parse device index '", digits, "' in device string '", spec,
             "' (an index has at most 6 digits; GPUs are numbered from cuda:0)");
  const int index = std::stoi(digits);
  TINY_CHECK(type_ == DeviceType::CUDA || index == 0, ValueError, "the CPU has no device index other than 0, got '",
             spec, "'");
  index_ = type_ == DeviceType::CPU ? -1 : index;
}

std::string Device::str() const {
  if (type_ == DeviceType::CPU) return "cpu";
  return index_ < 0 ? "cuda" : "cuda:" + std::to_string(index_);
}

std::ostream& operator<<(std::ostream& out, const Device& device) { return out << device.str(); }

}  // namespace tiny
