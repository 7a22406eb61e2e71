/// @file process.h
/// @brief Runs a child program with a wall-time limit and a memory limit, and
/// says in plain words how it ended (exit code, crash signal, timeout, out of memory).
///
/// The memory limit uses a cgroup (v2 `memory.max`, or v1
/// `memory.limit_in_bytes`) where this process may create one, never
/// RLIMIT_AS, which breaks programs linked with CUDA or sanitizers (they
/// reserve terabytes of address space). Where no cgroup can be made, the
/// program runs without a memory limit and `memory_limit_enforced` says so.
#pragma once

#include <cstddef>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

namespace workbook {

/// @brief What to run and under which limits.
struct ProcessOptions {
  std::vector<std::string> argv;               ///< program and arguments
  std::map<std::string, std::string> env;      ///< set (or, with an empty value, unset) on top of ours
  double timeout_s = 60;                       ///< wall time before the process group is killed
  size_t memory_limit = 0;                     ///< bytes; 0 = none
  std::filesystem::path log;                   ///< stdout and stderr go here (empty: /dev/null, or ours with passthrough)
  bool passthrough = false;                    ///< with no log: the child writes to our stdout and stderr
};

/// @brief How the child ended.
struct ProcessResult {
  int exit_code = -1;                  ///< when it exited normally
  int signal = 0;                      ///< the signal that ended it, if any
  bool timed_out = false;              ///< killed at the time limit
  bool out_of_memory = false;          ///< killed by the cgroup's memory limit
  bool memory_limit_enforced = false;  ///< a cgroup limit was in place
  double seconds = 0;                  ///< wall time
  std::string log_tail;                ///< the last lines of its output

  /// @brief True for exit code 0.
  bool ok() const { return !timed_out && signal == 0 && exit_code == 0; }
  /// @brief "exited with code 3", "crashed: SIGSEGV (segmentation fault: ...)", "ran past ...".
  std::string describe() const;
};

/// @brief Runs the program and waits (at most timeout_s). Throws tiny::Error if it cannot start.
ProcessResult run_process(const ProcessOptions& options);

/// @brief The last `max_lines` lines of a text file ("" if it cannot be read).
std::string tail_of_file(const std::filesystem::path& path, size_t max_lines = 30);

}  // namespace workbook
