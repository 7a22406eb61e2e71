// The runner: calls one exercise of a lesson in this process and writes what
// came out (see runner.h). Linked with the student's or the reference's code.
#include <cxxabi.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <typeinfo>
#include <map>
#include <string>

#include "runner.h"

namespace workbook {

namespace {

std::map<std::string, ExerciseFn>& registry() {
  static std::map<std::string, ExerciseFn> exercises;
  return exercises;
}

nlohmann::json counters_json(int device) {
  const tiny::cuda::DeviceCounters c = tiny::cuda::device_counters(device);
  return {{"synchronizations", c.synchronizations},
          {"kernel_launches", c.kernel_launches},
          {"bytes_host_to_device_pageable", c.bytes_host_to_device_pageable},
          {"bytes_host_to_device_pinned", c.bytes_host_to_device_pinned},
          {"bytes_device_to_host_pageable", c.bytes_device_to_host_pageable},
          {"bytes_device_to_host_pinned", c.bytes_device_to_host_pinned},
          {"bytes_device_to_device", c.bytes_device_to_device},
          {"device_mallocs", c.device_mallocs},
          {"memory_allocated", tiny::cuda::memory_allocated(device)},
          {"max_memory_allocated", tiny::cuda::max_memory_allocated(device)},
          {"memory_reserved", tiny::cuda::memory_reserved(device)}};
}

int devices() { return tiny::cuda::is_available() ? tiny::cuda::device_count() : 0; }

// What each device is, for the report: "emulated" marks the emulated GPU.
nlohmann::json devices_json() {
  nlohmann::json out = nlohmann::json::array();
  for (int d = 0; d < devices(); ++d) {
    const tiny::cuda::DeviceProperties p = tiny::cuda::get_device_properties(d);
    out.push_back({{"device", "cuda:" + std::to_string(d)}, {"name", p.name}, {"total_memory", p.total_memory},
                   {"multi_processor_count", p.multi_processor_count},
                   {"compute_capability", std::to_string(p.major) + "." + std::to_string(p.minor)},
                   {"emulated", p.is_emulated}});
  }
  return out;
}

void start_counting() {
  for (int d = 0; d < devices(); ++d) {
    tiny::cuda::reset_device_counters(d);
    tiny::cuda::reset_peak_memory_stats(d);
  }
}

// "tiny::DeviceError", "std::out_of_range": the dynamic type of what was thrown.
std::string type_name(const std::exception& e) {
  int status = 0;
  char* name = abi::__cxa_demangle(typeid(e).name(), nullptr, nullptr, &status);
  std::string out = status == 0 && name != nullptr ? name : typeid(e).name();
  std::free(name);
  const std::string libstdcxx = "std::__cxx11::";
  if (out.rfind(libstdcxx, 0) == 0) out = "std::" + out.substr(libstdcxx.size());
  return out;
}

// Calls the exercise; the outcome goes into out.values (_status, _message, _error_type).
void call(ExerciseFn fn, const Bundle& in, Bundle& out) {
  try {
    fn(in, out);
    out.values["_status"] = "ok";
  } catch (const tiny::NotImplemented& e) {
    out.values["_status"] = "todo";
    out.values["_message"] = e.what();
  } catch (const std::exception& e) {
    out.values["_status"] = "error";
    out.values["_message"] = e.what();
    out.values["_error_type"] = type_name(e);
  } catch (...) {
    out.values["_status"] = "error";
    out.values["_message"] = "an exception that is not a std::exception was thrown";
    out.values["_error_type"] = "unknown";
  }
}

int usage(const char* argv0) {
  std::fprintf(stderr, "usage: %s EXERCISE IN_DIR OUT_DIR [--repeat N]\n       %s --list\n", argv0, argv0);
  return 2;
}

}  // namespace

ExerciseRegistrar::ExerciseRegistrar(const char* name, ExerciseFn fn) { registry()[name] = fn; }

int runner_main(int argc, char** argv) {
  if (argc == 2 && std::strcmp(argv[1], "--list") == 0) {
    for (const auto& [name, fn] : registry()) std::printf("%s\n", name.c_str());
    return 0;
  }
  if (argc != 4 && argc != 6) return usage(argv[0]);
  int repeat = 0;
  if (argc == 6) {
    if (std::strcmp(argv[4], "--repeat") != 0) return usage(argv[0]);
    repeat = std::atoi(argv[5]);
    if (repeat < 1) return usage(argv[0]);
  }
  auto it = registry().find(argv[1]);
  if (it == registry().end()) {
    std::fprintf(stderr, "runner: no exercise named '%s' (--list shows them)\n", argv[1]);
    return 2;
  }
  try {
    const std::filesystem::path in_dir = argv[2], out_dir = argv[3];
    Bundle out;
    if (repeat == 0) {
      const Bundle in = Bundle::load(in_dir);
      if (in.values.contains("_seed")) tiny::manual_seed(in.values["_seed"].get<uint64_t>());
      start_counting();
      const auto t0 = std::chrono::steady_clock::now();
      call(it->second, in, out);
      const auto t1 = std::chrono::steady_clock::now();
      // Read before anything below synchronizes or copies.
      for (int d = 0; d < devices(); ++d) out.values["_counters"]["cuda:" + std::to_string(d)] = counters_json(d);
      out.values["_elapsed_ms"] = std::chrono::duration<double, std::milli>(t1 - t0).count();
      out.values["_devices"] = devices_json();
    } else {
      // Timing: each call gets fresh inputs and the clock stops once the devices are idle.
      nlohmann::json times = nlohmann::json::array();
      for (int r = 0; r < repeat; ++r) {
        const Bundle in = Bundle::load(in_dir);
        if (in.values.contains("_seed")) tiny::manual_seed(in.values["_seed"].get<uint64_t>());
        Bundle scratch;
        const auto t0 = std::chrono::steady_clock::now();
        call(it->second, in, scratch);
        for (int d = 0; d < devices(); ++d) tiny::cuda::synchronize(d);
        const auto t1 = std::chrono::steady_clock::now();
        if (scratch.values["_status"] != "ok") {
          out = scratch;
          break;
        }
        times.push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
      }
      if (!out.values.contains("_status")) out.values["_status"] = "ok";
      out.values["_times_ms"] = times;
    }
    out.save(out_dir);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "runner: %s\n", e.what());
    return 3;
  }
  return 0;
}

}  // namespace workbook

int main(int argc, char** argv) { return workbook::runner_main(argc, argv); }
