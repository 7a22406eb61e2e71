/// @file
/// @brief tiny::profiler: what ran where and when, on the modelled GPU's clock
/// (PyTorch's `torch.profiler`).
#pragma once

#include <memory>
#include <string>

namespace tiny::profiler {

/// @brief Records the GPU work issued while it is open: PyTorch's
/// `with torch.profiler.profile() as prof:`.
///
/// On the emulated GPU every kernel, copy and synchronization is recorded with
/// its modelled times (docs/performance_model.md): the host's launches on one
/// track per host thread, each stream's kernels on a track of its own, copies
/// on their copy engine's track, with an arrow from each launch to its
/// kernel. Profiles cannot overlap: opening a second one while one records
/// throws tiny::Error. (On a real GPU nothing is recorded yet: CUPTI is not
/// wired in.)
///
///     tiny::profiler::profile prof;
///     for (int i = 0; i < 5; ++i) step();
///     tiny::cuda::synchronize();
///     prof.stop();
///     prof.export_chrome_trace("trace.json");   // open in https://ui.perfetto.dev
///     std::cout << prof.key_averages();
class profile {
 public:
  /// @brief Starts recording.
  profile();
  /// @brief Stops recording if stop() was not called.
  ~profile();
  profile(const profile&) = delete;
  profile& operator=(const profile&) = delete;

  /// @brief Stops recording (`prof.stop()`); what was recorded stays readable.
  void stop();
  /// @brief Writes the Chrome trace event JSON that Perfetto and chrome://tracing
  /// open, in the shape of PyTorch's (Kineto's) traces: categories `cuda_runtime`,
  /// `kernel`, `gpu_memcpy`, `gpu_memset`; `ts` and `dur` in microseconds.
  /// Throws tiny::IOError naming the path when it cannot be written.
  void export_chrome_trace(const std::string& path) const;
  /// @brief PyTorch's `prof.key_averages().table()`: per kernel or copy name,
  /// the calls, the host's time in the launching calls and the device time,
  /// total and average, longest device total first.
  std::string key_averages() const;
  /// @brief How many kernels, copies and synchronizations were recorded.
  size_t num_events() const;

 private:
  struct Recording;
  std::shared_ptr<Recording> recording_;
};

}  // namespace tiny::profiler
