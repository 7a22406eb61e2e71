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
/// A graded run (the checker's: kResultsFdVariable is set) differs in three
/// ways. The runner takes the channel the checker reads (a pipe it inherits,
/// with no name anywhere) before any of the lesson's code runs, and sends
/// values.json's text through it (the tensors' .npy files, listed with a digest of each, stay in OUT_DIR);
/// the checker ignores any values.json on disk. It leaves with _exit right
/// after, so no atexit handler or static destructor runs once the results are
/// sent. And tiny::cuda::reset_device_counters and reset_peak_memory_stats are
/// refused (tiny::cuda::grading): the glue resets through the functions below;
/// an attempt by the code graded is sent as `_refused_resets`, which fails the check.
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

/// @brief Set by the checker for a graded run: the number of an inherited
/// descriptor (3), the write end of a pipe whose read end the checker holds;
/// the runner sends its results through it, as one JSON document.
inline constexpr const char* kResultsFdVariable = "WORKBOOK_RESULTS_FD";

/// @brief Starts the counters of GPU `device` again from zero, for a lesson's
/// glue right before it calls the exercise (in a graded run
/// tiny::cuda::reset_device_counters is refused: the code graded must not reset them).
void reset_device_counters(int device);
/// @brief Starts the peaks of GPU `device`'s memory again, for a lesson's glue
/// (as reset_device_counters, for tiny::cuda::reset_peak_memory_stats).
void reset_peak_memory_stats(int device);

}  // namespace workbook

/// @brief Defines and registers the glue of one exercise; the body sees `in` and `out`.
#define WORKBOOK_EXERCISE(name)                                                                 \
  static void workbook_exercise_##name(const ::workbook::Bundle& in, ::workbook::Bundle& out);  \
  static const ::workbook::ExerciseRegistrar workbook_registrar_##name(#name,                   \
                                                                       &workbook_exercise_##name); \
  static void workbook_exercise_##name([[maybe_unused]] const ::workbook::Bundle& in,           \
                                       [[maybe_unused]] ::workbook::Bundle& out)
