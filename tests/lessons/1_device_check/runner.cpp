// Lesson 1's glue: calls each exercise and writes down what it returned.
#include "exercise.h"
#include "harness/runner.h"

namespace {
nlohmann::json device_list(const std::vector<tiny::Device>& devices) {
  nlohmann::json out = nlohmann::json::array();
  for (const tiny::Device& d : devices) out.push_back(d.str());
  return out;
}
}  // namespace

WORKBOOK_EXERCISE(count_devices) { out.values["count"] = lesson1::count_devices(); }

WORKBOOK_EXERCISE(available_devices) { out.values["devices"] = device_list(lesson1::available_devices()); }

WORKBOOK_EXERCISE(choose_device) {
  out.values["device"] = lesson1::choose_device(in.values.at("requested").get<std::string>()).str();
}

WORKBOOK_EXERCISE(describe_device) {
  const lesson1::DeviceDescription d = lesson1::describe_device(tiny::Device(in.values.at("device").get<std::string>()));
  out.values["name"] = d.name;
  out.values["memory_gib"] = d.memory_gib;
  out.values["emulated"] = d.emulated;
  out.values["total_memory_bytes"] =
      tiny::Device(in.values.at("device").get<std::string>()).is_cpu()
          ? 0
          : tiny::cuda::get_device_properties(tiny::Device(in.values.at("device").get<std::string>()).index()).total_memory;
}
