// The runner: calls one exercise of a lesson in this process and writes what
// came out (see runner.h). Linked with the student's or the reference's code.
#include <cxxabi.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <typeinfo>
#include <map>
#include <string>

#include "runner.h"
#include "tiny/cuda_grading.h"

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
                   {"emulated", p.is_emulated}, {"modelled_gpu", p.modelled_gpu}});
  }
  return out;
}

void start_counting() {
  for (int d = 0; d < devices(); ++d) {
    reset_device_counters(d);
    reset_peak_memory_stats(d);
  }
}

// The channel of a graded run: the descriptor kResultsFdVariable names, a
// pipe the checker made and handed to us alone (it has no name anywhere),
// taken before any of the lesson's code runs (only static initializers have).
// -1 for a run that is not graded (by hand, or lesson 6's ranks: the variable
// is removed and the descriptor closed on exec, so no program the code starts
// is a graded run). Throws when the descriptor is not the checker's pipe.
int open_results_channel() {
  const char* fd_text = std::getenv(kResultsFdVariable);
  const std::string fd_name = fd_text != nullptr ? fd_text : "";
  ::unsetenv(kResultsFdVariable);
  if (fd_name.empty()) return -1;
  char* end = nullptr;
  const long n = std::strtol(fd_name.c_str(), &end, 10);
  const int fd = *end == '\0' && n > 2 && n < 1 << 20 ? static_cast<int>(n) : -1;
  struct stat st {};
  TINY_CHECK(fd >= 0 && ::fstat(fd, &st) == 0 && S_ISFIFO(st.st_mode) && ::fcntl(fd, F_SETFD, FD_CLOEXEC) == 0,
             IOError, "the results descriptor ", fd_name, " the checker named is not its open pipe");
  return fd;
}

// Writes all of `text` to the channel.
void send(int fd, const std::string& text) {
  for (size_t done = 0; done < text.size();) {
    const ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    TINY_CHECK(n > 0, IOError, "could not send the results to the checker: ", std::strerror(errno));
    done += static_cast<size_t>(n);
  }
}

// Leaves at once, with what was printed flushed: no atexit handler, static
// destructor or other thread of the code graded runs after the results were sent.
[[noreturn]] void leave(int code) {
  std::cout.flush();
  std::cerr.flush();
  std::fflush(nullptr);
  ::_exit(code);
}

// The resets of the counters the code graded tried (refused: tiny::cuda::grading).
void record_refused_resets(Bundle& out) {
  const tiny::cuda::grading::RefusedResets r = tiny::cuda::grading::refused_counter_resets();
  if (r.reset_device_counters == 0 && r.reset_peak_memory_stats == 0) return;
  out.values["_refused_resets"] = {{"reset_device_counters", r.reset_device_counters},
                                   {"reset_peak_memory_stats", r.reset_peak_memory_stats}};
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

// One call on the inputs in `in_dir`, with the devices' counters, the time it
// took and the devices it ran on.
Bundle run_once(ExerciseFn fn, const std::filesystem::path& in_dir) {
  Bundle out;
  const Bundle in = Bundle::load(in_dir);
  if (in.values.contains("_seed")) tiny::manual_seed(in.values["_seed"].get<uint64_t>());
  start_counting();
  const auto t0 = std::chrono::steady_clock::now();
  call(fn, in, out);
  const auto t1 = std::chrono::steady_clock::now();
  // Read before anything below synchronizes or copies.
  for (int d = 0; d < devices(); ++d) out.values["_counters"]["cuda:" + std::to_string(d)] = counters_json(d);
  out.values["_elapsed_ms"] = std::chrono::duration<double, std::milli>(t1 - t0).count();
  out.values["_devices"] = devices_json();
  out.values["_emulated_gpu_model"] = tiny::cuda::grading::emulated_gpu_model();
  return out;
}

// Timing: each call gets fresh inputs and the clock stops once the devices are idle.
// On the emulated GPU each call is also timed on the modelled clock
// (tiny::cuda::host_time(): what the call would take on the modelled GPU,
// the same on every run and machine), which the checks judge by.
Bundle run_timed(ExerciseFn fn, const std::filesystem::path& in_dir, int repeat) {
  Bundle out;
  const bool modelled = devices() > 0 && tiny::cuda::is_emulated(0);
  nlohmann::json times = nlohmann::json::array(), modelled_times = nlohmann::json::array();
  for (int r = 0; r < repeat; ++r) {
    const Bundle in = Bundle::load(in_dir);
    if (in.values.contains("_seed")) tiny::manual_seed(in.values["_seed"].get<uint64_t>());
    Bundle scratch;
    const double m0 = modelled ? tiny::cuda::host_time() : 0;
    const auto t0 = std::chrono::steady_clock::now();
    call(fn, in, scratch);
    for (int d = 0; d < devices(); ++d) tiny::cuda::synchronize(d);
    const auto t1 = std::chrono::steady_clock::now();
    const double m1 = modelled ? tiny::cuda::host_time() : 0;
    if (scratch.values["_status"] != "ok") {
      out = scratch;
      break;
    }
    times.push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
    if (modelled) modelled_times.push_back((m1 - m0) * 1e3);
  }
  if (!out.values.contains("_status")) out.values["_status"] = "ok";
  out.values["_times_ms"] = times;
  if (modelled && out.values["_status"] == "ok") {
    out.values["_modelled_ms"] = modelled_times;
    out.values["_modelled_gpu"] = tiny::cuda::get_device_properties(0).modelled_gpu;
  }
  out.values["_emulated_gpu_model"] = tiny::cuda::grading::emulated_gpu_model();
  return out;
}

int usage(const char* argv0) {
  std::fprintf(stderr, "usage: %s EXERCISE IN_DIR OUT_DIR [--repeat N]\n       %s --list\n", argv0, argv0);
  return 2;
}

}  // namespace

ExerciseRegistrar::ExerciseRegistrar(const char* name, ExerciseFn fn) { registry()[name] = fn; }

void reset_device_counters(int device) { tiny::cuda::grading::reset_device_counters(device); }
void reset_peak_memory_stats(int device) { tiny::cuda::grading::reset_peak_memory_stats(device); }

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
  int channel = -1;
  try {
    channel = open_results_channel();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "runner: %s\n", e.what());
    return 3;
  }
  const bool graded = channel >= 0;
  if (graded) tiny::cuda::grading::refuse_counter_resets();
  try {
    const std::filesystem::path in_dir = argv[2], out_dir = argv[3];
    Bundle out = repeat == 0 ? run_once(it->second, in_dir) : run_timed(it->second, in_dir, repeat);
    if (!graded) {
      out.save(out_dir);
      return 0;
    }
    record_refused_resets(out);
    send(channel, out.save_tensors(out_dir));
    ::close(channel);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "runner: %s\n", e.what());
    if (graded) leave(3);
    return 3;
  }
  leave(0);
}

}  // namespace workbook

int main(int argc, char** argv) { return workbook::runner_main(argc, argv); }
