/// @file checker_options.h
/// @brief What a checker program is asked to do (its command line, read by
/// checker_main with CLI11 in checker_cli.cpp) and the function that does it
/// (run_checker, in checker.cpp). Internal to the checker program.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace workbook {

/// @brief One checker run's options, one field per command-line option (`lesson_N_checks --help`).
struct CheckerOptions {
  std::string student;                  ///< --student: the runner built from the student's exercise.cpp
  std::string reference;                ///< --reference: the runner built from the reference solution
  std::vector<std::string> only;        ///< --check (and --expect-fail's CHECK): run only these checks
  std::optional<uint64_t> seed;         ///< --seed: the seed of every random input (default: fresh)
  bool timing = true;                   ///< false with --no-timing
  std::string json_file;                ///< --json: also write the results as JSON here
  double timeout = 0;                   ///< --timeout: seconds any one run may take (0: the default)
  double deadline = 0;                  ///< --deadline: seconds all runs together may take (0: none)
  std::string reference_cache;          ///< --reference-cache: folder of the reference's results
  bool keep = false;                    ///< --keep: keep the folder of inputs, outputs and logs
  bool list = false;                    ///< --list: print the checks as JSON and exit
  std::string expect_check;             ///< --expect-fail CHECK=TEXT: CHECK
  std::string expect_text;              ///< --expect-fail CHECK=TEXT: TEXT
  std::string write_ctest;              ///< --write-ctest: write the CTest entries here
  std::string student_runner;           ///< --student-runner (with --write-ctest)
  std::string reference_runner;         ///< --reference-runner (with --write-ctest)
};

/// @brief Does what `options` ask; `program` is argv[0] (for messages and
/// --write-ctest). Returns the exit status: 0 all passed, 1 a check did not
/// pass, 2 bad usage (said on stderr), 77 every check run was skipped.
int run_checker(const CheckerOptions& options, const std::string& program);

}  // namespace workbook
