// What an epoch's modelled time is made of, read from its Chrome trace
// (tiny::profiler::profile::chrome_trace()): the demo prints it, and the
// lesson's checks name a cost only where these figures show it.
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include <nlohmann/json.hpp>

namespace lesson4_checks {

/// @brief The host's time (ms) taking batches from the loader, waiting for the
/// GPU (synchronizations: .item(), .cpu(), synchronize) and held by copies from
/// pageable memory, with their counts; the copies back to the host; the GPU's kernel time.
struct EpochProfile {
  double loader_ms = 0, sync_ms = 0, pageable_copy_ms = 0, kernel_ms = 0;
  int loader_calls = 0, syncs = 0, pageable_copies = 0, copies_to_host = 0;

  /// @brief The figures as JSON (what the checks' glue sends).
  nlohmann::json to_json() const {
    return {{"loader_ms", loader_ms},   {"loader_calls", loader_calls},         {"sync_ms", sync_ms},
            {"syncs", syncs},           {"pageable_copy_ms", pageable_copy_ms}, {"pageable_copies", pageable_copies},
            {"copies_to_host", copies_to_host}, {"kernel_ms", kernel_ms}};
  }
};

/// @brief Reads the figures of EpochProfile from a trace tiny's profiler wrote.
inline EpochProfile epoch_profile(const std::string& chrome_trace) {
  const nlohmann::json trace = nlohmann::json::parse(chrome_trace);
  EpochProfile p;
  double loader_us = 0, sync_us = 0, kernel_us = 0;
  std::map<int64_t, double> call_us;  // correlation -> the host's time in the call that queued the copy
  std::map<int64_t, bool> pageable_in;
  for (const nlohmann::json& e : trace.at("traceEvents")) {
    if (e.value("ph", "") != "X") continue;
    const std::string cat = e.value("cat", ""), name = e.value("name", "");
    const double dur = e.value("dur", 0.0);
    if (cat == "cpu_op" && name.rfind("enumerate(DataLoader)", 0) == 0) {  // each batch the loop took
      loader_us += dur;
      ++p.loader_calls;
    } else if (cat == "cuda_runtime" && name.find("Synchronize") != std::string::npos) {
      sync_us += dur;
      ++p.syncs;
    } else if (cat == "cuda_runtime" && name == "cudaMemcpyAsync" && e.contains("args")) {
      call_us[e["args"].value("correlation", int64_t{-1})] = dur;
    } else if (cat == "gpu_memcpy" && e.contains("args")) {
      if (name == "DeviceToHost") ++p.copies_to_host;
      if (name == "HostToDevice" && !e["args"].value("pinned", true)) {
        pageable_in[e["args"].value("correlation", int64_t{-1})] = true;
      }
    } else if (cat == "kernel") {
      kernel_us += dur;
    }
  }
  double pageable_us = 0;
  for (const auto& [correlation, seen] : pageable_in) {
    pageable_us += call_us[correlation];
    ++p.pageable_copies;
  }
  p.loader_ms = loader_us / 1e3;
  p.sync_ms = sync_us / 1e3;
  p.pageable_copy_ms = pageable_us / 1e3;
  p.kernel_ms = kernel_us / 1e3;
  return p;
}

}  // namespace lesson4_checks
