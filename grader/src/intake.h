/// @file intake.h
/// @brief Where a submission's lessons are: each lesson's `N_name/exercise.cpp` found at any depth of a
/// folder, or of a `.zip` / `.tar.gz` unpacked into the grader's scratch, and the "submission layout" that
/// tells the student what was found against the tree expected, so a zero for "not submitted" is never silent.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "unpack.h"
#include "recipe.h"

namespace workbook {

/// @brief Where one lesson's exercise.cpp was found (or why it was not).
struct FoundLesson {
  const Lesson* lesson = nullptr;
  std::filesystem::path lessons_dir;  ///< the folder holding N_name/ (empty when not found)
  std::string shown;                  ///< its path as the student knows it ("alice.zip: work/lessons/1_x/exercise.cpp")
  std::string problem;                ///< why it is not graded though something was found (two of it); "" when fine
};

/// @brief What a submission holds against the tree the grader expects.
struct SubmissionLayout {
  std::string name;                      ///< the submission as shown ("alice/", "alice.zip")
  std::string problem;                   ///< the whole submission refused (a hostile archive); "" when taken
  std::vector<FoundLesson> lessons;      ///< one per lesson graded, in order
  std::vector<std::string> not_taken;    ///< exercise.cpp files that are no lesson's (wrong folder name, solutions/)
  std::vector<std::string> notes;        ///< the search cut short, archives inside the folder
  std::filesystem::path quiz_dir;        ///< where quiz.txt is read from

  /// @brief The folder whose `N_name/exercise.cpp` grade_lesson takes for `lesson` (a folder without it when not found).
  std::filesystem::path lessons_dir_of(const Lesson& lesson) const;
  /// @brief Why `lesson` is "not submitted" though the submission holds something for it; "" otherwise.
  std::string problem_of(const Lesson& lesson) const;
  /// @brief True when every lesson was found once and the submission was taken.
  bool complete() const;
  /// @brief The graded item's text: per lesson "found at PATH" or "not submitted", then what was not taken.
  std::string text() const;
};

/// @brief The most entries searched in a submission folder and how deep, so a hostile tree cannot stall the grader.
inline constexpr size_t kMaxSearchEntries = 50000;
inline constexpr int kMaxSearchDepth = 24;

/// @brief Finds each of `lessons`' exercise.cpp in `submission`: a folder searched at any depth (symbolic
/// links are not followed), or a .zip / .tar.gz unpacked into `scratch` (a folder of the grader's that the
/// caller removes; it must not exist yet). A folder holding nothing but one archive is that archive
/// (Gradescope keeps an uploaded .tar.gz as it is). Never throws for what the submission holds: a refused
/// archive is SubmissionLayout::problem.
SubmissionLayout take_in(const std::filesystem::path& submission, const std::vector<const Lesson*>& lessons,
                         const std::filesystem::path& scratch, const ArchiveLimits& limits = {});

}  // namespace workbook
