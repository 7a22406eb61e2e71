/// @file output_of.h
/// @brief Runs a trusted program (git, a checker's --list) from an argument
/// vector, with no shell in between, and returns what it printed: a path with
/// a quote or a space in it is one argument like any other.
#pragma once

#include <string>
#include <vector>

namespace workbook {

/// @brief What a program printed on its stdout, and how it ended.
struct ProgramOutput {
  bool started = false;  ///< false when it could not be run at all (no such program, no pipe)
  int exit_code = -1;    ///< its exit status; -1 when it did not exit normally (a signal) or never started
  std::string out;       ///< everything it wrote to stdout

  /// @brief True when it ran and exited with code 0.
  bool ok() const { return started && exit_code == 0; }
};

/// @brief Runs `argv` (argv[0] looked up in PATH when it has no '/') with no
/// shell, stdin from /dev/null, stdout captured; its stderr is ours, or
/// /dev/null with `quiet_stderr`. Waits for it to end. For trusted programs
/// only: no time or memory limit (run_process is for the others).
ProgramOutput output_of(const std::vector<std::string>& argv, bool quiet_stderr = false);

}  // namespace workbook
