/// @file runner.h
/// @brief The program a lesson's exercise runs in: the student's (or the
/// reference's) `exercise.cpp`, linked with the lesson's glue and this runner.
///
/// The checker starts it as `runner EXERCISE IN_DIR OUT_DIR [--repeat N]`. It
/// loads the inputs, seeds tiny, calls the exercise through the glue, and
/// writes what came out with the device counters read right after the call
/// (before anything of the harness synchronizes). Its own result is in
/// `values.json` (`_status`: ok, todo or error); a crash is seen by the checker.
///
/// A lesson's glue (tests/lessons/N_name/runner.cpp) registers one function per
/// exercise:
/// @code
/// WORKBOOK_EXERCISE(count_devices) {      // `in` and `out` are Bundles
///   out.values["count"] = lesson1::count_devices();
/// }
/// @endcode
#pragma once

#include "bundle.h"

namespace workbook {

/// @brief A lesson exercise as the runner calls it.
using ExerciseFn = void (*)(const Bundle& in, Bundle& out);

/// @brief Registers an exercise by name (WORKBOOK_EXERCISE makes one).
struct ExerciseRegistrar {
  /// @brief Adds the exercise to the runner's table, by name.
  ExerciseRegistrar(const char* name, ExerciseFn fn);
};

/// @brief The runner's main (harness/runner_main.cpp calls it).
int runner_main(int argc, char** argv);

}  // namespace workbook

/// @brief Defines and registers the glue of one exercise; the body sees `in` and `out`.
#define WORKBOOK_EXERCISE(name)                                                                 \
  static void workbook_exercise_##name(const ::workbook::Bundle& in, ::workbook::Bundle& out);  \
  static const ::workbook::ExerciseRegistrar workbook_registrar_##name(#name,                   \
                                                                       &workbook_exercise_##name); \
  static void workbook_exercise_##name([[maybe_unused]] const ::workbook::Bundle& in,           \
                                       [[maybe_unused]] ::workbook::Bundle& out)
