// Compiling a student's exercise.cpp into the lesson's runner (the recipe's
// compiler and flags, the lesson's glue, the runner's main, libtiny.so).
#pragma once

#include <filesystem>
#include <functional>
#include <string>

#include "harness/process.h"
#include "recipe.h"

namespace workbook {

struct BuildResult {
  bool ok = false;
  bool rebuilt = false;            // false when the runner was already up to date
  std::filesystem::path runner;    // the program the checker runs as the student
  std::string log;                 // the compiler's messages (the first errors when it failed)
  std::string warnings;            // when rebuilt: the compiler's warnings about the student's exercise.cpp
  Isolation isolation;             // when it compiled: the sandbox the compiler ran in
  bool out_of_time = false;        // stopped at a time limit that timeout_s (the grader's deadline) had cut short
};

// Holds an exclusive lock (flock) on <dir>/runner.lock while it lives, so that
// builds and checks of one lesson's runner take turns across processes (`watch`
// rebuilding while `check` runs it would otherwise start a half-written or
// missing runner). When another process holds it, `waiting` (if not empty) is
// printed on stderr once before waiting.
class LessonLock {
 public:
  LessonLock(const std::filesystem::path& dir, const std::string& waiting);
  ~LessonLock();
  LessonLock(const LessonLock&) = delete;
  LessonLock& operator=(const LessonLock&) = delete;

 private:
  int fd_ = -1;
};

// Builds <lessons_dir>/<folder>/exercise.cpp into <out_dir>/<folder>/runner.
// Only exercise.cpp is taken from lessons_dir, and only a regular file of at
// most 2 MiB, never through a link (nor a file of the workbook reached through
// a link to it): it is copied alone into a fresh folder, so `#include
// "exercise.h"` finds the workbook's own header. The compiler and the linker
// run in the sandbox of a student's run (process.h: its own uid as root, the
// reference, the checks, the reference runners, compiler caches and
// WORKBOOK_SANDBOX_HIDE hidden, everything read-only but that folder, limits
// of time, memory, processes and output), as the code they compile is the
// student's; their messages are capped per line and in all. No compiler cache
// is used there (the cache holds the reference's objects, and must not take
// entries from a submission).
// The runner is linked under a temporary name and renamed into place, so it is
// never half-written; callers that run it hold a LessonLock on its folder.
// `before_compiling` is called when the runner must be (re)built, before the compiler starts.
// Compiling and linking together stop after `timeout_s` (they fail as a compiler stopped).
BuildResult build_student(const Recipe& recipe, const Lesson& lesson, const std::filesystem::path& lessons_dir,
                          const std::filesystem::path& out_dir, const std::function<void()>& before_compiling = {},
                          double timeout_s = 300);

// The compiler's messages about `source` alone (a warning in the student's
// file, with its context lines and the "In function" line above it); messages
// about other files (the workbook's headers) are left out. At most `max_lines`,
// then a line saying how many more there are. "" when there are none.
std::string warnings_about(const std::string& messages, const std::string& source, size_t max_lines = 30);

}  // namespace workbook
