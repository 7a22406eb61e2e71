// Compiling a student's exercise.cpp into the lesson's runner (the recipe's
// compiler and flags, the lesson's glue, the runner's main, libtiny.so).
#pragma once

#include <filesystem>
#include <string>

#include "recipe.h"

namespace workbook {

struct BuildResult {
  bool ok = false;
  bool rebuilt = false;            // false when the runner was already up to date
  std::filesystem::path runner;    // the program the checker runs as the student
  std::string log;                 // the compiler's messages (the first errors when it failed)
};

// Builds <lessons_dir>/<folder>/exercise.cpp into <out_dir>/<folder>/runner.
// Only exercise.cpp is taken from lessons_dir: it is copied alone into the
// output folder, so `#include "exercise.h"` finds the workbook's own header.
BuildResult build_student(const Recipe& recipe, const Lesson& lesson, const std::filesystem::path& lessons_dir,
                          const std::filesystem::path& out_dir);

}  // namespace workbook
