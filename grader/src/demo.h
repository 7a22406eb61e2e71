/// @file demo.h
/// @brief `./workbook run N`: builds lesson N's demo (lessons/N_name/main.cpp
/// with the student's exercise.cpp) and runs it. The recipe CMake wrote is the
/// one place that names the demo's target and program.
#pragma once

#include <string>
#include <vector>

#include "recipe.h"

namespace workbook {

/// @brief Builds the recipe's `demo_target` of lesson `number` with the cmake
/// that configured the build, then replaces this process with its `demo`
/// program, given `args` (so Ctrl-C and the exit status are the demo's own).
/// Returns 1, after printing the compiler's messages, when the demo does not
/// build; throws tiny::ValueError for a lesson that does not exist and
/// tiny::IOError when the recipe lacks the demo or the program cannot start.
int run_demo(const Recipe& recipe, int number, const std::vector<std::string>& args);

}  // namespace workbook
