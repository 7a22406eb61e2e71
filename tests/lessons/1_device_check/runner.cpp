// Lesson 1's glue: calls each exercise and writes down what it returned.
#include "exercise.h"
#include "harness/runner.h"

namespace {
// A check may make another GPU current first (tiny::cuda::set_device, torch.cuda.set_device),
// to see whether an answer follows the current device.
void select_device(const workbook::Bundle& in) {
  if (in.values.contains("current_device")) tiny::cuda::set_device(in.values.at("current_device").get<int>());
}

nlohmann::json device_list(const std::vector<tiny::Device>& devices) {
  nlohmann::json out = nlohmann::json::array();
  for (const tiny::Device& d : devices) out.push_back(d.str());
  return out;
}
}  // namespace

WORKBOOK_EXERCISE(count_devices) {
  select_device(in);
  out.values["count"] = lesson1::count_devices();
}

WORKBOOK_EXERCISE(available_devices) {
  select_device(in);
  out.values["devices"] = device_list(lesson1::available_devices());
}

WORKBOOK_EXERCISE(choose_device) {
  select_device(in);
  out.values["device"] = lesson1::choose_device(in.values.at("requested").get<std::string>()).str();
}

WORKBOOK_EXERCISE(describe_device) {
  select_device(in);
  const lesson1::DeviceDescription d = lesson1::describe_device(tiny::Device(in.values.at("device").get<std::string>()));
  out.values["name"] = d.name;
  out.values["memory_gib"] = d.memory_gib;
  out.values["emulated"] = d.emulated;
  out.values["total_memory_bytes"] =
      tiny::Device(in.values.at("device").get<std::string>()).is_cpu()
          ? 0
          : tiny::cuda::get_device_properties(tiny::Device(in.values.at("device").get<std::string>()).index()).total_memory;
}
