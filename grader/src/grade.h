// Grading: build a lesson's student runner, run its checker, and turn the
// checker's JSON into a lesson result, a scoreboard, Gradescope's results.json
// and a gradebook row.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "intake.h"
#include "recipe.h"

namespace workbook {

struct CheckResult {
  std::string name, summary, verdict, message, note;  // verdict: pass, fail, todo, skip, error
  bool timed = false;
  double seconds = 0;
  nlohmann::json details;
  // Its weight (lesson.json's check_points and points): what it is worth, what it
  // scored; 0 and 0 when skipped. Every output (scoreboard, gradebook, results.json,
  // report, JUnit) reads these.
  double max_points = 0, points = 0;
};

struct LessonResult {
  const Lesson* lesson = nullptr;
  // not started, in progress, passed, does not compile, not submitted, error
  std::string status;
  std::string problem;  // compiler errors, or why the checker could not run
  std::string warnings;  // when its runner was rebuilt: the compiler's warnings about the student's exercise.cpp
  std::vector<CheckResult> checks;
  std::vector<std::string> counters_shown;  // the GPU counters the lesson is about (WORKBOOK_LESSON_COUNTERS)
  int passed = 0, total = 0, todo = 0;  // total excludes skipped checks
  nlohmann::json devices = nlohmann::json::array();  // the GPUs the checks ran on (from the reference's runs)
  double seconds = 0;
  // The first run of the student's that timed out (which, in which check, its limit), as
  // the checker says: the lesson's other checks then failed at once. "" when none did.
  std::string timed_out;
  double points = 0, max_points = 0;  // the sums of the checks' (assign_points)
  // The reference's runs the checker made (not timed ones), and how many of them were answered from
  // GradeOptions::reference_cache instead of running it again.
  int reference_runs = 0, reference_cache_hits = 0;

  // The share of its points scored, 0 to 1.
  double score() const { return max_points <= 0 ? 0.0 : points / max_points; }
  // The first check that did not pass (nullptr when none).
  const CheckResult* first_problem() const;
};

// A check as the checker lists it (`lesson_N_checks --list`).
struct CheckInfo {
  std::string name, summary;
  bool timed = false;
};
std::vector<CheckInfo> list_checks(const Lesson& lesson);

struct GradeOptions {
  uint64_t seed = 0;
  bool timing = true;
  double lesson_timeout_s = 1800;
  // Seconds this lesson may take, compiling included (0: no limit but the
  // checks' own): its runs are cut to what is left, then its checks fail at once.
  double lesson_budget_s = 0;
  bool out_of_time = false;  // the submission's deadline has passed: the lesson is "out of time", nothing run
  double run_timeout_s = 0;  // caps each run of an exercise (checker --timeout); 0: the checks' own limits
  bool verbose = false;  // print the compiler's warnings and each check's line as the checker runs (one student's self-check)
  bool progress = false;  // say on stderr when a lesson is built, and when it waits for another check of it
  // Why the submission has no exercise.cpp of this lesson to grade, as the intake found (intake.h: two of
  // them, a refused archive, none anywhere): the lesson is "not submitted" with it. "": look for the file.
  std::string not_submitted;
  // A folder the checkers keep the reference's results in (checker --reference-cache), shared by a
  // batch's submissions: a run of the reference on the very inputs it was given before (same exercise,
  // seed, GPUs, modelled GPU) is read back, not run again. "": every reference run is made.
  std::filesystem::path reference_cache;
};

// Builds and checks one lesson of `lessons_dir` (only its exercise.cpp is used),
// holding the lesson's LessonLock in build_dir from the build to the last check.
LessonResult grade_lesson(const Recipe& recipe, const Lesson& lesson, const std::filesystem::path& lessons_dir,
                          const std::filesystem::path& build_dir, const std::filesystem::path& work_dir,
                          const GradeOptions& options);

// Gives each check of r its points from lesson.json (points.h: "check_points", a
// check's points, default 1; "points", the lesson's total, shared in proportion),
// and sums them into r. A check_points name the lesson has no check of makes r an
// error naming the file and the field. A lesson whose checks could not be listed is worth
// its "points", or 1.
void assign_points(LessonResult& r);
// "7.5" or "12": points as a gradebook shows them (at most two decimals).
std::string points_text(double points);

// The terminal table: one line per lesson, then what to do next.
void print_scoreboard(std::ostream& out, const std::vector<LessonResult>& results, uint64_t seed, bool color);
// What to do next about this (not yet passing) lesson: its first open check and the commands.
void print_next(std::ostream& out, const LessonResult& result);
// Every check's line of one lesson (as the checker prints them).
void print_checks(std::ostream& out, const LessonResult& result, bool color);
// "the compiler warns about your code:" and the warnings, indented (nothing when there are none).
void print_warnings(std::ostream& out, const std::string& warnings);
// One report of `watch` after a save of lesson r's exercise.cpp (stamped `when`): its
// status, the compiler's warnings, its first open check, and the hint the student
// reached with ./workbook hint N (`hints_seen` of them so far; none is shown unasked).
void print_watch_report(std::ostream& out, const LessonResult& r, int hints_seen, const std::string& when);
// `list`: one line per lesson, the titles whole and the columns aligned.
void print_lesson_list(std::ostream& out, const std::vector<Lesson>& lessons);
// "needs a GPU", "needs 2 GPUs"; "" for none.
std::string gpus_needed(int gpus);
// Gradescope's results.json: output_format "text" everywhere (a check's output quotes C++ such as
// std::vector<int>, which must not be read as HTML), each check's visibility from its lesson.json,
// and, for a submission taken in by the intake, a first item "submission layout" (worth 0 points).
nlohmann::json gradescope_results(const std::vector<LessonResult>& results, double seconds, uint64_t seed,
                                  const std::string& quiz, const SubmissionLayout* layout = nullptr);
// Who sees check `c` of lesson `l` on Gradescope: check_visibility, else timed_visibility for a timed
// check, else visibility (lesson.json; "visible" by default).
std::string visibility_of(const Lesson& l, const CheckResult& c);
// A fresh seed (std::random_device).
uint64_t fresh_seed();
// True when stdout is a terminal and NO_COLOR is unset.
bool use_color();

}  // namespace workbook
